"""The training program of bench.torch_rescale_pause (bench_torch_rescale.py runs it under mpirun
with a standalone schedule that grows by one spawned group and shrinks back, several times).

The same model, optimizer and step on either path, 100 MB of training state: two
Linear(2048, 2048) layers (8.4 M float32 parameters, 33.6 MB) trained with Adam (its two moments
another 67.1 MB), a per-rank batch of random inputs regressed on random targets.

--path mpi: the session API. Parameters, Adam's state (created before begin()) and the step
  counter are registered; the runtime hands them to newcomers in begin(); every gradient is
  averaged with session.allreduce (MPI), in place.
--path torch: elastic_mpi.torch. init_process_group (gloo), DistributedDataParallel, a DataLoader
  with torch's DistributedSampler, elastic() (which hands the state to newcomers after a grow and
  makes the process group and DDP anew after every change).

Every rank appends one line per step to DIR/steps.<pid>: "step size t_start t_end" (wall clock:
t_start when the step's batch is in hand, after the rescale point; t_end after the optimizer's
step). Rank 0 appends one JSON line per rescale to DIR/rescales.<pid> (what, the runtime's pause_s
and phases; on the torch path also elastic_mpi.torch's own phases).

usage: bench_rescale_program.py --path mpi|torch --dir DIR --steps N
"""

import argparse
import json
import os
import sys
import time

import numpy as np
import torch
from torch import nn

WIDTH = 2048
BATCH = 8        # per rank at the start (the global batch: BATCH x the initial world size)
SAMPLES = 4096   # one epoch is longer than any run


def parse_args(argv):
    p = argparse.ArgumentParser()
    p.add_argument("--path", choices=["mpi", "torch"], required=True)
    p.add_argument("--dir", required=True)
    p.add_argument("--steps", type=int, required=True)
    return p.parse_args(argv)


def make_model():
    torch.manual_seed(1)
    return nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.ReLU(), nn.Linear(WIDTH, WIDTH))


def make_data():
    g = torch.Generator().manual_seed(2)
    return torch.randn(SAMPLES, WIDTH, generator=g), torch.randn(SAMPLES, WIDTH, generator=g)


class Log:
    def __init__(self, directory):
        self.steps = open(os.path.join(directory, f"steps.{os.getpid()}"), "a")
        self.rescales = open(os.path.join(directory, f"rescales.{os.getpid()}"), "a")

    def step(self, step, size, start, end):
        self.steps.write(f"{step} {size} {start:.6f} {end:.6f}\n")

    def rescale(self, record):
        self.rescales.write(json.dumps(record) + "\n")

    def close(self):
        self.steps.close()
        self.rescales.close()


def run_mpi(args, log):
    import elastic_mpi as em

    x, y = make_data()
    session = em.Session(local_batch=BATCH)
    model = make_model()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    for p in model.parameters():  # Adam's state as its first step makes it, now: to register it
        opt.state[p] = {"step": torch.tensor(0.0), "exp_avg": torch.zeros_like(p), "exp_avg_sq": torch.zeros_like(p)}
    steps_done = np.zeros(1, dtype=np.uint64)
    for name, p in model.named_parameters():
        session.register("param." + name, p)
    for i, p in enumerate(model.parameters()):
        for key in sorted(opt.state[p]):
            session.register(f"opt.{i}.{key}", opt.state[p][key])
    session.register("steps_done", steps_done)
    sharder = em.EpochSharder(SAMPLES, 3)
    session.register("data_cursor", sharder.cursor)
    session.begin()
    loss_fn = nn.MSELoss(reduction="sum")
    params = list(model.parameters())
    while int(steps_done[0]) < args.steps:
        if session.rescale_point():
            if session.should_stop:
                break
            if session.rank == 0:
                r = session.last_rescale
                log.rescale({"step": int(steps_done[0]), "what": r["what"], "size": session.size,
                             "pause_s": r["pause_s"], "phases": r.get("phases")})
        start = time.time()
        shard = sharder.next(session.global_batch, session.rank, session.size)
        idx = torch.from_numpy(shard.samples.astype(np.int64))
        opt.zero_grad(set_to_none=False)
        if len(idx) > 0:
            loss_fn(model(x[idx]), y[idx]).backward()
        for p in params:
            session.allreduce(p.grad)
            p.grad.div_(shard.global_count)
        opt.step()
        log.step(int(steps_done[0]), session.size, start, time.time())
        steps_done += 1
        session.report_step(time.time() - start, shard.global_count)
    session.close()


def run_torch(args, log):
    import torch.distributed as dist  # noqa: F401 (the script's usual import)
    from torch.utils.data import DataLoader, TensorDataset
    from torch.utils.data.distributed import DistributedSampler

    import elastic_mpi.torch as elastic

    x, y = make_data()
    elastic.init_process_group("gloo", batch_size=BATCH)
    model = elastic.DistributedDataParallel(make_model())
    dataset = TensorDataset(x, y)
    loader = DataLoader(dataset, batch_size=BATCH, sampler=DistributedSampler(dataset, seed=3))
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    job = elastic.elastic(model, opt, loader, observe_gradients=False)
    loss_fn = nn.MSELoss()
    seen = None
    for _ in job.epochs(1):
        for xb, yb in job.batches():
            start = time.time()
            if job.rank == 0 and job.last_rescale is not None and job.last_rescale is not seen:
                seen = job.last_rescale
                r = job.session.last_rescale
                log.rescale({"step": job.step, "what": r["what"], "size": job.world_size,
                             "pause_s": r["pause_s"], "phases": r.get("phases"), "torch_phases": seen})
            opt.zero_grad(set_to_none=False)
            loss_fn(model(xb), yb).backward()
            opt.step()
            log.step(job.step, job.world_size, start, time.time())
            if job.step + 1 >= args.steps:
                break
        break
    job.close()


def main(argv):
    args = parse_args(argv)
    torch.set_num_threads(1)
    log = Log(args.dir)
    try:
        (run_mpi if args.path == "mpi" else run_torch)(args, log)
    finally:
        log.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
