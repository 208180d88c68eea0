"""Benchmark: the latency the plugin adds to `sbatch --wrap true` (target: under 5 ms).

Submits held jobs alternately with the cluster's plugstack.conf (plugin loaded) and with a
private copy of slurm.conf whose plugstack.conf is empty, and prints one JSON line per case with
the median wall time of each and their difference. Two cases: a plain job, and an elastic job
(--elastic-gpus, --elastic-batch: the plugin parses and validates them); the job without the plugin
is the plain one in both (sbatch refuses the elastic flags without the plugin). Each line carries
its target check ("targets", "met": added_ms < 5); exits 1 with one line naming each case that
misses it (docs/results.md, "Benchmark targets"; ELASTIC_BENCH_TIGHTEN tightens every target,
tests/bench/benchtarget.py). The held jobs are cancelled afterwards.
"""

import json
import os
import statistics
import subprocess
import time

import benchtarget
from clustertest import CLUSTER_DIR, JOB_USER, SLURM_CONF, run, slurm_env

ROUNDS = int(os.environ.get("ELASTIC_BENCH_ROUNDS", "40"))
TARGET_ADDED_MS = 5  # what the plugin may add to a submission


def timed_sbatch(conf, extra):
    env = slurm_env({"SLURM_CONF": conf})
    cmd = ["runuser", "-u", JOB_USER, "--", "sbatch", "--parsable", "--hold", "-o", "/dev/null",
           f"--chdir={CLUSTER_DIR}/jobs"] + extra + ["--wrap", "true"]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)
    dt = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"sbatch failed: {proc.stderr}")
    return dt, proc.stdout.strip().split(";")[0]


def main():
    factor = benchtarget.tighten_factor()  # a bad value stops the run before it starts
    bench_dir = os.path.join(CLUSTER_DIR, "jobs", "bench-noplugin")
    os.makedirs(bench_dir, exist_ok=True)
    os.chmod(bench_dir, 0o755)
    empty = os.path.join(bench_dir, "plugstack.conf")
    open(empty, "w").close()
    bare_conf = os.path.join(bench_dir, "slurm.conf")
    with open(SLURM_CONF) as src, open(bare_conf, "w") as dst:
        for line in src:
            dst.write(f"PlugStackConfig={empty}\n" if line.startswith("PlugStackConfig=") else line)
    jobs = []
    cases = [("plain", []), ("elastic_flags", ["--elastic-gpus=1:4", "--elastic-batch=64:512"])]
    all_checks = []
    try:
        for name, extra in cases:
            with_plugin, without = [], []
            for _ in range(ROUNDS):
                # Alternate so that drift of the machine hits both sides alike.
                dt, job = timed_sbatch(SLURM_CONF, ["--gres=gpu:1"] + extra)
                with_plugin.append(dt)
                jobs.append(job)
                dt, job = timed_sbatch(bare_conf, ["--gres=gpu:1"])
                without.append(dt)
                jobs.append(job)
            result = {"bench": "spank_sbatch_latency", "case": name, "rounds": ROUNDS,
                      "with_plugin_ms": round(statistics.median(with_plugin) * 1000, 2),
                      "without_plugin_ms": round(statistics.median(without) * 1000, 2)}
            result["added_ms"] = round(result["with_plugin_ms"] - result["without_plugin_ms"], 2)
            result["ratio"] = round(result["with_plugin_ms"] / result["without_plugin_ms"], 3)
            result["target_ms"] = TARGET_ADDED_MS
            checks = [benchtarget.check(f"{name}.added_ms", result["added_ms"], "<", TARGET_ADDED_MS, factor)]
            print(json.dumps(benchtarget.add_checks(result, checks, factor)), flush=True)
            all_checks += checks
    finally:
        for i in range(0, len(jobs), 50):
            run(["scancel"] + jobs[i:i + 50], check=False)
    benchtarget.finish("bench_sbatch_latency", all_checks, f"median of {ROUNDS} submissions each")


if __name__ == "__main__":
    main()
