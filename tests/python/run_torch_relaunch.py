"""Driver of python.torch_relaunch: the DDP script on elastic_mpi.torch (torch_ddp_program.py)
relaunched as elasticd relaunches a world where the MPI cannot change it in place (docs/runtime.md,
"Relaunch"): once at 2 ranks under mpirun (the reference), once under `elastic-launch -n 2` with
two `relaunch` commands through the runtime's command directory, to 3 ranks and back to 2 (one
node: both MPI stacks relaunch there). The global batch never changes. Then:

1. each relaunched world went on from the step the one before it stopped at (the runtime's log),
   and the launcher exited 0;
2. every rank's model, optimizer, scheduler, counters and extras equal rank 0's after every step
   in every world (the program checks, exit 3 otherwise), so the relaunched ranks hold the torch
   state the world before them left;
3. every (epoch, sample) was trained on exactly once, in both runs, and the step count is the
   reference's;
4. the final loss and parameters agree with the reference within the tolerances of
   run_torch_ddp_rescale.py (only the order of additions differs), so nothing of the optimizer's
   momentum, the scheduler or the sampler's position was lost;
5. the hand-over file (RUN_DIR/relaunch.torch) is gone afterwards;
6. a third run whose hand-over file torch cannot read (--break-relaunch-state: rank 0 of the
   world that stops overwrites it) ends with exit 75, the world-lost status elasticd requeues,
   after rank 0 said why, instead of hanging or ending as a failed job.

usage: run_torch_relaunch.py MPIEXEC BINDIR PROGRAM
"""

import glob
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time

from sample_ids import compare_to_reference, exactly_once

LOSS_TOLERANCE = 1e-4
PARAM_TOLERANCE = 1e-4
SAMPLES, EPOCHS, BATCH, LR = 600, 4, 16, 0.05
SLEEP_MS = 80          # per step: the elastic run lasts long enough for two relaunches
RUN_TIMEOUT_S = 120


def program_args(program, work, sleep_ms):
    return [sys.executable, "-B", program, "--samples", str(SAMPLES), "--epochs", str(EPOCHS), "--batch", str(BATCH),
            "--lr", str(LR), "--out", os.path.join(work, "result.json"), "--ids-dir", work,
            "--sleep-ms", str(sleep_ms)]


def wait(proc, what, log=None):
    try:
        return proc.wait(timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        tail = open(log).read()[-4000:] if log else ""
        sys.exit(f"FAIL: {what} did not end within {RUN_TIMEOUT_S} s\n{tail}")


class ElasticRun:
    """The DDP script under `elastic-launch -n 2` in WORK/NAME, relaunched through the runtime's
    command directory as elasticd relaunches it."""

    def __init__(self, bindir, program, work, name, extra=()):
        self.dir = os.path.join(work, name)
        self.commands, self.run_dir = os.path.join(self.dir, "commands"), os.path.join(self.dir, "run")
        self.log, self.samples = os.path.join(self.dir, "el.log"), os.path.join(self.dir, "samples")
        os.makedirs(self.commands)
        env = dict(os.environ, ELASTIC_JOB_ID=f"pyrelaunch{os.getpid()}{name}", ELASTIC_COMMAND_DIR=self.commands,
                   ELASTIC_POLL_INTERVAL_S="0.1", ELASTIC_SAMPLE_LOG=self.samples)
        env.pop("ELASTIC_STANDALONE", None)
        cmd = [os.path.join(bindir, "elastic-launch"), "-n", "2", "--oversubscribe", "--run-dir", self.run_dir, "--",
               *program_args(program, self.dir, SLEEP_MS), *extra]
        print(" ".join(cmd), flush=True)
        with open(self.log, "w") as out:
            self.launcher = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)
        self.node = socket.gethostname()

    def text(self):
        with open(self.log, errors="replace") as f:
            return f.read()

    def sizes(self):
        """The world sizes of the steps done so far, from every process's sample log (the torch
        layer's per-step log, line-buffered)."""
        seen = set()
        for path in glob.glob(os.path.join(self.samples, "samples.*")):
            with open(path) as f:
                seen.update(int(line.split()[2]) for line in f if line.strip())
        return seen

    def wait_training(self):
        """Until a rank has logged a step."""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not self.sizes():
            if self.launcher.poll() is not None:
                sys.exit(f"FAIL: the launcher exited with {self.launcher.returncode} before training\n"
                         f"{self.text()[-4000:]}")
            time.sleep(0.1)

    def relaunch(self, ranks):
        """A relaunch command to a world of RANKS ranks on this node."""
        name = os.path.join(self.commands, f"r{ranks}")
        with open(name + ".tmp", "w") as f:
            json.dump({"action": "relaunch", "world": [{"node": self.node, "ranks": ranks}]}, f)
        os.rename(name + ".tmp", name + ".json")

    def relaunch_to(self, ranks):
        """A relaunch, and until the relaunched world runs."""
        before = self.text().count(f"relaunched world of {ranks} ranks")
        self.relaunch(ranks)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and self.launcher.poll() is None:
            if self.text().count(f"relaunched world of {ranks} ranks") > before:
                return
            time.sleep(0.1)
        self.launcher.kill()
        sys.exit(f"FAIL: no relaunched world of {ranks} ranks within 60 s\n{self.text()[-4000:]}")


def broken_hand_over(bindir, program, work):
    """A relaunched world whose torch state cannot be read (rank 0 of the world before overwrote
    it): every rank ends with exit 75, the world-lost status elasticd requeues, after rank 0 said
    why; nothing hangs."""
    run = ElasticRun(bindir, program, work, "broken", ["--break-relaunch-state"])
    run.wait_training()
    run.relaunch(3)
    rc = wait(run.launcher, "the run whose relaunch state was broken", run.log)
    output = run.text()
    failures = []
    if rc != 75:
        failures.append(f"the launcher exited with {rc}, not 75")
    if "cannot read the relaunch state" not in output or "did not come through: exit 75" not in output:
        failures.append("rank 0 did not say why the relaunched world ended")
    if failures:
        print(output[-3000:])
        sys.exit("FAIL (a broken relaunch state): " + "; ".join(failures))
    print("a relaunch state torch cannot read: exit 75 after the message", flush=True)


def main():
    mpiexec, bindir, program = sys.argv[1:4]
    with tempfile.TemporaryDirectory(prefix="elastic-py-relaunch.") as work:
        ref = os.path.join(work, "ref")
        os.makedirs(ref)
        env = dict(os.environ, ELASTIC_STANDALONE="1")
        rc = wait(subprocess.Popen([mpiexec, "--oversubscribe", "-np", "2", *program_args(program, ref, 0)], env=env),
                  "the reference run")
        if rc != 0:
            sys.exit(f"FAIL: the reference run exited with {rc}")

        run = ElasticRun(bindir, program, work, "elastic")
        el, run_dir, launcher = run.dir, run.run_dir, run.launcher
        run.wait_training()
        time.sleep(1.5)
        run.relaunch_to(3)
        time.sleep(1.0)
        run.relaunch_to(2)
        rc = wait(launcher, "the elastic run", run.log)
        output = run.text()
        print(output[-3000:])
        if rc != 0:
            sys.exit(f"FAIL: the launcher exited with {rc}")

        failures = []
        ended = [int(s) for s in re.findall(r"relaunch at step (\d+)", output)]
        started = [int(s) for s in re.findall(r"relaunched world of \d+ ranks at step (\d+)", output)]
        if len(ended) != 2 or ended != started:
            failures.append(f"worlds ended at steps {ended}, the relaunched ones started at {started}")
        if len(re.findall(r"relaunch done: \d+ ranks", output)) != 2:
            failures.append("not two relaunches done")
        if run.sizes() != {2, 3}:
            failures.append(f"steps were trained at world sizes {sorted(run.sizes())}, expected 2 and 3")
        exactly_once(ref, EPOCHS, SAMPLES)
        exactly_once(el, EPOCHS, SAMPLES)
        with open(os.path.join(ref, "result.json")) as f:
            r = json.load(f)
        with open(os.path.join(el, "result.json")) as f:
            e = json.load(f)
        if r["check_failures"] or e["check_failures"]:
            failures.append("the ranks' state disagreed (see CHECK FAILED above)")
        if e["job_steps"] != r["job_steps"]:
            failures.append(f"{e['job_steps']} steps, the reference {r['job_steps']}")
        failures += compare_to_reference(r, e, LOSS_TOLERANCE, PARAM_TOLERANCE, "relaunched")
        if len(e["epoch_loss"]) != EPOCHS:
            failures.append(f"epoch losses {e['epoch_loss']}: not one per epoch (the extras were lost)")
        if os.path.exists(os.path.join(run_dir, "relaunch.torch")):
            failures.append("the hand-over file relaunch.torch was left in the run dir")
        pauses = re.findall(r"relaunch done: \d+ ranks at step \d+, pause ([0-9.e+-]+)", output)
        print(json.dumps({"test": "torch_relaunch", "sizes": [2, 3, 2], "pause_s": [float(p) for p in pauses]}))
        if failures:
            sys.exit("FAIL: " + "; ".join(failures))
        broken_hand_over(bindir, program, work)
    print("PASS")


if __name__ == "__main__":
    main()
