"""elastic-report's command line: exit codes, exact messages, formats, with a stand-in sacct."""

import csv
import io
import json
import os
import shutil
import subprocess
import unittest

REPORT = os.environ["ELASTIC_REPORT"]
FIXTURE = os.environ["REPORT_FIXTURE"]
OUT = os.environ.get("REPORT_TEST_OUTPUT", "/tmp/report-test-cli")
DAY = ["--since", "2026-11-20", "--until", "2026-11-21"]


def report(*args, env=None):
    return subprocess.run([REPORT, *args], capture_output=True, text=True, timeout=30,
                          env=dict(os.environ, **(env or {})))


class CliTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        shutil.rmtree(OUT, ignore_errors=True)
        os.makedirs(OUT)
        subprocess.run([FIXTURE, OUT], check=True)
        cls.sacct = os.path.join(OUT, "sacct")
        cls.db = os.path.join(OUT, "state.db")

    def test_help(self):
        p = report("--help")
        self.assertEqual(p.returncode, 0)
        for word in ("--since", "--until", "--by", "--format", "--db", "--sacct", "--job", "Exit status"):
            self.assertIn(word, p.stdout)

    def test_usage_errors_exit_2_with_exact_messages(self):
        forms = ("; expected YYYY-MM-DD[THH:MM[:SS]], now, now-COUNT[seconds|minutes|hours|days|weeks], "
                 "today or yesterday")
        cases = [
            (["--by", "project"], "elastic-report: --by: unknown grouping 'project'; expected account, user, "
                                  "partition or job"),
            (["--format", "xml"], "elastic-report: --format: unknown format 'xml'; expected table, csv, json or html"),
            (["--since", "yesterday-ish"], "elastic-report: --since: cannot read 'yesterday-ish' as a time" + forms),
            (["--until", "2026-02-30"], "elastic-report: --until: cannot read '2026-02-30' as a time "
                                        "(no such date or time)" + forms),
            (["--since", "2026-11-21", "--until", "2026-11-20"],
             "elastic-report: --since (2026-11-21T00:00:00) must be before --until (2026-11-20T00:00:00)"),
            (["--job", "12"], "elastic-report: --job is for --format html (the job chart)"),
            (["--format", "html", "--job", "x"], "elastic-report: --job: 'x' is not a non-negative integer"),
            (["--colour"], "elastic-report: unrecognised option '--colour'"),
        ]
        for args, message in cases:
            with self.subTest(args=args):
                p = report(*args, "--sacct", self.sacct)
                self.assertEqual(p.returncode, 2, p.stderr)
                self.assertEqual(p.stderr.splitlines()[0], message)
                self.assertEqual(p.stdout, "")

    def test_source_errors_exit_1(self):
        p = report(*DAY, "--sacct", "/nonexistent/sacct")
        self.assertEqual(p.returncode, 1)
        self.assertEqual(p.stderr, "elastic-report: cannot run sacct '/nonexistent/sacct': No such file or directory\n")
        p = report(*DAY, "--sacct", self.sacct, "--db", "/nonexistent/state.db")
        self.assertEqual(p.returncode, 1)
        self.assertEqual(p.stderr, "elastic-report: cannot open the state database /nonexistent/state.db: "
                                   "unable to open database file\n")
        bad = os.path.join(OUT, "bad-sacct")
        with open(bad, "w") as f:
            f.write("#!/bin/sh\necho '1|u|a'\n")
        os.chmod(bad, 0o755)
        p = report(*DAY, "--sacct", bad)
        self.assertEqual(p.returncode, 1)
        self.assertEqual(p.stderr, "elastic-report: sacct output line 1: expected 14 fields separated by '|', "
                                   "got 3: 1|u|a\n")

    def test_sacct_is_asked_for_the_period(self):
        p = report(*DAY, "--sacct", self.sacct)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(os.path.join(OUT, "sacct.args")) as f:
            args = f.read().split()
        self.assertEqual(args, ["--parsable2", "--noheader", "--allusers", "--duplicates", "--allocations",
                                "--starttime=2026-11-20T00:00:00", "--endtime=2026-11-21T00:00:00",
                                "--format=JobIDRaw,User,Account,Partition,AllocTRES,ElapsedRaw,Submit,Eligible,"
                                "Start,End,State,AdminComment,JobID,JobName"])
        self.assertIn("warning: job 300 is named 'elastic-ext:100:1' but has no elastic-ext admin comment", p.stderr)

    def test_csv_json_and_table_agree(self):
        j = report(*DAY, "--sacct", self.sacct, "--db", self.db, "--format", "json", "--by", "job")
        self.assertEqual(j.returncode, 0, j.stderr)
        doc = json.loads(j.stdout)
        c = report(*DAY, "--sacct", self.sacct, "--db", self.db, "--format", "csv", "--by", "job")
        rows = list(csv.DictReader(io.StringIO(c.stdout)))
        self.assertEqual([r["job"] for r in rows], [g["job"] for g in doc["groups"]])
        for r, g in zip(rows, doc["groups"]):
            self.assertAlmostEqual(float(r["gpu_hours"]), g["gpu_hours"], places=5)
            self.assertAlmostEqual(float(r["extension_gpu_hours"]), g["extension_gpu_hours"], places=5)
            self.assertEqual(int(r["rescales"]), g["rescales"])
        job200 = next(g for g in doc["groups"] if g["job"] == "200")
        self.assertEqual(job200["gpu_hours"], 7.0)
        self.assertEqual(job200["extension_gpu_hours"], 3.0)
        self.assertEqual(job200["rescales"], 4)
        self.assertEqual(job200["peak_job_gpus"], 8)
        t = report(*DAY, "--sacct", self.sacct, "--db", self.db, "--by", "job")
        self.assertEqual(t.returncode, 0)
        self.assertRegex(t.stdout, r"(?m)^200 +1 +1 +2 +7\.00 +3\.00 +42\.9 +4 ")

    def test_output_file(self):
        path = os.path.join(OUT, "report.csv")
        p = report(*DAY, "--sacct", self.sacct, "--format", "csv", "-o", path)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout, "")
        with open(path) as f:
            self.assertTrue(f.read().startswith("account,jobs,"))
        p = report(*DAY, "--sacct", self.sacct, "-o", "/nonexistent/dir/report.txt")
        self.assertEqual(p.returncode, 1)
        self.assertEqual(p.stderr.splitlines()[-1], "elastic-report: cannot write /nonexistent/dir/report.txt")


if __name__ == "__main__":
    unittest.main()
