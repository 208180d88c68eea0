"""slurm-labelled: a fused sweep whose tasks Slurm starts together (GPUs free): the first task to
register leads, the others are members that end at once, and every trial has its result from the
leader (jobscripts/sweep_fused.sbatch; the held and widened case is test_fused_sweep.py)."""

import json
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(SOURCE, "tests", "python"))

from clustertest import CLUSTER_DIR, job_workdir, read, sbatch  # noqa: E402
from cluster_files import install_example, install_package  # noqa: E402
from e2e import ElasticdTestCase, wait_until  # noqa: E402
from test_fused_sweep import array_tasks  # noqa: E402


class FusedMembersTest(ElasticdTestCase):

    def test_tasks_started_together_become_members(self):
        # GPUs free: Slurm starts every task at once. The first to register leads; the others are
        # members, end at once and leave their GPUs to the leader; every trial still has its result.
        pydir, script = install_package(), install_example("train_sweep_fused.py")
        with open(os.path.join(SOURCE, "jobscripts", "sweep_fused.sbatch")) as f:
            text = f.read()
        wd = job_workdir("members")
        env = (f"ELASTIC_PREFIX={CLUSTER_DIR},ELASTIC_PYTHONPATH={pydir},TRAIN_SCRIPT={script},"
               f"ELASTIC_LOCAL_CLUSTER=1,TRAIN_STEPS=100,TRAIN_SLEEP_MS=0")
        array, _ = sbatch([f"--export=ALL,{env}", "--array=0-2", "--gres=gpu:a100:1", "-o", "task-%a.out"],
                          script=text, workdir=wd)
        self.jobs.append(array)
        wait_until(lambda: not array_tasks(array), 120, "every task of the array to end", interval=1)
        # (A task Slurm had not started yet when the leader registered is held instead: no output.)
        outputs = {t: read(os.path.join(wd, f"task-{t}.out")) for t in range(3)
                   if os.path.exists(os.path.join(wd, f"task-{t}.out"))}
        members = [t for t, out in outputs.items() if "trains fused in job" in out]
        print(f"\narray {array}: members {members}, tasks that ran {sorted(outputs)}")
        self.assertGreaterEqual(len(members), 1, outputs)
        self.assertEqual(len(outputs) - len(members), 1, outputs)  # one leader
        leaders = {json.loads(read(os.path.join(wd, f"results-{array}", f"trial-{t}.json")))["job"] for t in range(3)}
        self.assertEqual(len(leaders), 1, leaders)



if __name__ == "__main__":
    unittest.main()
