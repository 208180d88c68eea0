"""Helpers for slurm-labelled tests: they run against the local cluster of scripts/cluster.

The cluster is given by the environment that CTest sets for every slurm-labelled test:
ELASTIC_CLUSTER_DIR (its state directory), ELASTIC_CLUSTER_PORT_BASE, ELASTIC_JOB_USER and
ELASTIC_SOURCE_DIR. Jobs are submitted as the unprivileged job user with runuser.
"""

import os
import re
import shutil
import subprocess
import time
import unittest
import uuid

SOURCE_DIR = os.environ.get("ELASTIC_SOURCE_DIR",
                            os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
CLUSTER_DIR = os.environ.get("ELASTIC_CLUSTER_DIR", "/tmp/elastic-cluster")
PORT_BASE = os.environ.get("ELASTIC_CLUSTER_PORT_BASE", "16800")
JOB_USER = os.environ.get("ELASTIC_JOB_USER", "elastic")
CLUSTER_SCRIPT = os.path.join(SOURCE_DIR, "scripts", "cluster")
SLURM_CONF = os.path.join(CLUSTER_DIR, "etc", "slurm.conf")
TERMINAL_STATES = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
                   "PREEMPTED", "BOOT_FAIL", "DEADLINE"}


def slurm_env(extra=None):
    # The test's own ELASTIC_* settings (cluster directory, ports) are not for the jobs.
    env = {k: v for k, v in os.environ.items() if not k.startswith("ELASTIC_")}
    env["SLURM_CONF"] = SLURM_CONF
    if extra:
        env.update(extra)
    return env


def run(args, user=None, check=True, timeout=120, env=None, cwd=None):
    """Runs a command (as `user` when given) with SLURM_CONF pointing at the cluster."""
    cmd = list(args)
    if user is not None:
        cmd = ["runuser", "-u", user, "--"] + cmd
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          env=slurm_env(env), cwd=cwd)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {proc.returncode}\n"
                             f"stdout: {proc.stdout}\nstderr: {proc.stderr}")
    return proc


def cluster(*args, check=True, timeout=180):
    """Runs scripts/cluster with this test cluster's directory and ports."""
    return run([CLUSTER_SCRIPT, *args, "--dir", CLUSTER_DIR, "--port-base", PORT_BASE],
               check=check, timeout=timeout)


def job_workdir(name):
    """A fresh directory the job user owns, inside the cluster directory."""
    d = os.path.join(CLUSTER_DIR, "jobs", f"{name}-{uuid.uuid4().hex[:8]}")
    os.makedirs(d)
    shutil.chown(d, user=JOB_USER, group=JOB_USER)
    return d


def sbatch(args, script=None, wrap=None, user=JOB_USER, workdir=None, check=True):
    """Submits a batch job; returns (job id or None, completed process)."""
    cmd = ["sbatch", "--parsable"]
    if workdir:
        cmd.append(f"--chdir={workdir}")
    cmd += list(args)
    if wrap is not None:
        cmd += ["--wrap", wrap]
    elif script is not None:
        path = os.path.join(workdir or CLUSTER_DIR, f"job-{uuid.uuid4().hex[:8]}.sbatch")
        with open(path, "w") as f:
            f.write(script)
        os.chmod(path, 0o755)
        cmd.append(path)
    proc = run(cmd, user=user, check=check, cwd=workdir)
    job_id = None
    if proc.returncode == 0:
        job_id = int(proc.stdout.strip().split(";")[0])
    return job_id, proc


def job_state(job_id):
    """The job's state from slurmctld ("" once it has left slurmctld's memory)."""
    proc = run(["squeue", "-h", "-j", str(job_id), "-o", "%T", "--states=all"], check=False)
    return proc.stdout.strip()


def wait_job(job_id, timeout=120):
    """Waits until the job has ended; returns its final state as slurmctld reports it."""
    end = time.time() + timeout
    while time.time() < end:
        state = job_state(job_id)
        if state in TERMINAL_STATES:
            return state
        time.sleep(0.25)
    raise AssertionError(f"job {job_id} did not end within {timeout} s (state {job_state(job_id)})")


def sacct(job_id, fields, allocations=True, timeout=30):
    """Rows of sacct for a job as dicts; waits until accounting has the job's end and its start.

    slurmdbd may get a short job's end before its start record and then shows a provisional
    row (job name "allocation", no AllocTRES) for a moment: wait until the start is recorded.
    """
    fields = list(fields)
    extra = [f for f in ("State", "Start", "JobName") if f not in fields]
    asked = fields
    fields = fields + extra
    cmd = ["sacct", "-n", "-P", "-j", str(job_id), "-o", ",".join(fields)]
    if allocations:
        cmd.insert(1, "-X")
    end = time.time() + timeout
    rows = []
    while time.time() < end:
        out = run(cmd).stdout
        rows = [dict(zip(fields, line.split("|"))) for line in out.splitlines() if line]
        if rows and all(r["State"].split()[0] in TERMINAL_STATES and r["Start"] not in ("", "Unknown", "None")
                        and r["JobName"] != "allocation" for r in rows):
            return [{k: r[k] for k in asked} for r in rows]
        time.sleep(0.5)
    raise AssertionError(f"sacct has no finished record of job {job_id}: {rows}")


def tres(alloc_tres):
    """Parses an AllocTRES string ("cpu=2,gres/gpu=4,node=2") into a dict."""
    out = {}
    for item in alloc_tres.split(","):
        if "=" in item:
            k, v = item.split("=", 1)
            out[k] = v
    return out


def read(path):
    with open(path) as f:
        return f.read()


class ClusterTestCase(unittest.TestCase):
    """Base class: checks that the cluster runs before any test of the class."""

    @classmethod
    def setUpClass(cls):
        proc = run(["sinfo", "-h", "-N", "-o", "%N %t"], check=False)
        if proc.returncode != 0:
            raise AssertionError(f"the test cluster in {CLUSTER_DIR} does not answer: {proc.stderr}")
