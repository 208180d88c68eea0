"""Elastic data-parallel training on the elastic_mpi runtime: sessions that grow and shrink at
step boundaries, state hand-over without copies, exactly-once sharding, learning-rate rules.

The package re-exports its compiled module (elastic_mpi._core) as it is, so `import elastic_mpi`
gives the runtime's Python API (Session, EpochSharder, ...). `import elastic_mpi.torch` adds the
torch.distributed path (process groups, DistributedDataParallel and a DataLoader sampler that
follow the elastic world); it imports torch, which this package itself never does.
docs/user-guide.md, "Python and PyTorch", is the manual.
"""

from ._core import *  # noqa: F401,F403  (the whole compiled API, under its own names)
