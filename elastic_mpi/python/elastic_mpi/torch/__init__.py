"""elastic_mpi.torch: elastic training that keeps torch.distributed, DistributedDataParallel and
the standard DataLoader. A DDP script becomes elastic by swapping a few names:

    import elastic_mpi.torch as elastic

    elastic.init_process_group("gloo", batch_size=B)    # was dist.init_process_group("gloo")
    model = elastic.DistributedDataParallel(model)      # was DistributedDataParallel(model)
    loader = DataLoader(dataset, batch_size=B, sampler=DistributedSampler(dataset))  # unchanged
    optimizer = ...; scheduler = ...                    # unchanged
    job = elastic.elastic(model, optimizer, loader, scheduler)
    for epoch in job.epochs(start_epoch, epochs):       # was range(start_epoch, epochs)
        for x, y in job.batches():                      # was loader
            ...                                          # unchanged: forward, loss, backward, step
        scheduler.step()

The world grows and shrinks between steps without restarting anyone: after every rescale the
script has a torch.distributed default group for the new world (gloo or NCCL, rendezvoused
through the runtime's own world), its model a DistributedDataParallel for it, newcomers the
model, optimizer, scheduler, GradScaler, RNG and counter state of rank 0, the DataLoader the rest
of the epoch split over the new world (every sample once per epoch), and the optimizer the
learning rate of the job's rule. docs/user-guide.md ("The torch.distributed path") is the manual.
"""

from .ddp import DistributedDataParallel
from .job import Job, elastic
from .sampler import ElasticSampler
from .world import close, current, init_process_group


def session():
    """The process's elastic_mpi.Session (after init_process_group() or elastic()), or None."""
    world = current()
    return world.session if world is not None else None


__all__ = ["DistributedDataParallel", "ElasticSampler", "Job", "close", "elastic", "init_process_group", "session"]
