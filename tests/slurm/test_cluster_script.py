"""scripts/cluster itself: idempotent up, status, down leaves no process, down after a failed up,
stale pid files.

Runs a second, private cluster (its own directory and ports) so that the shared test cluster
is not disturbed.
"""

import os
import socket
import subprocess
import time
import unittest

from clustertest import CLUSTER_SCRIPT, JOB_USER, SOURCE_DIR, PORT_BASE

PRIVATE_DIR = os.environ.get("ELASTIC_PRIVATE_CLUSTER_DIR", "/tmp/elastic-ctest-lifecycle")
PRIVATE_PORT_BASE = str(int(PORT_BASE) + 300)
MARK = f"ELASTIC_CLUSTER_DIR={PRIVATE_DIR}"
CONF = os.path.join(PRIVATE_DIR, "etc", "slurm.conf")


def cluster(*args, check=True):
    proc = subprocess.run([CLUSTER_SCRIPT, *args, "--dir", PRIVATE_DIR, "--port-base", PRIVATE_PORT_BASE],
                          capture_output=True, text=True, timeout=180)
    if check and proc.returncode != 0:
        raise AssertionError(f"cluster {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc


def slurm(*args, user=None):
    cmd = list(args)
    if user:
        cmd = ["runuser", "-u", user, "--"] + cmd
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, SLURM_CONF=CONF))


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def processes_of_cluster():
    """PIDs (alive, not zombies) that carry the private cluster's marker or run its jobs."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if MARK.encode() in env or f"SLURM_CONF={CONF}".encode() in env and any(
                e.startswith(b"SLURM_JOB_ID=") for e in env):
            if alive(int(entry)):
                found.append(int(entry))
    return found


def daemon_pids():
    run_dir = os.path.join(PRIVATE_DIR, "run")
    pids = {}
    for name in sorted(os.listdir(run_dir)):
        if name.endswith(".pid") or name.endswith(".pid.own"):
            with open(os.path.join(run_dir, name)) as f:
                pids[name] = int(f.read().split()[0])  # "PID START-TICKS"
    return pids


def wait_until(predicate, timeout, what):
    end = time.time() + timeout
    while time.time() < end:
        if predicate():
            return
        time.sleep(0.25)
    raise AssertionError(f"timed out waiting for {what}")


class ClusterScriptTest(unittest.TestCase):

    @classmethod
    def tearDownClass(cls):
        cluster("down", "--purge", check=False)

    def test_1_up_is_idempotent_and_down_leaves_nothing(self):
        t0 = time.time()
        first = cluster("up")
        self.assertLess(time.time() - t0, 30, "first up took 30 s or more")
        self.assertIn("SLURM_CONF=", first.stdout)
        pids = daemon_pids()
        self.assertGreaterEqual(len(pids), 8, pids)  # munge, mariadb, dbd, ctld, 4 slurmd

        second = cluster("up")
        self.assertEqual(second.returncode, 0)
        self.assertEqual(daemon_pids(), pids, "a second up restarted daemons")

        status = cluster("status")
        for daemon in ("munged", "mariadb", "slurmdbd", "slurmctld", "slurmd-n1", "slurmd-n4"):
            self.assertRegex(status.stdout, rf"(?m)^{daemon}\s+running \(pid \d+\)$")
        self.assertIn(f"export SLURM_CONF={CONF}", status.stdout)

        # A running two-node job with a step: down must take it away too.
        jobs = os.path.join(PRIVATE_DIR, "jobs")
        sub = slurm("sbatch", "--parsable", "-N2", "--gres=gpu:1", f"--chdir={jobs}", "-o", "/dev/null",
                    "--wrap", "srun sleep 600", user=JOB_USER)
        self.assertEqual(sub.returncode, 0, sub.stderr)
        job = sub.stdout.strip()
        wait_until(lambda: slurm("squeue", "-h", "-j", job, "-o", "%T").stdout.strip() == "RUNNING",
                   60, "the job to run")
        wait_until(lambda: any(b"sleep" in open(f"/proc/{p}/cmdline", "rb").read()
                               for p in processes_of_cluster() if os.path.exists(f"/proc/{p}/cmdline")),
                   30, "the job's step to start")

        cluster("down")
        left = processes_of_cluster()
        self.assertEqual(left, [], f"processes survived down: {left}")
        for name, pid in pids.items():
            self.assertFalse(alive(pid), f"{name} (pid {pid}) survived down")
        status = cluster("status", check=False)
        self.assertNotEqual(status.returncode, 0)

        again = cluster("down")  # nothing left to stop: still fine
        self.assertEqual(again.returncode, 0)

    def test_2_down_after_a_failed_up_cleans_up(self):
        # Take slurmctld's port so that up fails half-way (after munge, MariaDB, slurmdbd).
        blocker = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        blocker.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        blocker.bind(("127.0.0.1", int(PRIVATE_PORT_BASE) + 2))
        blocker.listen(1)
        try:
            failed = cluster("up", check=False)
        finally:
            blocker.close()
        self.assertNotEqual(failed.returncode, 0)
        self.assertIn(f"port {int(PRIVATE_PORT_BASE) + 2} (slurmctld) is taken", failed.stderr)
        self.assertNotEqual(processes_of_cluster(), [], "nothing had started before the failure")
        cluster("down")
        self.assertEqual(processes_of_cluster(), [])

    def test_3_help_and_bad_arguments(self):
        for tool in ("cluster", "bootstrap", "demo"):
            path = os.path.join(SOURCE_DIR, "scripts", tool)
            proc = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=30)
            self.assertEqual(proc.returncode, 0, f"{tool} --help: {proc.stderr}")
            self.assertIn("Usage:", proc.stdout)
        bad = subprocess.run([CLUSTER_SCRIPT, "up", "--nodes", "3"], capture_output=True, text=True)
        self.assertEqual(bad.returncode, 1)
        self.assertIn("--nodes must be an even number", bad.stderr)
        bad = subprocess.run([CLUSTER_SCRIPT, "sideways"], capture_output=True, text=True)
        self.assertEqual(bad.returncode, 2)
        self.assertIn("unknown command 'sideways'", bad.stderr)

    def test_4_stale_pid_files_name_other_processes(self):
        # Pid files left by a run that was killed, whose PIDs an unrelated process holds since (PIDs
        # wrap; a new PID namespace starts again from 1), in both formats ("PID START-TICKS", and a
        # bare PID from an earlier version, older than the process): status reports no daemon,
        # down leaves the process alone, and up starts every daemon.
        run_dir = os.path.join(PRIVATE_DIR, "run")
        os.makedirs(run_dir, exist_ok=True)
        other = subprocess.Popen(["sleep", "600"])
        try:
            stale = ["munged.pid", "mariadb.pid", "slurmdbd.pid", "slurmdbd.pid.own",
                     "slurmctld.pid.own", "slurmd-n1.pid.own"]

            def write_stale():
                an_hour_ago = time.time() - 3600
                for i, name in enumerate(stale):
                    path = os.path.join(run_dir, name)
                    with open(path, "w") as f:
                        f.write(f"{other.pid} 1\n" if i % 2 else f"{other.pid}\n")
                    os.utime(path, (an_hour_ago, an_hour_ago))

            write_stale()
            status = cluster("status", check=False)
            self.assertNotRegex(status.stdout, r"running \(pid", status.stdout)
            cluster("down")
            self.assertTrue(alive(other.pid), "down stopped a process that was not the cluster's")

            write_stale()
            cluster("up")
            pids = daemon_pids()
            for name in stale:
                self.assertNotEqual(pids[name], other.pid, f"up took pid {other.pid} for {name}")
            status = cluster("status")
            self.assertRegex(status.stdout, r"(?m)^mariadb\s+running \(pid \d+\)$")
            self.assertRegex(status.stdout, r"(?m)^slurmd-n1\s+running \(pid \d+\)$")
            cluster("down")
            self.assertTrue(alive(other.pid), "down stopped a process that was not the cluster's")
            self.assertEqual(processes_of_cluster(), [])
        finally:
            other.kill()
            other.wait()

if __name__ == "__main__":
    unittest.main(verbosity=2)
