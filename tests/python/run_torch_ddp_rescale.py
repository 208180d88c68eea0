"""Driver of python.torch_ddp_rescale: the DDP script on elastic_mpi.torch (torch_ddp_program.py)
under mpirun, once at 2 ranks throughout (the reference) and once growing 2->4 by spawn,
shrinking back to 2 and growing to 4 again, with the same global batch schedule (32, then 64,
32, 64, changing every 11 steps) and the linear learning-rate rule. 322 samples per epoch, 5
epochs: the first grow falls between epochs 0 and 1 (after the end-of-epoch code: the newcomers
get the stepped scheduler), the shrink and the second grow mid-epoch (those newcomers resume the
epoch where it is), the 4-rank world has steps of 2 samples (two ranks train a weight-zero
filler) and of 34 (slices of 9 and 8). Then:

1. every rank's parameters, momentum buffers, scheduler, learning rate, counters and extras equal
   rank 0's after every step, the newcomers' included (the program checks; exit 3 otherwise), and
   6 processes trained;
2. every (epoch, sample) was trained on exactly once, in both runs (ids counted);
3. the final full-data-set loss agrees with the reference within LOSS_TOLERANCE (relative) and
   the parameters within PARAM_TOLERANCE (max |a-b| / max(1, |a|_inf));
4. the sizes and batches per step follow the schedule, and the learning rate is the scheduler's
   (StepLR, gamma 0.8 per epoch) times the rule's factor (global batch / 32).

usage: run_torch_ddp_rescale.py MPIEXEC PROGRAM
"""

import json
import os
import subprocess
import sys
import tempfile

from sample_ids import compare_to_reference, exactly_once


# Why these tolerances: float32 training where only the order of additions differs (the world
# of 4 sums its slices' gradients in another order than the world of 2; the DDP hook weights
# each rank by its share, so the mean is the same mean): a few 1e-7 relative per step, carried
# by SGD over 40 steps. Measured: final loss 8e-8 relative, parameters 9e-8; the
# tolerances leave three orders of margin and stay well below what a lost or doubled step, a
# wrong learning rate, a newcomer's stale state or DDP's unweighted average over unequal shares
# move (the last: 8e-3 in the loss, 6e-2 in the parameters).
LOSS_TOLERANCE = 1e-4
PARAM_TOLERANCE = 1e-4

SAMPLES, EPOCHS, EVERY, BASE_LR, GAMMA = 322, 5, 11, 0.05, 0.8
ELASTIC, REFERENCE = "2->4:64->2:32->4:64", "2->2:64->2:32->2:64"
SIZES = [2, 4, 2, 4]  # the elastic run's world size per EVERY steps, the last one to the end
# One run takes 5-10 s on a quiet machine; starved (CI's Debian 13 root at nice 19 beside a build,
# grow pauses of 6-8 s) one took over 50 s. Ranks out of step never end: any limit finds them.
RUN_TIMEOUT_S = 150


def run(mpiexec, program, schedule, work, workers):
    os.makedirs(work)
    env = dict(os.environ, ELASTIC_STANDALONE="1", ELASTIC_SCHEDULE=schedule, ELASTIC_SCHEDULE_EVERY=str(EVERY),
               ELASTIC_LR_SCALING="linear")
    cmd = [mpiexec, "--oversubscribe", "-np", "2", sys.executable, "-B", program, "--samples", str(SAMPLES),
           "--epochs", str(EPOCHS), "--batch", "16", "--lr", str(BASE_LR), "--out", os.path.join(work, "result.json"),
           "--ids-dir", work, "--workers", str(workers)]
    print(f"ELASTIC_SCHEDULE={schedule}", " ".join(cmd), flush=True)
    proc = subprocess.Popen(cmd, env=env)
    try:
        rc = proc.wait(timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.terminate()  # mpirun ends its ranks on SIGTERM
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        sys.exit(f"FAIL: run with schedule {schedule} did not end within {RUN_TIMEOUT_S} s (ranks out of step: "
                 f"a newcomer's state or position differs from the running ranks')")
    if rc != 0:
        sys.exit(f"FAIL: run with schedule {schedule} exited with {rc}")
    with open(os.path.join(work, "result.json")) as f:
        return json.load(f)


def main():
    mpiexec, program = sys.argv[1:3]
    failures = []
    with tempfile.TemporaryDirectory(prefix="elastic-py-ddp.") as work:
        ref = run(mpiexec, program, REFERENCE, os.path.join(work, "ref"), workers=0)
        # A DataLoader worker reads batches ahead: that must move nothing.
        el = run(mpiexec, program, ELASTIC, os.path.join(work, "elastic"), workers=1)
        exactly_once(os.path.join(work, "ref"), EPOCHS, SAMPLES)
        trainers = exactly_once(os.path.join(work, "elastic"), EPOCHS, SAMPLES)
    print(f"every (epoch, sample) trained on exactly once in both runs; {trainers} processes trained")
    if trainers != 6:
        failures.append(f"{trainers} processes trained, expected 6 (2 + two groups of 2 newcomers)")
    if el["check_failures"] or ref["check_failures"]:
        failures.append("the ranks' state disagreed (see CHECK FAILED above)")
    if el["noise_scale"] is None:
        failures.append("no gradient-noise statistics from the DDP hook")
    if el["job_steps"] != ref["job_steps"]:
        failures.append(f"{el['job_steps']} steps, the reference {ref['job_steps']}")
    sizes = [s[0] for s in el["steps"]]
    expected_sizes = [SIZES[min(i // EVERY, len(SIZES) - 1)] for i in range(len(sizes))]
    if sizes != expected_sizes:
        failures.append(f"world sizes per step {sizes}")
    if [s[1] for s in el["steps"]] != [s[1] for s in ref["steps"]]:
        failures.append("the global batch schedules differ")
    for size, batch, factor, lr, epoch in el["steps"]:
        want = BASE_LR * GAMMA ** epoch * batch / 32
        if abs(factor - batch / 32) > 1e-12 or abs(lr - want) > 1e-9 * want:
            failures.append(f"step at batch {batch}, epoch {epoch}: lr factor {factor}, lr {lr}, expected {want}")
            break
    failures += compare_to_reference(ref, el, LOSS_TOLERANCE, PARAM_TOLERANCE)
    print(f"epoch train loss: {el['epoch_loss']}")
    if el["final_loss"] >= el["epoch_loss"][0]:
        failures.append("the model did not learn")
    if failures:
        sys.exit("FAIL: " + "; ".join(failures))
    print("PASS")


if __name__ == "__main__":
    main()
