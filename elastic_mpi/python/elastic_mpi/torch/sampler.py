"""ElasticSampler: the standard DataLoader's sampler for an elastic world, in place of
DistributedSampler (elastic() also puts one in place of a DataLoader's DistributedSampler). Every sample of an epoch is trained on exactly once across rescales, and a
rank that joins mid-epoch continues where the world is.

It is a batch sampler: each item is this rank's list of sample indices for one step. The epoch's
order is elastic_mpi.EpochSharder's permutation (from seed and epoch alone, the same on every
rank; the identity with shuffle=False); a global position counts the samples of the epoch the
whole world has trained on. A step takes the next global_batch positions (fewer at the end of the
epoch) and splits them into contiguous slices, one per rank, sizes differing by at most one. The
position moves only when a step is done (Job.batches()), never when the DataLoader reads ahead,
and after a rescale the rest of the epoch is split among the new world. A rank whose slice of a
step is empty (a step of fewer samples than ranks) gets the step's first sample with weight zero
(ddp.py), so that every rank takes part in the step's gradient allreduce.
"""

import math

import torch
from torch.utils.data import Sampler

import elastic_mpi as em


class ElasticSampler(Sampler):
    """ElasticSampler(dataset, num_replicas=None, rank=None, shuffle=True, seed=0, drop_last=False,
    *, batch_size=None): DistributedSampler's arguments, for an elastic world.

    dataset: the data set (or its length). num_replicas and rank are accepted for
    DistributedSampler's callers and not used: the job's world at each step decides. drop_last:
    leave out each epoch's last step when it has fewer samples than the global batch (otherwise
    every sample is trained on exactly once per epoch). batch_size: the initial per-rank batch
    (optional; the DataLoader's batch_size serves, and the session's global batch decides once the
    job runs). Use it as the DataLoader's sampler with a batch size,
    `DataLoader(dataset, batch_size=32, sampler=ElasticSampler(dataset))` (elastic() installs it as
    the loader's batch sampler), or as its batch sampler,
    `DataLoader(dataset, batch_sampler=ElasticSampler(dataset, batch_size=32))`. It yields batches
    once elastic() bound it to the job; set_epoch(), state_dict() and load_state_dict() as torch's
    samplers.
    """

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0, drop_last=False, *,
                 batch_size=None):
        super().__init__(None)
        del num_replicas, rank  # the world at each step decides
        n = dataset if isinstance(dataset, int) else len(dataset)
        if n <= 0:
            raise ValueError("ElasticSampler: the data set is empty")
        if batch_size is not None and int(batch_size) <= 0:
            raise ValueError(f"ElasticSampler: batch_size must be > 0, got {batch_size}")
        if int(seed) < 0:
            raise ValueError(f"ElasticSampler: seed must be >= 0, got {seed}")
        self.num_samples = int(n)
        self.batch_size = None if batch_size is None else int(batch_size)
        self.shuffle = bool(shuffle)
        self.seed = int(seed)
        self.drop_last = bool(drop_last)
        self.epoch = 0      # the current epoch
        self.position = 0   # samples of this epoch the whole world has trained on
        self._reader = em.EpochSharder(self.num_samples, self.seed) if self.shuffle else None
        self._job = None    # set by elastic()

    # --- what a step takes

    def _world(self):
        job = self._job
        if job is None:
            raise RuntimeError("ElasticSampler is iterated before elastic_mpi.torch.elastic(model, optimizer, loader) "
                               "bound it to the job: iterate job.batches() (it needs the world's rank, size and batch)")
        return job.rank, job.world_size, job.global_batch

    def plan(self, epoch, position, rank, world_size, global_batch):
        """(indices, local_count, global_count) of the step at this position of the epoch for rank
        in a world of world_size ranks. local_count is 0 for a weight-zero filler (an empty slice)."""
        count = min(global_batch, self.num_samples - position)
        begin, end = em.EpochSharder.slice_of(count, rank, world_size)
        if end == begin:
            return [self._ids(epoch, position, 1)[0]], 0, count
        return self._ids(epoch, position + begin, end - begin), end - begin, count

    def _ids(self, epoch, start, count):
        if self._reader is None:
            return list(range(start, start + count))
        cursor = self._reader.cursor  # a view of the reader's own cursor
        cursor[0], cursor[1] = epoch, start
        return self._reader.next(count, 0, 1).samples.tolist()

    def __iter__(self):
        # The world and position now (the DataLoader calls this when its iterator is made): the
        # batches of the rest of the epoch for that world. A rescale makes a new iterator.
        rank, size, batch = self._world()
        return self._steps(self.epoch, self.position, rank, size, batch)

    def over(self, position, global_batch):
        """True when the epoch has no step left at this position."""
        left = self.num_samples - position
        return left <= 0 or (self.drop_last and left < global_batch)

    def _steps(self, epoch, position, rank, size, batch):
        while not self.over(position, batch):
            indices, _, count = self.plan(epoch, position, rank, size, batch)
            yield indices
            position += count

    def __len__(self):
        """Steps in an epoch at the current global batch."""
        if self._job is not None:
            batch = self._job.global_batch
        elif self.batch_size is not None:
            batch = self.batch_size
        else:
            raise TypeError("len(ElasticSampler) needs a batch size: pass batch_size or bind it with elastic()")
        return self.num_samples // batch if self.drop_last else math.ceil(self.num_samples / batch)

    # --- progress (Job)

    def advance(self, count):
        """A step of count samples is done."""
        self.position += count
        if self.position >= self.num_samples:
            self.epoch += 1
            self.position = 0

    def finish_epoch(self):
        """Leaves the rest of the current epoch out (the loop over it ended early, or never ran)."""
        self.epoch += 1
        self.position = 0

    def set_epoch(self, epoch):
        """As DistributedSampler.set_epoch: the epoch about to be iterated. Only needed when no
        step of the current epoch is done; a running job's sampler is already in its epoch."""
        epoch = int(epoch)
        if epoch == self.epoch:
            return
        if self.position != 0:
            raise ValueError(
                f"ElasticSampler.set_epoch({epoch}): the sampler is in epoch {self.epoch} at sample "
                f"{self.position} of {self.num_samples} (the state of the running job): take the epoch from "
                f"job.epochs(...) instead of counting epochs yourself")
        self.epoch = epoch

    def state_dict(self):
        return {"epoch": self.epoch, "position": self.position, "num_samples": self.num_samples,
                "seed": self.seed, "shuffle": self.shuffle, "drop_last": self.drop_last}

    def load_state_dict(self, state):
        for key in ("num_samples", "seed", "shuffle", "drop_last"):
            if state[key] != getattr(self, key):
                raise ValueError(f"ElasticSampler.load_state_dict: {key} {state[key]!r} in the state, "
                                 f"{getattr(self, key)!r} here: not the same data set or order")
        self.epoch, self.position = int(state["epoch"]), int(state["position"])


def is_elastic_loader(loader):
    return isinstance(getattr(loader, "batch_sampler", None), ElasticSampler)


def install(loader):
    """The loader's ElasticSampler, installed as its batch sampler: the loader's own when it was
    given as batch_sampler= or as sampler= (with the loader's batch_size and drop_last), or one
    made in place of torch's DistributedSampler (its data set, shuffle and seed; the loader's
    batch_size and drop_last). Refuses loaders that cannot follow the elastic world, saying what
    to write instead."""
    if not isinstance(loader, torch.utils.data.DataLoader):
        raise TypeError(f"elastic(): loader must be a torch.utils.data.DataLoader, got {type(loader).__name__}")
    if isinstance(loader.dataset, torch.utils.data.IterableDataset):
        raise TypeError("elastic(): an IterableDataset cannot be sharded by sample index; use a map-style "
                        "Dataset (__getitem__ and __len__)")
    if is_elastic_loader(loader):
        return loader.batch_sampler
    batches = loader.batch_sampler
    if isinstance(batches, torch.utils.data.BatchSampler):
        if isinstance(loader.sampler, ElasticSampler):
            sampler = loader.sampler
            sampler.drop_last = sampler.drop_last or batches.drop_last
        elif isinstance(loader.sampler, torch.utils.data.distributed.DistributedSampler):
            # Its order and its split among a fixed number of replicas give way to the elastic
            # ones; the script's set_epoch() calls on it stay harmless.
            theirs = loader.sampler
            sampler = ElasticSampler(theirs.dataset, shuffle=theirs.shuffle, seed=theirs.seed,
                                     drop_last=batches.drop_last)
        else:
            sampler = None
        if sampler is not None:
            if sampler.batch_size is None:
                sampler.batch_size = batches.batch_size
            # DataLoader refuses to set batch_sampler after its construction through its own
            # __setattr__; its iterators read it through _index_sampler, as any batch sampler.
            object.__setattr__(loader, "batch_sampler", sampler)
            return sampler
    raise TypeError(
        f"elastic(): the DataLoader's sampler is a {type(loader.sampler).__name__}, neither an "
        f"elastic_mpi.torch.ElasticSampler nor a DistributedSampler: write DataLoader(dataset, batch_size=B, "
        f"sampler=elastic_mpi.torch.ElasticSampler(dataset)) (it takes DistributedSampler's arguments)")
