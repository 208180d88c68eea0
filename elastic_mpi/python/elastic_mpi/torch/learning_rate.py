"""The job's learning-rate rule (--elastic-lr-scaling: none, linear, sqrt, adascale) applied to a
torch optimizer and its LR scheduler.

The runtime gives a factor for the current global batch (session.lr_factor, 1 at the base batch).
When it changes from f_old to f_new, every learning rate the optimizer and the scheduler hold is
multiplied by f_new / f_old: each param group's "lr" and the values schedulers compute it from
("initial_lr", OneCycleLR's "max_lr" and "min_lr"), and each scheduler's base_lrs, CyclicLR's
max_lrs and the last rates it reported, sub-schedulers of SequentialLR and ChainedScheduler
included. So the schedule's shape is kept (a StepLR still decays by gamma) and its scale follows
the rule, whether the scheduler computes from the current rate (chainable form) or from its base
rates (closed form). Floors (ReduceLROnPlateau's min_lrs, CosineAnnealingLR's eta_min) are
absolute and stay.
"""

import torch

_GROUP_KEYS = ("lr", "initial_lr", "max_lr", "min_lr")
_SCHEDULER_LISTS = ("base_lrs", "max_lrs", "_last_lr")


def _scaled(value, ratio):
    if isinstance(value, torch.Tensor):
        return value.mul_(ratio) if value.is_floating_point() else value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value * ratio
    return value


def _schedulers(scheduler):
    if scheduler is None:
        return
    yield scheduler
    for inner in getattr(scheduler, "_schedulers", None) or ():
        yield from _schedulers(inner)


def rescale(optimizer, scheduler, ratio):
    """Multiplies every learning rate of optimizer and scheduler by ratio."""
    if ratio == 1.0:
        return
    for group in optimizer.param_groups:
        for key in _GROUP_KEYS:
            if key in group:
                group[key] = _scaled(group[key], ratio)
    for s in _schedulers(scheduler):
        for attr in _SCHEDULER_LISTS:
            values = getattr(s, attr, None)
            if isinstance(values, list):
                setattr(s, attr, [_scaled(v, ratio) for v in values])
