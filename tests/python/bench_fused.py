#!/usr/bin/python3
"""Benchmark: a sweep's K trials trained fused (elastic_mpi.fused) against the same K trials as K
separate processes, the way a job array runs them today, on one core of this machine.

For K = 1, 2, 4, 8, 16 and two models (the MLP 64-128-10 of the issue's measurement, and a small
CNN on 1x16x16 images), batch 64, SGD with momentum and a learning rate per trial:
- fused: one process trains the K trials fused;
- separate: K processes, one trial each, all on the same core, started together (each imports
  torch and warms up first, then waits for the signal; the clock runs from the signal to the
  last one's end);
- loop: the K models stepped one after the other in one process (torch.optim each), for reference.
Every process has one torch thread and is pinned to the same core, so each side has the same
hardware. Throughput = samples trained per second over all trials; ratio = fused / separate.
Prints one JSON line per model and K, and a summary line with the target (docs/results.md,
"Benchmark targets"): ratio >= 1.5 at K = 8 for the MLP. Exits 1 naming a missed target.

    bench_fused.py [--ks 1,2,4,8,16] [--models mlp,cnn] [--steps-scale 1.0]
"""

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "bench"))

BATCH = 64
STEPS = {"mlp": 300, "cnn": 60}
WARMUP = 10


def build(model, seed):
    import torch
    from torch import nn
    torch.manual_seed(seed)
    if model == "mlp":
        return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(8, 16, 3, padding=1),
                         nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(16 * 4 * 4, 10))


def batch(model):
    import torch
    g = torch.Generator().manual_seed(0)
    shape = (64,) if model == "mlp" else (1, 16, 16)
    return torch.randn(BATCH, *shape, generator=g), torch.randint(10, (BATCH,), generator=g)


def hparams(k):
    return [{"lr": 0.01 * (1 + i % 4), "momentum": 0.9} for i in range(k)]


def worker(args):
    """One process: trains `k` trials (mode fused or loop) or one trial (separate) for `steps`."""
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(1)
    x, y = batch(args.model)
    if args.mode == "fused":
        from elastic_mpi.fused import FusedTrials
        trials = FusedTrials([build(args.model, s) for s in range(args.k)], hparams(args.k))
        step = lambda: trials.step(x, y)
    else:
        models = [build(args.model, s) for s in range(args.k)]
        opts = [torch.optim.SGD(m.parameters(), **h) for m, h in zip(models, hparams(args.k))]

        def step():
            for m, o in zip(models, opts):
                o.zero_grad()
                F.cross_entropy(m(x), y).backward()
                o.step()
    os.sched_setaffinity(0, {args.core})
    for _ in range(WARMUP):
        step()
    print("ready", flush=True)
    sys.stdin.readline()  # the signal
    start = time.time()
    for _ in range(args.steps):
        step()
    print(json.dumps({"start": start, "end": time.time()}), flush=True)


def run_group(model, mode, k, processes, steps, core):
    """Starts `processes` workers (each with k trials), signals them together once all are ready;
    returns samples per second over the group."""
    cmd = [sys.executable, "-B", os.path.abspath(__file__), "--worker", "--model", model, "--mode", mode,
           "--k", str(k), "--steps", str(steps), "--core", str(core)]
    procs = [subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) for _ in range(processes)]
    for p in procs:
        line = p.stdout.readline()
        if line.strip() != "ready":
            raise RuntimeError(f"a {mode} worker did not start: {line!r} (exit {p.wait()})")
    signal = time.time()
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    ends = []
    for p in procs:
        ends.append(json.loads(p.stdout.readline())["end"])
        if p.wait() != 0:
            raise RuntimeError(f"a {mode} worker failed with exit status {p.returncode}")
    samples = processes * k * steps * BATCH
    return samples / (max(ends) - signal)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ks", default="1,2,4,8,16")
    p.add_argument("--models", default="mlp,cnn")
    p.add_argument("--steps-scale", type=float, default=1.0, help="multiplies the steps per measurement")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--model", help=argparse.SUPPRESS)
    p.add_argument("--mode", help=argparse.SUPPRESS)
    p.add_argument("--k", type=int, help=argparse.SUPPRESS)
    p.add_argument("--steps", type=int, help=argparse.SUPPRESS)
    p.add_argument("--core", type=int, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return worker(args)
    import benchtarget
    core = max(os.sched_getaffinity(0))
    ratios = {}
    for model in args.models.split(","):
        if model not in STEPS:
            p.error(f"--models: {model!r} is not one of {sorted(STEPS)}")
        for k in (int(v) for v in args.ks.split(",")):
            steps = max(1, int(STEPS[model] * args.steps_scale))
            fused = run_group(model, "fused", k, 1, steps, core)
            separate = run_group(model, "separate", 1, k, steps, core)
            loop = run_group(model, "loop", k, 1, steps, core)
            ratios[(model, k)] = fused / separate
            print(json.dumps({"bench": "fused_sweep", "model": model, "k": k, "batch": BATCH, "steps": steps,
                              "fused_samples_per_s": round(fused), "separate_samples_per_s": round(separate),
                              "loop_samples_per_s": round(loop), "ratio_vs_separate": round(fused / separate, 3),
                              "ratio_vs_loop": round(fused / loop, 3)}), flush=True)
    checks = []
    if ("mlp", 8) in ratios:
        checks.append(benchtarget.check("mlp fused/separate throughput at K=8", ratios[("mlp", 8)], ">=", 1.5))
    summary = {"bench": "fused_sweep", "summary": True, "core": core,
               "ratios": {f"{m}/{k}": round(r, 3) for (m, k), r in ratios.items()}}
    print(json.dumps(benchtarget.add_checks(summary, checks)), flush=True)
    benchtarget.finish("fused_sweep", checks)


if __name__ == "__main__":
    main()
