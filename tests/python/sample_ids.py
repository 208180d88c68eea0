"""The exactly-once check of the torch drivers (run_torch_rescale.py, run_torch_ddp_rescale.py,
run_torch_relaunch.py): every process of a run appends the (epoch, sample id) pairs it trained on
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
