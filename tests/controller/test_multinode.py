"""A parent job on two nodes: `sbatch -N2 --gres=gpu:1 --elastic-gpus=2:4` and
`srun --ntasks-per-node=1 elastic-launch`. Each node's launcher starts its own ranks (a node
group); node group 1 connects to node group 0 through the job's ompi-server and they merge into
one world. elasticd is not running, so the job runs rigid, but its world must still be one."""

import os
import unittest

from clustertest import ClusterTestCase, job_workdir, read, run, sbatch, wait_job
from e2e import LAUNCH, TRAINER


class MultiNodeTest(ClusterTestCase):

    def test_two_nodes_train_as_one_world(self):
        wd = job_workdir("multinode")
        script = f"""#!/bin/bash
#SBATCH -N2
#SBATCH --gres=gpu:1
#SBATCH --elastic-gpus=2:4
#SBATCH -o job-%j.out
export OMPI_MCA_btl=self,tcp OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
srun --ntasks-per-node=1 {LAUNCH} --oversubscribe -- {TRAINER} --samples 2000 --epochs 2 --batch 64
exit $?
"""
        job, _ = sbatch([], script=script, workdir=wd)
        try:
            state = wait_job(job, timeout=240)
        finally:
            run(["scancel", str(job)], check=False)
        out = read(os.path.join(wd, f"job-{job}.out"))
        self.assertEqual(state, "COMPLETED", out)
        self.assertIn("initial world of 2 ranks from 2 node groups", out)
        self.assertRegex(out, r"elastic-train-logreg: done: \d+ steps, world 2,")


if __name__ == "__main__":
    unittest.main(verbosity=2)
