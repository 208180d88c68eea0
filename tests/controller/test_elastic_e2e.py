"""End to end on the local cluster: elasticd grows elastic jobs through extension jobs whose
ranks join the running MPI world, releases them when a waiting job needs the GPUs, shrinks a job
whose extension is cancelled from outside, and recovers from kill -9 during a grow and a shrink.

Two runtimes, one story (e2e.by_relaunch()):
- Open MPI 4 ("grows_onto": "any_node"): a job of 2 GPUs grows to 6 by one extension of 4 GPUs on
  another node, whose ranks join the running world in place ("join at step N: 2 -> 6 ranks").
- Open MPI 5 ("grows_onto": "relaunch", docs/runtime.md "Relaunch"): it first grows in place on its
  own node (an extension of 2 GPUs there) and then onto another node by a relaunch of the world (an
  extension of 2 GPUs there): 6 GPUs in two extensions. A waiting job that needs the other node
  takes that extension's GPUs back (6 -> 4); an extension cancelled from outside leaves by a
  relaunch of the world without it."""

import json
import os
import re
import sqlite3
import time
import unittest

from clustertest import JOB_USER, job_workdir, read, run, sacct, sbatch, wait_job, job_state
from e2e import CTL, ElasticdTestCase, by_relaunch, extension_jobs, gpus_of, status, submit_trainer, wait_until

EPOCH = ElasticdTestCase.EPOCH


def node_of(job):
    return run(["squeue", "-h", "-j", str(job), "-o", "%N", "--states=all"]).stdout.strip()


def world_sizes(text):
    """The world sizes the job's rank 0 reported after each change, in order."""
    return [int(n) for n in re.findall(r"(?:join|shrink|relaunch) at step \d+: \d+ -> (\d+) ranks", text)]


class ElasticEndToEndTest(ElasticdTestCase):
    # Strong hysteresis: on this oversubscribed test machine the measured speed of a job at 4 and
    # at 6 ranks is noise, and the plan may trade one for the other; the test is about a waiting
    # job and an extension cancelled from outside, not about that choice.
    EXTRA = "[scheduler]\nmin_gain_percent = 50\n"

    def decisions(self):
        """Every decision of elasticd's epochs so far (its database's epochs table)."""
        db = sqlite3.connect(self.d.db)
        rows = db.execute("SELECT decisions FROM epochs ORDER BY id").fetchall()
        db.close()
        return [d for (text,) in rows if text for d in json.loads(text)]

    def registered(self, job):
        wait_until(lambda: status().get(job, {}).get("launcher_ready"), 60, f"job {job} to register its launcher")

    def test_grow_release_for_a_waiting_job_and_external_cancel(self):
        relaunch = by_relaunch()
        # Steps that are mostly emulated GPU time (4 ms a sample): two jobs of 6 ranks on this
        # machine's 2 cores, with steps of little emulated time and much CPU (0.4 ms a sample),
        # measured 6 GPUs 8-28 times slower per step than 2 (Open MPI 5, 2026-11-28), and elasticd
        # then rightly shrank both to 2 once it had fitted that, about 15 s after they reached 6.
        a, wd_a = submit_trainer("grow-a", gpus=2, max_gpus=6, gpu_type="a100", samples=1000, epochs=60,
                                 compute_us=4000)
        c, wd_c = submit_trainer("grow-c", gpus=2, max_gpus=6, gpu_type="v100", samples=1000, epochs=400,
                                 compute_us=4000)
        self.jobs += [a, c]
        self.registered(a)
        self.registered(c)
        # A job grows once its program reported a step; the first step is an event, so within the
        # event gap and one epoch after it the controller submits extension jobs for both, as their owner.
        wait_until(lambda: all(status().get(j, {}).get("metrics_received", 0) > 0 for j in (a, c)), 60,
                   "the first steps of both jobs")
        t0 = time.time()
        wait_until(lambda: extension_jobs(a) and extension_jobs(c), 2 * EPOCH + 2, "extension jobs of both jobs")
        self.assertLess(time.time() - t0, 2 * EPOCH + 2)
        for parent in (a, c):
            for jid, state, user, account in extension_jobs(parent):
                self.assertEqual((user, account), (JOB_USER, "research"))
        # Their ranks join: each job runs at 6 GPUs (Open MPI 4: 2 + one extension of 4 on another
        # node; Open MPI 5: 2 + 2 more on its own node + 2 on another node, two extensions).
        wait_until(lambda: gpus_of(a) == 6 and gpus_of(c) == 6, 120, "both jobs at 6 GPUs")
        out_c_path = os.path.join(wd_c, f"job-{c}.out")
        self.assertEqual(world_sizes(read(out_c_path))[-1], 6, read(out_c_path)[-2000:])
        exts_a = [e[0] for e in extension_jobs(a) if e[1] == "RUNNING"]
        exts_c = [e[0] for e in extension_jobs(c) if e[1] == "RUNNING"]
        self.assertEqual(len(exts_c), 2 if relaunch else 1, extension_jobs(c))
        # The extension of c on the other v100 node (the only one on Open MPI 4).
        ext_c = [e for e in exts_c if node_of(e) != node_of(c)]
        self.assertEqual(len(ext_c), 1, [(e, node_of(e)) for e in exts_c])
        ext_c = ext_c[0]

        # From here on the a100 job keeps its size by its own measure: it takes part only in
        # what follows (an extension cancelled from outside, which elasticd handles for a paused
        # job as for any other). On this machine's 2 cores, shared with other suites in CI, its
        # measured speed at 6 ranks is noise: starved at nice 19 it once trained 13 samples/s
        # at 6 against far more at 2, and elasticd rightly shrank it 6 -> 4 by that measure.
        run([CTL, "pause", str(a)])

        # A third job arrives that needs a whole v100 node: c's extension there is released so it
        # starts, by elasticd's room for it (the epoch's decision names it), not by c's own measure.
        wd_b = job_workdir("waiting")
        b, _ = sbatch(["--gres=gpu:v100:4", "-N1", "-o", "out.txt"], wrap="echo started; sleep 8", workdir=wd_b)
        self.jobs.append(b)
        wait_until(lambda: job_state(b) in ("RUNNING", "COMPLETED"), 60, "the waiting job to start")
        released = [g for d in self.decisions() if d.get("job") == c and b in d.get("room_for", [])
                    for g in d.get("groups", [])]
        self.assertEqual([g["job"] for g in released], [ext_c], f"c's extension on the other node leaves for {b}")
        self.assertEqual([d for d in self.decisions() if d.get("job") == a and d.get("room_for")], [],
                         "the a100 job gave nothing to the v100 job")
        self.assertEqual(gpus_of(a), 6)
        self.assertEqual(wait_job(b), "COMPLETED")
        # c's world without its extension there (c may shrink again afterwards by its own measure).
        out_c = read(out_c_path)
        if relaunch:
            self.assertRegex(out_c, r"relaunch at step \d+: 6 -> 4 ranks")
        else:
            self.assertRegex(out_c, r"join at step \d+: 2 -> 6 ranks")
            self.assertRegex(out_c, r"shrink at step \d+: 6 -> 2 ranks")

        # scancel of a's extension from outside (Open MPI 5: the one on its own node, whose ranks
        # run in a's own step and get no signal: elasticd relaunches the world without them): the
        # group leaves, a trains on and completes.
        mine = [e for e in exts_a if node_of(e) == node_of(a)]
        ext_a = mine[0] if relaunch and mine else exts_a[0]
        run(["scancel", str(ext_a)])
        wait_until(lambda: gpus_of(a) == (4 if relaunch else 2), 60, "job a back without that extension")
        out_a_path = os.path.join(wd_a, f"job-{a}.out")
        wait_until(lambda: re.search(r"relaunch at step \d+: 6 -> 4 ranks" if relaunch else r"got SIGTERM: it leaves",
                                     read(out_a_path)), 30, "job a's world without that extension")
        run(["scancel", str(c)])
        self.assertIn(wait_job(a, timeout=600), ("COMPLETED",))
        # elasticd may grow it again once the GPUs are free: what matters is that it completes.
        self.assertRegex(read(out_a_path), r"elastic-train-logreg: done: \d+ steps")

        # Accounting: every extension is a job of the owner, under the owner's account, with GPUs.
        for ext in (ext_a, ext_c):
            row = sacct(ext, ["JobName", "User", "Account", "AllocTRES"])[0]
            self.assertTrue(row["JobName"].startswith("elastic-ext:"), row)
            self.assertEqual((row["User"], row["Account"]), (JOB_USER, "research"))
            self.assertIn("gres/gpu=2" if relaunch else "gres/gpu=4", row["AllocTRES"])

    def check_no_duplicates(self, parent, out_path, relaunch):
        """elasticd and Slurm agree on the job's extensions and none is there twice: the extension
        jobs Slurm holds are the ones elasticd counts, at most one per node (Open MPI 4: one in
        all), and the world the program reports last is as large as elasticd says."""
        slurm = sorted(e[0] for e in extension_jobs(parent) if e[1] in ("PENDING", "RUNNING"))
        db = sqlite3.connect(self.d.db)
        rows = db.execute("SELECT slurm_job, node, gpus FROM extensions WHERE parent = ? AND state NOT IN "
                          "('left','failed','cancelled')", (parent,)).fetchall()
        db.close()
        self.assertEqual(slurm, sorted(r[0] for r in rows), f"Slurm's extension jobs {slurm}, elasticd's {rows}")
        nodes = [r[1] for r in rows]
        self.assertEqual(len(nodes), len(set(nodes)), f"two extensions on one node: {rows}")
        self.assertLessEqual(len(rows), 2 if relaunch else 1, f"duplicate extensions: {rows}")
        self.assertEqual(world_sizes(read(out_path))[-1], gpus_of(parent), read(out_path)[-2000:])

    def test_kill9_during_grow_and_during_shrink(self):
        relaunch = by_relaunch()
        a, wd = submit_trainer("kill9", gpus=2, max_gpus=6, gpu_type="a100", epochs=400)
        out = os.path.join(wd, f"job-{a}.out")
        self.jobs.append(a)
        self.registered(a)
        # During a grow: the extension exists but has not joined yet.
        wait_until(lambda: any(e["state"] in ("submitted", "registered", "joining")
                               for e in status().get(a, {}).get("extensions", [])), 30, "a grow in flight")
        self.d.kill9()
        self.d.start()
        wait_until(lambda: gpus_of(a) == 6, 2 * EPOCH + 90, "the grow to complete after the restart")
        self.check_no_duplicates(a, out, relaunch)
        self.assertEqual(job_state(a), "RUNNING")

        # During a shrink: a waiting job needs a whole a100 node, so the extension on the other one
        # leaves (Open MPI 5: the one on a's own node stays, a's own node being full).
        wd_b = job_workdir("kill9-b")
        b, _ = sbatch(["--gres=gpu:a100:4", "-N1", "-o", "out.txt"], wrap="sleep 5", workdir=wd_b)
        self.jobs.append(b)
        after = 4 if relaunch else 2
        wait_until(lambda: any(e["state"] == "leaving" for e in status().get(a, {}).get("extensions", [])) or
                   gpus_of(a) == after, 30, "a shrink in flight")
        self.d.kill9()
        self.d.start()
        wait_until(lambda: gpus_of(a) == after, 2 * EPOCH + 30, "the shrink to complete after the restart")
        wait_until(lambda: job_state(b) in ("RUNNING", "COMPLETED"), 60, "the waiting job to start")
        self.check_no_duplicates(a, out, relaunch)
        self.assertEqual(job_state(a), "RUNNING", "the elastic job was lost")
        self.assertEqual(wait_job(b), "COMPLETED")


if __name__ == "__main__":
    unittest.main(verbosity=2)
