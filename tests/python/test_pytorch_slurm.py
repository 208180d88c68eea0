"""slurm-labelled: jobscripts/pytorch_elastic.sbatch on the local cluster. elasticd grows the
PyTorch example from 2 to 6 GPUs through an extension job whose ranks (Python processes started by
`elastic-launch --join`) join the running world and receive the parameters and Adam's state, and
the job completes with its optimizer state checked at every rescale (--check). On Open MPI 5 the
growth is two relaunches of the world (its own node, then another; e2e.by_relaunch()), and each
relaunched world checks the state it took over."""

import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(SOURCE, "tests", "controller"))

from clustertest import CLUSTER_DIR, job_workdir, read, sbatch, wait_job  # noqa: E402
from cluster_files import install_example, install_package  # noqa: E402
from e2e import ElasticdTestCase, by_relaunch, extension_jobs, gpus_of, status, wait_until  # noqa: E402

EPOCH = ElasticdTestCase.EPOCH


def install_python_files():
    """The package and the example where the job user can read them."""
    return install_package(), install_example("train_mlp.py")


class PyTorchElasticSlurmTest(ElasticdTestCase):
    def test_grown_by_elasticd_and_completes(self):
        pydir, script = install_python_files()
        with open(os.path.join(SOURCE, "jobscripts", "pytorch_elastic.sbatch")) as f:
            text = f.read()
        wd = job_workdir("pytorch")
        env = (f"ELASTIC_PREFIX={CLUSTER_DIR},ELASTIC_PYTHONPATH={pydir},TRAIN_SCRIPT={script},"
               f"ELASTIC_LOCAL_CLUSTER=1,TRAIN_SAMPLES=4096,TRAIN_EPOCHS=20,TRAIN_SLEEP_MS=40,"
               f"TRAIN_ARGS=--check")
        job, _ = sbatch([f"--export=ALL,{env}", "-o", "job-%j.out"], script=text, workdir=wd)
        self.jobs.append(job)
        wait_until(lambda: status().get(job, {}).get("launcher_ready"), 90, "the job to register its launcher")
        # elasticd grows a job once it has measured it: the first step comes after Python imported
        # torch, which took more than 16 s on a loaded machine (CI's Debian 13 check beside the
        # suite). The growth is then due within two epochs.
        wait_until(lambda: status().get(job, {}).get("metrics_received", 0) > 0, 90, "the job's first step")
        wait_until(lambda: extension_jobs(job), 2 * EPOCH + 10, "an extension job")
        wait_until(lambda: gpus_of(job) == 6, 150, "the job at 6 GPUs")
        state = wait_job(job, timeout=600)
        out = read(os.path.join(wd, f"job-{job}.out"))
        print(out[-3000:])
        self.assertEqual(state, "COMPLETED", out[-2000:])
        self.assertRegex(out, r"relaunch done: 6 ranks" if by_relaunch() else r"join at step \d+: 2 -> 6 ranks")
        self.assertRegex(out, r"final loss [0-9.]+ accuracy [0-9.]+ steps \d+ rescales checked [1-9]")
        self.assertNotIn("CHECK FAILED", out)


if __name__ == "__main__":
    unittest.main()
