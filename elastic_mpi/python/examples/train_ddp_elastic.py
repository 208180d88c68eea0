"""Data-parallel training with DistributedDataParallel, as PyTorch's own DDP tutorials teach it:
train_ddp.py, and train_ddp_elastic.py beside it, the same script made elastic.

The structure follows PyTorch's DDP tutorial series ("Distributed Data Parallel in PyTorch",
pytorch/examples distributed/ddp-tutorial-series, its torchrun and multi-node steps): `ddp_setup()`
initialises the process group from torchrun's environment, `load_train_objs()` builds the data
set, model, optimizer and learning-rate scheduler, `prepare_dataloader()` shards the data with a
DistributedSampler, and a `Trainer` wraps the model in DDP, runs epochs, saves a snapshot every few
epochs and resumes from it when the job is started again. Written for this project, not copied.

train_ddp.py knows nothing of the cluster: it reads RANK, LOCAL_RANK and WORLD_SIZE (and torch
reads MASTER_ADDR and MASTER_PORT) as torchrun sets them, so the same file runs, rigid, under

    torchrun --nproc-per-node=2 train_ddp.py --epochs 6
    srun --ntasks-per-node=1 elastic-launch -- /usr/bin/python3 train_ddp.py --epochs 6

train_ddp_elastic.py differs from it in a few lines (`diff train_ddp.py train_ddp_elastic.py`; the
test python.ddp_port_diff holds them to 10): torch.distributed and DistributedDataParallel come
from elastic_mpi.torch, elastic() makes the job once the model is wrapped, and the two loops take
the job's epochs and batches. Submitted with --elastic-gpus (jobscripts/pytorch_ddp_elastic.sbatch)
it grows and shrinks between steps without a restart: newcomers receive the model, optimizer and
scheduler from rank 0, every sample of an epoch is trained on once across the changes, and the
learning rate follows --elastic-lr-scaling (docs/user-guide.md, "Making a DistributedDataParallel
script elastic").

On CPU it trains over gloo; where a GPU is visible, over NCCL on the GPU of its LOCAL_RANK.
The data set is generated (the same on every rank; nothing is downloaded): points around one
centre per class, classified by a small MLP with SGD and momentum, the learning rate halved every
--lr-step epochs.
"""

import argparse
import os
import time

import torch
import elastic_mpi.torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from elastic_mpi.torch import DistributedDataParallel as DDP, elastic
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def ddp_setup():
    """One process per GPU (or per CPU rank); the rendezvous comes from the environment (env://)."""
    if torch.cuda.is_available():
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
        dist.init_process_group(backend="nccl")
    else:
        dist.init_process_group(backend="gloo")


class Trainer:
    def __init__(self, model, train_data, optimizer, scheduler, save_every, snapshot_path, compute_us_per_sample=0):
        self.local_rank = int(os.environ["LOCAL_RANK"])
        self.global_rank = int(os.environ["RANK"])
        if torch.cuda.is_available():
            self.device = torch.device("cuda", self.local_rank)
        else:
            self.device = torch.device("cpu")
        self.model = model.to(self.device)
        self.train_data = train_data
        self.optimizer = optimizer
        self.scheduler = scheduler
        self.save_every = save_every
        self.snapshot_path = snapshot_path
        self.compute_s_per_sample = compute_us_per_sample * 1e-6
        self.epochs_run = 0
        if os.path.exists(snapshot_path):
            self._load_snapshot(snapshot_path)
        device_ids = [self.local_rank] if self.device.type == "cuda" else None
        self.model = DDP(self.model, device_ids=device_ids)
        self.job = elastic(self.model, self.optimizer, self.train_data, self.scheduler)

    def _load_snapshot(self, snapshot_path):
        snapshot = torch.load(snapshot_path, map_location=self.device)
        self.model.load_state_dict(snapshot["MODEL_STATE"])
        self.optimizer.load_state_dict(snapshot["OPTIMIZER_STATE"])
        self.scheduler.load_state_dict(snapshot["SCHEDULER_STATE"])
        self.epochs_run = snapshot["EPOCHS_RUN"]
        print(f"[rank {self.global_rank}] resuming training from snapshot at epoch {self.epochs_run}", flush=True)

    def _run_batch(self, source, targets):
        self.optimizer.zero_grad()
        output = self.model(source)
        loss = F.cross_entropy(output, targets)
        loss.backward()
        if self.compute_s_per_sample:  # a bigger model's time on a GPU for this batch
            time.sleep(self.compute_s_per_sample * len(source))
        self.optimizer.step()
        return loss.item()

    def _run_epoch(self, epoch):
        self.train_data.sampler.set_epoch(epoch)
        batch_size = len(next(iter(self.train_data))[0])
        lr = self.optimizer.param_groups[0]["lr"]
        loss_sum, batches = 0.0, 0
        for source, targets in self.job.batches():
            source = source.to(self.device)
            targets = targets.to(self.device)
            loss_sum += self._run_batch(source, targets)
            batches += 1
        # The mean training loss over every rank's batches, for the log.
        totals = torch.tensor([loss_sum, batches], dtype=torch.float64, device=self.device)
        dist.all_reduce(totals)
        if self.global_rank == 0:
            print(f"[rank {self.global_rank}] epoch {epoch} | batch size {batch_size} | steps {batches} | "
                  f"lr {lr:.4f} | train loss {(totals[0] / totals[1]).item():.6f}", flush=True)
        self.scheduler.step()

    def _save_snapshot(self, epoch):
        snapshot = {
            "MODEL_STATE": self.model.module.state_dict(),
            "OPTIMIZER_STATE": self.optimizer.state_dict(),
            "SCHEDULER_STATE": self.scheduler.state_dict(),
            "EPOCHS_RUN": epoch + 1,
        }
        tmp = self.snapshot_path + ".tmp"
        torch.save(snapshot, tmp)
        os.replace(tmp, self.snapshot_path)  # a job killed while saving keeps the last snapshot
        print(f"[rank {self.global_rank}] epoch {epoch} | training snapshot saved at {self.snapshot_path}", flush=True)

    def train(self, max_epochs):
        for epoch in self.job.epochs(self.epochs_run, max_epochs):
            self._run_epoch(epoch)
            if self.global_rank == 0 and ((epoch + 1) % self.save_every == 0 or epoch + 1 == max_epochs):
                self._save_snapshot(epoch)

    def evaluate(self, dataset):
        """Loss and accuracy of the trained model on the whole data set: every rank holds the same
        model, so every rank prints the same numbers."""
        model = self.model.module
        model.eval()
        with torch.no_grad():
            inputs, labels = dataset.tensors
            output = model(inputs.to(self.device))
            loss = F.cross_entropy(output, labels.to(self.device)).item()
            accuracy = (output.argmax(dim=1).cpu() == labels).float().mean().item()
        print(f"[rank {self.global_rank}] world size {dist.get_world_size()} | final loss {loss:.6f} | "
              f"accuracy {accuracy:.4f}", flush=True)


def load_train_objs(args):
    # The same data set and initial model on every rank.
    generator = torch.Generator().manual_seed(args.seed)
    centres = 0.5 * torch.randn(args.classes, args.features, generator=generator)
    labels = torch.randint(args.classes, (args.samples,), generator=generator)
    inputs = centres[labels] + torch.randn(args.samples, args.features, generator=generator)
    dataset = TensorDataset(inputs, labels)
    torch.manual_seed(args.seed)
    model = nn.Sequential(nn.Linear(args.features, args.hidden), nn.ReLU(), nn.Linear(args.hidden, args.classes))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=args.lr_step, gamma=0.5)
    return dataset, model, optimizer, scheduler


def prepare_dataloader(dataset, batch_size):
    return DataLoader(
        dataset,
        batch_size=batch_size,
        pin_memory=torch.cuda.is_available(),
        shuffle=False,
        sampler=DistributedSampler(dataset),
    )


def run(args):
    dataset, model, optimizer, scheduler = load_train_objs(args)
    train_data = prepare_dataloader(dataset, args.batch_size)
    trainer = Trainer(model, train_data, optimizer, scheduler, args.save_every, args.snapshot_path,
                      args.compute_us_per_sample)
    trainer.train(args.epochs)
    trainer.evaluate(dataset)


def main(args):
    ddp_setup()
    if dist.get_rank() == 0:
        print(f"world size {dist.get_world_size()} | backend {dist.get_backend()}", flush=True)
    # The DDP model is gone when run() returns, before the process group: a DDP model that
    # outlives destroy_process_group() can deadlock gloo's worker threads at exit (torch 1.13).
    run(args)
    dist.destroy_process_group()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="distributed training job (DDP)")
    parser.add_argument("--epochs", type=int, default=6, help="total epochs to train the model")
    parser.add_argument("--save-every", type=int, default=2, help="how often to save a snapshot (epochs)")
    parser.add_argument("--batch-size", type=int, default=32, help="input batch size on each rank")
    parser.add_argument("--lr", type=float, default=0.05, help="initial learning rate")
    parser.add_argument("--lr-step", type=int, default=3, help="halve the learning rate every this many epochs")
    parser.add_argument("--snapshot-path", default="snapshot.pt", help="where snapshots are saved and resumed from")
    parser.add_argument("--samples", type=int, default=2048, help="size of the generated data set")
    parser.add_argument("--features", type=int, default=32)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--classes", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--compute-us-per-sample", type=float, default=0,
                        help="also wait this long per sample of a step: the time a bigger model would take on a "
                        "GPU (the local test cluster's GPUs are not real)")
    main(parser.parse_args())
