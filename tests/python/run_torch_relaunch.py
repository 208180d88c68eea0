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
5. the hand-over file (RUN_DIR/relaunch.torch) is gone afterwards.

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


def main():
    mpiexec, bindir, program = sys.argv[1:4]
    with tempfile.TemporaryDirectory(prefix="elastic-py-relaunch.") as work:
        ref, el = os.path.join(work, "ref"), os.path.join(work, "elastic")
        os.makedirs(ref)
        os.makedirs(el)
        env = dict(os.environ, ELASTIC_STANDALONE="1")
        rc = wait(subprocess.Popen([mpiexec, "--oversubscribe", "-np", "2", *program_args(program, ref, 0)], env=env),
                  "the reference run")
        if rc != 0:
            sys.exit(f"FAIL: the reference run exited with {rc}")

        commands, run_dir, log = os.path.join(work, "commands"), os.path.join(work, "run"), os.path.join(work, "el.log")
        os.makedirs(commands)
        samples = os.path.join(work, "samples")  # the torch layer's per-step log (line-buffered)
        env = dict(os.environ, ELASTIC_JOB_ID=f"pyrelaunch{os.getpid()}", ELASTIC_COMMAND_DIR=commands,
                   ELASTIC_POLL_INTERVAL_S="0.1", ELASTIC_SAMPLE_LOG=samples)
        env.pop("ELASTIC_STANDALONE", None)
        cmd = [os.path.join(bindir, "elastic-launch"), "-n", "2", "--oversubscribe", "--run-dir", run_dir, "--",
               *program_args(program, el, SLEEP_MS)]
        print(" ".join(cmd), flush=True)
        with open(log, "w") as out:
            launcher = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)
        node = socket.gethostname()

        def text():
            with open(log, errors="replace") as f:
                return f.read()

        def relaunch_to(ranks):
            before = text().count(f"relaunched world of {ranks} ranks")
            with open(os.path.join(commands, f"r{ranks}.tmp"), "w") as f:
                json.dump({"action": "relaunch", "world": [{"node": node, "ranks": ranks}]}, f)
            os.rename(os.path.join(commands, f"r{ranks}.tmp"), os.path.join(commands, f"r{ranks}.json"))
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and launcher.poll() is None:
                if text().count(f"relaunched world of {ranks} ranks") > before:
                    return
                time.sleep(0.1)
            launcher.kill()
            sys.exit(f"FAIL: no relaunched world of {ranks} ranks within 60 s\n{text()[-4000:]}")

        def sizes():
            """The world sizes of the steps done so far, from every process's sample log."""
            seen = set()
            for path in glob.glob(os.path.join(samples, "samples.*")):
                with open(path) as f:
                    seen.update(int(line.split()[2]) for line in f if line.strip())
            return seen

        # Training: a rank has logged a step.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not sizes():
            if launcher.poll() is not None:
                sys.exit(f"FAIL: the launcher exited with {launcher.returncode} before training\n{text()[-4000:]}")
            time.sleep(0.1)
        time.sleep(1.5)
        relaunch_to(3)
        time.sleep(1.0)
        relaunch_to(2)
        rc = wait(launcher, "the elastic run", log)
        output = text()
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
        if sizes() != {2, 3}:
            failures.append(f"steps were trained at world sizes {sorted(sizes())}, expected 2 and 3")
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
    print("PASS")


if __name__ == "__main__":
    main()
