#!/usr/bin/python3
"""Benchmark (label bench) of issue 22's target: on Sia's default cluster (simulator/clusters/
sia-default.txt: 6 x 4 T4, 2 x 8 A100, 3 x 8 RTX 2080Ti) and Sia's published workloads (philly 1-8,
saturn 1-10), the dp policy with the remaining-time objective (dp-srpt: --weights remaining
--solver exact, its defaults) against Sia's formulation (--policy sia), both in the same run.
Target: dp-srpt's average JCT <= 0.9x sia's, per trace, as the ratio of the means over the
workloads (docs/results.md, "Several GPU types").

Usage: hetero_bench.py ELASTIC_SIM DATA_DIR CLUSTER_FILE [--traces philly,saturn] [--threads 2]
One JSON line per run and a summary line with the targets; exits 1 naming each missed target,
77 when DATA_DIR lacks Sia's artifact (sia-sosp23).
"""
import argparse
import concurrent.futures
import json
import os
import subprocess
import sys

import benchtarget

VARIANTS = {"sia": ["--policy", "sia"],
            "dp-srpt": ["--policy", "dp", "--weights", "remaining", "--solver", "exact"]}
TARGET = 0.9


def run(sim, data, cluster, trace, index, variant):
    workload = os.path.join(data, "sia-sosp23", "workloads", trace, f"workload-{index}.csv")
    out = subprocess.run([sim, "-q", "--data-dir", data, "--cluster", cluster, "--workload", workload,
                          *VARIANTS[variant], "--json"], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        sys.exit(f"hetero_bench: elastic-sim failed ({out.returncode}) on {trace} {index} {variant}: {out.stderr.strip()}")
    r = json.loads(out.stdout)
    return {"bench": "hetero_sia", "trace": trace, "index": index, "variant": variant,
            "avg_jct_s": round(r["avg_jct_s"], 1), "p99_jct_s": round(r["p99_jct_s"], 1),
            "gpu_hours": round(r["gpu_hours"], 1), "moves_per_job": r["moves_per_job"],
            "rescales_per_job": r["rescales_per_job"], "jobs_finished": r["jobs_finished"],
            "solves_unproven": r.get("solves_unproven", 0)}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("sim")
    p.add_argument("data")
    p.add_argument("cluster")
    p.add_argument("--traces", default="philly,saturn")
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    work = []
    for trace in args.traces.split(","):
        d = os.path.join(args.data, "sia-sosp23", "workloads", trace)
        if not os.path.isdir(d):
            print(f"hetero_bench: {d} is missing (Sia's artifact in ../shared/data): skipped", file=sys.stderr)
            return 77
        for index in range(1, 11):
            if os.path.exists(os.path.join(d, f"workload-{index}.csv")):
                work += [(trace, index, v) for v in VARIANTS]
    rows = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.threads)) as pool:
        for row in pool.map(lambda w: run(args.sim, args.data, args.cluster, *w), work):
            print(json.dumps(row), flush=True)
            rows.append(row)
    checks, summary = [], {"bench": "hetero_sia", "summary": True}
    for trace in args.traces.split(","):
        mean = {}
        for v in VARIANTS:
            xs = [r["avg_jct_s"] for r in rows if r["trace"] == trace and r["variant"] == v]
            mean[v] = sum(xs) / len(xs)
        ratio = mean["dp-srpt"] / mean["sia"]
        summary[trace] = {"workloads": len(xs), "sia_avg_jct_s": round(mean["sia"], 1),
                          "dp_srpt_avg_jct_s": round(mean["dp-srpt"], 1), "ratio": round(ratio, 4)}
        checks.append(benchtarget.check(f"{trace} dp-srpt/sia avg JCT", ratio, "<=", TARGET))
    print(json.dumps(benchtarget.add_checks(summary, checks)), flush=True)
    benchtarget.finish("hetero_sia", checks)
    return 0


if __name__ == "__main__":
    sys.exit(main())
