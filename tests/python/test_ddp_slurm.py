"""slurm-labelled: jobscripts/pytorch_ddp.sbatch on the local cluster. The unmodified DDP example
(elastic_mpi/python/examples/train_ddp.py: `init_process_group("gloo")` from torchrun's
environment, DistributedSampler, DDP, snapshots) runs rigid on 2 nodes with 2 GPUs each, through
`srun --ntasks-per-node=1 elastic-launch`: one world of 4 ranks (2 per node through the node's
mpirun and the launcher's rank shim), the loss falls, every rank ends with the same model, and
rank 0 leaves its snapshot."""

import json
import os
import re
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))

from clustertest import CLUSTER_DIR, ClusterTestCase, job_workdir, read, sbatch, wait_job  # noqa: E402
from cluster_files import install_example  # noqa: E402

EPOCHS = 4




class PyTorchDdpSlurmTest(ClusterTestCase):
    def test_unmodified_ddp_script_runs_rigid_on_two_nodes(self):
        script = install_example("train_ddp.py")
        with open(os.path.join(SOURCE, "jobscripts", "pytorch_ddp.sbatch")) as f:
            text = f.read()
        wd = job_workdir("ddp")
        env = (f"ELASTIC_PREFIX={CLUSTER_DIR},TRAIN_SCRIPT={script},ELASTIC_LOCAL_CLUSTER=1,"
               f"TRAIN_EPOCHS={EPOCHS},PYTHON={sys.executable}")
        job, _ = sbatch([f"--export=ALL,{env}", "-o", "job-%j.out"], script=text, workdir=wd)
        state = wait_job(job, timeout=90)
        out = read(os.path.join(wd, f"job-{job}.out"))
        print(out[-3000:])
        self.assertEqual(state, "COMPLETED", out[-2000:])
        self.assertIn("world size 4 | backend gloo", out)
        # The ranks of a node share mpirun's output: a line may follow another rank's text.
        finals = re.findall(r"\[rank (\d+)\] world size (\d+) \| final loss ([0-9.]+) \| accuracy ([0-9]\.[0-9]{4})",
                            out)
        self.assertEqual(sorted(int(r) for r, *_ in finals), [0, 1, 2, 3], out[-2000:])
        self.assertEqual({w for _, w, _, _ in finals}, {"4"})
        self.assertEqual(len({(loss, acc) for _, _, loss, acc in finals}), 1, f"ranks disagree: {finals}")
        losses = [float(l) for l in re.findall(r"\[rank 0\] epoch \d+ \| [^\n\[]* \| train loss ([0-9]+\.[0-9]{6})", out)]
        self.assertEqual(len(losses), EPOCHS, out[-2000:])
        final = float(finals[0][2])
        self.assertLess(losses[-1], 0.5 * losses[0])
        self.assertLess(final, losses[0])
        self.assertTrue(os.path.exists(os.path.join(wd, f"snapshot-{job}.pt")), "no snapshot from rank 0")
        # Two launchers (one per node) published 2 ranks each in the job's run dir.
        run_dir = os.path.join(wd, ".elastic", str(job))
        for group in (0, 1):
            with open(os.path.join(run_dir, f"torch-node{group}.json")) as f:
                self.assertEqual(json.load(f)["ranks"], 2, f"node group {group}")


if __name__ == "__main__":
    unittest.main()
