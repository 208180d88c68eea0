#!/usr/bin/env python3
"""scripts.release_adapters: what differs between Slurm releases stays in its adapter.

The C++ code reaches Slurm's headers only through slurm_api/include/elastic/slurm_api/slurm_api.h
(the only file that may test SLURM_VERSION_NUMBER or name slurm_get_errno), and the local
cluster's release-dependent configuration is written only by scripts/lib/slurm_release.sh, whose
functions give each supported release its lines (docs/design.md, "Where Slurm releases differ").
"""
import os
import re
import subprocess
import tempfile
import unittest

SOURCE_DIR = os.environ.get("ELASTIC_SOURCE_DIR",
                            os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
API_ADAPTER = os.path.join("slurm_api", "include", "elastic", "slurm_api", "slurm_api.h")
CONF_ADAPTER = os.path.join("scripts", "lib", "slurm_release.sh")
SKIP_DIRS = {".git", "build", "build-asan", "build-tsan", "build-dev", "build-tidy", "docs"}


def files(suffixes):
    for top, dirs, names in os.walk(SOURCE_DIR):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.startswith("build")]
        for name in names:
            if name.endswith(suffixes) or (suffixes == ("",) and "." not in name):
                yield os.path.relpath(os.path.join(top, name), SOURCE_DIR)


def adapter_conf(function, *args):
    lib = os.path.join(SOURCE_DIR, CONF_ADAPTER)
    quoted = " ".join(f"'{a}'" for a in args)
    return subprocess.run(["bash", "-c", f"source '{lib}' && {function} {quoted}"],
                          capture_output=True, text=True, timeout=30)


class ApiAdapterTest(unittest.TestCase):

    def test_only_the_adapter_includes_slurm_h_or_tests_the_release(self):
        pattern = re.compile(r"#\s*include\s*<slurm/(slurm|slurm_errno|slurm_version)\.h>"
                             r"|SLURM_VERSION_NUM|slurm_get_errno")
        offenders = []
        for path in files((".c", ".cc", ".cpp", ".h", ".hpp")):
            if path == API_ADAPTER:
                continue
            with open(os.path.join(SOURCE_DIR, path), encoding="utf-8", errors="replace") as f:
                for n, line in enumerate(f, 1):
                    if pattern.search(line):
                        offenders.append(f"{path}:{n}: {line.strip()}")
        self.assertEqual(offenders, [], "Slurm's headers and release tests belong in " + API_ADAPTER)

    def test_the_adapter_exists_and_has_the_errno_compat(self):
        with open(os.path.join(SOURCE_DIR, API_ADAPTER), encoding="utf-8") as f:
            text = f.read()
        self.assertIn("SLURM_VERSION_NUM(24, 11, 0)", text)
        self.assertIn("inline int SlurmErrno()", text)


class ConfAdapterTest(unittest.TestCase):

    def test_only_the_adapter_writes_release_dependent_lines(self):
        pattern = re.compile(r"TaskPlugin=|JobAcctGatherType=|CgroupPlugin=")
        offenders = []
        for path in list(files((".sh", ".py"))) + [os.path.join("scripts", n) for n in
                                                     ("bootstrap", "cluster", "demo", "test")]:
            if path == CONF_ADAPTER or path.startswith("tests" + os.sep + "scripts"):
                continue
            with open(os.path.join(SOURCE_DIR, path), encoding="utf-8", errors="replace") as f:
                for n, line in enumerate(f, 1):
                    if pattern.search(line):
                        offenders.append(f"{path}:{n}: {line.strip()}")
        self.assertEqual(offenders, [], "release-dependent slurm.conf lines belong in " + CONF_ADAPTER)

    def test_slurm_22_05_gets_task_none_and_no_cgroup_conf(self):
        proc = adapter_conf("slurm_release_conf", "22.05")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stdout.split(), ["TaskPlugin=task/none", "JobAcctGatherType=jobacct_gather/none"])
        with tempfile.TemporaryDirectory() as d:
            conf = os.path.join(d, "cgroup.conf")
            with open(conf, "w") as f:
                f.write("left from another release\n")
            proc = adapter_conf("slurm_release_cgroup_conf", "22.05", conf)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assertFalse(os.path.exists(conf))

    def test_slurm_24_11_and_later_get_no_removed_plugin_and_cgroup_disabled(self):
        for release in ("24.11", "25.05", "26.05"):
            proc = adapter_conf("slurm_release_conf", release)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assertEqual(proc.stdout, "", release)
            with tempfile.TemporaryDirectory() as d:
                conf = os.path.join(d, "cgroup.conf")
                proc = adapter_conf("slurm_release_cgroup_conf", release, conf)
                self.assertEqual(proc.returncode, 0, proc.stderr)
                with open(conf) as f:
                    self.assertIn("CgroupPlugin=disabled", f.read().split())

    def test_the_installed_release_is_read_or_named_as_missing(self):
        proc = adapter_conf("slurm_release_version")
        if os.path.exists("/usr/sbin/slurmctld"):
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assertRegex(proc.stdout.strip(), r"^\d+\.\d+$")
        else:
            self.assertNotEqual(proc.returncode, 0)
            self.assertIn("scripts/bootstrap", proc.stderr)


if __name__ == "__main__":
    unittest.main()
