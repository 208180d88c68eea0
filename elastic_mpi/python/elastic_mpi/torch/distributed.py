"""elastic_mpi.torch.distributed: torch.distributed for a DDP script made elastic, one import away.

    import elastic_mpi.torch.distributed as dist     # was: import torch.distributed as dist

Every name is torch.distributed's (all_reduce, barrier, get_rank, get_world_size, ReduceOp, ...),
acting on the default process group of the current elastic world, except two:

* init_process_group(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1, *,
  batch_size=None, ...) is elastic_mpi.torch.init_process_group: the process's elastic session and
  the default group of its world. torch's call, `dist.init_process_group("gloo")`, stays as it
  is: without a batch size, elastic() takes the per-rank batch from the job's DataLoader.
* destroy_process_group(group=None): without a group it ends the elastic job (its torch DDP, the
  default group, the session), as torch's ends the default group; a group the script made itself
  (new_group) is torch's to destroy.
"""

import torch.distributed as _torch_dist
from torch.distributed import *  # noqa: F401,F403  (torch's names; the two below replace theirs)

from .world import close as _close
from .world import current as _current
from .world import init_process_group  # noqa: F401


def destroy_process_group(group=None):
    """Without a group: ends the elastic job (its DDP, the default group, the session). With one:
    torch's destroy_process_group(group)."""
    world = _current()
    if group is None and world is not None:
        if world.job is not None:
            world.job.close()
        else:
            _close()
        return
    _torch_dist.destroy_process_group(group)


def __getattr__(name):
    # What `import *` left out (names torch does not export): torch.distributed's own.
    return getattr(_torch_dist, name)
