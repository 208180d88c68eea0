"""slurm-labelled: jobscripts/pytorch_ddp_elastic.sbatch on the local cluster. The DDP example's
elastic port (elastic_mpi/python/examples/train_ddp_elastic.py: train_ddp.py with a few lines
changed to elastic_mpi.torch) is submitted with --elastic-gpus=2:6; elasticd grows it through an
extension job whose ranks join the running world (on Open MPI 5: in place on its own node, by
relaunch onto another), and shrinks it again when a rigid job waits for the extension's GPUs. Beside it the same script runs at a fixed 2 ranks (--no-elastic) with the
same global batch schedule (the job script without its elastic flags: global batch 2 x 32
throughout, as in the elastic job, which has no --elastic-batch, so elasticd never changes it). Then:

1. the elastic job's own record (ELASTIC_SAMPLE_LOG: every rank's lines "<epoch> <step> <world
   size> <sample ids>...") shows a world larger than 2 and, after its peak, a smaller one;
2. every sample of every epoch was trained on exactly once, in both runs;
3. both ran the same steps with the same global batches, and the final loss of the whole data set agrees within
   LOSS_TOLERANCE (relative);
4. both jobs completed, the elastic one through the grow and the shrink without a restart.
"""

import collections
import glob
import os
import re
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(SOURCE, "tests", "controller"))

from clustertest import CLUSTER_DIR, job_state, job_workdir, read, sbatch, wait_job  # noqa: E402
from cluster_files import install_example, install_package  # noqa: E402
from e2e import ElasticdTestCase, gpus_of, status, wait_until  # noqa: E402


# The training: 4096 samples, 32 per rank at the start (global batch 64: 64 steps an epoch).
SAMPLES, EPOCHS, BATCH = 4096, 16, 32
TRAIN_ARGS = f"--samples {SAMPLES} --batch-size {BATCH} --hidden 256 --save-every 100"
# The elastic job's pace: the emulated GPU time of a step's samples, so that it trains long enough
# for a grow and a shrink and faster at 6 ranks than at 2 (what elasticd measures). The fixed-size
# run needs no such pace: the waits change no number.
PACE = "--compute-us-per-sample 1500"
# Why this tolerance: the two runs make the same 1024 steps over the same samples with the same
# learning rates; only the order of float32 additions differs (a world of 6 splits a step's 64
# samples into other slices than a world of 2, and the DDP hook weights each rank by its share, so
# the mean is the same mean): a few 1e-7 relative per step, which SGD carries but does not blow
# up. The script prints the loss to 6 decimals (about 2e-6 relative at 0.21). Measured: equal to
# the printed digit. The tolerance, 1e-4, is well above that and well below what a real fault
# moves (measured with the same script at a fixed 2 ranks: the last epoch's 64 steps lost 4.4e-3,
# the learning rate 1% off 6.3e-3, a global batch of 62 instead of 64 2.1e-2); a newcomer with
# stale state makes the ranks' models differ, which DDP does not repair.
LOSS_TOLERANCE = 1e-4


def install_python_files():
    """The package and the example where the job user can read them."""
    return install_package(), install_example("train_ddp_elastic.py")


def sample_log(directory):
    """[(process, epoch, step, world size, [sample ids])] from every rank's ELASTIC_SAMPLE_LOG file."""
    rows = []
    for path in sorted(glob.glob(os.path.join(directory, "samples.*"))):
        with open(path) as f:
            for line in f:
                epoch, step, size, *ids = map(int, line.split())
                rows.append((os.path.basename(path), epoch, step, size, ids))
    return rows


def step_batches(rows):
    """The global batch of every step: the samples of all ranks, in step order."""
    per_step = collections.Counter()
    for _, _, step, _, ids in rows:
        per_step[step] += len(ids)
    return [per_step[step] for step in sorted(per_step)]


def final_loss(out):
    m = re.search(r"\[rank 0\] world size \d+ \| final loss ([0-9.]+) \| accuracy", out)
    return float(m.group(1)) if m else None


class PyTorchDdpElasticSlurmTest(ElasticdTestCase):
    # Hysteresis, as in the other end-to-end tests: on this oversubscribed machine a job's measured
    # speed at 2 and at 6 ranks is noise; the test is about a grow and a shrink it asks for.
    EXTRA = "[scheduler]\nmin_gain_percent = 50\n"

    def submit(self, name, extra_args, train_args, pydir, script, elastic=True):
        with open(os.path.join(SOURCE, "jobscripts", "pytorch_ddp_elastic.sbatch")) as f:
            text = f.read()
        if not elastic:
            # The same job script without its elastic flags: a rigid job of 2 GPUs.
            text = "".join(line for line in text.splitlines(keepends=True) if not line.startswith("#SBATCH --elastic-"))
        wd = job_workdir(name)
        logdir = os.path.join(wd, "samples")
        env = (f"ELASTIC_PREFIX={CLUSTER_DIR},ELASTIC_PYTHONPATH={pydir},TRAIN_SCRIPT={script},"
               f"ELASTIC_LOCAL_CLUSTER=1,TRAIN_EPOCHS={EPOCHS},TRAIN_ARGS={train_args},PYTHON={sys.executable},"
               f"ELASTIC_SAMPLE_LOG={logdir}")
        job, _ = sbatch([f"--export=ALL,{env}", "-o", "job-%j.out", *extra_args], script=text, workdir=wd)
        self.jobs.append(job)
        return job, wd, logdir

    def test_port_grows_and_shrinks_and_trains_as_at_fixed_size(self):
        t0 = time.time()
        pydir, script = install_python_files()
        # The elastic job on the a100 nodes; the fixed-size run of the same script on a v100 node,
        # out of its way.
        job, wd, logdir = self.submit("ddp-elastic", ["--gres=gpu:a100:2"], f"{TRAIN_ARGS} {PACE}", pydir, script)
        ref, wd_ref, logdir_ref = self.submit("ddp-fixed", ["--gres=gpu:v100:2"], TRAIN_ARGS, pydir, script,
                                              elastic=False)
        wait_until(lambda: status().get(job, {}).get("launcher_ready"), 90, "the job to register its launcher")
        grown = wait_until(lambda: (gpus_of(job) or 0) > 2 and gpus_of(job), 90, "elasticd to grow the job")
        t_grown = time.time() - t0
        # A rigid job that needs a whole a100 node: the one the extension holds.
        wd_wait = job_workdir("ddp-waiting")
        waiting, _ = sbatch(["--gres=gpu:a100:4", "-N1", "-o", "out.txt"], wrap="sleep 2", workdir=wd_wait)
        self.jobs.append(waiting)
        # It gives back the extension on that node: all it has beyond its own 2 GPUs where it grew
        # onto other nodes only (Open MPI 4); on Open MPI 5 it first grows on its own node (in
        # place) and keeps that extension.
        most = [grown]

        def shrunk():
            now = gpus_of(job) or 0
            most[0] = max(most[0], now)
            return now < most[0] or job_state(job) not in ("RUNNING", "PENDING")

        wait_until(shrunk, 60, "elasticd to shrink the job for the waiting one")
        t_shrunk = time.time() - t0
        state = wait_job(job, timeout=240)
        out = read(os.path.join(wd, f"job-{job}.out"))
        print(out[-2500:])
        self.assertEqual(state, "COMPLETED", out[-2000:])
        ref_state = wait_job(ref, timeout=240)
        out_ref = read(os.path.join(wd_ref, f"job-{ref}.out"))
        self.assertEqual(ref_state, "COMPLETED", out_ref[-2000:])
        self.assertIn(wait_job(waiting, timeout=60), ("COMPLETED",))
        wall = time.time() - t0

        rows, rows_ref = sample_log(logdir), sample_log(logdir_ref)
        # 1. The world grew and shrank, as the job's ranks saw it.
        sizes = [size for _, size in sorted({(step, size) for _, _, step, size, _ in rows})]
        peak = max(sizes)
        self.assertGreater(peak, 2, f"the job never ran larger than 2 ranks: {collections.Counter(sizes)}")
        self.assertLess(min(sizes[sizes.index(peak):]), peak, "the job never ran smaller again after its peak")
        self.assertEqual({size for _, _, _, size, _ in rows_ref}, {2})
        # 2. Every (epoch, sample) exactly once, in both runs.
        for name, data in (("elastic", rows), ("fixed-size", rows_ref)):
            counts = collections.Counter((epoch, i) for _, epoch, _, _, ids in data for i in ids)
            expected = {(e, i) for e in range(EPOCHS) for i in range(SAMPLES)}
            repeated = sorted(k for k, n in counts.items() if n != 1)
            self.assertEqual(set(counts), expected,
                             f"{name} run: {len(expected - set(counts))} (epoch, sample) pairs never trained on, "
                             f"{len(set(counts) - expected)} unknown")
            self.assertEqual(repeated, [], f"{name} run: {len(repeated)} pairs trained on more than once")
        processes = len({p for p, *_ in rows})
        self.assertGreater(processes, 2, "no newcomer trained")
        # 3. The same steps with the same global batches; the final loss of the fixed-size run.
        batches, batches_ref = step_batches(rows), step_batches(rows_ref)
        self.assertEqual(batches, batches_ref, "the global batch schedules differ")
        steps = len(batches)
        loss, loss_ref = final_loss(out), final_loss(out_ref)
        self.assertIsNotNone(loss, out[-2000:])
        self.assertIsNotNone(loss_ref, out_ref[-2000:])
        rel = abs(loss - loss_ref) / loss_ref
        print(f"grown to {grown} GPUs at {t_grown:.0f} s, shrunk at {t_shrunk:.0f} s; world sizes per step "
              f"{dict(collections.Counter(sizes))}; {processes} processes trained; {steps} steps; final loss "
              f"{loss:.6f}, fixed size {loss_ref:.6f}, relative difference {rel:.2g} (tolerance "
              f"{LOSS_TOLERANCE:g}); wall {wall:.0f} s")
        self.assertLessEqual(rel, LOSS_TOLERANCE)


if __name__ == "__main__":
    unittest.main()
