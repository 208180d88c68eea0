"""elasticd and elasticctl on the local cluster: registration, status, authorisation between
users, malformed and oversized input, configuration checks and reload."""

import json
import os
import re
import signal
import socket
import struct
import subprocess
import time
import unittest

from clustertest import (CLUSTER_DIR, JOB_USER, ClusterTestCase, job_workdir, read, run, sbatch, wait_job,
                         job_state)
from elasticd_fixture import ELASTICD, PORT, Elasticd
from wireclient import WireClient, encode

OTHER_USER = os.environ.get("ELASTIC_OTHER_USER", "elastic2")
CTL = os.path.join(CLUSTER_DIR, "bin", "elasticctl")  # readable by the job users


def wait_running(job, timeout=60):
    end = time.time() + timeout
    while time.time() < end:
        if job_state(job) == "RUNNING":
            return
        time.sleep(0.2)
    raise AssertionError(f"job {job} did not start")


def ctl(*args, user=None):
    return run([CTL, *args], user=user, check=False)


class ControllerTest(ClusterTestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.d = Elasticd("controller").start()

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()

    def submit_sleeper(self, seconds=60, gpus="2:8"):
        wd = job_workdir("ctl")
        job, _ = sbatch([f"--elastic-gpus={gpus}", f"--gres=gpu:{gpus.split(':')[0]}", "-o", "out.txt"],
                        wrap=f"env | grep ^ELASTIC_ | sort; sleep {seconds}", workdir=wd)
        wait_running(job)
        end = time.time() + 20
        out = os.path.join(wd, "out.txt")
        while time.time() < end and (not os.path.exists(out) or "ELASTIC_MODE" not in read(out)):
            time.sleep(0.1)
        return job, wd

    def test_registration_and_status(self):
        job, wd = self.submit_sleeper()
        out = read(os.path.join(wd, "out.txt"))
        self.assertIn("ELASTIC_MODE=elastic", out)
        self.assertRegex(out, r"(?m)^ELASTIC_JOIN_TOKEN=[0-9a-f]{32}$")
        self.assertNotIn("warning", out)
        for user in (None, JOB_USER, OTHER_USER):  # status is readable by anyone
            proc = ctl("status", "--json", user=user)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            jobs = {j["job_id"]: j for j in json.loads(proc.stdout)["jobs"]}
            self.assertIn(job, jobs)
            self.assertEqual(jobs[job]["gpus"], 2)
            self.assertEqual(jobs[job]["user"], JOB_USER)
            self.assertEqual(jobs[job]["extensions"], [])
        table = ctl("status").stdout
        self.assertRegex(table, rf"(?m)^\s+{job}\s+{JOB_USER}\s+research\s+a100\s+2\s+2\s+8\b")
        run(["scancel", str(job)])
        wait_job(job)
        # Within two epochs the controller notices the end.
        end = time.time() + 10
        while time.time() < end and any(j["job_id"] == job for j in json.loads(ctl("status", "--json").stdout)["jobs"]):
            time.sleep(0.2)
        self.assertFalse(any(j["job_id"] == job for j in json.loads(ctl("status", "--json").stdout)["jobs"]))

    def test_another_user_cannot_act_on_a_job(self):
        job, _ = self.submit_sleeper()
        try:
            other = WireClient(PORT, user=OTHER_USER)
            for msg in ({"type": "metrics", "job": job, "gpus": 2, "step_time_s": 0.1, "local_batch": 32},
                        {"type": "poll", "job": job}, {"type": "pause", "job": job},
                        {"type": "launcher", "job": job, "argv": ["/bin/true"], "cwd": "/tmp", "env": {}},
                        {"type": "ack", "job": job, "command": 1, "ok": True},
                        {"type": "ready", "job": job, "group": 1}, {"type": "ended", "job": job}):
                with self.subTest(type=msg["type"]):
                    reply = other.call(msg)
                    self.assertFalse(reply["ok"], reply)
                    self.assertEqual(reply["error"]["kind"], "permission")
                    self.assertIn(f"does not own job {job}", reply["error"]["message"])
            # Only root (the plugin in slurmstepd) registers jobs, even the owner cannot.
            owner = WireClient(PORT, user=JOB_USER)
            reply = owner.call({"type": "register", "job": job, "user": 0})
            self.assertEqual(reply["error"]["kind"], "permission")
            reply = owner.call({"type": "pause_all"})
            self.assertEqual(reply["error"]["kind"], "permission")
            # The owner may report for and pause the own job.
            self.assertTrue(owner.call({"type": "metrics", "job": job, "gpus": 2, "step_time_s": 0.1,
                                        "local_batch": 32, "global_batch": 64, "samples": 6400,
                                        "total_samples": 640000})["ok"])
            status = {j["job_id"]: j for j in json.loads(ctl("status", "--json").stdout)["jobs"]}[job]
            self.assertEqual((status["samples_done"], status["total_samples"]), (6400, 640000))
            for bad in (-1, 1e300, "many"):
                reply = owner.call({"type": "metrics", "job": job, "total_samples": bad})
                self.assertEqual(reply["error"]["kind"], "protocol", bad)
            proc = ctl("pause", str(job), user=OTHER_USER)
            self.assertEqual(proc.returncode, 4, proc.stderr)
            self.assertIn(f"does not own job {job}", proc.stderr)
            proc = ctl("pause", str(job), user=JOB_USER)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            paused = {j["job_id"]: j for j in json.loads(ctl("status", "--json").stdout)["jobs"]}[job]["paused"]
            self.assertTrue(paused)
            proc = ctl("pause-all", user=JOB_USER)
            self.assertEqual(proc.returncode, 4)
            self.assertIn("pause_all needs a Slurm operator or administrator", proc.stderr)
        finally:
            run(["scancel", str(job)])

    def test_malformed_and_oversized_input_is_refused_without_crash(self):
        cases = []
        c = WireClient(PORT)
        c.sock.sendall(struct.pack(">I", 2 * 1024 * 1024))  # 2 MiB announced: refused unread
        cases.append(("oversized", c.read_frame()))
        c = WireClient(PORT)
        c.send_frame(b"this is not a munge credential")
        cases.append(("garbage", c.read_frame()))
        for reply_name, frame in cases:
            # Refusals the daemon could not authenticate are still signed by it.
            from wireclient import decode
            uid, payload = decode(frame)
            self.assertEqual(uid, 0)
            reply = json.loads(payload)
            self.assertFalse(reply["ok"], reply_name)
            if reply_name == "oversized":
                self.assertEqual(reply["error"]["message"], "frame of 2097152 bytes exceeds the limit of 1048576")
            else:
                self.assertEqual(reply["error"]["kind"], "permission")
        c = WireClient(PORT, user=JOB_USER)
        for payload, message in ((b"{not json", "message is not valid JSON"),
                                 (b"[1,2]", "message is not a JSON object"),
                                 (b'{"type":"status"}', 'message has no integer protocol version "v"'),
                                 (b'{"v":2,"type":"status"}', "unsupported protocol version 2 (this side speaks 1)"),
                                 (b'{"v":1}', 'message has no "type"')):
            c.send_frame(encode(payload, JOB_USER))
            from wireclient import decode
            reply = json.loads(decode(c.read_frame())[1])
            self.assertEqual(reply["error"], {"kind": "protocol", "message": message})
        reply = c.call({"type": "teleport", "job": 1})
        self.assertEqual(reply["error"]["message"], "unknown message type 'teleport'")
        reply = c.call({"type": "metrics", "job": "x"})
        self.assertEqual(reply["error"]["message"], 'message needs a positive integer "job"')
        # A replayed credential is refused by munge.
        cred = encode(json.dumps({"v": 1, "type": "status", "id": 99}).encode(), JOB_USER)
        c.send_frame(cred)
        from wireclient import decode
        self.assertTrue(json.loads(decode(c.read_frame())[1])["ok"])
        c.send_frame(cred)
        reply = json.loads(decode(c.read_frame())[1])
        self.assertEqual(reply["error"]["kind"], "permission")
        self.assertIn("replayed", reply["error"]["message"].lower())
        # A write to a peer that has gone (SIGPIPE) fails the write, not the daemon.
        os.kill(self.d.proc.pid, signal.SIGPIPE)
        time.sleep(0.2)
        # Still alive and answering.
        self.assertIsNone(self.d.proc.poll())
        self.assertEqual(ctl("status").returncode, 0)

    def test_check_config_and_reload(self):
        bad = os.path.join(self.d.dir, "bad.conf")
        with open(bad, "w") as f:
            f.write("[scheduler]\nepoch = soon\n")
        proc = run([ELASTICD, "--check-config", bad], check=False)
        self.assertEqual(proc.returncode, 1)
        self.assertIn(f"{bad}: scheduler.epoch: 'soon' is not a non-negative integer", proc.stderr)
        with open(bad, "w") as f:
            f.write("[scheduler]\ncolour = blue\n")
        proc = run([ELASTICD, "--check-config", bad], check=False)
        self.assertEqual(proc.returncode, 1)
        self.assertIn("unknown setting 'scheduler.colour'", proc.stderr)
        self.assertEqual(run([ELASTICD, "--check-config", self.d.conf]).returncode, 0)

        good = open(self.d.conf).read()
        try:
            with open(self.d.conf, "w") as f:
                f.write(good.replace("[scheduler]", "[scheduler]\npolicy = sideways"))
            self.d.proc.send_signal(signal.SIGHUP)
            end = time.time() + 10
            while time.time() < end and "reload refused" not in self.d.read_log():
                time.sleep(0.1)
            self.assertIn("reload refused, keeping the running configuration", self.d.read_log())
            self.assertEqual(json.loads(ctl("status", "--json").stdout)["policy"], "dp")
            with open(self.d.conf, "w") as f:
                f.write(good.replace("[scheduler]", "[scheduler]\npolicy = greedy"))
            self.d.proc.send_signal(signal.SIGHUP)
            end = time.time() + 10
            while time.time() < end and json.loads(ctl("status", "--json").stdout)["policy"] != "greedy":
                time.sleep(0.1)
            self.assertEqual(json.loads(ctl("status", "--json").stdout)["policy"], "greedy")
        finally:
            with open(self.d.conf, "w") as f:
                f.write(good)
            self.d.proc.send_signal(signal.SIGHUP)
            time.sleep(0.5)

    def test_refuses_unsafe_file_permissions(self):
        """elasticd checks at start that nobody but root can change what it trusts (its
        configuration, state and log) or read its join tokens (the state database)."""
        d = Elasticd("perms")  # not started: every case below must stop elasticd before it listens

        def refused(expected):
            proc = subprocess.run([ELASTICD, "--config", d.conf], capture_output=True, text=True, timeout=30)
            self.assertEqual(proc.returncode, 1, proc.stderr)
            self.assertIn("elasticd: refusing to start: ", proc.stderr)
            self.assertIn(expected, proc.stderr)

        os.chmod(d.conf, 0o666)
        refused(f"configuration file {d.conf} is writable by group or others (mode 0666): chmod go-w {d.conf}")
        os.chmod(d.conf, 0o644)
        os.chown(d.conf, 65534, 65534)
        refused(f"configuration file {d.conf} belongs to uid 65534, not to root or elasticd's user")
        os.chown(d.conf, 0, 0)

        os.chmod(d.dir, 0o777)
        refused(f"state directory {d.dir} is writable by group or others (mode 0777)")
        os.chmod(d.dir, 0o1777)  # sticky, like /tmp: others could still create state.db-wal there
        refused(f"state directory {d.dir} is writable by group or others (mode 1777)")
        os.chmod(d.dir, 0o755)

        with open(d.db, "w"):
            pass
        os.chmod(d.db, 0o644)
        refused(f"state database {d.db} (join tokens) is readable by group or others (mode 0644): chmod 600 {d.db}")
        os.chmod(d.db, 0o622)
        refused(f"state database {d.db} is writable by group or others (mode 0622)")
        os.remove(d.db)

        with open(d.log, "w"):
            pass
        os.chmod(d.log, 0o666)
        refused(f"log file {d.log} is writable by group or others (mode 0666)")
        os.remove(d.log)

        conf = read(d.conf)
        with open(d.conf, "w") as f:
            f.write(re.sub(r"munge_socket = .*", f"munge_socket = {d.conf}", conf))
        refused(f"controller.munge_socket {d.conf} is not a socket")

    def test_elasticctl_usage_errors(self):
        self.assertIn("Usage:", ctl("--help").stdout)
        proc = ctl("frobnicate")
        self.assertEqual(proc.returncode, 2)
        proc = ctl("pause", "abc")
        self.assertEqual(proc.returncode, 2)
        self.assertIn("'abc' is not a job id", proc.stderr)
        proc = run([CTL, "--controller", "127.0.0.1:1", "status"], check=False)
        self.assertEqual(proc.returncode, 3)
        self.assertIn("cannot connect to 127.0.0.1:1", proc.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
