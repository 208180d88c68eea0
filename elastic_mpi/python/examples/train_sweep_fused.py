"""A hyper-parameter sweep as a Slurm job array trained fused (jobscripts/sweep_fused.sbatch):
one array task per learning rate; with --elastic-fuse, elasticd makes the first task that starts
the sweep's leader, which trains every trial of the array fused (elastic_mpi.fused), at most
ELASTIC_FUSE_MAX_PER_GPU trials at a time, and reports each trial's end so that elasticd ends the
trial's own array task. Every trial writes its own result (trial-<task>.json) and state
(trial-<task>.pt, loadable into a plain model and torch.optim.SGD).

Without elasticd (or without --elastic-fuse) every task trains its own trial alone: the same
results, one GPU per trial.

With --session (under elastic-launch, as jobscripts/sweep_fused.sbatch runs it) the leader is an
elastic job: elasticd may widen it onto idle GPUs (extension jobs whose ranks join) and narrow it
for waiting jobs. Every ROUND steps each rank saves its running trials' states
(OUT/state/trial-<task>.pt), the ranks agree on the trials still running, and at the rescale point
the world may change; after a change each rank takes its share of the trials (the i-th running
trial goes to rank i mod size, at most ELASTIC_FUSE_MAX_PER_GPU at a time) and fuses them again
from their states (FusedTrials.from_states): nothing is lost, newcomers included.

    python3 train_sweep_fused.py --out results --steps 300 [--target-loss 0.25] [--sleep-ms 0]
    srun elastic-launch -- python3 train_sweep_fused.py --session --out results ...
"""

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

from elastic_mpi.fused import FusedTrials

RATES = [0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.8]  # the sweep: task i trains with RATES[i % 8]


def make_model(seed=None):
    if seed is not None:
        torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))


def data(samples=2048):
    """One fixed classification problem for every trial (the same seed in every task)."""
    g = torch.Generator().manual_seed(1234)
    x = torch.randn(samples, 16, generator=g)
    w = torch.randn(16, 4, generator=g)
    return x, (x @ w).argmax(1)


def batches(trials, x, y, batch=64):
    """Each trial's batch at its own step ([K, B, ...]): a trial sees the same data whichever
    trials it is fused with, and on whichever rank, so its run does not depend on the fusion."""
    starts = [(s * batch) % x.shape[0] for s in trials.steps]
    return torch.stack([x[i:i + batch] for i in starts]), torch.stack([y[i:i + batch] for i in starts])


def report_done(args, task, steps, state, result):
    """elasticctl trial-done: elasticd records the trial and ends its array task."""
    cmd = [args.elasticctl]
    if os.environ.get("ELASTIC_CONTROLLER"):
        cmd += ["--controller", os.environ["ELASTIC_CONTROLLER"]]
    if os.environ.get("ELASTIC_MUNGE_SOCKET"):
        cmd += ["--munge-socket", os.environ["ELASTIC_MUNGE_SOCKET"]]
    cmd += ["trial-done", os.environ["ELASTIC_JOB_ID"], str(task), str(steps), state, result]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    print(f"trial {task}: {(proc.stdout or proc.stderr).strip()}", flush=True)


def train_wave(args, tasks, x, y, fused_reporting):
    trials = FusedTrials([make_model(seed=t) for t in tasks], [{"lr": RATES[t % len(RATES)], "momentum": 0.9}
                                                               for t in tasks],
                         optimizer="sgd", loss_fn=F.cross_entropy, ids=list(tasks))
    print(f"fused wave: trials {tasks} ({'fused layers' if trials.fused_layers else 'functorch'})", flush=True)
    step = 0
    while trials.k > 0:
        trials.step(*batches(trials, x, y), per_trial=True)
        step += 1
        if args.sleep_ms:
            time.sleep(args.sleep_ms / 1000.0)
        if step % 10 != 0 and step < args.steps:
            continue
        losses = trials.evaluate(x, y, lambda out, t: F.cross_entropy(out, t).item())
        for tid in list(trials.ids):
            if losses[tid] <= args.target_loss or step >= args.steps:
                trials.stop(tid, "finished" if losses[tid] <= args.target_loss else "stopped", loss=losses[tid])
        for tid in list(trials.stopped):
            finish_trial(args, trials, tid, x, y, fused_reporting)
    return step


def finish_trial(args, trials, tid, x, y, fused_reporting):
    return write_result(args, tid, trials.stopped.pop(tid), x, y, fused_reporting)


def write_result(args, tid, info, x, y, fused_reporting):
    if info["reason"] == "diverged":
        loss = float("nan")
    else:
        model = make_model()
        model.load_state_dict(info["state"]["model"])
        with torch.no_grad():
            out = model(x)
        loss = F.cross_entropy(out, y).item()
        info["accuracy"] = (out.argmax(1) == y).float().mean().item()
    state_path = os.path.join(args.out, f"trial-{tid}.pt")
    torch.save(dict(info["state"], stopped=info["reason"]), state_path)
    result = {"task": tid, "lr": RATES[tid % len(RATES)], "steps": info["step"], "state": info["reason"],
              "loss": loss, "accuracy": info.get("accuracy"), "checkpoint": state_path,
              "job": os.environ.get("ELASTIC_JOB_ID") or os.environ.get("SLURM_JOB_ID")}
    path = os.path.join(args.out, f"trial-{tid}.json")
    with open(path + ".tmp", "w") as f:
        json.dump(result, f)
    os.replace(path + ".tmp", path)
    print(f"trial {tid}: {info['reason']} after {info['step']} steps, loss {loss:.4f}", flush=True)
    if fused_reporting:
        report_done(args, tid, info["step"], info["reason"], path)


ROUND = 10  # steps between rescale points


def initial_trials(tasks):
    return FusedTrials([make_model(seed=t) for t in tasks], [{"lr": RATES[t % len(RATES)], "momentum": 0.9}
                                                             for t in tasks],
                       optimizer="sgd", loss_fn=F.cross_entropy, ids=list(tasks))


def run_elastic(args, tasks, width, fused_reporting):
    """The sweep under an elastic session: trials move between ranks through their state files."""
    import elastic_mpi as em
    state_dir = os.path.join(args.out, "state")
    sweep_file = os.path.join(args.out, "sweep.json")
    first = os.environ.get("ELASTIC_NODE_GROUP", "0") == "0" and os.environ.get("ELASTIC_LOCAL_RANK", "0") == "0"
    if os.environ.get("ELASTIC_JOIN") != "1" and first and not os.path.exists(sweep_file):
        # The first start of the leader's first rank: every trial's initial state on disk.
        os.makedirs(state_dir, exist_ok=True)
        initial_trials(tasks).save(state_dir)
        with open(sweep_file + ".tmp", "w") as f:
            json.dump({"trials": tasks, "width": width, "report": fused_reporting}, f)
        os.replace(sweep_file + ".tmp", sweep_file)
    while not os.path.exists(sweep_file):
        time.sleep(0.1)
    with open(sweep_file) as f:
        sweep = json.load(f)  # newcomers (extension ranks) learn the trials here
    tasks, width, fused_reporting = sweep["trials"], sweep["width"], sweep["report"]
    running = np.ones(len(tasks), dtype=np.float64)  # 1: the trial still trains (handed to newcomers)
    for i, t in enumerate(tasks):
        if os.path.exists(os.path.join(args.out, f"trial-{t}.json")):
            running[i] = 0.0  # a restarted leader: finished trials stay finished
    session = em.Session(global_batch=64 * len(tasks))
    session.register("running", running)
    session.begin()
    x, y = data()
    fused, mine, sizes = None, None, []
    while True:
        changed = session.rescale_point()
        if session.should_stop:
            break
        active = [t for i, t in enumerate(tasks) if running[i] > 0]
        if not active:
            break
        share = [t for i, t in enumerate(active) if i % session.size == session.rank][:width]
        if changed or fused is None or share != mine:
            mine = share
            fused = FusedTrials.from_states(make_model, [os.path.join(state_dir, f"trial-{t}.pt") for t in share]) \
                if share else None
            if changed or not sizes or sizes[-1] != session.size:
                sizes.append(session.size)
                if session.rank == 0:
                    print(f"world of {session.size}: {len(active)} trials running, up to {width} per rank",
                          flush=True)
        done = np.zeros(len(tasks), dtype=np.float64)
        start = time.perf_counter()
        steps = 0
        if fused is not None:
            for _ in range(ROUND):
                if fused.k == 0:
                    break
                fused.step(*batches(fused, x, y), per_trial=True)
                steps += 1
                if args.sleep_ms:
                    time.sleep(args.sleep_ms / 1000.0)
            losses = fused.evaluate(x, y, lambda out, t: F.cross_entropy(out, t).item()) if fused.k else {}
            for tid in list(fused.ids):
                step = fused.steps[fused.ids.index(tid)]
                if losses[tid] <= args.target_loss or step >= args.steps:
                    fused.stop(tid, "finished" if losses[tid] <= args.target_loss else "stopped", loss=losses[tid])
            for tid in list(fused.stopped):
                write_result(args, tid, fused.stopped.pop(tid), x, y, fused_reporting)
                done[tasks.index(tid)] = 1.0
            fused.save(state_dir)  # the running trials' states, before the world may change
            mine = list(fused.ids)
        session.allreduce(done)
        running[done > 0] = 0.0
        session.report_step((time.perf_counter() - start) / max(steps, 1), session.global_batch)
    if session.rank == 0 and not session.left:
        print(f"sweep done: {len(tasks)} trial(s), world sizes {sizes}", flush=True)
    session.close()
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="folder of the trials' results and states")
    p.add_argument("--steps", type=int, default=300, help="most steps per trial")
    p.add_argument("--target-loss", type=float, default=0.25, help="a trial finishes at this loss")
    p.add_argument("--sleep-ms", type=float, default=0, help="added per fused step (tests: a slower GPU)")
    p.add_argument("--elasticctl", default="elasticctl")
    p.add_argument("--session", action="store_true", help="elastic: under elastic-launch, elasticd may rescale it")
    args = p.parse_args()
    torch.set_num_threads(1)
    args.out = os.path.abspath(args.out)
    os.makedirs(args.out, exist_ok=True)
    own = int(os.environ.get("SLURM_ARRAY_TASK_ID", "0"))
    leader = os.environ.get("ELASTIC_FUSE_LEADER")
    if leader:
        # A member: elasticd has a leader training this trial; the task ends without using its GPU.
        print(f"trial {own} trains fused in job {leader}", flush=True)
        return 0
    listed = os.environ.get("ELASTIC_FUSE_TRIALS")
    tasks = [int(t) for t in listed.split(",") if t] if listed else [own]
    width = max(1, int(os.environ.get("ELASTIC_FUSE_MAX_PER_GPU", "1")))
    print(f"job {os.environ.get('SLURM_JOB_ID')}: {len(tasks)} trial(s) {tasks}, {width} per GPU", flush=True)
    if args.session:
        return run_elastic(args, tasks, width, fused_reporting=listed is not None)
    x, y = data()
    for start in range(0, len(tasks), width):
        train_wave(args, tasks[start:start + width], x, y, fused_reporting=listed is not None)
    print(f"sweep done: {len(tasks)} trial(s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
