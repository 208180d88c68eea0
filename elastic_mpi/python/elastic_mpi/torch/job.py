"""The elastic training job of a torch script: elastic() and the Job it returns.

    job = elastic(model, optimizer, loader, scheduler)
    for epoch in job.epochs(start_epoch, epochs):   # a newcomer starts in the epoch it joined in
        for x, y in job.batches():                  # this epoch's steps
            ...                                      # the usual DDP step on the model
        scheduler.step()

Rescale points (step boundaries) are in elastic() (before the first step), between two steps of
batches() (when the script asks for the next batch) and between two epochs of epochs() (after the
script's end-of-epoch code), nowhere else: what the script does at the top of an epoch runs again
on a rank that joins mid-epoch, so it must make no collective call. At a boundary the gradient statistics of the step before go to the
runtime, its time is reported, and the session's rescale point runs (collective). When it changed
the world: the old process group is destroyed and a new one made through the session (world.py),
rank 0 hands its state to the ranks that joined (handover.py), the model gets a
DistributedDataParallel for the new group (ddp.py), the DataLoader is read anew from the
sampler's position for the new world (sampler.py), and the learning rates follow the job's rule
(learning_rate.py). A rank whose group left the job ends there: the session is closed and
SystemExit(0) is raised (finally blocks and with statements run). A newcomer does the same steps
in init_process_group() and elastic(), then enters the script's loops where the running ranks
are: at the top of the epoch they are in, whose next step is theirs.

A step counts as done when the script asks for the next batch or leaves the loop: the sampler's
position moves past the step's samples then, never when the DataLoader reads ahead.

With ELASTIC_SAMPLE_LOG set to a directory, every process appends one line per step done to
DIR/samples.<host>.<pid>: "<epoch> <job step> <world size> <sample id>..." (the data set indices
of its slice; none for a weight-zero filler), an audit trail of what each rank trained on.
"""

import os
import socket
import sys
import time

import torch

from . import handover
from . import learning_rate
from . import relaunch
from . import sampler as sampler_mod
from . import world as world_mod
from .ddp import DistributedDataParallel


class Job:
    """What elastic() returns: the job's world, model, state and loops."""

    def __init__(self, world, model, optimizer, loader, scheduler, scaler, extras, observe_gradients):
        self._world = world
        self.session = world.session
        self.model = model
        self.optimizer = optimizer
        self.scheduler = scheduler
        self.scaler = scaler
        self.loader = loader
        self.extras = extras
        self.sampler = sampler_mod.install(loader)
        self.sampler._job = self
        params = list(model.module.parameters())
        self.device = params[0].device if params else torch.device("cpu")
        self.step = 0                 # steps done by the job (handed over)
        self._lr_applied = 1.0        # the rule's factor the learning rates hold now (handed over)
        self._iterator = None         # the DataLoader's iterator and the step it gives next
        self._iterator_next = None
        self._step = None             # (start time, global count, local count, grad scale) of the step
        self._done = None             # (seconds, global count, local count, grad scale) of the last one
        self._closed = False
        self._step_ids = None         # (epoch, world size, indices) of the current step, for the log
        self._sample_log = _open_sample_log()
        self.last_rescale = None      # the phases of the last change of the world (_after_change)
        model.hook_state.observe = bool(observe_gradients)
        joined = world.joined_pending
        if joined:
            world.joined_pending = False
            self._receive_state()
        elif self.session.relaunched:
            # A world started again after a relaunch: the state the world before it left.
            relaunch.take(self)
        # A newcomer (and every rank of a relaunched world) holds rank 0's state now, as the
        # running ranks do: no start-up broadcast.
        model.rewrap(sync=not (joined or self.session.relaunched))
        self._apply_learning_rate()
        if not joined:
            # The rescale point before the first step (one before each step, as in the runtime's
            # other APIs); a newcomer joined at one.
            self._boundary()

    # --- the world

    @property
    def rank(self):
        return self.session.rank

    @property
    def world_size(self):
        return self.session.size

    @property
    def global_batch(self):
        return self.session.global_batch

    @property
    def local_batch(self):
        """This rank's share of the global batch."""
        return self.session.local_batch

    @property
    def lr_factor(self):
        """The factor of the job's learning-rate rule the learning rates hold."""
        return self._lr_applied

    @property
    def newcomer(self):
        """True on a rank that joined the running job (and received its state)."""
        return self.session.newcomer

    @property
    def epoch(self):
        return self.sampler.epoch

    @property
    def local_count(self):
        """Samples of the current step's batch on this rank that count (0: a weight-zero filler,
        in a step of fewer samples than ranks); None outside a step."""
        return self._step[2] if self._step is not None else None

    @property
    def step_samples(self):
        """Samples of the current step over all ranks; None outside a step."""
        return self._step[1] if self._step is not None else None

    # --- loops

    def epochs(self, *bounds):
        """epochs(stop) or epochs(start, stop), as range(): the epochs to train, from the one the
        job is in. start counts only while the job has taken no step (a fresh start, e.g. from the
        script's own snapshot; the ranks that joined before the first step as well); a newcomer
        starts in the epoch it joined in. Between two epochs
        (after the script's end-of-epoch code) is a rescale point. An epoch left before its end
        (a break out of batches()) is not resumed."""
        if len(bounds) == 1:
            start, stop = 0, int(bounds[0])
        elif len(bounds) == 2:
            start, stop = int(bounds[0]), int(bounds[1])
        else:
            raise TypeError("epochs(stop) or epochs(start, stop)")
        if self.step == 0 and self.sampler.position == 0 and self.sampler.epoch < start:
            self.sampler.set_epoch(start)
        while self.sampler.epoch < stop:
            epoch = self.sampler.epoch
            yield epoch
            if self.sampler.epoch == epoch:
                self.sampler.finish_epoch()
            if self.sampler.epoch < stop:
                self._boundary()

    def batches(self):
        """The remaining batches of the current epoch from the job's DataLoader, one per step, with
        a rescale point between two steps. A step counts as done when the next batch is asked for
        or the loop is left."""
        self._check_open()
        epoch = self.sampler.epoch
        while True:
            if self.sampler.over(self.sampler.position, self.global_batch):  # drop_last's short step
                self.sampler.finish_epoch()
                return
            batch = self._next_batch()
            try:
                yield batch
            except GeneratorExit:
                self._finish_step()
                raise
            self._finish_step()
            if self.sampler.epoch != epoch:
                return
            self._boundary()

    # --- state

    def state_dict(self):
        """The whole training state (what a newcomer receives; torch.save it for a snapshot)."""
        extras = {k: (v.state_dict() if hasattr(v, "state_dict") else v) for k, v in self.extras.items()}
        return {
            "format": handover.FORMAT,
            "model": self.model.module.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict() if self.scheduler is not None else None,
            "scaler": self.scaler.state_dict() if self.scaler is not None else None,
            "sampler": self.sampler.state_dict(),
            "step": self.step,
            "lr_factor": self._lr_applied,
            "rng": handover.rng_state(self.device),
            "extras": extras,
        }

    def load_state_dict(self, state, rng=True):
        """Loads what state_dict() gave (a newcomer's hand-over, or a snapshot on every rank)."""
        if state.get("format") != handover.FORMAT:
            raise ValueError(f"Job.load_state_dict: state format {state.get('format')!r}, this version reads "
                             f"{handover.FORMAT}")
        for part, have in (("scheduler", self.scheduler), ("scaler", self.scaler)):
            if (state[part] is None) != (have is None):
                raise ValueError(f"Job.load_state_dict: the state {'has' if state[part] is not None else 'has no'} "
                                 f"{part} but this job {'has none' if have is None else 'has one'}")
        self.model.module.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        if self.scheduler is not None:
            self.scheduler.load_state_dict(state["scheduler"])
        if self.scaler is not None:
            self.scaler.load_state_dict(state["scaler"])
        self.sampler.load_state_dict(state["sampler"])
        self.step = int(state["step"])
        self._lr_applied = float(state["lr_factor"])
        if rng:
            handover.set_rng_state(state["rng"], self.device)
        for key, value in state["extras"].items():
            current = self.extras.get(key)
            if hasattr(current, "load_state_dict"):
                current.load_state_dict(value)
            else:
                self.extras[key] = value

    # --- life cycle

    def close(self):
        """Destroys the process group and closes the session (also at exit)."""
        if not self._closed:
            self._closed = True
            self._iterator = None
            # No torch DDP may outlive its process group (with gloo, torch 1.13 can hang at exit).
            self.model.release()
            if self._sample_log is not None:
                self._sample_log.close()
                self._sample_log = None
            world_mod.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _check_open(self):
        if self._closed:
            raise RuntimeError("the elastic job is closed")

    # --- the step protocol

    def _boundary(self):
        """A rescale point (collective), with what belongs before it."""
        if self._done is not None:
            seconds, count, local, scale = self._done
            self._done = None
            self._observe(local, scale)
            self.session.report_step(seconds, count)
        started = time.perf_counter()
        if self.session.rescale_point():
            self._after_change(started)
        else:
            self._apply_learning_rate()  # adascale: the factor follows the statistics

    def _observe(self, local_count, scale):
        """Collective when observing: the last step's squared gradient norms to the runtime."""
        if not self.model.hook_state.observe:
            return
        norms = self.model.hook_state.take_norms()
        if norms is None:
            return  # no backward in that step (on every rank alike: DDP's allreduce is collective)
        local_sqr, global_sqr = (v / (scale * scale) for v in norms)
        if global_sqr == global_sqr and global_sqr != float("inf"):  # the same on every rank
            self.session.observe_gradient_norms(local_sqr, local_count, global_sqr)

    def _after_change(self, started):
        session = self.session
        if session.should_stop:
            if relaunch.stopped_for_relaunch(session):
                relaunch.hand_over(self)  # rank 0: the state for the world started after this one
                self._leave("the world stops for a relaunch")
            self._leave()
        what = session.last_rescale["what"]
        clock = [time.perf_counter()]
        phases = {"what": what, "session_s": clock[0] - started}

        def phase(name):
            now = time.perf_counter()
            phases[name] = now - clock[0]
            clock[0] = now

        if what in ("grow", "join", "shrink"):
            sent = self._world.rendezvous(handover=what in ("grow", "join"))
            phase("rendezvous_s")
            if sent:
                handover.broadcast(session, self.state_dict() if self.rank == 0 else None)
            phase("handover_s")
            self.model.rewrap(sync=False)  # every rank holds rank 0's parameters already
            phase("rewrap_s")
        self._apply_learning_rate()
        phases["pause_s"] = time.perf_counter() - started
        self.last_rescale = phases

    def _receive_state(self):
        self.load_state_dict(handover.broadcast(self.session, None, receiving=True))

    def _leave(self, why=None):
        session = self.session
        if why is None:
            why = "its group left the job" if session.left else "the job is stopping"
        print(f"elastic_mpi.torch: rank {session.rank} stops at step {self.step}: {why}", file=sys.stderr, flush=True)
        self.close()
        raise SystemExit(0)

    def _apply_learning_rate(self):
        factor = self.session.lr_factor
        if factor != self._lr_applied:
            learning_rate.rescale(self.optimizer, self.scheduler, factor / self._lr_applied)
            self._lr_applied = factor

    def _next_batch(self):
        s = self.sampler
        here = (s.epoch, s.position, self.rank, self.world_size, self.global_batch)
        if self._iterator is None or self._iterator_next != here:
            self._iterator = None  # its workers end with it
            self._iterator = iter(self.loader)
        batch = next(self._iterator)
        indices, local, count = s.plan(*here)
        if self._sample_log is not None:
            self._step_ids = (s.epoch, self.world_size, indices if local > 0 else [])
        self.model.hook_state.weight = local / count
        scale = 1.0
        if self.model.hook_state.observe and self.scaler is not None and self.scaler.is_enabled():
            scale = float(self.scaler.get_scale())
        self._step = (time.perf_counter(), count, local, scale)
        return batch

    def _finish_step(self):
        if self._step is None:
            return
        start, count, local, scale = self._step
        self._step = None
        if self._sample_log is not None:
            epoch, size, indices = self._step_ids
            self._sample_log.write(f"{epoch} {self.step} {size}" + "".join(f" {int(i)}" for i in indices) + "\n")
        self.sampler.advance(count)
        self.step += 1
        self._done = (time.perf_counter() - start, count, local, scale)
        s = self.sampler
        if s.position == 0:
            self._iterator = None  # the epoch is over: its iterator is spent
        self._iterator_next = (s.epoch, s.position, self.rank, self.world_size, self.global_batch)


def _open_sample_log():
    """This process's file of ELASTIC_SAMPLE_LOG (line-buffered, appended to), or None."""
    directory = os.environ.get("ELASTIC_SAMPLE_LOG")
    if not directory:
        return None
    path = os.path.join(directory, f"samples.{socket.gethostname()}.{os.getpid()}")
    try:
        os.makedirs(directory, exist_ok=True)
        return open(path, "a", buffering=1)
    except OSError as e:
        raise RuntimeError(f"elastic_mpi.torch: ELASTIC_SAMPLE_LOG: cannot write {path} ({e}); set it to a "
                           f"directory every rank can write, or unset it") from e


def _loader_batch(loader):
    """The per-rank batch of the job's DataLoader (its ElasticSampler's, else the loader's)."""
    elastic_sampler = sampler_mod.install(loader)
    batch = elastic_sampler.batch_size or loader.batch_size
    if not batch:
        raise ValueError("elastic(): no batch size: give ElasticSampler(dataset, batch_size=B), or call "
                         "elastic_mpi.torch.init_process_group(batch_size=B) first")
    return int(batch)


def elastic(model, optimizer, loader, scheduler=None, *, scaler=None, extras=None, observe_gradients=True,
            **ddp_options):
    """The elastic job of this process (collective): elastic(model, optimizer, loader, scheduler=None,
    scaler=None, extras=None, observe_gradients=True, **ddp_options) -> Job.

    model: the module (on its device), or an elastic_mpi.torch.DistributedDataParallel of it;
    ddp_options go to torch's DistributedDataParallel (device_ids=[d] is the default for a model on
    cuda:d). optimizer, scheduler (any torch LR scheduler) and scaler (torch.cuda.amp.GradScaler)
    are handed to newcomers through their state_dicts, with the RNG states, the step and epoch
    counters and extras (a dict: values with state_dict()/load_state_dict() go through those,
    others by value). loader: a DataLoader with torch's DistributedSampler (an ElasticSampler takes
    its place) or an ElasticSampler (as sampler= or batch_sampler=).
    observe_gradients: feed the runtime's gradient-noise statistics (adascale, elasticd) from the
    DDP hook.

    Without init_process_group() before, it is called here (batch_size: the sampler's, else the
    loader's; backend: "nccl" for a model on CUDA, else "gloo"); after an init_process_group()
    without a batch size, the initial global batch is that batch size x the initial world size.
    """
    if extras is None:
        extras = {}
    if not isinstance(extras, dict):
        raise TypeError(f"elastic(): extras must be a dict, got {type(extras).__name__}")
    if isinstance(model, torch.nn.parallel.DistributedDataParallel):
        raise TypeError("elastic(): pass the module or an elastic_mpi.torch.DistributedDataParallel of it, not a torch "
                        "DistributedDataParallel (it is bound to one process group)")
    if isinstance(model, DistributedDataParallel):
        if ddp_options:
            raise TypeError("elastic(): DistributedDataParallel options go to elastic_mpi.torch."
                            "DistributedDataParallel(...) when the model is one already")
        proxy = model
    else:
        params = list(model.parameters())
        if params and params[0].device.type == "cuda" and "device_ids" not in ddp_options:
            ddp_options["device_ids"] = [params[0].device.index]
        proxy = DistributedDataParallel(model, **ddp_options)
    if world_mod.current() is None:
        batch = _loader_batch(loader)
        on_cuda = any(p.device.type == "cuda" for p in proxy.module.parameters())
        world_mod.init_process_group("nccl" if on_cuda else "gloo", batch_size=batch)
    world = world_mod.current()
    if world.job is not None:
        raise RuntimeError("elastic_mpi.torch.elastic() was already called in this process")
    if world.session.global_batch == 0:
        # init_process_group() had no batch size: the DataLoader's, over the initial world (on
        # every rank of the base job alike; a newcomer has the running world's batch).
        world.session.set_initial_local_batch(_loader_batch(loader))
    world.job = Job(world, proxy, optimizer, loader, scheduler, scaler, extras, observe_gradients)
    return world.job
