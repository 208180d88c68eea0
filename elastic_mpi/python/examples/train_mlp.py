#!/usr/bin/python3
"""Elastic data-parallel PyTorch training on the elastic_mpi runtime (CPU).

A small MLP classifier trained with Adam (or SGD with momentum) on a synthetic data set that every
rank generates deterministically from a seed (a random "teacher" network labels Gaussian inputs).
What makes it elastic, compared to a torch DistributedDataParallel script:

* `elastic_mpi.Session` replaces `dist.init_process_group`; the world may grow and shrink at every
  `session.rescale_point()` (step boundary). Newcomers start this same script (spawned, or an
  extension job's `elastic-launch --join`) and receive the registered state in `session.begin()`.
* State to hand over is registered once, without copies: the parameters, the optimizer's state
  (created eagerly, exactly as torch.optim would create it lazily at the first step), the step
  count and the sharder's cursor.
* The global batch comes from the session (the controller may change it), each rank trains on
  its exactly-once share of the step (`EpochSharder`), and the learning rate follows the rule
  (`session.lr_factor`).
* Gradients are summed with `session.allreduce` and divided by the step's global sample count,
  so the update does not depend on how the step is split among ranks.

Run it with `mpirun -np 2 /usr/bin/python3 train_mlp.py` (standalone: ELASTIC_STANDALONE=1
ELASTIC_SCHEDULE=2->4->2 ELASTIC_SCHEDULE_EVERY=10) or under Slurm with
`srun --ntasks-per-node=1 elastic-launch -- /usr/bin/python3 train_mlp.py` (jobscripts/pytorch_elastic.sbatch).

Checks (--check, used by the tests): after every rescale every rank compares a fingerprint of the
parameters, the optimizer state and the step counters with rank 0's, the parents also with their
own fingerprint from before the rescale, and every optimizer step counter must equal the job's
step count; any mismatch exits with status 3.
"""

import argparse
import json
import os
import sys
import time

import numpy as np
import torch
from torch import nn

import elastic_mpi as em

EXIT_CHECK_FAILED = 3


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--samples", type=int, default=4096, help="data set size")
    p.add_argument("--features", type=int, default=16)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--classes", type=int, default=4)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch", type=int, default=64, help="initial global batch (the session may change it)")
    p.add_argument("--lr", type=float, default=0.01, help="learning rate at the initial global batch")
    p.add_argument("--optimizer", choices=["adam", "sgd"], default="adam")
    p.add_argument("--momentum", type=float, default=0.9, help="SGD momentum")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    p.add_argument("--sleep-ms", type=float, default=0, help="extra time per step (emulates a bigger model)")
    p.add_argument("--out", help="rank 0 writes the result (JSON) here")
    p.add_argument("--ids-dir", help="every rank appends the (epoch, sample) ids it trained on here")
    p.add_argument("--checkpoint", help="write a checkpoint here at the end (collective)")
    p.add_argument("--check", action="store_true", help="verify state hand-over at every rescale")
    return p.parse_args(argv)


def make_data(args, dtype):
    """Gaussian inputs labelled by a random teacher MLP plus noise; identical on every rank."""
    rng = np.random.default_rng(args.seed)
    x = rng.standard_normal((args.samples, args.features))
    w1 = rng.standard_normal((args.features, 32)) / np.sqrt(args.features)
    w2 = rng.standard_normal((32, args.classes)) / np.sqrt(32)
    logits = np.tanh(x @ w1) @ w2 + 0.3 * rng.standard_normal((args.samples, args.classes))
    y = logits.argmax(axis=1)
    return torch.from_numpy(x).to(dtype), torch.from_numpy(y).long()


def make_model(args):
    torch.manual_seed(args.seed)
    return nn.Sequential(nn.Linear(args.features, args.hidden), nn.Tanh(), nn.Linear(args.hidden, args.hidden),
                         nn.Tanh(), nn.Linear(args.hidden, args.classes))


def make_optimizer(args, model):
    """The optimizer with its state created now, as torch.optim creates it at the first step
    (zeros; Adam's step counter a 0-d float tensor), so that it can be registered before
    session.begin(). The first step then computes exactly what it would have computed."""
    if args.optimizer == "adam":
        opt = torch.optim.Adam(model.parameters(), lr=args.lr)
        for p in model.parameters():
            opt.state[p] = {"step": torch.tensor(0.0), "exp_avg": torch.zeros_like(p),
                            "exp_avg_sq": torch.zeros_like(p)}
    else:
        opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
        for p in model.parameters():
            opt.state[p] = {"momentum_buffer": torch.zeros_like(p)}
    return opt


def optimizer_tensors(opt, model):
    """(name, tensor) of every optimizer state tensor, in a fixed order."""
    out = []
    for i, p in enumerate(model.parameters()):
        for key in sorted(opt.state[p]):
            out.append((f"opt.{i}.{key}", opt.state[p][key]))
    return out


def fingerprint(model, opt, steps_done, sharder, session):
    """Float64 summary of everything that must survive a rescale."""
    vals = []
    for p in model.parameters():
        d = p.detach().double()
        vals += [d.sum().item(), d.abs().sum().item(), (d * d).sum().item()]
    for _, t in optimizer_tensors(opt, model):
        d = t.detach().double()
        vals += [d.sum().item(), (d * d).sum().item()]
    vals += [float(steps_done[0]), float(sharder.epoch), float(sharder.position), float(session.step)]
    return np.array(vals, dtype=np.float64)


def check_rescale(args, session, model, opt, steps_done, sharder, before):
    """After a rescale: every rank holds rank 0's state; parents kept theirs; step counters agree."""
    fp = fingerprint(model, opt, steps_done, sharder, session)
    ref = fp.copy()
    session.broadcast(ref, root=0)
    problems = []
    if not np.array_equal(fp, ref):
        problems.append(f"state differs from rank 0's (max |diff| {np.abs(fp - ref).max():.3g})")
    if before is not None and not np.array_equal(fp[:-1], before[:-1]):
        problems.append("a parent's state changed during the rescale")
    if steps_done[0] != session.step - 1:
        problems.append(f"steps_done {steps_done[0]} but session step {session.step}")
    if args.optimizer == "adam":
        for p in model.parameters():
            if opt.state[p]["step"].item() != steps_done[0]:
                problems.append(f"Adam step {opt.state[p]['step'].item()} != steps done {steps_done[0]}")
                break
        if steps_done[0] > 0 and all(opt.state[p]["exp_avg_sq"].abs().sum().item() == 0 for p in model.parameters()):
            problems.append("Adam's second moments are zero after training steps (state lost)")
    # Count the ranks that passed, and the newcomers among them, at rank 0.
    tally = np.array([0.0 if problems else 1.0, 1.0 if session.newcomer else 0.0])
    session.allreduce(tally)
    for problem in problems:
        print(f"rank {session.rank}: CHECK FAILED at step {session.step}: {problem}", file=sys.stderr, flush=True)
    return not problems, {"step": int(steps_done[0]), "size": session.size, "ranks_ok": int(tally[0]),
                          "newcomers": int(tally[1]), "what": session.last_rescale["what"],
                          "pause_s": session.last_rescale["pause_s"]}


def main(argv):
    args = parse_args(argv)
    torch.set_num_threads(1)
    dtype = torch.float64 if args.dtype == "float64" else torch.float32
    torch.set_default_dtype(dtype)
    x, y = make_data(args, dtype)
    model = make_model(args)
    opt = make_optimizer(args, model)
    loss_fn = nn.CrossEntropyLoss(reduction="sum")
    sharder = em.EpochSharder(args.samples, args.seed)
    steps_done = np.zeros(1, dtype=np.uint64)

    # The training goal, for elasticd's remaining-time objective (ELASTIC_TOTAL_SAMPLES wins).
    overrides = {} if os.environ.get("ELASTIC_TOTAL_SAMPLES") else {"total_samples": args.epochs * args.samples}
    session = em.Session(global_batch=args.batch, **overrides)
    for name, p in model.named_parameters():
        session.register("param." + name, p)          # the tensors' own memory
    for name, t in optimizer_tensors(opt, model):
        session.register(name, t)
    session.register("steps_done", steps_done)
    session.register("data_cursor", sharder.cursor)
    session.begin()                                    # a newcomer receives all of the above here

    params = list(model.parameters())
    numel = sum(p.numel() for p in params)
    flat = np.zeros(numel + 1, dtype=np.float64 if dtype == torch.float64 else np.float32)  # grads + loss
    flat_t = torch.from_numpy(flat)
    local_mean = np.zeros(numel, dtype=flat.dtype)
    ids = open(os.path.join(args.ids_dir, f"ids.{os.getpid()}"), "a") if args.ids_dir else None
    checks, sizes, failed = [], [], False
    epoch_loss = {}
    if args.check and session.relaunched:
        # A world started again over other nodes (how Open MPI 5 grows onto them): its ranks took
        # the state the world before left at its stop; the same checks as after a rescale in place.
        ok, record = check_rescale(args, session, model, opt, steps_done, sharder, None)
        record["what"] = "relaunch"
        failed |= not ok
        checks.append(record)

    while sharder.epoch < args.epochs:
        before = fingerprint(model, opt, steps_done, sharder, session) if args.check else None
        if session.rescale_point():
            if session.should_stop:                    # this group left (or the job is stopping)
                break
            if args.check:
                ok, record = check_rescale(args, session, model, opt, steps_done, sharder, before)
                failed |= not ok
                checks.append(record)
        start = time.perf_counter()
        rank, size = session.rank, session.size
        shard = sharder.next(session.global_batch, rank, size)
        idx = torch.from_numpy(shard.samples.astype(np.int64))
        opt.zero_grad(set_to_none=False)
        local_loss = 0.0
        if len(idx) > 0:
            loss = loss_fn(model(x[idx]), y[idx])
            loss.backward()
            local_loss = loss.item()
        # One allreduce of [sum of per-sample gradients..., sum of losses].
        torch.cat([p.grad.reshape(-1) for p in params], out=flat_t[:numel])
        flat[numel] = local_loss
        local_mean[:] = flat[:numel] / max(len(idx), 1)
        session.allreduce(flat)
        flat /= shard.global_count
        offset = 0
        for p in params:
            p.grad.copy_(flat_t[offset:offset + p.numel()].view_as(p))
            offset += p.numel()
        session.observe_gradients(local_mean, len(idx), flat[:numel])
        for group in opt.param_groups:
            group["lr"] = args.lr * session.lr_factor
        opt.step()
        steps_done += 1
        epoch_loss.setdefault(shard.epoch, []).append((float(flat[numel]) * shard.global_count, shard.global_count))
        if ids is not None:
            ids.write("".join(f"{shard.epoch} {int(i)}\n" for i in shard.samples))
        if args.sleep_ms > 0:
            time.sleep(args.sleep_ms / 1000)
        sizes.append(size)
        session.report_step(time.perf_counter() - start, shard.global_count)

    if ids is not None:
        ids.close()
    if session.should_stop:
        # Its group left, or the world stops (SIGTERM: the job resumes from the runtime's
        # checkpoint; a relaunch: the world started again goes on from the state it hands over).
        # Training did not end: no end-of-training checkpoint, loss or result (as train_logreg).
        session.close()
        return EXIT_CHECK_FAILED if failed else 0
    if args.checkpoint:
        session.write_checkpoint(args.checkpoint)
    # Failures anywhere fail the job.
    bad = np.array([1.0 if failed else 0.0])
    session.allreduce(bad)
    if session.rank == 0:
        with torch.no_grad():
            full_loss = nn.CrossEntropyLoss()(model(x), y).item()
            accuracy = (model(x).argmax(dim=1) == y).double().mean().item()
        result = {
            "final_loss": full_loss, "accuracy": accuracy, "steps": int(steps_done[0]), "session_step": session.step,
            "optimizer": args.optimizer, "dtype": args.dtype,
            "optimizer_steps": [opt.state[p]["step"].item() for p in params] if args.optimizer == "adam" else None,
            "epoch_train_loss": {str(e): sum(l for l, _ in v) / sum(n for _, n in v) for e, v in epoch_loss.items()},
            "sizes": sizes, "rescale_checks": checks, "check_failures": int(bad[0]),
            "params": [v for p in params for v in p.detach().double().reshape(-1).tolist()],
            "global_batch": session.global_batch, "lr_factor": session.lr_factor,
        }
        print(f"final loss {full_loss:.6f} accuracy {accuracy:.4f} steps {result['steps']} "
              f"rescales checked {len(checks)}", flush=True)
        if args.out:
            with open(args.out, "w") as f:
                json.dump(result, f)
    status = EXIT_CHECK_FAILED if bad[0] > 0 else 0
    session.close()
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
