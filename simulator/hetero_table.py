#!/usr/bin/python3
"""The heterogeneous tables of docs/results.md from simulator/hetero_study.sh's JSON lines.

Usage: simulator/hetero_table.py hetero.jsonl

Per trace, over the workloads every variant finished (so that the means compare the same runs):
the mean of each run's avg and p99 JCT, makespan, GPU-hours, moves and rescales per job, and
avg JCT relative to sia; then the fidelity row (sia's avg JCT / pollux's, mean of the
per-workload ratios and ratio of the means).
"""
import collections
import json
import sys


def main(path):
    runs = collections.defaultdict(dict)  # (trace, index) -> variant -> run
    order = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            r = json.loads(line)
            runs[(r["trace"], r["index"])][r["variant"]] = r
            if r["variant"] not in order:
                order.append(r["variant"])
    for trace in sorted({t for t, _ in runs}):
        complete = sorted(i for (t, i), v in runs.items() if t == trace and all(x in v for x in order))
        if not complete:
            continue
        print(f"#### {trace} (workloads {', '.join(map(str, complete))})\n")
        print("| policy | avg JCT [s] | p99 JCT [s] | makespan [s] | GPU-hours | avg JCT / sia | moves/job | rescales/job | jobs finished |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        mean = lambda v, k: sum(runs[(trace, i)][v][k] for i in complete) / len(complete)
        sia = mean("sia", "avg_jct_s") if "sia" in order else None
        rows = sorted(order, key=lambda v: mean(v, "avg_jct_s"))
        for v in rows:
            rel = f"{mean(v, 'avg_jct_s') / sia:.2f}" if sia else ""
            print(f"| {v} | {mean(v, 'avg_jct_s'):.0f} | {mean(v, 'p99_jct_s'):.0f} | {mean(v, 'makespan_s'):.0f} | "
                  f"{mean(v, 'gpu_hours'):.0f} | {rel} | {mean(v, 'moves_per_job'):.2f} | "
                  f"{mean(v, 'rescales_per_job'):.2f} | {mean(v, 'jobs_finished'):.1f} |")
        if "sia" in order and "pollux" in order:
            ratios = [runs[(trace, i)]["sia"]["avg_jct_s"] / runs[(trace, i)]["pollux"]["avg_jct_s"] for i in complete]
            print(f"\nsia / pollux avg JCT: per workload {', '.join(f'{x:.2f}' for x in ratios)}; "
                  f"mean of ratios {sum(ratios) / len(ratios):.2f}; ratio of means "
                  f"{mean('sia', 'avg_jct_s') / mean('pollux', 'avg_jct_s'):.2f}")
        if "sia" in order and "dp-srpt" in order:
            ratios = [runs[(trace, i)]["dp-srpt"]["avg_jct_s"] / runs[(trace, i)]["sia"]["avg_jct_s"] for i in complete]
            print(f"dp-srpt / sia avg JCT: per workload {', '.join(f'{x:.2f}' for x in ratios)}; "
                  f"ratio of means {mean('dp-srpt', 'avg_jct_s') / mean('sia', 'avg_jct_s'):.2f}")
        print()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
