"""Shared pieces of the end-to-end tests: the elastic trainer's job script, elasticd's status,
and waiting for conditions."""

import json
import os
import re
import subprocess
import time

from clustertest import CLUSTER_DIR, ClusterTestCase, run, sbatch, job_workdir, wait_job
from elasticd_fixture import Elasticd

CTL = os.path.join(CLUSTER_DIR, "bin", "elasticctl")
LAUNCH = os.path.join(CLUSTER_DIR, "bin", "elastic-launch")
TRAINER = os.path.join(CLUSTER_DIR, "bin", "elastic-train-logreg")
# Slurm starts a requeued job once the credentials of its last run expired: AuthInfo cred_expire
# in scripts/cluster's slurm.conf (Slurm's default 120 s).
CRED_EXPIRE_S = 30


def trainer_script(gpus, max_gpus, gpu_type="a100", samples=4000, epochs=40, batch=64, compute_us=400,
                   sbatch_lines="", env="", trainer_args="", wrapper=""):
    """An elastic job: the example trainer, one rank per GPU, emulating GPU time per sample.
    gpu_type None: an untyped GPU request (--gres=gpu:N). wrapper: words before the trainer's
    path in the program elastic-launch starts (extensions run the same program)."""
    gres = f"gpu:{gpu_type}:{gpus}" if gpu_type else f"gpu:{gpus}"
    return f"""#!/bin/bash
#SBATCH --elastic-gpus={gpus}:{max_gpus}
#SBATCH --gres={gres}
#SBATCH -o job-%j.out
{sbatch_lines}
export OMPI_MCA_btl=self,tcp OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo {env}
srun --ntasks-per-node=1 {LAUNCH} --oversubscribe -- {wrapper}{TRAINER} --samples {samples} --epochs {epochs} \\
     --batch {batch} --compute-us-per-sample {compute_us} {trainer_args}
exit $?
"""


def restarts(job):
    """How often Slurm started the job again (scontrol's Restarts=; -1 once it is gone)."""
    out = run(["scontrol", "-o", "show", "job", str(job)], check=False).stdout
    m = re.search(r"\bRestarts=(\d+)", out)
    return int(m.group(1)) if m else -1


def by_relaunch():
    """Whether this build grows onto other nodes by relaunch (the rendezvous elastic-launch --help
    names: prte-dvm, Open MPI 5) rather than in place (Open MPI 4)."""
    out = subprocess.run([LAUNCH, "--help"], capture_output=True, text=True, check=False).stdout
    return "prte-dvm" in out


def submit_trainer(name, **kw):
    wd = job_workdir(name)
    job, _ = sbatch([], script=trainer_script(**kw), workdir=wd)
    return job, wd


def status():
    return {j["job_id"]: j for j in json.loads(run([CTL, "status", "--json"]).stdout)["jobs"]}


def wait_until(predicate, timeout, what, interval=0.25):
    end = time.time() + timeout
    last = None
    while time.time() < end:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {what} (last: {last!r})")


def extension_jobs(parent):
    """Extension jobs of `parent` in squeue: [(job id, state, user, account)]."""
    out = run(["squeue", "-h", "-o", "%i|%j|%T|%u|%a", "--states=all"]).stdout
    rows = []
    for line in out.splitlines():
        jid, name, state, user, account = line.split("|")
        if name.startswith(f"elastic-ext:{parent}:"):
            rows.append((int(jid), state, user, account))
    return rows


def gpus_of(job):
    j = status().get(job)
    return j["gpus"] if j else None


class ElasticdTestCase(ClusterTestCase):
    """A test with its own elasticd (epoch EPOCH seconds, two epochs between rescales of a job);
    jobs appended to self.jobs are cancelled and waited for afterwards."""

    EPOCH = 3
    EXTRA = ""  # more elasticd.conf lines

    def setUp(self):
        self.d = Elasticd(self.id().split(".")[-1], epoch=self.EPOCH, min_rescale_interval=2 * self.EPOCH,
                          extra=self.EXTRA).start()
        self.jobs = []

    def tearDown(self):
        for job in self.jobs:
            run(["scancel", str(job)], check=False)
        for job in self.jobs:
            try:
                wait_job(job, timeout=60)
            except AssertionError:
                pass
        self.d.stop()
