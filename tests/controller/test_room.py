"""Room for a waiting job that needs GPUs on each of several nodes, on either MPI stack. An elastic
job grows on its own a100 node (n1) while the other a100 node (n2) is held by another job; that
job ends, and a rigid job arrives that needs 2 GPUs on each of the two a100 nodes. By GPU count
the cluster has room for both (8 a100 GPUs: 4 for the elastic job, 4 for the rigid one), so the
plan shrinks nothing; but n1 is full. elasticd releases the elastic job's extension on n1 (its log
names the waiting job and the node), the rigid job starts, and the elastic job trains on at its
base size. Without that step the rigid job would wait until the elastic job ended."""

import os
import re
import time
import unittest

from clustertest import job_state, job_workdir, read, run, sbatch, wait_job
from e2e import ElasticdTestCase, extension_jobs, gpus_of, status, submit_trainer, wait_until


def nodes_of(job):
    return run(["squeue", "-h", "-j", str(job), "-o", "%N", "--states=all"]).stdout.strip()


class RoomTest(ElasticdTestCase):
    def test_a_job_needing_gpus_on_each_node_gets_the_node_an_extension_holds(self):
        # n2's a100 GPUs are held while the elastic job starts and grows: it can only grow on n1.
        holder, _ = sbatch(["--gres=gpu:a100:4", "-N1", "-w", "n2", "-o", "out.txt"], wrap="sleep 600",
                           workdir=job_workdir("room-holder"))
        self.jobs.append(holder)
        wait_until(lambda: job_state(holder) == "RUNNING", 60, "the job holding n2")
        # Long enough that it is still training when the rigid job has waited far longer than
        # elasticd needs (it is cancelled at the end).
        job, wd = submit_trainer("room", gpus=2, max_gpus=4, gpu_type="a100", epochs=2000)
        self.jobs.append(job)
        wait_until(lambda: status().get(job, {}).get("metrics_received", 0) > 0, 90, "the job's first step")
        self.assertEqual(nodes_of(job), "n1")
        wait_until(lambda: gpus_of(job) == 4, 90, "the job grown to 4 GPUs on n1")
        exts = extension_jobs(job)
        self.assertEqual(len(exts), 1, exts)
        self.assertEqual(nodes_of(exts[0][0]), "n1")

        run(["scancel", str(holder)])
        wait_until(lambda: job_state(holder) not in ("RUNNING", "COMPLETING"), 60, "n2 given back")
        t0 = time.time()
        rigid, _ = sbatch(["--gres=gpu:a100:2", "-N2", "-o", "out.txt"], wrap="sleep 5",
                          workdir=job_workdir("room-rigid"))
        self.jobs.append(rigid)
        wait_until(lambda: job_state(rigid) in ("RUNNING", "COMPLETED"), 60,
                   "the rigid job started (elasticd released the extension on n1)")
        started_s = time.time() - t0
        log = self.d.read_log()
        self.assertRegex(log, rf"job {rigid} waits for 2 nodes with 2 GPUs free on each: extension group \d+ of job "
                              rf"{job} on n1 \(2 GPUs\) leaves for it")
        self.assertEqual(wait_job(rigid, timeout=60), "COMPLETED")
        self.assertEqual(job_state(job), "RUNNING", read(os.path.join(wd, f"job-{job}.out"))[-2000:])
        # It went on at its base size: the extension on n1 ended, its ranks left the world. (Its
        # size now is not asserted: with n2's GPUs free, and n1's once the rigid job ended,
        # elasticd may grow it again at once.)
        wait_until(lambda: job_state(exts[0][0]) not in ("PENDING", "RUNNING", "COMPLETING"), 30,
                   f"extension job {exts[0][0]} on n1 to end")
        wait_until(lambda: re.search(r"shrink at step \d+: 4 -> 2 ranks", read(os.path.join(wd, f"job-{job}.out"))),
                   30, "the shrink in the job's output")
        print(f"room: the rigid job ran {started_s:.1f} s after its submission", flush=True)


if __name__ == "__main__":
    unittest.main()
