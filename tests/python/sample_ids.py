"""The checks the torch drivers share (the exactly-once check and the comparison with the
reference run) of (run_torch_rescale.py, run_torch_ddp_rescale.py,
run_torch_relaunch.py). Exactly once: every process of a run appends the (epoch, sample id) pairs it trained on
to WORK/ids.<pid>; each pair of the data set must appear exactly once over all of them."""

import collections
import glob
import os
import sys


def exactly_once(work, epochs, samples):
    """Exits naming what is missing, extra or repeated; returns how many processes trained."""
    counts = collections.Counter()
    trainers = 0
    for path in glob.glob(os.path.join(work, "ids.*")):
        with open(path) as f:
            lines = f.readlines()
        trainers += bool(lines)
        counts.update(tuple(map(int, line.split())) for line in lines)
    expected = {(e, i) for e in range(epochs) for i in range(samples)}
    repeated = [k for k, n in counts.items() if n != 1]
    if set(counts) != expected or repeated:
        sys.exit(f"FAIL: samples not trained on exactly once in {work}: {len(expected - set(counts))} missing, "
                 f"{len(set(counts) - expected)} extra, {len(repeated)} repeated")
    return trainers


def compare_to_reference(ref, el, loss_tolerance, param_tolerance, label="elastic"):
    """The final full-data-set loss (relative) and the parameters (max |a-b| / max(1, |a|_inf)) of
    run `el` against the reference run `ref` (their result.json); prints both, returns the
    failures (a list of strings, empty when within the tolerances)."""
    loss_rel = abs(el["final_loss"] - ref["final_loss"]) / abs(ref["final_loss"])
    param_rel = max(abs(a - b) for a, b in zip(ref["params"], el["params"])) / max(1.0, max(abs(a) for a in ref["params"]))
    print(f"final loss: reference {ref['final_loss']:.8f} {label} {el['final_loss']:.8f} relative difference "
          f"{loss_rel:.3g} (tolerance {loss_tolerance:g}); parameters {param_rel:.3g} (tolerance {param_tolerance:g})")
    failures = []
    if loss_rel > loss_tolerance:
        failures.append("final loss differs from the reference")
    if param_rel > param_tolerance:
        failures.append("parameters differ from the reference")
    return failures
