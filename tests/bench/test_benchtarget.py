"""benchtarget.py, the ending of every Python benchmark: a miss exits 1 with one line naming the target and the
figure, all met returns, ELASTIC_BENCH_TIGHTEN tightens (never loosens) every target."""

import json
import os
import subprocess
import sys
import unittest

import benchtarget

HERE = os.path.dirname(os.path.abspath(__file__))

# A benchmark's ending in miniature: one figure, one check, the JSON line, finish().
PROGRAM = """
import json, benchtarget
checks = [benchtarget.check("ratio", 12.7, ">=", 10)]
print(json.dumps(benchtarget.add_checks({"case": "restart_vs_join4", "ratio": 12.7}, checks)))
benchtarget.finish("bench_restart", checks, "checkpoint-restart")
"""


def run(tighten):
    env = dict(os.environ, PYTHONPATH=HERE)
    env.pop(benchtarget.TIGHTEN_VARIABLE, None)
    if tighten is not None:
        env[benchtarget.TIGHTEN_VARIABLE] = tighten
    return subprocess.run([sys.executable, "-B", "-c", PROGRAM], capture_output=True, text=True, env=env, timeout=30)


class BenchTarget(unittest.TestCase):
    def test_met_returns_and_prints_the_checks(self):
        p = run(None)
        self.assertEqual(p.returncode, 0, p.stderr)
        line = json.loads(p.stdout)
        self.assertTrue(line["met"])
        self.assertEqual(line["targets"][0], {"name": "ratio", "measured": 12.7, "bound": ">=", "stated": 10,
                                              "limit": 10, "met": True})
        self.assertNotIn("tighten", line)

    def test_unreachable_target_exits_1_naming_it(self):
        p = run("1e9")
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertEqual(p.stderr.strip(),
                         "bench_restart: missed target: ratio 12.7 (target >= 1e+10) (checkpoint-restart)")
        line = json.loads(p.stdout)
        self.assertFalse(line["met"])
        self.assertEqual(line["tighten"], 1e9)

    def test_a_factor_below_1_is_refused(self):
        for bad in ("0.5", "fast", "nan"):
            p = run(bad)
            self.assertEqual(p.returncode, 2, bad)
            self.assertIn(f"ELASTIC_BENCH_TIGHTEN='{bad}' is not a number >= 1", p.stderr)

    def test_bounds_and_tightening(self):
        self.assertTrue(benchtarget.check("ms", 999, "<", 1000, 1)["met"])
        self.assertFalse(benchtarget.check("ms", 1000, "<", 1000, 1)["met"])
        self.assertTrue(benchtarget.check("ms", 1000, "<=", 1000, 1)["met"])
        self.assertFalse(benchtarget.check("ms", 300, "<", 1000, 4)["met"])  # limit 250
        self.assertFalse(benchtarget.check("r", 15, ">=", 10, 2)["met"])  # limit 20
        self.assertFalse(benchtarget.check("r", 10, ">", 10, 1)["met"])
        missing = benchtarget.check("ms", None, "<", 1000, 1)
        self.assertFalse(missing["met"])
        self.assertEqual(benchtarget.missed([missing]), "ms not measured (target < 1000)")
        with self.assertRaises(ValueError):
            benchtarget.check("ms", 1, "=<", 1000, 1)


if __name__ == "__main__":
    unittest.main()
