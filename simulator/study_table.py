#!/usr/bin/python3
"""Turns the JSON lines of `elastic-sim study` (one or more files) into the markdown tables of
docs/results.md: per (load, mechanism) the mean over workloads of each policy variant, then the
per-workload fidelity of the pollux and optimus policies against Pollux's published results."""
import json
import os
import sys

records = []
for path in sys.argv[1:]:
    with open(path) as f:
        records += [json.loads(line) for line in f if line.strip().startswith("{")]
means = [d for d in records if d.get("kind") == "mean"]
runs = [d for d in records if d.get("kind") == "run"]

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

# Fidelity: per workload, the simulator's pollux and optimus policies against Pollux's published
# per-workload average JCTs (results-jobload/<policy>-<load>/summary.json under the data folder,
# ELASTIC_DATA_DIR or ../shared/data next to the repository).
data_dir = os.environ.get("ELASTIC_DATA_DIR",
                          os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "data"))
for policy in ("pollux", "optimus"):
    for mech in ("restart", "stop-free"):
        rows = [r for r in runs if r["policy"] == policy and r["mechanism"] == mech]
        if not rows:
            continue
        print(f"\n#### {policy} vs published, {mech} mechanism\n")
        print("| load | workload | this simulator [s] | published [s] | ratio |")
        print("| --- | --- | ---: | ---: | ---: |")
        for load in sorted({r["load"] for r in rows}):
            summary = os.path.join(data_dir, "pollux-adaptdl-osdi21", "results-jobload", f"{policy}-{load}", "summary.json")
            if not os.path.exists(summary):
                continue
            with open(summary) as f:
                pub = json.load(f)["avgs"]
            ours_all, pub_all = [], []
            for r in sorted((r for r in rows if r["load"] == load), key=lambda r: int(r["workload"].split("-")[-1])):
                p = pub.get(r["workload"])
                if p is None:
                    continue
                ours_all.append(r["avg_jct_s"])
                pub_all.append(p)
                print(f'| {load} | {r["workload"].split("-")[-1]} | {r["avg_jct_s"]:.0f} | {p:.0f} | {r["avg_jct_s"] / p:.2f} |')
            if ours_all:
                o, p = sum(ours_all) / len(ours_all), sum(pub_all) / len(pub_all)
                print(f"| {load} | mean | **{o:.0f}** | **{p:.0f}** | **{o / p:.2f}** |")
