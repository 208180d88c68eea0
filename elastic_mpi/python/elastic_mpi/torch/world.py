"""The elastic world as torch.distributed sees it: the process's one elastic_mpi session, and after
every change of its world a torch.distributed default process group for the new world.

Rendezvous goes through the session's own world, never through a guessed port or an external
service: the old default group is destroyed, rank 0 opens a TCPStore on a port the kernel picks
(port 0) and broadcasts "host port flags" with the session's byte broadcast (MPI), and every rank
calls torch.distributed.init_process_group(store=..., rank=..., world_size=...) with the
session's rank and size. The host rank 0 advertises is `store_host`, else MASTER_ADDR as the
process found it at start (torchrun's convention: rank 0's node), else its host name.

The session's own collectives go through MPI (backend "mpi"): the GPU work is torch's (NCCL
process group), and a second NCCL communicator per rank would only take GPU memory.
"""

import atexit
import datetime
import os
import socket

import numpy as np
import torch
import torch.distributed as dist

import elastic_mpi as em

# The address message: "host port handover generation" in a fixed-size byte buffer.
_MESSAGE_BYTES = 1024

_world = None  # the process's World (one per process)


def _tcp_store(host, port, size, is_master, timeout, **kwargs):
    """dist.TCPStore with the store server PyTorch has everywhere. PyTorch 2.4 and later ask for
    a libuv-based server by default, which Debian 13's PyTorch 2.6 is built without ("use_libuv was
    requested but PyTorch was build without libuv support"); Debian 12's PyTorch 1.13 has no
    use_libuv argument (TypeError) and only the classic server."""
    try:
        return dist.TCPStore(host, port, size, is_master, timeout, use_libuv=False, **kwargs)
    except TypeError:
        return dist.TCPStore(host, port, size, is_master, timeout, **kwargs)


class World:
    """The process's session and the torch.distributed default group of its current world."""

    def __init__(self, session, backend, timeout, store_host):
        self.session = session
        self.backend = backend
        self.timeout = timeout
        self.store_host = store_host or os.environ.get("MASTER_ADDR") or socket.gethostname()
        self.store = None          # the TCPStore of the current group (kept alive with it)
        self.generation = 0        # process groups made so far
        self.joined_pending = False  # a newcomer whose state hand-over is still to come (elastic())
        self.job = None            # the Job made by elastic(), once there is one

    @property
    def rank(self):
        return self.session.rank

    @property
    def size(self):
        return self.session.size

    def destroy_group(self):
        """Destroys the default process group (local: no collective) and drops its store."""
        if dist.is_initialized():
            dist.destroy_process_group()
        self.store = None

    def rendezvous(self, handover):
        """Collective over the session's world: a new default process group for it. handover (rank
        0's value counts) says whether rank 0 hands its training state to newcomers right after;
        returns rank 0's value."""
        session = self.session
        self.destroy_group()
        rank, size = session.rank, session.size
        message = np.zeros(_MESSAGE_BYTES, dtype=np.uint8)
        if rank == 0:
            self.store = _tcp_store(self.store_host, 0, size, True, self.timeout, wait_for_workers=False)
            text = f"{self.store_host} {self.store.port} {int(bool(handover))} {self.generation + 1}".encode()
            if len(text) >= _MESSAGE_BYTES:
                raise ValueError(f"elastic_mpi.torch: store host name too long: {self.store_host!r}")
            message[:len(text)] = np.frombuffer(text, dtype=np.uint8)
        session.broadcast(message, root=0)
        host, port, flag, generation = bytes(message).rstrip(b"\0").decode().split()
        port, handover, self.generation = int(port), flag == "1", int(generation)
        if rank != 0:
            try:
                self.store = _tcp_store(host, port, size, False, self.timeout)
            except RuntimeError as e:
                raise RuntimeError(
                    f"elastic_mpi.torch: rank {rank} cannot reach the process group's store at {host}:{port}, "
                    f"opened by rank 0 ({e}); set MASTER_ADDR (or init_process_group(store_host=...)) to an "
                    f"address of rank 0's node that every node can reach") from e
        dist.init_process_group(self.backend, store=self.store, rank=rank, world_size=size, timeout=self.timeout)
        _export_environment(rank, size, host, port)
        return handover


def _export_environment(rank, size, host, port):
    """torchrun's variables for code that reads them, kept true for the current world."""
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(size), MASTER_ADDR=host, MASTER_PORT=str(port))
    # The launch-local rank (the rule a rank picks its GPU by) when the launcher did not set one.
    for ours, mpi in (("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK"), ("LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE")):
        if ours not in os.environ and mpi in os.environ:
            os.environ[ours] = os.environ[mpi]


def _default_backend():
    return "nccl" if torch.cuda.is_available() and dist.is_nccl_available() else "gloo"


def current():
    """The process's World, or None before init_process_group()."""
    return _world


def init_process_group(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1, *, batch_size=None,
                       global_batch=None, store_host=None, **session_options):
    """Drop-in for torch.distributed.init_process_group under the elastic runtime (collective).
    init_method, world_size and rank are accepted for torch's callers and not used: the runtime's
    world decides them (and changes them).

    Creates the process's elastic_mpi session (options from ELASTIC_*, keywords override them as in
    elastic_mpi.Session; the session's own collectives use MPI) and the torch.distributed default
    process group of its world: "gloo" or "nccl" (default: "nccl" where torch has CUDA, else
    "gloo"). The initial global batch is batch_size (the per-rank batch of the DataLoader) times
    the initial world size, or global_batch; without either (torch's own call), elastic() takes
    the per-rank batch from the DataLoader it is given. torchrun's RANK, WORLD_SIZE, MASTER_ADDR and
    MASTER_PORT (and LOCAL_RANK, LOCAL_WORLD_SIZE from the launch when unset) are exported and
    follow every rescale.

    A process that joins a running job (a newcomer) is let into the world here; it receives the
    training state in elastic(). Between the two calls the script must make no collective call
    (the running ranks wait for the newcomer in the state hand-over meanwhile).
    """
    global _world
    del init_method, world_size, rank  # the runtime's world decides
    if _world is not None:
        raise RuntimeError("elastic_mpi.torch.init_process_group() was already called in this process")
    if dist.is_initialized():
        raise RuntimeError("a torch.distributed process group exists already: call elastic_mpi.torch."
                           "init_process_group() instead of torch.distributed.init_process_group(), not after it")
    if timeout is None:
        timeout = datetime.timedelta(seconds=300)
    elif not isinstance(timeout, datetime.timedelta):
        timeout = datetime.timedelta(seconds=float(timeout))
    backend = str(backend) if backend is not None else _default_backend()
    if backend not in ("gloo", "nccl"):
        raise ValueError(f"elastic_mpi.torch: backend {backend!r}: 'gloo' (CPU tensors) or 'nccl' (CUDA tensors)")
    if backend == "nccl" and not (torch.cuda.is_available() and dist.is_nccl_available()):
        raise ValueError("elastic_mpi.torch: backend 'nccl' needs torch with CUDA and NCCL and a GPU; "
                         "use 'gloo' for CPU training")
    session_options.setdefault("backend", "mpi")
    if global_batch is None and batch_size is not None:
        session_options["local_batch"] = int(batch_size)
    elif global_batch is None:
        session_options["defer_batch"] = True  # elastic() gives the DataLoader's batch size
    session = em.Session(global_batch=global_batch, **session_options)
    _world = World(session, backend, timeout, store_host)
    session.begin()
    if session.newcomer:
        # The running ranks are inside the rescale point that let this process in: its first
        # rescale point is that one (it returns at once), and what follows it is theirs too.
        session.rescale_point()
        _world.joined_pending = _world.rendezvous(handover=True)
    else:
        _world.rendezvous(handover=False)
    return None


def close():
    """Destroys the process group and closes the session (at exit, or when this rank's group left)."""
    global _world
    world = _world
    if world is None:
        return
    world.destroy_group()
    world.session.close()
    _world = None


# Before the compiled module's own exit handler (registered earlier, so run later) closes the
# session and finalises MPI.
atexit.register(close)
