"""Hand-over of the training state from rank 0 (always a rank that was there before the rescale:
the base group never leaves) to the ranks that joined, through torch's own state_dicts.

The state is one dict (Job.state_dict()): the model's, optimizer's, LR scheduler's and
GradScaler's state_dicts, the sampler's position, the step counter and the applied learning-rate
factor, the random generators (torch's CPU generator, the CUDA generator of the model's device,
NumPy's and Python's global ones) and the user's extras. Rank 0 serializes it with torch.save
into memory (CUDA tensors are written from the device, nothing is staged by hand) and broadcasts
its length, then its bytes, with the session's byte broadcast (MPI, host memory). The newcomers
load it with torch.load(map_location="cpu") and each part's load_state_dict, which puts the
tensors where the newcomer's model and optimizer are (CPU or its GPU). Every rank takes part in
the broadcast (it is the world's collective); the ranks that were there already discard it.
"""

import io
import random

import numpy as np
import torch

FORMAT = 1


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


def broadcast(session, state=None):
    """Collective: rank 0 passes its state (a dict), every other rank None. Returns the state on
    rank 0 and its serialized bytes (a NumPy uint8 array) elsewhere: deserialize() them where they
    are needed (on the newcomers)."""
    length = np.zeros(1, dtype=np.uint64)
    buffer = None
    if session.rank == 0:
        buffer = serialize(state)
        length[0] = buffer.getbuffer().nbytes
    session.broadcast(length, root=0)
    if session.rank == 0:
        view = buffer.getbuffer()
        try:
            session.broadcast(view, root=0)
        finally:
            view.release()
        return state
    data = np.empty(int(length[0]), dtype=np.uint8)
    session.broadcast(data, root=0)
    return data
