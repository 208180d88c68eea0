"""SGD and Adam over stacked parameters, with hyper-parameters of their own for every trial.

torch.optim applies one learning rate (one momentum, one weight decay) to a whole parameter
group; a fused parameter [K, ...] holds K trials, each with its own. These optimizers carry each
hyper-parameter as a vector over the trials and perform, slice by slice, the arithmetic of
torch.optim.SGD and torch.optim.Adam (their single-tensor CPU path in torch 1.13, the same
operations in the same order), so that a fused trial follows the run it would have had alone to
rounding. Their state converts to and from torch.optim's own state_dict of one trial
(`trial_state_dict`, `load_trial_state`), so a trial's checkpoint loads into a plain
torch.optim optimizer and back.
"""

import math

import torch

SGD_DEFAULTS = {"lr": 0.01, "momentum": 0.0, "weight_decay": 0.0}
ADAM_DEFAULTS = {"lr": 1e-3, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.0}


_SGD_RECORDS_EMPTY_BUFFERS = None


def _sgd_records_empty_buffers():
    """Whether the installed torch.optim.SGD without momentum keeps a state entry per parameter
    (momentum_buffer None: torch 1.x) or none (torch 2.x); asked of torch itself, once."""
    global _SGD_RECORDS_EMPTY_BUFFERS
    if _SGD_RECORDS_EMPTY_BUFFERS is None:
        p = torch.zeros(1, requires_grad=True)
        p.grad = torch.ones(1)
        opt = torch.optim.SGD([p], lr=0.1)
        opt.step()
        _SGD_RECORDS_EMPTY_BUFFERS = len(opt.state_dict()["state"]) > 0
    return _SGD_RECORDS_EMPTY_BUFFERS


def _check_hparams(hparams, defaults, kind):
    out = []
    for i, h in enumerate(hparams):
        unknown = set(h) - set(defaults) - ({"betas"} if kind == "adam" else set())
        if unknown:
            raise ValueError(f"trial {i}: unknown {kind} hyper-parameter(s) {sorted(unknown)}; "
                             f"known: {sorted(defaults)}")
        full = dict(defaults)
        full.update({k: v for k, v in h.items() if k != "betas"})
        if "betas" in h:
            full["beta1"], full["beta2"] = h["betas"]
        for k, v in full.items():
            if not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise ValueError(f"trial {i}: {kind} hyper-parameter {k} = {v!r}: expected a finite number >= 0")
        if kind == "adam" and not (full["beta1"] < 1 and full["beta2"] < 1):
            raise ValueError(f"trial {i}: adam betas must be below 1, got ({full['beta1']}, {full['beta2']})")
        out.append(full)
    return out


class _FusedOptimizer:
    kind = ""
    defaults = {}

    def __init__(self, params, hparams):
        self.params = list(params)
        self.hparams = _check_hparams(hparams, self.defaults, self.kind)
        self.k = len(self.hparams)
        for p in self.params:
            if p.shape[0] != self.k:
                raise ValueError(f"a fused parameter holds {p.shape[0]} trials, the optimizer was given "
                                 f"hyper-parameters for {self.k}")
        self.state = [dict() for _ in self.params]
        self._cache = {}

    # Hyper-parameters derived in double precision, as torch computes `1 - beta1` in Python.
    _DERIVED = {"1-beta1": lambda h: 1 - h["beta1"], "1-beta2": lambda h: 1 - h["beta2"], "-lr": lambda h: -h["lr"]}

    def _vector(self, name, like):
        """The hyper-parameter `name` over the trials, shaped to broadcast against `like`
        [K, ...], in the parameter's dtype (as torch converts a Python float in its kernels).
        Cached until the trials or their hyper-parameters change."""
        key = (name, like.dtype, like.dim(), like.device)
        v = self._cache.get(key)
        if v is None:
            value = self._DERIVED.get(name, lambda h: h[name])
            v = torch.tensor([value(h) for h in self.hparams], dtype=torch.float64)
            v = v.to(device=like.device, dtype=like.dtype).reshape(-1, *([1] * (like.dim() - 1)))
            self._cache[key] = v
        return v

    def _any(self, name):
        """Whether any trial has a non-zero `name` (torch skips the term when it is 0)."""
        return any(h[name] != 0 for h in self.hparams)

    def zero_grad(self, set_to_none=True):
        for p in self.params:
            if p.grad is not None:
                if set_to_none:
                    p.grad = None
                else:
                    p.grad.zero_()

    def select(self, keep, params):
        """Keeps the trials at indices `keep` (in that order), with `params` the module's new
        stacked parameters (the same order as before)."""
        index = torch.as_tensor(keep, dtype=torch.long)
        self.params = list(params)
        self.hparams = [self.hparams[i] for i in keep]
        self.k = len(keep)
        self._cache = {}
        self.state = [{n: t.index_select(0, index).clone() for n, t in s.items()} for s in self.state]

    def trial_state_dict(self, i):
        """torch.optim's state_dict of trial i alone (parameters numbered in module order)."""
        state = {}
        for n, s in enumerate(self.state):
            if s:
                entry = self._trial_state(s, i)
                if entry is not None:
                    state[n] = entry
        group = self._torch_group(self.hparams[i])
        group["params"] = list(range(len(self.params)))
        return {"state": state, "param_groups": [group]}

    def load_trial_state(self, i, state_dict):
        """Sets trial i's hyper-parameters and state from a torch.optim state_dict of its model."""
        groups = state_dict.get("param_groups", [])
        if len(groups) != 1 or len(groups[0].get("params", [])) != len(self.params):
            raise ValueError(f"a {self.kind} state_dict of one parameter group with {len(self.params)} parameters "
                             "was expected")
        self.hparams[i] = _check_hparams([self._from_torch_group(groups[0])], self.defaults, self.kind)[0]
        self._cache = {}
        saved = state_dict.get("state", {})
        for n, p in enumerate(self.params):
            entry = saved.get(n, saved.get(str(n)))
            if entry is None:
                # No state: the trial has not stepped (or needs none). torch.optim creates it at the
                # first step: Adam's as zeros with step 0, SGD's momentum buffer as that step's
                # gradient, which a zero buffer gives exactly (dampening 0). So a zero slice is it,
                # beside trials that have stepped (a trial that joins a running fusion).
                for t in self.state[n].values():
                    t[i].zero_()
                continue
            self._load_entry(n, p, i, entry)


class FusedSGD(_FusedOptimizer):
    """torch.optim.SGD per trial: lr, momentum, weight_decay (dampening 0, no Nesterov)."""

    kind = "sgd"
    defaults = SGD_DEFAULTS

    @torch.no_grad()
    def step(self):
        for n, p in enumerate(self.params):
            if p.grad is None:
                continue
            d_p = p.grad
            if self._any("weight_decay"):
                d_p = d_p + self._vector("weight_decay", p) * p
            if self._any("momentum"):
                m = self._vector("momentum", p)
                buf = self.state[n].get("momentum_buffer")
                if buf is None:
                    buf = d_p.clone()
                else:
                    # A trial without momentum keeps no buffer in torch: its step is d_p alone.
                    buf.mul_(m).add_(d_p)
                    no_momentum = [i for i, h in enumerate(self.hparams) if h["momentum"] == 0]
                    if no_momentum:
                        buf[no_momentum] = d_p[no_momentum]
                self.state[n]["momentum_buffer"] = buf
                d_p = buf
            p.addcmul_(self._vector("-lr", p), d_p)

    def _trial_state(self, s, i):
        if "momentum_buffer" not in s:
            return {}
        if self.hparams[i]["momentum"] == 0:
            # torch keeps no buffer for a parameter group without momentum: torch 1.x records
            # momentum_buffer None per parameter, torch 2.x no state for the parameter at all.
            return {"momentum_buffer": None} if _sgd_records_empty_buffers() else None
        return {"momentum_buffer": s["momentum_buffer"][i].clone()}

    @staticmethod
    def _stateless(h):
        return h["momentum"] == 0

    def _load_entry(self, n, p, i, entry):
        if "momentum_buffer" in entry and entry["momentum_buffer"] is not None:
            buf = self.state[n].setdefault("momentum_buffer", torch.zeros_like(p))
            buf[i] = entry["momentum_buffer"]

    @staticmethod
    def _torch_group(h):
        return {"lr": h["lr"], "momentum": h["momentum"], "dampening": 0, "weight_decay": h["weight_decay"],
                "nesterov": False, "maximize": False, "foreach": None, "differentiable": False}

    @staticmethod
    def _from_torch_group(g):
        if g.get("dampening", 0) != 0 or g.get("nesterov", False) or g.get("maximize", False):
            raise ValueError("fused SGD supports dampening 0 without Nesterov or maximize")
        return {"lr": g["lr"], "momentum": g.get("momentum", 0), "weight_decay": g.get("weight_decay", 0)}


class FusedAdam(_FusedOptimizer):
    """torch.optim.Adam per trial: lr, betas (beta1, beta2), eps, weight_decay (no AMSGrad)."""

    kind = "adam"
    defaults = ADAM_DEFAULTS

    @torch.no_grad()
    def step(self):
        for n, p in enumerate(self.params):
            if p.grad is None:
                continue
            s = self.state[n]
            if not s:
                s["step"] = torch.zeros(self.k, dtype=torch.float32)
                s["exp_avg"] = torch.zeros_like(p)
                s["exp_avg_sq"] = torch.zeros_like(p)
            s["step"] += 1
            grad = p.grad
            if self._any("weight_decay"):
                grad = grad + self._vector("weight_decay", p) * p
            b1, b2 = self._vector("beta1", p), self._vector("beta2", p)
            s["exp_avg"].mul_(b1).add_(self._vector("1-beta1", p) * grad)
            s["exp_avg_sq"].mul_(b2).add_(self._vector("1-beta2", p) * grad * grad)
            # The bias corrections in double precision, as torch computes them from the step count.
            step = s["step"].to(torch.float64)
            lr = torch.tensor([h["lr"] for h in self.hparams], dtype=torch.float64)
            beta1 = torch.tensor([h["beta1"] for h in self.hparams], dtype=torch.float64)
            beta2 = torch.tensor([h["beta2"] for h in self.hparams], dtype=torch.float64)
            shape = (-1, *([1] * (p.dim() - 1)))
            step_size = (lr / (1 - beta1 ** step)).to(p.dtype).reshape(shape)
            bc2_sqrt = torch.sqrt(1 - beta2 ** step).to(p.dtype).reshape(shape)
            denom = s["exp_avg_sq"].sqrt() / bc2_sqrt + self._vector("eps", p)
            p.add_((-step_size) * s["exp_avg"] / denom)

    @staticmethod
    def _stateless(h):
        return False

    def _trial_state(self, s, i):
        return {"step": s["step"][i].clone(), "exp_avg": s["exp_avg"][i].clone(),
                "exp_avg_sq": s["exp_avg_sq"][i].clone()}

    def _load_entry(self, n, p, i, entry):
        s = self.state[n]
        if not s:
            s["step"] = torch.zeros(self.k, dtype=torch.float32)
            s["exp_avg"] = torch.zeros_like(p)
            s["exp_avg_sq"] = torch.zeros_like(p)
        s["step"][i] = float(entry["step"])
        s["exp_avg"][i] = entry["exp_avg"]
        s["exp_avg_sq"][i] = entry["exp_avg_sq"]

    @staticmethod
    def _torch_group(h):
        return {"lr": h["lr"], "betas": (h["beta1"], h["beta2"]), "eps": h["eps"], "weight_decay": h["weight_decay"],
                "amsgrad": False, "maximize": False, "foreach": None, "capturable": False, "differentiable": False,
                "fused": False}

    @staticmethod
    def _from_torch_group(g):
        if g.get("amsgrad", False) or g.get("maximize", False):
            raise ValueError("fused Adam supports neither AMSGrad nor maximize")
        beta1, beta2 = g.get("betas", (0.9, 0.999))
        return {"lr": g["lr"], "beta1": beta1, "beta2": beta2, "eps": g.get("eps", 1e-8),
                "weight_decay": g.get("weight_decay", 0)}


OPTIMIZERS = {"sgd": FusedSGD, "adam": FusedAdam}
