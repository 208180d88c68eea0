#!/usr/bin/env python3
"""scripts.fresh_root: the pieces of the fresh-machine check that CI reads (scripts/lib/fresh_root.sh).

The tests a check runs (one ctest per label, each printing a failed test's output) and the
extract of a failed test's output that the check prints when it fails, so that CI's log says why
a test failed in the root without the kept root at hand (each label's ctest writes over
LastTest.log there).
"""
import os
import subprocess
import tempfile
import unittest

SOURCE_DIR = os.environ.get("ELASTIC_SOURCE_DIR",
                            os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
LIB = os.path.join(SOURCE_DIR, "scripts", "lib", "fresh_root.sh")


def lib(call):
    proc = subprocess.run(["bash", "-c", f"source '{LIB}' && {call}"], capture_output=True, text=True, timeout=30)
    if proc.returncode != 0:
        raise AssertionError(f"{call} exited {proc.returncode}: {proc.stderr}")
    return proc.stdout


# As ctest --output-on-failure prints it (ctest 3.25 and 3.31), one failed test in the middle,
# one at the end that timed out, their outputs between result lines and the next test's start.
CTEST_LOG = """Test project /root/elastic-slurm/build
      Start  49: slurm.cluster_up
 1/4 Test  #49: slurm.cluster_up .................   Passed    6.77 sec
      Start 260: slurm.elastic_e2e
 2/4 Test #260: slurm.elastic_e2e ................***Failed   76.18 sec
F
FAIL: test_grow (test_elastic_e2e.ElasticEndToEndTest)
AssertionError: 4 != 6
      Start 263: slurm.relaunch_nodes
 3/4 Test #263: slurm.relaunch_nodes .............   Passed   23.80 sec
      Start 264: slurm.grow_by_relaunch
 4/4 Test #264: slurm.grow_by_relaunch ...........***Timeout 420.01 sec
""" + "".join(f"line {i}\n" for i in range(100)) + """
50% tests passed, 2 tests failed out of 4
The following tests FAILED:
\t260 - slurm.elastic_e2e (Failed)                        slurm
"""


class FreshRootTest(unittest.TestCase):

    def test_one_ctest_per_label_in_order_each_printing_failed_output(self):
        out = lib("fresh_tests mpi,slurm,unit")
        runs = [part for part in out.split(";") if "ctest" in part]
        self.assertEqual([r.split(" -L ")[1].split()[0] for r in runs], ["mpi", "slurm", "unit"], out)
        for r in runs:
            self.assertIn("--output-on-failure", r)
            self.assertIn("|| s=1", r, "every label runs whatever the one before gave")
        self.assertTrue(out.startswith("cmake --preset default && cmake --build --preset default && "), out)
        single = lib("fresh_tests unit")
        self.assertTrue(single.endswith("ctest --test-dir build --output-on-failure -L unit"), single)

    def test_failed_output_names_each_failed_test_and_keeps_its_last_lines(self):
        with tempfile.NamedTemporaryFile("w", suffix=".log") as f:
            f.write(CTEST_LOG)
            f.flush()
            out = lib(f"fresh_failed_output {f.name}")
        blocks = out.split("fresh-root: the output of ")[1:]
        self.assertEqual([b.split()[0] for b in blocks], ["slurm.elastic_e2e", "slurm.grow_by_relaunch"], out)
        self.assertIn("  > AssertionError: 4 != 6\n", blocks[0])
        self.assertNotIn("relaunch_nodes", blocks[0], "a passed test's lines are not a failed one's output")
        tail = [line for line in blocks[1].splitlines()[1:] if line.strip("> ")]
        self.assertEqual(len(tail), 80, blocks[1])
        self.assertEqual((tail[0], tail[-1]), ("  > line 20", "  > line 99"))
        self.assertNotIn("tests passed", out)


if __name__ == "__main__":
    unittest.main()
