"""elasticd grows a job onto another node by relaunch and gives that node back. A job of 2 a100
GPUs on n1, whose other 2 GPUs a rigid job holds, may reach 6: the plan extends it onto n2.
(Registered for builds whose runtime grows by relaunch, Open MPI 5; on Open MPI 4, "grows_onto":
"any_node", the same growth joins in place, the else-branches below, and slurm.elastic_e2e proves it.)
- Open MPI 5 ("grows_onto": "relaunch", docs/runtime.md "Relaunch"): its runtime cannot add n2 to
  the running world, so the extension's launcher holds n2 (`elastic-launch --join --hold`) and
  elasticd sends the job a `relaunch` command whose world is n1 (2 ranks) and n2 (4 ranks, its
  daemon started inside the extension job through `srun --overlap`): the world is started again
  over both nodes ("relaunch done: 6 ranks").
Then a rigid job asks for all of n2: elasticd lets the extension go (Open MPI 4: a shrink in
place; Open MPI 5: a relaunch over n1 alone, after which nothing of the job runs in the extension
job) and cancels the extension job, the rigid job runs, and the elastic job trains to the end at 2
GPUs, every sample exactly once.
test_extension_cancelled_from_outside (Open MPI 5): the extension job that holds n2 is cancelled
from outside instead; the world goes on without n2 (docs/runtime.md, "A node taken away")."""

import glob
import os
import re
import unittest

from clustertest import job_workdir, read, run, sbatch, wait_job
from e2e import (CRED_EXPIRE_S, TRAINER, ElasticdTestCase, by_relaunch, extension_jobs, gpus_of, restarts, status,
                 trainer_script, wait_until)

SAMPLES, EPOCHS = 4000, 120


def steps_of(job):
    """The job's steps other than its batch and extern steps (a relaunched world's daemon there)."""
    out = run(["squeue", "-h", "-s", "-j", str(job), "-o", "%i"], check=False).stdout.split()
    return [s for s in out if not s.endswith((".batch", ".extern"))]


def job_workdir_of(test):
    return getattr(test, "wd", None)


def nodes_of(job):
    return run(["squeue", "-h", "-j", str(job), "-o", "%N", "--states=all"]).stdout.strip()


class GrowByRelaunchTest(ElasticdTestCase):
    def run_reporting(self, body):
        try:
            body()
        except (AssertionError, OSError):
            # What the job, its extensions and elasticd said, for a failure in CI.
            wd = job_workdir_of(self)
            for name in sorted(os.listdir(wd)) if wd else []:
                if name.endswith(".out"):
                    print(f"--- {name}\n{read(os.path.join(wd, name))[-3000:]}")
            print(f"--- elasticd.log\n{self.d.read_log()[-5000:]}")
            raise

    def start_grown_job(self, name, resumable=False):
        """A job of 2 a100 GPUs on n1, whose other 2 a rigid job (the blocker) holds, grown to 6
        (onto n2); resumable: it checkpoints every 2 s and resumes from its checkpoint when
        requeued. Returns (ids dir, blocker, job, its output file)."""
        wd = job_workdir(name)
        self.wd = wd
        ids = os.path.join(wd, "ids")
        os.makedirs(ids)
        os.chmod(ids, 0o777)
        blocker, proc = sbatch(["-w", "n1", "--gres=gpu:a100:2", "-o", "/dev/null"], script="#!/bin/bash\nsleep 900\n",
                               workdir=wd)
        self.assertIsNotNone(blocker, proc.stderr)
        self.jobs.append(blocker)
        script = trainer_script(gpus=2, max_gpus=6, gpu_type="a100", samples=SAMPLES, epochs=EPOCHS,
                                sbatch_lines="#SBATCH -w n1" + ("\n#SBATCH --open-mode=append" if resumable else ""),
                                env="ELASTIC_CHECKPOINT_INTERVAL_S=2" if resumable else "",
                                trainer_args=f"--ids-dir {ids}" + (" --resume" if resumable else ""))
        job, proc = sbatch([], script=script, workdir=wd)
        self.assertIsNotNone(job, proc.stderr)
        self.jobs.append(job)
        wait_until(lambda: status().get(job, {}).get("metrics_received", 0) > 0, 90, "the job's first step")
        wait_until(lambda: gpus_of(job) == 6, 120, "the job at 6 GPUs")
        return ids, blocker, job, os.path.join(wd, f"job-{job}.out")

    def test_grow_onto_another_node_and_give_it_back(self):
        self.run_reporting(self.grow_and_give_back)

    def grow_and_give_back(self):
        relaunch = by_relaunch()
        ids, blocker, job, out = self.start_grown_job("grow-by-relaunch")
        wd = self.wd
        exts = extension_jobs(job)
        self.assertEqual(len(exts), 1, exts)
        ext = exts[0][0]
        self.assertEqual(nodes_of(ext), "n2")
        if relaunch:
            wait_until(lambda: re.search(r"relaunch done: 6 ranks at step \d+", read(out)), 60,
                       "the world relaunched over n1 and n2")
            # The extension's launcher holds the node and started no ranks of its own.
            ext_out = glob.glob(os.path.join(wd, f"*-{ext}.out"))  # elasticd names it elastic-ext:JOB:GROUP-ID.out
            self.assertEqual(len(ext_out), 1, os.listdir(wd))
            self.assertIn("holding this node for group", read(ext_out[0]))
            wait_until(lambda: steps_of(ext), 20, "the world's daemon on n2 as a step of the extension job")
        else:
            wait_until(lambda: re.search(r"join at step \d+: 2 -> 6 ranks", read(out)), 60, "the join in place")
        # A rigid job asks for all of n2: the extension goes, the node with it.
        rigid, proc = sbatch(["-w", "n2", "--gres=gpu:a100:4", "-o", "/dev/null"], script="#!/bin/bash\nsleep 3\n",
                             workdir=wd)
        self.assertIsNotNone(rigid, proc.stderr)
        self.jobs.append(rigid)
        wait_until(lambda: gpus_of(job) == 2, 120, "the job back at 2 GPUs")
        if relaunch:
            wait_until(lambda: re.search(r"relaunch done: 2 ranks at step \d+", read(out)), 60,
                       "the world relaunched on n1 alone")
        else:
            wait_until(lambda: re.search(r"shrink at step \d+: 6 -> 2 ranks", read(out)), 60, "the shrink in place")
        self.assertEqual(wait_job(rigid, timeout=120), "COMPLETED")
        run(["scancel", str(blocker)], check=False)
        self.assertEqual(wait_job(job, timeout=400), "COMPLETED", read(out)[-3000:])
        text = read(out)
        # It trained to the end (once n2 is free again it may grow again: its last size varies).
        self.assertRegex(text, r"done: \d+ steps, world \d+,")
        if relaunch:
            at = [int(x) for x in re.findall(r"relaunch at step (\d+)", text)]
            began = [int(x) for x in re.findall(r"relaunched world of \d+ ranks at step (\d+)", text)]
            self.assertGreaterEqual(len(at), 2, text[-3000:])
            self.assertEqual(at, began, "each world goes on from the step the one before it reached")
            pauses = re.findall(r"relaunch done: \d+ ranks at step \d+, pause ([0-9.e+-]+) s", text)
            print(f"relaunch pauses (s): onto n2 {pauses[0]}, back {pauses[1]}", flush=True)
        once = run([TRAINER, "--verify-ids", ids, "--samples", str(SAMPLES), "--epochs", str(EPOCHS)], check=False)
        self.assertEqual(once.returncode, 0, once.stdout + once.stderr)

    def test_extension_cancelled_from_outside(self):
        self.run_reporting(self.cancel_extension)

    def cancel_extension(self):
        """The extension that holds n2 is cancelled from outside (as preemption or its time limit
        would end it): the ranks there get SIGTERM, their daemon ends with them, and the world is
        started again on n1 at once from the state in memory; the job trains to the end, every
        sample exactly once. Before: PRRTE took the whole world down and the job FAILED. The
        daemon's end races rank 0's next rescale point: where the DVM's abort comes first (a
        loaded machine: once in CI on 2026-11-28), the launcher exits 75 and elasticd requeues the
        job, which resumes from its last checkpoint (docs/runtime.md, "A node taken away"); the
        test checks that way's outcome then, and says which way it went."""
        if not by_relaunch():
            self.skipTest("this build grows in place (Open MPI 4): a cancelled extension's group leaves "
                          "(slurm.faults)")
        ids, blocker, job, out = self.start_grown_job("relaunch-ext-cancelled", resumable=True)
        ext = extension_jobs(job)[0][0]
        wait_until(lambda: re.search(r"relaunch done: 6 ranks at step \d+", read(out)), 60,
                   "the world relaunched over n1 and n2")
        run(["scancel", str(ext)])
        # Rank 0 says so, or, where the DVM's abort lost rank 0's last output (its daemon on n2 ended
        # first), the launcher, which found the record without n2; or the abort came before the
        # record: the launcher's exit 75.
        without_n2 = (r"SIGTERM to the ranks on \[\"n2\"\].*6 -> 2 ranks|"
                      r"after its ranks on \[\"n2\"\] got SIGTERM .* its record is whole")
        lost = r"its ranks on \[\"n2\"\] got SIGTERM \(the job holding the node ends\) before it could go on without them: exit 75"
        way = wait_until(lambda: re.search(without_n2, read(out)) and "relaunch" or re.search(lost, read(out)) and "requeue",
                         30, "the world started again without n2, or the launcher's exit 75")
        if way == "relaunch":
            wait_until(lambda: re.search(r"relaunch done: 2 ranks at step \d+", read(out)), 60,
                       "the world relaunched on n1 alone")
        else:
            wait_until(lambda: restarts(job) == 1 and re.search(r"restored .*checkpoint\.bin at epoch \d+", read(out)),
                       CRED_EXPIRE_S + 90, "elasticd to requeue the job and it to resume from its checkpoint")
        run(["scancel", str(blocker)], check=False)
        self.assertEqual(wait_job(job, timeout=400), "COMPLETED", read(out)[-3000:])
        text = read(out)
        self.assertEqual(len(re.findall(r"done: \d+ steps, world \d+,", text)), 1, text[-3000:])
        print(f"job {job}: its extension cancelled from outside; it went on by {way}", flush=True)
        if way == "requeue":
            self.assertEqual(restarts(job), 1)
            return  # the steps since its last checkpoint were trained again: no exactly-once check
        self.assertNotIn("restarted from its last checkpoint", text)
        # Each world goes on from the step the one before it reached (the old world's own line of
        # the relaunch without n2 may be lost with the DVM's abort; every sample once says the rest).
        at = [int(x) for x in re.findall(r"relaunch at step (\d+)", text)]
        began = [int(x) for x in re.findall(r"relaunched world of \d+ ranks at step (\d+)", text)]
        self.assertLessEqual(set(at), set(began), text[-3000:])
        self.assertEqual(began, sorted(began), text[-3000:])
        once = run([TRAINER, "--verify-ids", ids, "--samples", str(SAMPLES), "--epochs", str(EPOCHS)], check=False)
        self.assertEqual(once.returncode, 0, once.stdout + once.stderr)

if __name__ == "__main__":
    unittest.main(verbosity=2)
