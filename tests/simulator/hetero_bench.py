#!/usr/bin/python3
"""Benchmark (label bench) of issue 22's target: on Sia's default cluster (simulator/clusters/
sia-default.txt: 6 x 4 T4, 2 x 8 A100, 3 x 8 RTX 2080Ti) and Sia's published workloads (philly 1-8,
saturn 1-10), the dp policy with the remaining-time objective (dp-srpt: --weights remaining
--solver exact, its defaults) against Sia's formulation (--policy sia), both in the same run,
through simulator/hetero_study.sh (which says what each variant runs), the traces side by side.
Target: dp-srpt's average JCT <= 0.9x sia's, per trace, as the ratio of the means over the
workloads (docs/results.md, "Several GPU types"). Reported beside it, not a target: this
project's mechanism against Sia's, dp-srpt-pm-sf (Sia's power mean p = -0.5 with dp-srpt's
weights, stop-free resizes within a type: a variant chosen after seeing these workloads) over
sia (restarts): "project_vs_sia".

Usage: hetero_bench.py BUILD/bin/elastic-sim DATA_DIR CLUSTER_FILE [--traces philly,saturn]
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

HERE = os.path.dirname(os.path.abspath(__file__))
STUDY = os.path.join(os.path.dirname(os.path.dirname(HERE)), "simulator", "hetero_study.sh")
VARIANTS = ("sia", "dp-srpt", "dp-srpt-pm-sf")  # as simulator/hetero_study.sh runs them
TARGET = 0.9


def study(build, data, cluster, trace):
    """One trace's runs of every variant through hetero_study.sh: its JSON lines."""
    env = dict(os.environ, ELASTIC_DATA_DIR=data, ELASTIC_CLUSTER=cluster)
    out = subprocess.run(["sh", STUDY, build, trace, " ".join(VARIANTS)], capture_output=True, text=True,
                         env=env, check=False)
    if out.returncode != 0:
        sys.exit(f"hetero_bench: {STUDY} failed ({out.returncode}) on {trace}: {out.stderr.strip()}")
    return [json.loads(line) for line in out.stdout.splitlines() if line.strip()]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("sim")
    p.add_argument("data")
    p.add_argument("cluster")
    p.add_argument("--traces", default="philly,saturn")
    args = p.parse_args()
    build = os.path.dirname(os.path.dirname(os.path.abspath(args.sim)))  # BUILD/bin/elastic-sim
    traces = args.traces.split(",")
    expected = {}
    for trace in traces:
        d = os.path.join(args.data, "sia-sosp23", "workloads", trace)
        if not os.path.isdir(d):
            print(f"hetero_bench: {d} is missing (Sia's artifact in ../shared/data): skipped", file=sys.stderr)
            return 77
        expected[trace] = sorted(i for i in range(1, 11) if os.path.exists(os.path.join(d, f"workload-{i}.csv")))
    # The traces side by side (each one at a time, as hetero_study.sh runs).
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(traces)) as pool:
        results = list(pool.map(lambda t: study(build, args.data, args.cluster, t), traces))
    checks, summary = [], {"bench": "hetero_sia", "summary": True}
    for trace, runs in zip(traces, results):
        mean = {}
        for v in VARIANTS:
            mine = [r for r in runs if r["variant"] == v]
            got = sorted(r["index"] for r in mine)
            if got != expected[trace]:
                sys.exit(f"hetero_bench: {trace} {v}: runs of workloads {got}, expected {expected[trace]}")
            for r in mine:
                print(json.dumps({"bench": "hetero_sia", "trace": trace, "index": r["index"], "variant": v,
                                  "avg_jct_s": round(r["avg_jct_s"], 1), "p99_jct_s": round(r["p99_jct_s"], 1),
                                  "gpu_hours": round(r["gpu_hours"], 1), "moves_per_job": r["moves_per_job"],
                                  "rescales_per_job": r["rescales_per_job"], "jobs_finished": r["jobs_finished"],
                                  "solves_unproven": r.get("solves_unproven", 0)}), flush=True)
            mean[v] = sum(r["avg_jct_s"] for r in mine) / len(mine)
        ratio = mean["dp-srpt"] / mean["sia"]
        summary[trace] = {"workloads": len(expected[trace]), "sia_avg_jct_s": round(mean["sia"], 1),
                          "dp_srpt_avg_jct_s": round(mean["dp-srpt"], 1), "ratio": round(ratio, 4),
                          "dp_srpt_pm_sf_avg_jct_s": round(mean["dp-srpt-pm-sf"], 1),
                          "project_vs_sia": round(mean["dp-srpt-pm-sf"] / mean["sia"], 4)}
        checks.append(benchtarget.check(f"{trace} dp-srpt/sia avg JCT", ratio, "<=", TARGET))
    print(json.dumps(benchtarget.add_checks(summary, checks)), flush=True)
    benchtarget.finish("hetero_sia", checks)
    return 0


if __name__ == "__main__":
    sys.exit(main())
