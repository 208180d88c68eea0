"""Who administers elasticd, against the real slurmctld and slurmdbd: a user whose Slurm AdminLevel
is Operator (set with sacctmgr) pauses, plans, snapshots and sets the policy through elasticctl; a
plain user is refused with a message that names the role needed; revoking the level takes effect
once elasticd's cached answer expires; when slurmdbd cannot be reached nothing is granted.

The second job user (ELASTIC_OTHER_USER, elastic2) is made an operator for the time of a test and
set back to its previous level afterwards: the cluster is shared by the suite's tests."""

import json
import os
import re
import sqlite3
import time
import unittest

from clustertest import (CLUSTER_DIR, JOB_USER, PORT_BASE, SLURM_CONF, ClusterTestCase, job_state, job_workdir, read, run,
                         sbatch)
from elasticd_fixture import MUNGE_SOCKET, Elasticd

OTHER_USER = os.environ.get("ELASTIC_OTHER_USER", "elastic2")
CTL = os.path.join(CLUSTER_DIR, "bin", "elasticctl")  # readable by the job users
CACHE_S = 2  # controller.admin_cache of the elasticd under test
NEEDS_OPERATOR = ("needs a Slurm operator or administrator (AdminLevel=Operator or Administrator in sacctmgr), "
                  "root or SlurmUser")
# elasticctl command -> the message type elasticd names in its refusal
ADMIN_COMMANDS = {("pause-all",): "pause_all", ("resume-all",): "resume_all", ("plan", "--dry-run"): "plan",
                  ("snapshot",): "snapshot", ("set-policy", "greedy"): "set_policy"}


def uid(user):
    return int(run(["id", "-u", user]).stdout)


def admin_level(user):
    return run(["sacctmgr", "-n", "-P", "show", "user", user, "format=adminlevel"]).stdout.strip()


def set_admin_level(user, level):
    run(["sacctmgr", "-i", "modify", "user", "where", f"name={user}", "set", f"adminlevel={level}"])
    # sacctmgr's answer says the change is stored; check it the way an administrator would.
    if admin_level(user) != level:
        raise AssertionError(f"sacctmgr did not set {user} to {level}: {admin_level(user)!r}")


def ctl(*args, user=None, controller=None):
    # --controller skips plugstack.conf, where the munge socket would come from as well.
    extra = ["--controller", controller, "--munge-socket", MUNGE_SOCKET] if controller else []
    return run([CTL, *extra, *args], user=user, check=False)


class AdminRolesTest(ClusterTestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.saved = {u: admin_level(u) for u in (JOB_USER, OTHER_USER)}
        for u, level in cls.saved.items():
            if level != "None":  # left over from an interrupted run
                set_admin_level(u, "None")
        cls.d = Elasticd("roles", extra=f"[controller]\nadmin_cache = {CACHE_S}\n").start()

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()
        for u, level in cls.saved.items():
            if admin_level(u) != "None":
                set_admin_level(u, "None")

    def tearDown(self):
        for u in (JOB_USER, OTHER_USER):
            if admin_level(u) != "None":
                set_admin_level(u, "None")

    def grant(self, user, level):
        set_admin_level(user, level)
        time.sleep(CACHE_S + 0.5)  # elasticd's answer about `user` may be cached that long

    def status(self):
        proc = ctl("status", "--json")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        return json.loads(proc.stdout)

    def assert_refused_as_plain(self, user, args, message_type):
        proc = ctl(*args, user=user)
        self.assertEqual(proc.returncode, 4, f"{args} as {user}: {proc.stdout}{proc.stderr}")
        self.assertEqual(proc.stderr.strip(),
                         f"elasticctl: {message_type} {NEEDS_OPERATOR}; user '{user}' (uid {uid(user)}) is a plain user")

    def submit_sleeper(self):
        wd = job_workdir("roles")
        job, _ = sbatch(["--elastic-gpus=2:8", "--gres=gpu:2", "-o", "out.txt"], wrap="sleep 120", workdir=wd)
        end = time.time() + 60
        while time.time() < end:
            if any(j["job_id"] == job for j in self.status()["jobs"]):
                return job
            time.sleep(0.2)
        raise AssertionError(f"job {job} did not register with elasticd (state {job_state(job)})")

    def audit(self, action):
        db = sqlite3.connect(self.d.db)
        try:
            return [(r[0], json.loads(r[1])) for r in
                    db.execute("SELECT actor_uid, detail FROM audit WHERE action = ? ORDER BY id", (action,))]
        finally:
            db.close()

    def test_operator_administers_and_plain_user_is_refused(self):
        job = self.submit_sleeper()
        try:
            # Both job users are plain: every administrative command is refused, naming the role.
            for user in (JOB_USER, OTHER_USER):
                for args, message_type in ADMIN_COMMANDS.items():
                    with self.subTest(user=user, command=args):
                        self.assert_refused_as_plain(user, args, message_type)
            proc = ctl("pause", str(job), user=OTHER_USER)
            self.assertEqual(proc.returncode, 4, proc.stderr)
            self.assertEqual(proc.stderr.strip(),
                             f"elasticctl: uid {uid(OTHER_USER)} does not own job {job}: pausing another user's job "
                             f"{NEEDS_OPERATOR}; user '{OTHER_USER}' (uid {uid(OTHER_USER)}) is a plain user")
            self.assertEqual(self.status()["policy"], "dp")
            self.assertFalse(self.status()["paused"])

            # An operator, as slurmdbd records it, administers elasticd.
            self.grant(OTHER_USER, "Operator")
            proc = ctl("set-policy", "greedy", user=OTHER_USER)
            self.assertEqual((proc.returncode, proc.stdout.strip()), (0, "policy set to greedy"), proc.stderr)
            self.assertEqual(self.status()["policy"], "greedy")
            proc = ctl("plan", "--dry-run", "--json", user=OTHER_USER)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            plan = json.loads(proc.stdout)
            self.assertIn(job, [d["job"] for d in plan["decisions"]])
            proc = ctl("snapshot", user=OTHER_USER)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            snapshot = json.loads(proc.stdout)
            self.assertIn(job, [j["id"] for j in snapshot["registry"]])
            proc = ctl("pause-all", user=OTHER_USER)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assertTrue(self.status()["paused"])
            proc = ctl("resume-all", user=OTHER_USER)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assertFalse(self.status()["paused"])
            # ... and may pause another user's job.
            proc = ctl("pause", str(job), user=OTHER_USER)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assertTrue({j["job_id"]: j for j in self.status()["jobs"]}[job]["paused"])
            # The audit log says who did it and as what.
            operator = uid(OTHER_USER)
            self.assertEqual(self.audit("set_policy"), [(operator, {"policy": "greedy", "as": "AdminLevel=Operator"})])
            self.assertEqual(self.audit("pause_all"), [(operator, {"as": "AdminLevel=Operator"})])
            self.assertEqual(self.audit("pause"), [(operator, {"as": "AdminLevel=Operator"})])

            # The plain user stays refused, though the owner may still resume the own job.
            for args, message_type in ADMIN_COMMANDS.items():
                with self.subTest(user=JOB_USER, command=args):
                    self.assert_refused_as_plain(JOB_USER, args, message_type)
            proc = ctl("resume", str(job), user=JOB_USER)
            self.assertEqual(proc.returncode, 0, proc.stderr)

            # Administrator includes operator.
            self.grant(OTHER_USER, "Administrator")
            proc = ctl("set-policy", "dp", user=OTHER_USER)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assertEqual(self.status()["policy"], "dp")

            # Revoked: refused again once the cached answer has expired.
            self.grant(OTHER_USER, "None")
            for args, message_type in ADMIN_COMMANDS.items():
                with self.subTest(user=OTHER_USER, command=args, revoked=True):
                    self.assert_refused_as_plain(OTHER_USER, args, message_type)
            self.assertEqual(self.status()["policy"], "dp")
        finally:
            run(["scancel", str(job)], check=False)

    def test_unreachable_slurmdbd_grants_nothing(self):
        """An elasticd whose slurm.conf names a slurmdbd port where nothing listens: the operator is
        refused (never granted), with a message that says slurmdbd could not be read; root still
        administers."""
        self.grant(OTHER_USER, "Operator")
        conf = read(SLURM_CONF)
        self.assertRegex(conf, r"(?m)^AccountingStoragePort=\d+$")
        d = Elasticd("roles-nodbd", epoch=3600)
        dead_port = int(PORT_BASE) + 8  # nothing of the test cluster listens there
        broken = os.path.join(d.dir, "slurm.conf")
        with open(broken, "w") as f:
            f.write(re.sub(r"(?m)^AccountingStoragePort=\d+$", f"AccountingStoragePort={dead_port}", conf))
        address = f"127.0.0.1:{int(PORT_BASE) + 9}"
        text = read(d.conf)
        with open(d.conf, "w") as f:
            f.write(re.sub(r"(?m)^listen = .*$", f"listen = {address}",
                           re.sub(r"(?m)^conf = .*$", f"conf = {broken}", text)))
        d.start()
        try:
            # The same operator is granted by the elasticd that reaches slurmdbd ...
            self.assertEqual(ctl("set-policy", "dp", user=OTHER_USER).returncode, 0)
            # ... and refused by the one that cannot.
            for args, message_type in ADMIN_COMMANDS.items():
                with self.subTest(command=args):
                    proc = ctl(*args, user=OTHER_USER, controller=address)
                    self.assertEqual(proc.returncode, 4, proc.stdout + proc.stderr)
                    self.assertRegex(
                        proc.stderr.strip(),
                        rf"^elasticctl: {message_type} {re.escape(NEEDS_OPERATOR)}; cannot tell whether user "
                        rf"'{OTHER_USER}' \(uid {uid(OTHER_USER)}\) is one \(cannot read its AdminLevel: "
                        r"slurmdbd did not answer: .+\)$")
            self.assertIn("cannot read its AdminLevel: slurmdbd did not answer", d.read_log())
            proc = ctl("set-policy", "greedy", controller=address)  # root
            self.assertEqual(proc.returncode, 0, proc.stderr)
        finally:
            d.stop()


if __name__ == "__main__":
    unittest.main(verbosity=2)
