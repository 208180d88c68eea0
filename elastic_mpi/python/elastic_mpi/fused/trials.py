"""A sweep's trials trained together: K models of one architecture, fused (layers.py), each with
its own optimizer hyper-parameters (optim.py), losses and metrics of its own, a checkpoint of its
own in torch's formats, and a life of its own: a trial that finished or diverged leaves, the
others go on."""

import math
import os
from collections import OrderedDict

import torch
import torch.nn.functional as F

from .layers import EnsembleFallback, fuse_modules
from .optim import OPTIMIZERS


class FusedTrials:
    """K trials trained as one fused model.

    models:    K built models of one architecture (each initialised as its trial would be alone,
               e.g. with its own seed); their weights are copied, the models are not used after.
    hparams:   K dicts of optimizer hyper-parameters (sgd: lr, momentum, weight_decay; adam: lr,
               betas or beta1/beta2, eps, weight_decay).
    optimizer: "sgd" or "adam" (torch.optim.SGD / Adam, per trial).
    loss_fn:   loss of one trial's outputs and targets (torch's convention: a scalar, e.g.
               F.cross_entropy); applied to every trial with functorch's vmap.
    ids:       the trials' names (default 0..K-1), used in results, checkpoints and stop().
    """

    def __init__(self, models, hparams, optimizer="sgd", loss_fn=F.cross_entropy, ids=None):
        models = list(models)
        if len(hparams) != len(models):
            raise ValueError(f"{len(models)} models but {len(hparams)} sets of hyper-parameters")
        if optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer {optimizer!r}: expected one of {sorted(OPTIMIZERS)}")
        self.ids = list(ids) if ids is not None else list(range(len(models)))
        if len(self.ids) != len(models) or len(set(self.ids)) != len(self.ids):
            raise ValueError("ids must name every trial once")
        self.module, self._names = fuse_modules(models)
        self.fused_layers = not isinstance(self.module, EnsembleFallback)
        self.optimizer_kind = optimizer
        self.optimizer = OPTIMIZERS[optimizer](list(self.module.parameters()), hparams)
        self.loss_fn = loss_fn
        self.steps = [0] * len(models)
        self.stopped = OrderedDict()  # id -> {"reason", "step", "loss", "state"}
        from functorch import vmap
        self._vmap = vmap

    @property
    def k(self):
        return len(self.ids)

    def forward(self, x, per_trial=False):
        """Outputs [K, B, ...] of every trial; x is one batch for all trials ([B, ...]) or, with
        per_trial, a batch per trial ([K, B, ...])."""
        if per_trial:
            if x.shape[0] != self.k:
                raise ValueError(f"per-trial inputs have {x.shape[0]} batches for {self.k} trials")
        else:
            x = x.unsqueeze(0).expand(self.k, *x.shape)
        return self.module(x)

    def losses(self, outputs, targets, per_trial=False):
        """Each trial's loss, a tensor [K]."""
        if self.loss_fn is F.cross_entropy and outputs.dim() == 3 and targets.dtype == torch.long:
            # The common case in one call over the K x B samples, without vmap's overhead: each
            # trial's mean over its targets that are not torch's ignore_index (-100), as
            # F.cross_entropy's default reduction takes it.
            k, b = outputs.shape[0], outputs.shape[1]
            flat = targets.reshape(-1) if per_trial else targets.unsqueeze(0).expand(k, b).reshape(-1)
            per = F.cross_entropy(outputs.reshape(k * b, -1), flat, reduction="none").view(k, b)
            return per.sum(1) / (flat != -100).view(k, b).sum(1)
        return self._vmap(self.loss_fn, in_dims=(0, 0 if per_trial else None))(outputs, targets)

    def step(self, x, y, per_trial=False):
        """One training step of every trial on its batch; returns {trial id: loss before the
        step}. A trial whose loss is not finite has diverged: it leaves the sweep (stop())."""
        if self.k == 0:
            raise RuntimeError("no trial left to train")
        losses = self.losses(self.forward(x, per_trial), y, per_trial)
        self.optimizer.zero_grad()
        losses.sum().backward()  # trial k's parameters get the gradient of its own loss only
        self.optimizer.step()
        values = losses.detach().tolist()
        result = OrderedDict(zip(self.ids, values))
        self.steps = [s + 1 for s in self.steps]
        for tid, v in result.items():
            if not math.isfinite(v):
                self.stop(tid, "diverged", loss=v)
        return result

    @torch.no_grad()
    def evaluate(self, x, y, metric, per_trial=False):
        """{trial id: metric(outputs, targets)} of every trial, without gradients."""
        out = self.forward(x, per_trial)
        return OrderedDict((tid, metric(out[i], y[i] if per_trial else y)) for i, tid in enumerate(self.ids))

    # -------------------------------------------------------------- one trial's state
    def _index(self, trial_id):
        try:
            return self.ids.index(trial_id)
        except ValueError:
            raise KeyError(f"no running trial {trial_id!r} (running: {self.ids})") from None

    def trial_state(self, trial_id):
        """The trial's state in torch's own formats: {"id", "step", "model": its model's
        state_dict, "optimizer": torch.optim's state_dict for that model, "optimizer_kind"}."""
        i = self._index(trial_id)
        params = dict(self.module.named_parameters())
        model = OrderedDict((trial_name, params[fused_name][i].detach().clone())
                            for fused_name, trial_name in self._names.items())
        if not self.fused_layers:
            model.update(self.module.trial_buffers(i))
        return {"id": trial_id, "step": self.steps[i], "model": model,
                "optimizer": self.optimizer.trial_state_dict(i), "optimizer_kind": self.optimizer_kind}

    def stop(self, trial_id, reason="finished", loss=None):
        """The trial leaves the sweep; its last state is kept in self.stopped (and returned)."""
        i = self._index(trial_id)
        state = self.trial_state(trial_id)
        self.stopped[trial_id] = {"reason": reason, "step": self.steps[i], "loss": loss, "state": state}
        keep = [j for j in range(self.k) if j != i]
        self._select(keep)
        return state

    def _select(self, keep):
        index = torch.as_tensor(keep, dtype=torch.long)
        for module in self.module.modules():
            for name, p in list(module._parameters.items()):
                if p is not None:
                    module._parameters[name] = torch.nn.Parameter(p.detach().index_select(0, index).clone())
            for name, b in list(module._buffers.items()):
                if b is not None:
                    module._buffers[name] = b.index_select(0, index).clone()
        self.optimizer.select(keep, list(self.module.parameters()))
        self.ids = [self.ids[j] for j in keep]
        self.steps = [self.steps[j] for j in keep]

    def save(self, directory):
        """One file per trial, <directory>/trial-<id>.pt (torch.save of trial_state, written to a
        temporary name and renamed): running trials and those that stopped."""
        os.makedirs(directory, exist_ok=True)
        states = [self.trial_state(t) for t in self.ids]
        states += [dict(s["state"], stopped=s["reason"]) for s in self.stopped.values()]
        for state in states:
            path = os.path.join(directory, f"trial-{state['id']}.pt")
            torch.save(state, path + ".tmp")
            os.replace(path + ".tmp", path)
        return [os.path.join(directory, f"trial-{s['id']}.pt") for s in states]

    @classmethod
    def from_states(cls, make_model, states, loss_fn=F.cross_entropy, include_stopped=False):
        """Fuses trials from their states (trial_state(), or files save() wrote): make_model()
        builds one trial's model, each is loaded with its state; optimizer state and step counts
        carry on. How trials move between fused processes: a narrower or wider fusion is made of
        the same trials' states. Trials that had stopped (finished, diverged: save() marks them)
        stay stopped unless include_stopped."""
        states = [torch.load(s) if isinstance(s, (str, os.PathLike)) else s for s in states]
        if not include_stopped:
            states = [s for s in states if "stopped" not in s]
        if not states:
            raise ValueError("no trial states (to run)")
        kinds = {s["optimizer_kind"] for s in states}
        if len(kinds) != 1:
            raise ValueError(f"the trials were trained with different optimizers: {sorted(kinds)}")
        models = []
        for s in states:
            m = make_model()
            m.load_state_dict(s["model"])
            models.append(m)
        kind = kinds.pop()
        optimizer_class = OPTIMIZERS[kind]
        hparams = [optimizer_class._from_torch_group(s["optimizer"]["param_groups"][0]) for s in states]
        trials = cls(models, hparams, optimizer=kind, loss_fn=loss_fn, ids=[s["id"] for s in states])
        for i, s in enumerate(states):
            trials.optimizer.load_trial_state(i, s["optimizer"])
        trials.steps = [int(s["step"]) for s in states]
        return trials
