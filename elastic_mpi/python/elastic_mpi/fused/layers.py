"""Horizontal fusion of K models of one architecture, operator by operator.

K trials of a sweep train K copies of one network that differ in their initial weights and
hyper-parameters. Fused, each layer of the K copies becomes one layer over stacked weights, and
the K trials' activations travel together with the trial as the leading dimension: [K, B, ...].
A linear layer becomes one batched matrix product (baddbmm), a convolution one grouped
convolution with K groups (the K trials' channels side by side), element-wise layers and pooling
need no change but a reshape. One fused step then costs a few large kernels instead of K small
ones: the idea of HFTA (Wang et al., MLSys 2021), written here for torch's own modules.

`fuse_modules(models)` builds the fused network from K built models (so each trial starts from
exactly the weights its own model was initialised with). Modules it has no fused form for make
the whole network fall back to torch's own model ensembling (functorch's
combine_state_for_ensemble + vmap), which computes the same thing with less speed-up.
Either way the fused network maps [K, B, ...] inputs to [K, B, ...] outputs, and
`named_trial_parameters()` tells, for every stacked parameter, the name it has in one trial's
model (its state_dict key).
"""

from collections import OrderedDict

import torch
from torch import nn
import torch.nn.functional as F

# Modules that act on every element (or every sample) alone: applied to [K, B, ...] as they are
# to [B, ...], since they see the trial dimension as one more batch dimension.
_ELEMENTWISE = (nn.ReLU, nn.ReLU6, nn.LeakyReLU, nn.ELU, nn.GELU, nn.SiLU, nn.Tanh, nn.Sigmoid, nn.Softplus,
                nn.Identity, nn.Hardtanh, nn.Mish)


class FusedLinear(nn.Module):
    """K linear layers: weight [K, out, in], bias [K, out]; input [K, B, in]."""

    def __init__(self, layers):
        super().__init__()
        self.weight = nn.Parameter(torch.stack([l.weight.detach() for l in layers]).clone())
        self.bias = (nn.Parameter(torch.stack([l.bias.detach() for l in layers]).clone())
                     if layers[0].bias is not None else None)

    def forward(self, x):
        if x.dim() != 3:  # [K, B, ..., in]: the same map over the middle dimensions
            shape = x.shape
            return self.forward(x.reshape(shape[0], -1, shape[-1])).reshape(*shape[:-1], self.weight.shape[1])
        k, b, out = x.shape[0], x.shape[1], self.weight.shape[1]
        if x.stride(0) == 0:  # one batch for every trial (the first layer): one matrix product
            w = self.weight.reshape(k * out, -1).t()
            y = torch.mm(x[0], w) if self.bias is None else torch.addmm(self.bias.reshape(-1), x[0], w)
            return y.reshape(b, k, out).transpose(0, 1)
        if self.bias is None:
            return torch.bmm(x, self.weight.transpose(1, 2))
        return torch.baddbmm(self.bias.unsqueeze(1), x, self.weight.transpose(1, 2))


class FusedConv2d(nn.Module):
    """K 2-D convolutions as one grouped convolution: the K trials' channels side by side.
    Input [K, B, C, H, W]."""

    def __init__(self, layers):
        super().__init__()
        first = layers[0]
        if first.padding_mode != "zeros" or isinstance(first.padding, str):
            raise NotImplementedError("padding_mode other than zeros or string padding")
        self.stride, self.padding, self.dilation, self.groups = first.stride, first.padding, first.dilation, first.groups
        self.weight = nn.Parameter(torch.stack([l.weight.detach() for l in layers]).clone())
        self.bias = (nn.Parameter(torch.stack([l.bias.detach() for l in layers]).clone())
                     if first.bias is not None else None)

    def forward(self, x):
        k, b = x.shape[0], x.shape[1]
        joined = x.transpose(0, 1).reshape(b, k * x.shape[2], *x.shape[3:])
        w = self.weight.reshape(-1, *self.weight.shape[2:])
        out = F.conv2d(joined, w, None if self.bias is None else self.bias.reshape(-1), self.stride, self.padding,
                       self.dilation, self.groups * k)
        return out.reshape(b, k, -1, *out.shape[2:]).transpose(0, 1)


class PerSample(nn.Module):
    """A module without parameters that works on [N, ...] batches (pooling, flatten, dropout):
    applied to the K trials' batches as one batch of K * B."""

    def __init__(self, module):
        super().__init__()
        self.inner = module

    def forward(self, x):
        k, b = x.shape[0], x.shape[1]
        out = self.inner(x.reshape(k * b, *x.shape[2:]))
        return out.reshape(k, b, *out.shape[1:])


class FusedSequential(nn.Sequential):
    """nn.Sequential of fused layers, its children named as the trial model's: a fused parameter
    has the name of the parameter it stacks."""


class EnsembleFallback(nn.Module):
    """Other architectures: the K models' parameters and buffers stacked by functorch, the forward
    vmapped over them. Same results as the fused layers, fewer of their gains. What functorch's
    vmap cannot batch it refuses with its own error: BatchNorm in training mode updates its running
    statistics in place (functorch.experimental.replace_all_batch_norm_modules_ removes them)."""

    def __init__(self, models):
        super().__init__()
        from functorch import combine_state_for_ensemble, vmap
        fmodel, params, buffers = combine_state_for_ensemble(models)
        # Not a submodule: its own copy of the model's parameters is not the trials'.
        self.__dict__["_fmodel"] = fmodel
        self._vmap = vmap
        self._names = [n for n, _ in models[0].named_parameters()]
        self._buffer_names = [n for n, _ in models[0].named_buffers()]
        self.stacked = nn.ParameterList([nn.Parameter(p.detach().clone()) for p in params])
        for i, b in enumerate(buffers):
            self.register_buffer(f"buffer_{i}", b.detach().clone())

    def forward(self, x):
        buffers = tuple(getattr(self, f"buffer_{i}") for i in range(len(self._buffer_names)))
        # Random layers (dropout) draw for every trial on its own; the trials' random streams are
        # then not those of separate runs (only deterministic models match them exactly).
        return self._vmap(self._fmodel, randomness="different")(tuple(self.stacked), buffers, x)

    def trial_names(self):
        return OrderedDict((f"stacked.{i}", n) for i, n in enumerate(self._names))

    def trial_buffers(self, i):
        """Trial i's buffers under their names in its model."""
        return OrderedDict((n, getattr(self, f"buffer_{j}")[i].clone()) for j, n in enumerate(self._buffer_names))


def _fuse(modules):
    first = modules[0]
    if any(type(m) is not type(first) for m in modules):
        raise NotImplementedError("the trials' models differ in their structure")
    if isinstance(first, nn.Sequential):  # children keep their names, so parameters keep theirs
        return FusedSequential(OrderedDict(
            (name, _fuse([dict(m.named_children())[name] for m in modules])) for name, _ in first.named_children()))
    if type(first) is nn.Linear:
        return FusedLinear(modules)
    if type(first) is nn.Conv2d:
        return FusedConv2d(modules)
    if isinstance(first, _ELEMENTWISE):
        return first
    if isinstance(first, (nn.Flatten, nn.MaxPool2d, nn.AvgPool2d, nn.AdaptiveAvgPool2d, nn.AdaptiveMaxPool2d)):
        if isinstance(first, nn.Flatten) and first.start_dim < 1:
            raise NotImplementedError("nn.Flatten over the batch dimension")
        return PerSample(first)
    if isinstance(first, nn.Dropout) and first.p == 0:
        return nn.Identity()
    raise NotImplementedError(f"no fused form of {type(first).__name__}")


def fuse_modules(models):
    """The fused network of K models of one architecture (nn.Sequential of Linear, Conv2d,
    element-wise activations, pooling and Flatten fuse layer by layer; anything else falls back
    to functorch's ensembling). Returns (module, names): names maps each parameter of the fused
    module to the state_dict key of the same parameter in one trial's model."""
    models = list(models)
    if not models:
        raise ValueError("fuse_modules needs at least one model")
    if any(sum(1 for _ in m.buffers()) for m in models) or not isinstance(models[0], nn.Sequential):
        fallback = EnsembleFallback(models)
        return fallback, fallback.trial_names()
    try:
        fused = _fuse(models)
    except NotImplementedError:
        fallback = EnsembleFallback(models)
        return fallback, fallback.trial_names()
    trial = OrderedDict((n, n) for n, _ in models[0].named_parameters())
    mapping = OrderedDict()
    for n, _ in fused.named_parameters():
        if n not in trial:
            raise NotImplementedError(f"fused parameter {n} has no counterpart in the trial's model")
        mapping[n] = n
    return fused, mapping
