"""Fused training of a sweep's trials: K models of one architecture with different
hyper-parameters trained as one fused model on one device (horizontal fusion, after HFTA).

    from elastic_mpi.fused import FusedTrials
    trials = FusedTrials([make_model(seed) for seed in seeds],
                         [{"lr": lr, "momentum": 0.9} for lr in (0.3, 0.1, 0.03, 0.01)], optimizer="sgd")
    for x, y in loader:
        losses = trials.step(x, y)          # {trial id: loss}
        ...
        trials.stop(trial_id, "finished")   # leaves the sweep; the others go on
    trials.save("checkpoints")              # trial-<id>.pt each, torch's own state_dicts

Each trial follows, to rounding, the run it would have had alone with torch.optim (the tests
check it). docs/user-guide.md, "Sweeps: fused trials", is the manual. Imports torch.
"""

from .layers import fuse_modules, FusedLinear, FusedConv2d
from .optim import FusedSGD, FusedAdam
from .trials import FusedTrials

__all__ = ["FusedTrials", "FusedSGD", "FusedAdam", "fuse_modules", "FusedLinear", "FusedConv2d"]
