"""Starts elasticd against the test cluster (its plugstack.conf names 127.0.0.1:PORT_BASE+3)."""

import os
import shutil
import signal
import subprocess
import time

from clustertest import CLUSTER_DIR, PORT_BASE, SLURM_CONF, run

BUILD_DIR = os.environ.get("ELASTIC_BUILD_DIR", "")
ELASTICD = os.path.join(BUILD_DIR, "bin", "elasticd")
ELASTICCTL = os.path.join(BUILD_DIR, "bin", "elasticctl")
PORT = int(PORT_BASE) + 3
MUNGE_SOCKET = os.path.join(CLUSTER_DIR, "munge", "munge.socket")


class Elasticd:
    def __init__(self, name, epoch=2, extra="", min_rescale_interval=0):
        # One directory per test cluster: two build trees testing at once (each with its own
        # cluster) must not share an elasticd's state and log.
        cluster = os.path.basename(os.path.normpath(CLUSTER_DIR))
        self.dir = os.path.join("/tmp", f"elasticd-test-{cluster}-{name}")
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir, mode=0o700)
        self.conf = os.path.join(self.dir, "elasticd.conf")
        self.log = os.path.join(self.dir, "elasticd.log")
        self.db = os.path.join(self.dir, "state.db")
        self.write_config(epoch, extra, min_rescale_interval)
        self.proc = None

    def write_config(self, epoch=2, extra="", min_rescale_interval=0):
        with open(self.conf, "w") as f:
            f.write(f"""[slurm]
conf = {SLURM_CONF}
[controller]
listen = 127.0.0.1:{PORT}
munge_socket = {MUNGE_SOCKET}
state_db = {self.db}
log_level = debug
log_file = {self.log}
[scheduler]
epoch = {epoch}
min_rescale_interval = {min_rescale_interval}
[extensions]
launcher = {CLUSTER_DIR}/bin/elastic-launch
ready_timeout = 60
{extra}
""")

    def start(self):
        seen = len(self.read_log())  # the log is appended to across restarts
        self.proc = subprocess.Popen([ELASTICD, "--config", self.conf], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, env=dict(os.environ, SLURM_CONF=SLURM_CONF))
        end = time.time() + 20
        while time.time() < end:
            if self.proc.poll() is not None:
                raise AssertionError(f"elasticd exited {self.proc.returncode}: {self.proc.stderr.read()!r}\n{self.read_log()}")
            if "listening on" in self.read_log()[seen:]:
                return self
            time.sleep(0.05)
        raise AssertionError("elasticd did not start listening:\n" + self.read_log())

    def read_log(self):
        try:
            with open(self.log) as f:
                return f.read()
        except OSError:
            return ""

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def ctl(self, *args, user=None, check=True):
        return run([ELASTICCTL, *args], user=user, check=check)
