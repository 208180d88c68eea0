"""A small DDP training script on elastic_mpi.torch, run by run_torch_ddp_rescale.py (mpi label)
and run_gpu_test.sh (gpu label) under mpirun with a standalone schedule: an MLP on a generated
classification set, SGD with momentum, a StepLR scheduler, DistributedDataParallel on the
job's process group, the DataLoader with torch's DistributedSampler (taken over by elastic()).

Checks on every rank at every step (exit 3 when one fails, after the step's collectives):
* every rank's parameters, momentum buffers, scheduler epoch, learning rate, step and epoch
  counters and extras (a list, and a table large enough to travel as its own message) equal
  rank 0's (max == min over the world, through the torch group);
* the ranks' sample counts add up to the step's global count, and their batches are their counts
  (or one weight-zero filler).
Every rank appends the (epoch, sample id) pairs it trained on to IDS_DIR/ids.<pid>; rank 0 writes
the result (final full-data-set loss, parameters, sizes, batches and learning rates per step).

usage: torch_ddp_program.py --out FILE --ids-dir DIR [--device cpu|cuda] [--amp] [--workers N] [...]
"""

import argparse
import json
import os
import sys
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

import elastic_mpi.torch as elastic
from elastic_mpi.torch import handover

EXIT_CHECK_FAILED = 3


def parse_args(argv):
    p = argparse.ArgumentParser()
    p.add_argument("--samples", type=int, default=600)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch", type=int, default=16, help="initial per-rank batch")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--workers", type=int, default=0, help="DataLoader worker processes")
    p.add_argument("--amp", action="store_true", help="CUDA: autocast and a GradScaler (handed over too)")
    p.add_argument("--out")
    p.add_argument("--ids-dir")
    p.add_argument("--sleep-ms", type=float, default=0, help="a pause after each step (a slower job to change)")
    p.add_argument("--break-relaunch-state", action="store_true",
                   help="rank 0 of a world that stops for a relaunch overwrites the torch state it handed over "
                        "(RUN_DIR/relaunch.torch) with bytes torch cannot read, as a damaged file would be")
    return p.parse_args(argv)


def make_data(args):
    """Gaussian inputs labelled by a random teacher network; identical on every rank."""
    g = torch.Generator().manual_seed(args.seed)
    x = torch.randn(args.samples, 10, generator=g)
    teacher = torch.randn(10, 3, generator=g)
    y = (x @ teacher + 0.5 * torch.randn(args.samples, 3, generator=g)).argmax(dim=1)
    return x, y


def fingerprint(model, optimizer, scheduler, job, extras, device):
    values = []
    for p in model.module.parameters():
        d = p.detach().double()
        values += [d.sum(), d.abs().sum()]
    for p in model.module.parameters():
        buf = optimizer.state.get(p, {}).get("momentum_buffer")
        values.append(buf.detach().double().abs().sum() if buf is not None else torch.tensor(0.0, dtype=torch.float64))
    table = extras["table"]
    values.append((table * torch.arange(1, len(table) + 1, dtype=table.dtype)).sum())
    scalars = [scheduler.last_epoch, optimizer.param_groups[0]["lr"], job.step, job.epoch, len(extras["epoch_loss"])]
    values += [torch.tensor(float(v), dtype=torch.float64) for v in scalars]
    return torch.stack([v.to(device) for v in values])


def agree(vector):
    """True when every rank holds the same vector."""
    high, low = vector.clone(), vector.clone()
    dist.all_reduce(high, op=dist.ReduceOp.MAX)
    dist.all_reduce(low, op=dist.ReduceOp.MIN)
    return bool(torch.equal(high, low))


def main(argv):
    args = parse_args(argv)
    torch.set_num_threads(1)
    if args.device == "cuda":
        torch.cuda.set_device(int(os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK", "0")))
    elastic.init_process_group("nccl" if args.device == "cuda" else "gloo", batch_size=args.batch)
    device = torch.device("cuda", torch.cuda.current_device()) if args.device == "cuda" else torch.device("cpu")

    x, y = make_data(args)
    dataset = TensorDataset(x, y, torch.arange(args.samples))
    torch.manual_seed(args.seed)
    model = nn.Sequential(nn.Linear(10, 32), nn.Tanh(), nn.Linear(32, 3)).to(device)
    model = elastic.DistributedDataParallel(model)
    # torch's DistributedSampler, as a DDP script has it: elastic() samples elastically in its place.
    loader = DataLoader(dataset, batch_size=args.batch, sampler=DistributedSampler(dataset, seed=args.seed),
                        num_workers=args.workers)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.8)
    # A table above the hand-over's LARGE_BYTES (160 KB): newcomers get it as its own message.
    extras = {"epoch_loss": [], "table": torch.zeros(20000, dtype=torch.float64)}
    scaler = torch.cuda.amp.GradScaler() if args.amp else None
    job = elastic.elastic(model, optimizer, loader, scheduler, scaler=scaler, extras=extras)
    loss_fn = nn.CrossEntropyLoss()

    problems = []
    steps = []  # rank 0: [world size, global batch, lr factor, lr, epoch] per step
    ids = open(os.path.join(args.ids_dir, f"ids.{os.getpid()}"), "a") if args.ids_dir else None
    first_rank = job.rank == 0  # (the session is closed once the job stops)
    try:
        for epoch in job.epochs(args.epochs):
            total = torch.zeros(2, dtype=torch.float64, device=device)
            for xb, yb, ib in job.batches():
                xb, yb = xb.to(device), yb.to(device)
                extras["table"][job.step % len(extras["table"])] += 1.0 + job.step
                optimizer.zero_grad()
                if scaler is not None:
                    with torch.autocast("cuda"):
                        loss = loss_fn(model(xb), yb)
                    scaler.scale(loss).backward()
                    scaler.step(optimizer)
                    scaler.update()
                else:
                    loss = loss_fn(model(xb), yb)
                    loss.backward()
                    optimizer.step()
                local = job.local_count
                if local:
                    total += torch.tensor([loss.item() * local, local], dtype=torch.float64, device=device)
                    if ids is not None:
                        ids.write("".join(f"{epoch} {int(i)}\n" for i in ib))
                elif len(ib) != 1:
                    problems.append(f"a filler batch of {len(ib)} samples")
                if local and len(ib) != local:
                    problems.append(f"batch of {len(ib)} samples but a count of {local}")
                counts = torch.tensor([float(local)], dtype=torch.float64, device=device)
                dist.all_reduce(counts)
                if int(counts.item()) != job.step_samples:
                    problems.append(f"ranks' counts add up to {int(counts.item())}, the step has {job.step_samples}")
                if not agree(fingerprint(model, optimizer, scheduler, job, extras, device)):
                    problems.append(f"state differs between ranks after step {job.step}")
                if job.rank == 0:
                    steps.append([job.world_size, job.global_batch, job.lr_factor, optimizer.param_groups[0]["lr"],
                                  epoch])
                if args.sleep_ms:
                    time.sleep(args.sleep_ms / 1000)
            dist.all_reduce(total)
            extras["epoch_loss"].append(total[0].item() / max(total[1].item(), 1.0))
            scheduler.step()
    finally:
        if ids is not None:
            ids.close()
        handed_over = os.path.join(os.environ.get("ELASTIC_RUN_DIR", ""), "relaunch.torch")
        if args.break_relaunch_state and first_rank and os.path.exists(handed_over):
            with open(handed_over, "wb") as f:
                f.write(b"not a torch file")
    # The hand-over's own path on this rank's tensors (CPU or its GPU): the state through
    # torch.save into memory and back leaves everything as it was.
    before = fingerprint(model, optimizer, scheduler, job, extras, device)
    job.load_state_dict(handover.deserialize(handover.serialize(job.state_dict()).getvalue()))
    if not torch.equal(before, fingerprint(model, optimizer, scheduler, job, extras, device)):
        problems.append("the state changed through state_dict, torch.save, torch.load and load_state_dict")
    for problem in problems[:5]:
        print(f"rank {job.rank}: CHECK FAILED: {problem}", file=sys.stderr, flush=True)
    bad = torch.tensor([float(len(problems))], device=device)
    dist.all_reduce(bad)
    if job.rank == 0:
        with torch.no_grad():
            final = loss_fn(model.module(x.to(device)), y.to(device)).item()
        result = {"final_loss": final, "epoch_loss": extras["epoch_loss"], "steps": steps, "job_steps": job.step,
                  "noise_scale": job.session.noise_scale,
                  "params": [v for p in model.module.parameters() for v in p.detach().double().cpu().reshape(-1).tolist()],
                  "check_failures": int(bad.item())}
        print(f"final loss {final:.6f} steps {job.step} check failures {int(bad.item())}", flush=True)
        if args.out:
            with open(args.out, "w") as f:
                json.dump(result, f)
    job.close()
    return EXIT_CHECK_FAILED if bad.item() > 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
