"""A parent job on two nodes, then on four: `sbatch -N2 --gres=gpu:1 --elastic-gpus=2:4` and
`srun --ntasks-per-node=1 elastic-launch`. Open MPI 4: each node's launcher starts its own ranks (a
node group); node group 1 connects to node group 0 through the job's rendezvous (ompi-server) and
they merge into one world, and so on for each further node. Open MPI 5: node group 0's launcher
starts every node's ranks as one job of the job's PRRTE DVM, the others hold their nodes.
elasticd is not running, so the job runs rigid, but its world must still be one."""

import os
import re
import time
import unittest

from clustertest import ClusterTestCase, job_workdir, read, run, sbatch, wait_job
from e2e import LAUNCH, TRAINER, wait_until


def processes_in(directory):
    """Pids of the processes whose working directory is `directory` (the job's ranks and launchers)."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.readlink(f"/proc/{entry}/cwd") == directory:
                    pids.append(int(entry))
            except OSError:
                pass
    return pids


class MultiNodeTest(ClusterTestCase):

    def submit(self, nodes, epochs=2):
        wd = job_workdir(f"multinode{nodes}")
        script = f"""#!/bin/bash
#SBATCH -N{nodes}
#SBATCH --gres=gpu:1
#SBATCH --elastic-gpus={nodes}:{2 * nodes}
#SBATCH -o job-%j.out
export OMPI_MCA_btl=self,tcp OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
srun --ntasks-per-node=1 {LAUNCH} --oversubscribe -- {TRAINER} --samples 2000 --epochs {epochs} --batch 64
exit $?
"""
        job, _ = sbatch([], script=script, workdir=wd)
        return job, wd

    def run_on_nodes(self, nodes):
        job, wd = self.submit(nodes)
        try:
            state = wait_job(job, timeout=240)
        finally:
            run(["scancel", str(job)], check=False)
        out = read(os.path.join(wd, f"job-{job}.out"))
        self.assertEqual(state, "COMPLETED", out)
        # Open MPI 4: each node's ranks a node group, merged by connect/accept; Open MPI 5: one
        # launch over every node (launch/spanning_world.h), the other launchers holding their nodes.
        hosts = ",".join(f"n{i + 1}:1" for i in range(nodes))
        self.assertRegex(out, rf"initial world of {nodes} ranks from {nodes} node groups|"
                              rf"one world of {nodes} ranks over {hosts}\n")
        if f"one world of {nodes} ranks" in out:
            for g in range(1, nodes):
                self.assertIn(f"node group {g}: this node's 1 ranks are in the world node group 0's launcher "
                              f"starts over {nodes} nodes", out)
        self.assertRegex(out, rf"elastic-train-logreg: done: \d+ steps, world {nodes},")

    def test_two_nodes_train_as_one_world(self):
        self.run_on_nodes(2)

    def test_scancel_stops_every_node_with_a_checkpoint(self):
        # The job on two nodes trains; scancel: SIGTERM reaches the ranks on both nodes (Open MPI 5:
        # the second node's launcher passes it to the ranks the first one started there), rank 0
        # writes the job's checkpoint, every launcher and rank of the job ends.
        job, wd = self.submit(2, epochs=100000)
        out_path = os.path.join(wd, f"job-{job}.out")
        try:
            wait_until(lambda: os.path.exists(out_path) and
                       re.search(r"initial world of 2 ranks|one world of 2 ranks", read(out_path)), 120, "the job's world")
            # Two launchers and two ranks at least (Open MPI 5: the DVM's daemons too).
            wait_until(lambda: len(processes_in(wd)) >= 4, 60, "its ranks")
            time.sleep(3)  # a few steps
            run(["scancel", str(job)])
            state = wait_job(job, timeout=120)
        finally:
            run(["scancel", str(job)], check=False)
        out = read(out_path)
        self.assertEqual(state, "CANCELLED", out)
        self.assertIn("SIGTERM: checkpoint written", out)
        self.assertTrue(os.path.getsize(os.path.join(wd, ".elastic", str(job), "checkpoint", "checkpoint.bin")) > 0)
        self.assertNotIn("wrote no end of the world", out)
        wait_until(lambda: not processes_in(wd), 60, "every process of the job to end")

    def test_four_nodes_train_as_one_world(self):
        # Every node of the test cluster: node groups 1-3 each connect to the world the ones
        # before them made (on Open MPI 5, three jobs of the DVM on other nodes than the leader's).
        self.run_on_nodes(4)


if __name__ == "__main__":
    unittest.main(verbosity=2)
