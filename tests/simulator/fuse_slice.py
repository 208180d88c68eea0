#!/usr/bin/python3
"""elastic-sim with fused sweeps on a slice of the Philly trace (label unit), against the same
slice without fusion: every job (every trial) completes in both runs, no epoch holds more GPUs
than the cluster has, and the fused run uses no more GPU-hours for the same completed work.
Exits 77 (skipped) when the trace is not there (it is read from ../shared/data, never stored here).

    fuse_slice.py ELASTIC_SIM DATA_DIR
"""

import csv
import json
import os
import subprocess
import sys
import tempfile

NODES, GPUS_PER_NODE = 4, 4
SLICE = ["--format", "philly", "--philly-start", "2017-10-10 08:00:00", "--philly-hours", "2", "--philly-jobs", "80",
         "--nodes", str(NODES), "--gpus-per-node", str(GPUS_PER_NODE), "--policy", "dp", "--quiet", "--json"]


def run(sim, data, out, extra):
    trace = os.path.join(data, "pollux-adaptdl-osdi21", "traces", "philly.csv")
    cmd = [sim, "--workload", trace, "--data-dir", data, "--out-dir", out] + SLICE + extra
    p = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr}")
    summary = json.loads(p.stdout)
    with open(os.path.join(out, "jobs.csv"), newline="") as f:
        jobs = list(csv.DictReader(f))
    with open(os.path.join(out, "epochs.csv"), newline="") as f:
        epochs = list(csv.DictReader(f))
    return summary, jobs, epochs


def main():
    sim, data = sys.argv[1], sys.argv[2]
    if not os.path.exists(os.path.join(data, "pollux-adaptdl-osdi21", "traces", "philly.csv")):
        print(f"skipped: no Philly trace under {data}")
        return 77
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        base = run(sim, data, os.path.join(tmp, "off"), [])
        fused = run(sim, data, os.path.join(tmp, "fused"), ["--fuse", "16", "--fuse-profile", "cpu-mlp"])
        for name, (summary, jobs, epochs) in (("without fusion", base), ("with fusion", fused)):
            unfinished = [j["name"] for j in jobs if float(j["finish_s"]) < 0]
            if unfinished or summary["jobs_finished"] != summary["jobs"]:
                failures.append(f"{name}: {len(unfinished)} jobs never finished: {unfinished[:5]}")
            over = [e["time_s"] for e in epochs if int(e["gpus_allocated"]) > NODES * GPUS_PER_NODE]
            if over:
                failures.append(f"{name}: more than {NODES * GPUS_PER_NODE} GPUs allocated at t = {over[:5]}")
            print(f"{name}: {summary['jobs']} jobs, avg JCT {summary['avg_jct_s']:.0f} s, "
                  f"{summary['gpu_hours']:.2f} GPU-hours, makespan {summary['makespan_s']:.0f} s")
        if sorted(j["name"] for j in base[1]) != sorted(j["name"] for j in fused[1]):
            failures.append("the two runs did not simulate the same jobs")
        if fused[0]["gpu_hours"] > base[0]["gpu_hours"]:
            failures.append(f"fusion used more GPU-hours: {fused[0]['gpu_hours']:.3f} > {base[0]['gpu_hours']:.3f}")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
