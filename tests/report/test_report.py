"""elastic-report on the local cluster: its GPU-hours match sacct's gres/gpu figures within 1%.

Jobs: two rigid GPU jobs under two accounts, a job with elastic flags (the parent), and two
extension jobs of it made as elasticd makes them (submitted by root for the job's owner and
account, held, linked with an admin comment, released), plus a job that only borrows an
extension's name (no admin comment: it stays an ordinary job). The report, per job and per
account, is compared with an oracle computed here from sacct's own rows.
"""

import json
import os
import subprocess
import time
import unittest

from clustertest import (JOB_USER, TERMINAL_STATES, ClusterTestCase, job_workdir, run, sacct, sbatch, slurm_env,
                         tres, wait_job)

BUILD_DIR = os.environ.get("ELASTIC_BUILD_DIR", "")
REPORT = os.path.join(BUILD_DIR, "bin", "elastic-report")
FIELDS = ["JobIDRaw", "User", "Account", "AllocTRES", "ElapsedRaw", "State", "Start", "AdminComment", "JobName"]


def stamp(t):
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(t))


def submit_extension(parent, group, gpus, seconds, workdir):
    """An extension job as elasticd submits it (docs/interfaces.md section 4)."""
    out = run(["sbatch", "--parsable", f"--uid={JOB_USER}", f"--gid={JOB_USER}", "--account=research",
               f"--chdir={workdir}", f"--job-name=elastic-ext:{parent}:{group}", f"--gres=gpu:{gpus}", "--hold",
               "-o", "/dev/null", "--wrap", f"sleep {seconds}"]).stdout
    job = int(out.strip().split(";")[0])
    run(["scontrol", "update", f"JobId={job}", f"AdminComment=elastic-ext parent={parent} group={group}"])
    run(["scontrol", "release", str(job)])
    return job


def gpu_seconds(row):
    return int(tres(row["AllocTRES"]).get("gres/gpu", "0")) * int(row["ElapsedRaw"])


class ReportAgainstSacctTest(ClusterTestCase):

    def test_gpu_hours_match_sacct_per_job_and_per_account(self):
        self.assertTrue(os.access(REPORT, os.X_OK), f"{REPORT} is not built")
        since = time.time() - 5
        wd = job_workdir("report")
        rigid, _ = sbatch(["--gres=gpu:2", "-o", "/dev/null"], wrap="sleep 6", workdir=wd)
        other, _ = sbatch(["--account=root", "--gres=gpu:1", "-o", "/dev/null"], wrap="sleep 4", user="root",
                          workdir=wd)
        parent, _ = sbatch(["--elastic-gpus=1:4", "--gres=gpu:1", "-o", "/dev/null"], wrap="sleep 20", workdir=wd)
        end = time.time() + 60
        while run(["squeue", "-h", "-j", str(parent), "-o", "%T"]).stdout.strip() != "RUNNING":
            self.assertLess(time.time(), end, "the parent did not start")
            time.sleep(0.25)
        ext1 = submit_extension(parent, 1, 2, 6, wd)
        ext2 = submit_extension(parent, 2, 1, 4, wd)
        impostor, _ = sbatch([f"--job-name=elastic-ext:{parent}:9", "--gres=gpu:1", "-o", "/dev/null"],
                             wrap="sleep 2", workdir=wd)
        jobs = [rigid, other, parent, ext1, ext2, impostor]
        for job in jobs:
            self.assertIn(wait_job(job, timeout=180), TERMINAL_STATES)
        rows = {}
        for job in jobs:
            rows[job] = sacct(job, FIELDS)[0]
        self.assertEqual(rows[ext1]["AdminComment"], f"elastic-ext parent={parent} group=1")
        self.assertEqual(rows[ext1]["User"], JOB_USER)
        self.assertEqual(rows[other]["Account"], "root")
        until = time.time() + 1

        # Per job: the parent carries its extensions; the impostor is a job of its own.
        p = subprocess.run([REPORT, "--since", stamp(since), "--until", stamp(until), "--by", "job",
                            "--format", "json"], capture_output=True, text=True, timeout=60, env=slurm_env())
        self.assertEqual(p.returncode, 0, p.stderr)
        doc = json.loads(p.stdout)
        groups = {g["job"]: g for g in doc["groups"]}
        expected = {
            rigid: (gpu_seconds(rows[rigid]), 0),
            other: (gpu_seconds(rows[other]), 0),
            parent: (gpu_seconds(rows[parent]) + gpu_seconds(rows[ext1]) + gpu_seconds(rows[ext2]),
                     gpu_seconds(rows[ext1]) + gpu_seconds(rows[ext2])),
            impostor: (gpu_seconds(rows[impostor]), 0),
        }
        print(f"\nreport vs sacct, GPU-hours per job ({stamp(since)} .. {stamp(until)}):")
        for job, (total_s, ext_s) in expected.items():
            g = groups.get(str(job))
            self.assertIsNotNone(g, f"job {job} is not in the report: {sorted(groups)}")
            print(f"  job {job}: report {g['gpu_hours']:.6f} (extensions {g['extension_gpu_hours']:.6f}), "
                  f"sacct {total_s / 3600:.6f} (extensions {ext_s / 3600:.6f})")
            self.assertGreater(total_s, 0)
            self.assertLessEqual(abs(g["gpu_hours"] - total_s / 3600), 0.01 * total_s / 3600, job)
            self.assertLessEqual(abs(g["extension_gpu_hours"] - ext_s / 3600), 0.01 * max(ext_s, 1) / 3600, job)
        self.assertEqual(groups[str(parent)]["extensions"], 2)
        self.assertEqual(groups[str(parent)]["elastic_jobs"], 1)
        self.assertEqual(groups[str(parent)]["peak_job_gpus"], 4)  # 1 + 2 + 1 while both extensions ran
        for job in (ext1, ext2):
            self.assertNotIn(str(job), groups)
        self.assertIn(f"job {impostor} is named 'elastic-ext:{parent}:9' but has no elastic-ext admin comment",
                      p.stderr)

        # Per account, whole allocations, against every allocation sacct lists for the period
        # (other tests' jobs included): extensions count for their parent's account.
        p = subprocess.run([REPORT, "--since", stamp(since), "--until", stamp(until), "--by", "account",
                            "--format", "json", "--whole-jobs"], capture_output=True, text=True, timeout=60,
                           env=slurm_env())
        self.assertEqual(p.returncode, 0, p.stderr)
        out = run(["sacct", "-n", "-P", "-X", "--allusers", "--duplicates", "-S", stamp(since), "-E", stamp(until),
                   "-o", "JobIDRaw,Account,AllocTRES,ElapsedRaw,AdminComment"]).stdout
        accounts, owner = {}, {}
        lines = [line.split("|") for line in out.splitlines() if line]
        for job_id, account, _, _, comment in lines:
            if not comment.startswith("elastic-ext parent="):
                owner[job_id] = account
        for job_id, account, alloc, elapsed, comment in lines:
            if comment.startswith("elastic-ext parent="):
                account = owner.get(comment.split()[1].split("=")[1], account)
            gpus = int(tres(alloc).get("gres/gpu", "0"))
            if gpus:
                accounts[account] = accounts.get(account, 0) + gpus * int(elapsed or 0)
        got = {g["account"]: g["gpu_hours"] for g in json.loads(p.stdout)["groups"]}
        print("report vs sacct, GPU-hours per account:")
        for account, secs in sorted(accounts.items()):
            print(f"  {account}: report {got.get(account, 0):.6f}, sacct {secs / 3600:.6f}")
        self.assertEqual(set(got), set(accounts))
        for account, secs in accounts.items():
            self.assertLessEqual(abs(got[account] - secs / 3600), 0.01 * secs / 3600, account)
        self.assertIn("research", got)
        self.assertIn("root", got)


if __name__ == "__main__":
    unittest.main()
