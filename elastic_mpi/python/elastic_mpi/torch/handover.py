"""Hand-over of the training state from rank 0 (always a rank that was there before the rescale:
the base group never leaves) to the ranks that joined, through torch's own state_dicts.

The state is one dict (Job.state_dict()): the model's, optimizer's, LR scheduler's and
GradScaler's state_dicts, the sampler's position, the step counter and the applied learning-rate
factor, the random generators (torch's CPU generator, the CUDA generator of the model's device,
NumPy's and Python's global ones) and the user's extras.

Only rank 0 and the newcomers take part (the ranks that were there already hold the state): the
new world's process group carries it point to point, along a binomial tree rooted at rank 0 over
rank 0 and the newcomers (each newcomer receives once; with several, the ones that have it pass
it on). Tensors of LARGE_BYTES or more go as they are, each in one message from its own memory
(no serialisation, no copy on a CPU rank 0; CUDA tensors travel device to device under NCCL and
through a host copy under gloo); the rest of the dict, with the small tensors, is one torch.save
in memory, sent first, where each large tensor is a Slot (shape, dtype, device). The newcomers
receive each large tensor into a new tensor of its shape and dtype, then load the dict with each
part's load_state_dict, which puts the tensors where the newcomer's model and optimizer are (CPU
or its GPU).

Which ranks are newcomers the ranks tell each other with one small allreduce of the session
(MPI), in which every rank of the new world takes part: that is the only collective here.
"""

import collections
import io
import random

import numpy as np
import torch
import torch.distributed as dist

FORMAT = 1
LARGE_BYTES = 64 * 1024  # tensors at least this large go as their own messages


class Slot:
    """Where a large tensor was in the state: its index among the large tensors, shape, dtype and
    whether it was on a CUDA device (the newcomer's is its own)."""

    def __init__(self, index, tensor):
        self.index = index
        self.shape = tuple(tensor.shape)
        self.dtype = tensor.dtype
        self.cuda = tensor.device.type == "cuda"


def rng_state(device):
    state = {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate()}
    if device is not None and device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def set_rng_state(state, device):
    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
    random.setstate(state["python"])
    if "cuda" in state and device is not None and device.type == "cuda":
        torch.cuda.set_rng_state(state["cuda"], device)


def serialize(state):
    buffer = io.BytesIO()
    torch.save(state, buffer)
    return buffer


def deserialize(data):
    # The state comes from rank 0 of this job: the same program. weights_only=False: it holds the
    # generators' states and the user's extras, which are not tensors.
    return torch.load(io.BytesIO(data), map_location="cpu", weights_only=False)


def _rebuild(value, walk):
    """value with walk() applied to the items of its dicts, lists and tuples (a state_dict's
    OrderedDict stays one, with its _metadata: module versions that load_state_dict reads)."""
    if isinstance(value, dict):
        items = ((k, walk(v)) for k, v in value.items())
        out = collections.OrderedDict(items) if isinstance(value, collections.OrderedDict) else dict(items)
        if hasattr(value, "_metadata"):
            out._metadata = value._metadata
        return out
    if isinstance(value, list):
        return [walk(v) for v in value]
    if isinstance(value, tuple) and not hasattr(value, "_fields"):  # a namedtuple stays as it is
        return tuple(walk(v) for v in value)
    return value


def split(state):
    """(skeleton, large tensors): the state with every dense CPU or CUDA tensor of LARGE_BYTES or
    more replaced by a Slot, and those tensors in slot order (sparse and quantized ones stay in the
    skeleton). Dicts, lists and tuples are walked; other values stay."""
    tensors = []

    def walk(value):
        if isinstance(value, torch.Tensor):
            plain = value.layout == torch.strided and not value.is_quantized and value.device.type in ("cpu", "cuda")
            if plain and value.numel() * value.element_size() >= LARGE_BYTES:
                tensors.append(value.detach())
                return Slot(len(tensors) - 1, value)
            return value
        return _rebuild(value, walk)

    return walk(state), tensors


def join(skeleton, tensors):
    """The state again: every Slot of the skeleton replaced by its tensor."""

    def walk(value):
        if isinstance(value, Slot):
            return tensors[value.index]
        return _rebuild(value, walk)

    return walk(skeleton)


def slots(skeleton):
    """The Slots of a skeleton, in index order."""
    found = []

    def walk(value):
        if isinstance(value, Slot):
            found.append(value)
        elif isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, (list, tuple)):
            for v in value:
                walk(v)

    walk(skeleton)
    return sorted(found, key=lambda s: s.index)


def _tree(members, rank):
    """(parent or None, children) of `rank` in the binomial tree over `members` rooted at members[0]."""
    n, i = len(members), members.index(rank)
    parent, mask = None, 1
    while mask < n:
        if i & mask:
            parent = members[i - mask]
            break
        mask <<= 1
    children = []
    mask >>= 1
    while mask > 0:
        if i + mask < n:
            children.append(members[i + mask])
        mask >>= 1
    return parent, children


def _transport_device():
    """Where point-to-point messages live: the rank's GPU under NCCL, host memory under gloo."""
    if dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def _pass_on(tensor, parent, children):
    if parent is not None:
        dist.recv(tensor, src=parent)
    for child in children:
        dist.send(tensor, dst=child)


def broadcast(session, state=None, receiving=False):
    """Collective over the new world (its torch.distributed default group and the session): rank 0
    passes its state (a dict), a newcomer receiving=True, every other rank neither. Returns the
    state on rank 0 and on the newcomers (their large tensors on the CPU, or on their GPU where
    rank 0's were on one and the group is NCCL), None elsewhere."""
    flags = np.zeros(session.size, dtype=np.float64)
    flags[session.rank] = 1.0 if receiving else 0.0
    session.allreduce(flags)
    members = [0] + [r for r in range(1, session.size) if flags[r] > 0]
    if session.rank not in members or len(members) == 1:
        return state if session.rank == 0 else None
    parent, children = _tree(members, session.rank)
    device = _transport_device()
    length = torch.zeros(1, dtype=torch.int64, device=device)
    if session.rank == 0:
        skeleton, tensors = split(state)
        data = serialize(skeleton).getvalue()
        length[0] = len(data)
        _pass_on(length, parent, children)
        _pass_on(torch.frombuffer(bytearray(data), dtype=torch.uint8).to(device), parent, children)
        for tensor in tensors:
            message = tensor.to(device).contiguous()
            _pass_on(message, parent, children)
        return state
    _pass_on(length, parent, children)
    data = torch.empty(int(length.item()), dtype=torch.uint8, device=device)
    _pass_on(data, parent, children)
    skeleton = deserialize(data.cpu().numpy().tobytes())
    tensors = []
    for slot in slots(skeleton):
        tensor = torch.empty(slot.shape, dtype=slot.dtype, device=device)
        _pass_on(tensor, parent, children)
        tensors.append(tensor if slot.cuda or device.type == "cpu" else tensor.cpu())
    return join(skeleton, tensors)
