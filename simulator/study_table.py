#!/usr/bin/python3
"""Turns the JSON lines of `elastic-sim study` (one or more files) into the markdown tables of
docs/results.md: per (load, mechanism) the mean over workloads of each policy variant."""
import json
import sys

means = []
for path in sys.argv[1:]:
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                d = json.loads(line)
                if d.get("kind") == "mean":
                    means.append(d)

for load in sorted({d["load"] for d in means}):
    for mech in ("restart", "stop-free"):
        rows = [d for d in means if d["load"] == load and d["mechanism"] == mech]
        if not rows:
            continue
        print(f"\n#### load {load}x, {mech} mechanism\n")
        print("| policy | workloads | avg JCT [s] | p99 JCT [s] | makespan [s] | finished in 8 h | GPU-hours | utilisation | rescales/job | published avg JCT [s] | sim wall [s] |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for d in sorted(rows, key=lambda d: d["avg_jct_s"]):
            pub = f'{d["published_avg_jct_s"]:.0f} ({d["published_policy"]})' if "published_avg_jct_s" in d else ""
            print(f'| {d["policy"]} | {d["workloads"]} | {d["avg_jct_s"]:.0f} | {d["p99_jct_s"]:.0f} | {d["makespan_s"]:.0f} | '
                  f'{d["jobs_finished"]:.1f} | {d["gpu_hours"]:.0f} | {d["utilisation"]:.3f} | {d["rescales_per_job"]:.2f} | {pub} | {d["wall_s_total"]:.1f} |')
