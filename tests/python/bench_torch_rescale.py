"""bench.torch_rescale_pause (label bench): the pause of a rescale on the torch.distributed path
(elastic_mpi.torch) beside the session API's (the "MPI path"), measured in the same run with the
same model, optimizer and 100 MB of training state (bench_rescale_program.py).

Each path runs once under mpirun from 2 ranks with the standalone schedule 2->3->2 repeated
REPEATS times (ELASTIC_SCHEDULE_EVERY=EVERY steps): a grow spawns one group of 1 rank (the
runtime's grow mechanism of the standalone mode), and the shrink after it lets that group leave.
The paths run one after the other, ROUNDS times (default 2) in alternating order (MPI, torch,
torch, MPI, ...), so that a machine whose load drifts during the measurement weighs on both.

The pause of a change (pause_s): from the end of the last step before the rescale point (the
latest of the old world's ranks) to the end of the first step after it (the latest of the new
world's ranks: the slowest rank). It holds one step of the new world on either path. Also
reported, without a target: added_s, the pause less one ordinary step of the new world (the
median, in the same run, of that path's steps that follow a step of the same world), i.e. what the
change added to training; and ready_s, from the same start until the slowest rank of the new world
has its first batch in hand (the rescale point and what follows it, without the first step).
added_s is a difference of two step-sized figures: its noise is that of a step (0.1-0.5 s on
this machine under load), far more than what a shrink costs the session API (ready_s, ~20 ms).

Prints one JSON line per path and kind ({"case": "torch_grow", "pause_s" (median), "pauses_s",
"added_s", "ready_s", "step_s", the phases: elastic_mpi.torch's on the torch path, the runtime's
pause_s on the MPI path}) and one per kind with the ratios torch / MPI of the medians, the target
on that of pause_s (<= 2), then exits 1 naming every missed target
(tests/bench/benchtarget.py; ELASTIC_BENCH_TIGHTEN=F tightens them by F).

usage: bench_torch_rescale.py MPIEXEC PROGRAM [ROUNDS]
"""

import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile

import benchtarget

REPEATS = 3           # grows and shrinks per run
EVERY = 5             # steps per schedule entry: one after the change, 4 ordinary
TARGET_RATIO = 2.0    # torch path / MPI path, median pauses, per kind (the bench's statement)
RUN_TIMEOUT_S = 300


def run(mpiexec, program, path, work):
    os.makedirs(work)
    schedule = "->".join(["2"] + ["3", "2"] * REPEATS)
    steps = EVERY * (2 * REPEATS + 1)
    env = dict(os.environ, ELASTIC_STANDALONE="1", ELASTIC_SCHEDULE=schedule, ELASTIC_SCHEDULE_EVERY=str(EVERY))
    cmd = [mpiexec, "--oversubscribe", "-np", "2", sys.executable, "-B", program, "--path", path, "--dir", work,
           "--steps", str(steps)]
    print(f"ELASTIC_SCHEDULE={schedule} ELASTIC_SCHEDULE_EVERY={EVERY}", " ".join(cmd), file=sys.stderr, flush=True)
    try:
        proc = subprocess.run(cmd, env=env, timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        sys.exit(f"bench.torch_rescale_pause: the {path} path's run did not end within {RUN_TIMEOUT_S} s")
    if proc.returncode != 0:
        sys.exit(f"bench.torch_rescale_pause: the {path} path's run exited with {proc.returncode}")
    return analyse(work, path, steps)


def analyse(work, path, steps):
    """({"grow": [change, ...], "shrink": [...]}, rank 0's rescale records): each change's
    pause_s, added_s, ready_s and step_s."""
    ends, starts, sizes = {}, {}, {}
    for name in glob.glob(os.path.join(work, "steps.*")):
        with open(name) as f:
            for line in f:
                step, size, start, end = line.split()
                step, size = int(step), int(size)
                ends.setdefault(step, []).append(float(end))
                starts.setdefault(step, []).append(float(start))
                if sizes.setdefault(step, size) != size:
                    sys.exit(f"bench.torch_rescale_pause: {path}: ranks disagree on the world size of step {step}")
    if sorted(ends) != list(range(steps)):
        sys.exit(f"bench.torch_rescale_pause: {path}: steps {sorted(ends)}, expected 0..{steps - 1}")
    for step in ends:
        if len(ends[step]) != sizes[step]:
            sys.exit(f"bench.torch_rescale_pause: {path}: step {step} done by {len(ends[step])} ranks in a world "
                     f"of {sizes[step]}")
    end = {s: max(v) for s, v in ends.items()}
    ready = {s: max(v) for s, v in starts.items()}
    ordinary = {}  # world size -> durations of steps that follow a step of the same world
    for s in range(2, steps):  # step 1 may still pay the start's lazy costs
        if sizes[s] == sizes[s - 1] and sizes[s - 1] == sizes[s - 2]:
            ordinary.setdefault(sizes[s], []).append(end[s] - end[s - 1])
    step_s = {size: statistics.median(v) for size, v in ordinary.items()}
    changes = {"grow": [], "shrink": []}
    for s in range(1, steps):
        if sizes[s] == sizes[s - 1]:
            continue
        kind = "grow" if sizes[s] > sizes[s - 1] else "shrink"
        pause = end[s] - end[s - 1]
        changes[kind].append({"step": s, "sizes": [sizes[s - 1], sizes[s]], "pause_s": pause,
                              "added_s": pause - step_s[sizes[s]], "ready_s": ready[s] - end[s - 1],
                              "step_s": step_s[sizes[s]]})
    for kind, found in changes.items():
        if len(found) != REPEATS:
            sys.exit(f"bench.torch_rescale_pause: {path}: {len(found)} {kind} changes, expected {REPEATS}")
    phases = []
    for name in glob.glob(os.path.join(work, "rescales.*")):
        with open(name) as f:
            phases += [json.loads(line) for line in f]
    return changes, sorted(phases, key=lambda r: r["step"])


def median(values):
    return statistics.median(values) if values else None


def main():
    mpiexec, program = sys.argv[1:3]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    collected = {(p, k): [] for p in ("mpi", "torch") for k in ("grow", "shrink")}
    phases = {"mpi": [], "torch": []}
    with tempfile.TemporaryDirectory(prefix="elastic-bench-torch.") as work:
        for r in range(rounds):
            order = ("mpi", "torch") if r % 2 == 0 else ("torch", "mpi")
            for path in order:
                changes, rescales = run(mpiexec, program, path, os.path.join(work, f"{path}.{r}"))
                phases[path] += rescales
                for kind, found in changes.items():
                    collected[(path, kind)] += found
    for (path, kind), found in collected.items():
        line = {"case": f"{path}_{kind}", "state_mb": 100.7, "sizes": found[0]["sizes"]}
        for name in ("pause_s", "added_s", "ready_s", "step_s"):
            line[name] = median([c[name] for c in found])
        line["pauses_s"] = [round(c["pause_s"], 4) for c in found]
        line["added_all_s"] = [round(c["added_s"], 4) for c in found]
        records = [r for r in phases[path] if (r["what"] in ("grow", "join")) == (kind == "grow")]
        # The runtime's rescale point on rank 0 (on the torch path: elastic_mpi.torch's session_s).
        line["runtime_pause_s"] = median([r["pause_s"] for r in records])
        names = sorted({name for r in records for name in (r.get("phases") or {})})
        line["runtime_phases_s"] = {name: median([r["phases"][name] for r in records if name in r["phases"]])
                                    for name in names}
        if path == "torch":
            parts = [r["torch_phases"] for r in records if r.get("torch_phases")]
            line["torch_phases_s"] = {name: median([p[name] for p in parts if name in p])
                                      for name in ("session_s", "rendezvous_s", "handover_s", "rewrap_s", "pause_s")}
        print(json.dumps(line), flush=True)
    checks = []
    for kind in ("grow", "shrink"):
        line = {"case": f"{kind}_ratio"}
        for name in ("pause_s", "added_s", "ready_s"):
            mpi = median([c[name] for c in collected[("mpi", kind)]])
            torch_ = median([c[name] for c in collected[("torch", kind)]])
            line[f"torch_{name}"], line[f"mpi_{name}"] = torch_, mpi
            line["ratio" if name == "pause_s" else f"ratio_{name[:-2]}"] = torch_ / mpi if mpi > 0 else None
        check = benchtarget.check(f"{kind}_ratio", line["ratio"], "<=", TARGET_RATIO)
        checks.append(check)
        print(json.dumps(benchtarget.add_checks(line, [check])), flush=True)
    benchtarget.finish("bench.torch_rescale_pause", checks,
                       "pause of the torch.distributed path / the session API's, same run")


if __name__ == "__main__":
    main()
