"""Jobs across GPU types (docs/admin-guide.md, "Jobs across GPU types"), on the test cluster's two
types (a100 on n1-n2, v100 on n3-n4):

- a job submitted with --elastic-gpu-types=a100,v100 and an untyped request while a rigid job holds
  every a100 GPU starts on v100; the rigid job ends, and elasticd, told by the site's table that an
  a100 is twice a v100, moves the job to a100 through a checkpoint and a held requeue; it resumes
  from its checkpoint there and completes with every step of its training, once;
- sbatch refuses bad type lists (a type the cluster lacks, a type twice, an empty item) with a
  message that says what to do, and the batch step refuses a list without the job's own type."""

import json
import os
import re
import sqlite3
import time
import unittest

from clustertest import job_state, job_workdir, read, run, sbatch, wait_job
from e2e import CTL, ElasticdTestCase, restarts, status, submit_trainer, trainer_script, wait_until

SAMPLES, EPOCHS, BATCH = 4000, 50, 64



def moves():
    return json.loads(run([CTL, "status", "--json"]).stdout)["moves"]


def final_loss(out):
    done = re.search(r"elastic-train-logreg: done: (\d+) steps, world (\d+), batch (\d+), loss ([0-9.]+)", out)
    return done and float(done.group(4))


def nodes_of(job):
    return run(["squeue", "-h", "-j", str(job), "-o", "%N"], check=False).stdout.strip()


class GpuTypesTest(ElasticdTestCase):
    # The site's relative speeds; a move costs 4 s until one is measured and must save twice that.
    EXTRA = "[types]\nspeed = a100:2,v100:1\nmove_cost = 4\nmove_payback = 2\n"

    def test_bad_type_lists_are_refused_at_submit(self):
        wd = job_workdir("types-bad")
        for types, message in [
                ("a100,h100", "--elastic-gpu-types: this cluster has no GPU type 'h100'; its types are a100,v100"),
                ("a100,a100", "--elastic-gpu-types: 'a100' is listed twice; give each type once"),
                ("a100,,v100", "--elastic-gpu-types: 'a100,,v100' has an empty item; separate the types by single "
                               "commas, e.g. a100,v100")]:
            job, proc = sbatch(["--elastic-gpus=1:2", f"--elastic-gpu-types={types}", "--gres=gpu:1"], wrap="true",
                               workdir=wd, check=False)
            if job:
                self.jobs.append(job)
            self.assertIsNone(job, f"sbatch accepted --elastic-gpu-types={types}")
            self.assertIn(message, proc.stderr)
        # The job's own type must be listed: checked when its batch step starts (sbatch cannot see --gres).
        job, _ = sbatch(["--elastic-gpus=1:2", "--elastic-gpu-types=a100", "--gres=gpu:v100:1", "-o", "out.txt"],
                        wrap="echo ran", workdir=wd)
        self.jobs.append(job)
        self.assertEqual(wait_job(job, timeout=60), "FAILED")
        out = read(os.path.join(wd, "out.txt"))
        self.assertIn("--elastic-gpu-types=a100 does not contain 'v100', the type of the job's own GPU request", out)
        self.assertNotIn("ran", out.replace("--elastic", ""))

    def test_job_moves_to_the_faster_type_once_it_frees_up(self):
        t0 = time.time()
        rigid, _ = sbatch(["-N2", "--gres=gpu:a100:4", "-o", "out.txt"], wrap="sleep 10",
                          workdir=job_workdir("types-rigid"))
        self.jobs.append(rigid)
        wait_until(lambda: job_state(rigid) == "RUNNING", 30, "the rigid job on every a100")
        # The reference: the same training as a rigid job on v100, never moved (the trainer is
        # deterministic: the moved job must end with the same model, hence the same loss).
        ref_wd = job_workdir("types-reference")
        ref_script = trainer_script(gpus=2, max_gpus=2, gpu_type="v100", samples=SAMPLES, epochs=EPOCHS, batch=BATCH)
        ref, _ = sbatch([], script="\n".join(l for l in ref_script.splitlines() if "--elastic-gpus" not in l) + "\n",
                        workdir=ref_wd)
        self.jobs.append(ref)
        a, wd = submit_trainer("types-move", gpus=2, max_gpus=2, gpu_type=None, samples=SAMPLES, epochs=EPOCHS,
                               batch=BATCH, sbatch_lines="#SBATCH --elastic-gpu-types=a100,v100\n"
                                                         "#SBATCH --open-mode=append",
                               trainer_args="--resume")
        self.jobs.append(a)
        wait_until(lambda: status().get(a, {}).get("metrics_received", 0) > 0, 60, "the job's first step")
        first = status()[a]
        self.assertEqual(first["gpu_type"], "v100")
        self.assertEqual(first["gpu_types"], ["a100", "v100"])
        self.assertTrue(first["speed_per_gpu"]["v100"]["measured"])
        self.assertFalse(first["speed_per_gpu"]["a100"]["measured"])  # from the site's table until it runs there
        on_v100 = nodes_of(a)
        self.assertIn(on_v100, ("n3", "n4"))

        # The rigid job ends: elasticd moves the job to a100 (checkpoint, held requeue, release);
        # elasticctl status lists the move while it is in flight.
        self.assertEqual(wait_job(rigid, timeout=60), "COMPLETED")
        move = wait_until(lambda: [m for m in moves() if m["job_id"] == a], 30, "the move in elasticctl status")[0]
        self.assertEqual((move["from"], move["to"]), ("v100", "a100"))
        self.assertTrue(move["check"]["worth"])
        wait_until(lambda: restarts(a) == 1 and job_state(a) == "RUNNING", 60, "the job requeued and running again")
        self.assertIn(nodes_of(a), ("n1", "n2"))
        wait_until(lambda: status().get(a, {}).get("gpu_type") == "a100", 30, "the job registered on a100")
        out_path = os.path.join(wd, f"job-{a}.out")
        self.assertEqual(wait_job(a, timeout=120), "COMPLETED")
        elapsed = time.time() - t0

        out = read(out_path)
        self.assertIn("elasticd command 1: checkpoint", out)
        restored = re.search(r"restored .*checkpoint\.bin at epoch (\d+), cursor (\d+)", out)
        self.assertIsNotNone(restored, out)
        self.assertEqual(out.count("elastic-train-logreg: done:"), 1, out)
        done = re.search(r"elastic-train-logreg: done: (\d+) steps, world (\d+), batch (\d+), loss ([0-9.]+)", out)
        self.assertIsNotNone(done, out)
        steps, world, batch, loss = int(done.group(1)), int(done.group(2)), int(done.group(3)), float(done.group(4))
        # The run on a100 trains exactly what the checkpoint had left: the remaining samples in
        # batches of 64, an epoch's last batch possibly partial (one more step per epoch at most).
        epoch, cursor = int(restored.group(1)), int(restored.group(2))
        left = EPOCHS * SAMPLES - (epoch * SAMPLES + cursor)
        self.assertGreater(epoch * SAMPLES + cursor, 0, "the checkpoint holds no progress")
        self.assertGreaterEqual(steps, left // BATCH, out)
        self.assertLessEqual(steps, left // BATCH + (EPOCHS - epoch) + 1, out)
        self.assertEqual((world, batch), (2, BATCH))
        self.assertLess(loss, 0.3, "the model did not train (logistic loss starts at ln 2 = 0.69)")
        self.assertEqual(wait_job(ref, timeout=120), "COMPLETED")
        reference = final_loss(read(os.path.join(ref_wd, f"job-{ref}.out")))
        self.assertEqual(loss, reference, "the moved job's model differs from the unmoved reference's")
        db = sqlite3.connect(self.d.db)
        audit = [(r[0], r[1]) for r in db.execute("SELECT action, detail FROM audit WHERE job_id = ? ORDER BY id", (a,))]
        db.close()
        actions = [x for x, _ in audit]
        for step in ("move", "move_requeued", "move_released", "moved"):
            self.assertEqual(actions.count(step), 1, actions)
        self.assertNotIn("move_failed", actions)
        moved = [d for x, d in audit if x == "moved"][0]
        self.assertIn('"from":"v100"', moved.replace(" ", ""))
        self.assertIn('"to":"a100"', moved.replace(" ", ""))
        self.assertIn(f"job {a}: moved from v100 to a100", self.d.read_log())
        print(f"job {a}: v100 ({on_v100}) -> a100 at epoch {epoch}, {steps} steps after, loss {loss}, {elapsed:.0f} s from submission to completion; "
              f"move: {moved}")


if __name__ == "__main__":
    unittest.main(verbosity=2)
