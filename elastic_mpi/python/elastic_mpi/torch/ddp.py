"""DistributedDataParallel that follows the elastic world: a module holding the user's model and,
for the current world, a torch DistributedDataParallel made anew after every rescale (a torch DDP
is bound to one process group for its lifetime).

The stable object is what the script keeps (`model = DistributedDataParallel(model, ...)` as with
torch's, `model(x)`, `model.module`, `model.no_sync()`, state_dict keys "module.*"); the torch DDP
inside is made by the job (elastic()) and after every change of the world, never by the
constructor: a newcomer's constructor runs while the running ranks wait in the state hand-over.

Gradients: a communication hook averages each bucket weighted by the rank's share of the step's
samples, sum_r (n_r / N) g_r, with g_r the gradient of the rank's mean loss. With equal shares
(n_r = N / P) this is DDP's own average; with the unequal shares of an elastic world (a global
batch that does not divide by the world size, the short last step of an epoch, a weight-zero
filler) it is still the gradient of the mean loss over the step's samples, so the update does not
depend on how the step was split. The hook also sums the squared norms of the local and the
averaged gradient for the runtime's gradient-noise statistics (adascale, elasticd).
"""

import inspect

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import distributed as _torch_ddp

# torch >= 2.3 skips DDP's start-up broadcast of the parameters and buffers when told
# (init_sync=False); older versions broadcast in _sync_module_states, which rewrap() passes over.
_HAS_INIT_SYNC = "init_sync" in inspect.signature(nn.parallel.DistributedDataParallel.__init__).parameters


class _HookState:
    """What the hook reads (the rank's weight in the current step) and writes (squared norms)."""

    def __init__(self):
        self.weight = 1.0
        self.observe = False
        self.local_sqr = []   # per bucket, this rank's gradient (device tensors: no sync in the hook)
        self.global_sqr = []  # per bucket, the averaged gradient

    def take_norms(self):
        """(local, global) squared norms summed over the buckets of the last backward, or None."""
        local, glob = self.local_sqr, self.global_sqr
        self.local_sqr, self.global_sqr = [], []
        if not local or len(local) != len(glob):
            return None
        return float(torch.stack(local).sum().item()), float(torch.stack(glob).sum().item())


def _squared_norm(t):
    t = t.detach()
    dtype = torch.float32 if t.dtype in (torch.float16, torch.bfloat16) else None  # no overflow
    return torch.linalg.vector_norm(t, dtype=dtype).to(torch.float64).square()


def _weighted_allreduce(state, bucket):
    tensor = bucket.buffer()
    if state.observe:
        state.local_sqr.append(_squared_norm(tensor))
    tensor.mul_(state.weight)
    future = dist.all_reduce(tensor, async_op=True).get_future()

    def averaged(fut):
        out = fut.value()[0]
        if state.observe:
            state.global_sqr.append(_squared_norm(out))
        return out

    return future.then(averaged)


def _make_ddp(module, options, sync):
    if sync:
        return nn.parallel.DistributedDataParallel(module, **options)
    if _HAS_INIT_SYNC:
        return nn.parallel.DistributedDataParallel(module, init_sync=False, **options)
    original = getattr(_torch_ddp, "_sync_module_states", None)
    if original is None:  # a torch without either: its constructor syncs, which is correct, only slower
        return nn.parallel.DistributedDataParallel(module, **options)
    _torch_ddp._sync_module_states = lambda *args, **kwargs: None
    try:
        return nn.parallel.DistributedDataParallel(module, **options)
    finally:
        _torch_ddp._sync_module_states = original


class DistributedDataParallel(nn.Module):
    """DistributedDataParallel(module, **ddp_options): torch's DDP for the elastic world.

    Takes the options of torch.nn.parallel.DistributedDataParallel (device_ids, output_device,
    broadcast_buffers, find_unused_parameters, bucket_cap_mb, gradient_as_bucket_view,
    static_graph, ...) except process_group: every torch DDP it makes uses the default group of
    the current world. The module's loss must be a mean over the rank's batch (PyTorch's default
    reduction), as with torch's DDP.
    """

    def __init__(self, module, **ddp_options):
        super().__init__()
        if isinstance(module, nn.parallel.DistributedDataParallel):
            raise TypeError("elastic_mpi.torch.DistributedDataParallel: pass the module itself, not a torch "
                            "DistributedDataParallel (it is bound to one process group)")
        if "process_group" in ddp_options:
            raise TypeError("elastic_mpi.torch.DistributedDataParallel: no process_group: each world's default "
                            "group is used")
        self.module = module
        object.__setattr__(self, "_ddp_options", dict(ddp_options))
        object.__setattr__(self, "_ddp", None)  # not a submodule: state_dict keys stay "module.*"
        object.__setattr__(self, "hook_state", _HookState())

    @property
    def ddp(self):
        """The torch DistributedDataParallel of the current world (None before elastic())."""
        return self._ddp

    def rewrap(self, sync=True):
        """Collective over the current default group: a new torch DDP for it. sync: its
        constructor broadcasts rank 0's parameters and buffers, as torch's does; sync=False (every
        rank passes the same) when every rank holds them already (after a shrink, or once the
        newcomers received rank 0's state): 2 x the model's bytes less to move."""
        object.__setattr__(self, "_ddp", None)  # the old one's reducer and hooks go with it
        ddp = _make_ddp(self.module, self._ddp_options, sync)
        ddp.register_comm_hook(self.hook_state, _weighted_allreduce)
        ddp.train(self.training)
        object.__setattr__(self, "_ddp", ddp)

    def release(self):
        """Drops the torch DDP of the current world (before its process group is destroyed)."""
        object.__setattr__(self, "_ddp", None)

    def _current(self):
        if self._ddp is None:
            raise RuntimeError("elastic_mpi.torch.DistributedDataParallel is used before elastic_mpi.torch.elastic"
                               "(model, optimizer, loader) made its DistributedDataParallel for the job's world")
        return self._ddp

    def forward(self, *inputs, **kwargs):
        return self._current()(*inputs, **kwargs)

    def no_sync(self):
        return self._current().no_sync()

    def train(self, mode=True):
        super().train(mode)
        if self._ddp is not None:
            self._ddp.train(mode)
        return self

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            ddp = self.__dict__.get("_ddp")
            if ddp is None or name.startswith("__"):
                raise
            return getattr(ddp, name)
