"""GPU jobs on the local cluster: multi-node GRES jobs, accounting of GPUs, typed GPUs."""

import os
import re
import unittest

from clustertest import (JOB_USER, ClusterTestCase, job_workdir, read, sacct, sbatch, tres,
                         wait_job)


class GpuJobTest(ClusterTestCase):

    def test_two_node_gpu_job_completes_with_visible_devices_in_every_step(self):
        wd = job_workdir("twonode")
        script = """#!/bin/bash
echo "batch $SLURMD_NODENAME CVD=$CUDA_VISIBLE_DEVICES"
srun --ntasks-per-node=1 bash -c 'echo "step $SLURMD_NODENAME CVD=$CUDA_VISIBLE_DEVICES"'
"""
        job, _ = sbatch(["-N2", "--gres=gpu:2", "-o", "out.txt"], script=script, workdir=wd)
        self.assertEqual(wait_job(job), "COMPLETED")
        out = read(os.path.join(wd, "out.txt"))
        steps = re.findall(r"^step (n\d+) CVD=(\S*)$", out, re.M)
        self.assertEqual(len(steps), 2, out)
        self.assertEqual(len({node for node, _ in steps}), 2, f"steps not on two nodes: {out}")
        for node, cvd in steps:
            self.assertEqual(len(cvd.split(",")), 2, f"{node} sees CUDA_VISIBLE_DEVICES={cvd!r}")
        self.assertRegex(out, r"(?m)^batch n\d+ CVD=\d+,\d+$")

        rows = sacct(job, ["JobID", "User", "Account", "State", "AllocTRES"])
        self.assertEqual(len(rows), 1, rows)
        row = rows[0]
        self.assertEqual(row["User"], JOB_USER)
        self.assertEqual(row["State"], "COMPLETED")
        self.assertIn("gres/gpu=", row["AllocTRES"])
        self.assertEqual(tres(row["AllocTRES"])["gres/gpu"], "4")  # 2 nodes x 2 GPUs
        self.assertEqual(tres(row["AllocTRES"])["node"], "2")

    def test_job_runs_on_the_gpu_type_it_names(self):
        nodes_of_type = {"a100": {"n1", "n2"}, "v100": {"n3", "n4"}}
        for gpu_type, nodes in nodes_of_type.items():
            with self.subTest(gpu_type=gpu_type):
                wd = job_workdir(gpu_type)
                job, _ = sbatch([f"--gres=gpu:{gpu_type}:3", "-o", "out.txt"],
                                wrap='echo "$SLURMD_NODENAME $CUDA_VISIBLE_DEVICES"', workdir=wd)
                self.assertEqual(wait_job(job), "COMPLETED")
                node, cvd = read(os.path.join(wd, "out.txt")).split()
                self.assertIn(node, nodes)
                self.assertEqual(len(cvd.split(",")), 3)
                row = sacct(job, ["AllocTRES", "NodeList"])[0]
                self.assertEqual(tres(row["AllocTRES"]).get(f"gres/gpu:{gpu_type}"), "3", row)

    def test_request_beyond_a_node_is_refused_at_submit(self):
        job, proc = sbatch(["--gres=gpu:5", "-N1"], wrap="true", workdir=job_workdir("toobig"),
                           check=False)
        self.assertIsNone(job)
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("Requested node configuration is not available", proc.stderr)

    def test_unknown_gpu_type_is_refused_at_submit(self):
        job, proc = sbatch(["--gres=gpu:h100:1"], wrap="true", workdir=job_workdir("badtype"),
                           check=False)
        self.assertIsNone(job)
        self.assertNotEqual(proc.returncode, 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
