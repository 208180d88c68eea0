"""Unit tests of elastic_mpi.torch in one process (an MPI singleton, standalone, a gloo group of
one): the sampler's plan across world sizes and batches, the learning-rate rule on optimizers and
schedulers, a job through a batch change, its state_dict, torch's own calls through
elastic_mpi.torch.distributed (the batch size from the DataLoader, the sample log) and the errors
that say what to write instead. Run by ctest (python.torch_elastic) with the package's build folder on PYTHONPATH.
The multi-rank paths (grow, shrink, hand-over) are python.torch_ddp_rescale's."""

import collections
import faulthandler
import glob
import os
import sys
import tempfile
import unittest

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import elastic_mpi.torch as elastic
from elastic_mpi.torch import handover, learning_rate

# The whole module takes 4-6 s; it hung once (Debian 13, a CI run, in
# test_torch_calls_through_the_distributed_module) until ctest's 120 s. Should it hang again, every
# thread's stack goes to the test's output before ctest ends it.
faulthandler.dump_traceback_later(100, exit=False, file=sys.stderr)


class SamplerPlanTest(unittest.TestCase):
    """plan() is what every rank computes alone: its slices must cover each epoch exactly once."""

    def walk(self, sampler, schedule):
        """Trains through one epoch; schedule[i] = (world size, global batch) of step i (the last
        entry repeats). Returns the ids each rank got and the steps' counts."""
        seen = collections.Counter()
        steps = []
        position, i = 0, 0
        while position < sampler.num_samples:
            size, batch = schedule[min(i, len(schedule) - 1)]
            counts = []
            for rank in range(size):
                ids, local, count = sampler.plan(0, position, rank, size, batch)
                if local:
                    self.assertEqual(len(ids), local)
                    seen.update(ids)
                else:
                    self.assertEqual(len(ids), 1)  # a weight-zero filler
                counts.append(local)
            self.assertEqual(sum(counts), count)
            self.assertLessEqual(max(counts) - min(counts), 1)
            steps.append(count)
            position += count
            i += 1
        return seen, steps

    def test_exactly_once_across_sizes_and_batches(self):
        sampler = elastic.ElasticSampler(103, seed=5)
        schedule = [(2, 16), (2, 16), (3, 16), (5, 24), (4, 24), (7, 9), (2, 10)]
        seen, steps = self.walk(sampler, schedule)
        self.assertEqual(set(seen), set(range(103)))
        self.assertEqual(set(seen.values()), {1})
        self.assertEqual(sum(steps), 103)

    def test_fillers_when_a_step_has_fewer_samples_than_ranks(self):
        sampler = elastic.ElasticSampler(34, shuffle=False)
        seen, steps = self.walk(sampler, [(4, 32)])
        self.assertEqual(steps, [32, 2])
        self.assertEqual(sorted(seen), list(range(34)))  # unshuffled: the identity order
        ids, local, count = sampler.plan(0, 32, 3, 4, 32)
        self.assertEqual((ids, local, count), ([32], 0, 2))

    def test_order_depends_on_seed_and_epoch_only(self):
        a, b = elastic.ElasticSampler(50, seed=1), elastic.ElasticSampler(range(50), seed=1)
        self.assertEqual(a.plan(3, 10, 1, 2, 8), b.plan(3, 10, 1, 2, 8))
        self.assertNotEqual(a.plan(0, 0, 0, 1, 50)[0], a.plan(1, 0, 0, 1, 50)[0])
        self.assertEqual(sorted(a.plan(1, 0, 0, 1, 50)[0]), list(range(50)))

    def test_progress_state_and_errors(self):
        s = elastic.ElasticSampler(10, batch_size=4)
        self.assertEqual(len(s), 3)
        s.set_epoch(2)
        s.advance(4)
        self.assertEqual((s.epoch, s.position), (2, 4))
        s.set_epoch(2)  # the current epoch: nothing to do
        with self.assertRaises(ValueError) as ctx:
            s.set_epoch(3)
        self.assertIn("job.epochs", str(ctx.exception))
        state = s.state_dict()
        other = elastic.ElasticSampler(10)
        other.load_state_dict(state)
        self.assertEqual((other.epoch, other.position), (2, 4))
        s.advance(6)
        self.assertEqual((s.epoch, s.position), (3, 0))
        with self.assertRaises(ValueError) as ctx:
            elastic.ElasticSampler(11).load_state_dict(state)
        self.assertIn("num_samples", str(ctx.exception))
        with self.assertRaises(RuntimeError) as ctx:
            iter(s)
        self.assertIn("elastic_mpi.torch.elastic", str(ctx.exception))
        for bad in (dict(dataset=[]), dict(dataset=5, batch_size=0), dict(dataset=5, seed=-1)):
            with self.assertRaises(ValueError):
                elastic.ElasticSampler(**bad)


    def test_distributed_sampler_arguments(self):
        # DistributedSampler's call works as it is: num_replicas and rank are not used (the world
        # decides); drop_last leaves out a last step shorter than the global batch.
        s = elastic.ElasticSampler(10, 4, 1, shuffle=False, seed=0, drop_last=True)
        self.assertEqual((s.over(6, 4), s.over(8, 4), s.over(8, 2)), (False, True, False))
        s.batch_size = 4
        self.assertEqual(len(s), 2)
        with self.assertRaises(TypeError):
            elastic.ElasticSampler(10, 4, 1, True, 0, False, 8)  # batch_size is keyword-only


class LearningRateTest(unittest.TestCase):
    """After a rescale by r, every scheduler gives r times the rates it gave unscaled."""

    def rates(self, make, ratio, at=3, steps=8):
        model = nn.Linear(2, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        scheduler = make(optimizer)
        out = []
        for i in range(steps):
            if i == at:
                learning_rate.rescale(optimizer, scheduler, ratio)
            optimizer.step()
            scheduler.step()
            out.append(optimizer.param_groups[0]["lr"])
        return out

    def test_schedulers_keep_their_shape(self):
        S = torch.optim.lr_scheduler
        makers = {
            "StepLR": lambda o: S.StepLR(o, step_size=2, gamma=0.5),
            "LambdaLR": lambda o: S.LambdaLR(o, lambda e: 1.0 / (1 + e)),
            "CosineAnnealingLR": lambda o: S.CosineAnnealingLR(o, T_max=10),
            "OneCycleLR": lambda o: S.OneCycleLR(o, max_lr=0.5, total_steps=20),
            "SequentialLR": lambda o: S.SequentialLR(o, [S.LinearLR(o, 0.5, total_iters=2), S.ExponentialLR(o, 0.9)],
                                                     milestones=[2]),
        }
        for name, make in makers.items():
            with self.subTest(scheduler=name):
                base = self.rates(make, 1.0)
                scaled = self.rates(make, 2.0)
                for b, s in zip(base[3:], scaled[3:]):
                    self.assertAlmostEqual(s, 2.0 * b, places=12)
                self.assertEqual(base[:3], scaled[:3])

    def test_without_scheduler(self):
        model = nn.Linear(2, 1)
        optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
        learning_rate.rescale(optimizer, None, 1.5)
        self.assertAlmostEqual(optimizer.param_groups[0]["lr"], 0.015)


def make_job(samples=40, batch=4, sampler_as="sampler", workers=0):
    torch.manual_seed(3)
    x = torch.randn(samples, 3)
    y = (x.sum(dim=1) > 0).long()
    dataset = TensorDataset(x, y, torch.arange(samples))
    model = nn.Linear(3, 2)
    if sampler_as == "sampler":
        loader = DataLoader(dataset, batch_size=batch, sampler=elastic.ElasticSampler(dataset, seed=2),
                            num_workers=workers)
    else:
        loader = DataLoader(dataset, batch_sampler=elastic.ElasticSampler(dataset, batch_size=batch, seed=2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    return model, optimizer, loader, scheduler


def environment(**extra):
    """A standalone world of one, no core binding, as the binding's tests run."""
    env = {"ELASTIC_STANDALONE": "1", "ELASTIC_BIND": "0", "ELASTIC_SCHEDULE": "", "ELASTIC_LR_SCALING": "none"}
    env.update(extra)
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    return saved


def restore(saved):
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


class JobTest(unittest.TestCase):
    def tearDown(self):
        elastic.close()

    def test_batch_change_learning_rate_and_epochs(self):
        # 40 samples, global batch 4 for 3 steps, then 8 (linear rule: factor 2).
        saved = environment(ELASTIC_SCHEDULE="1:4->1:8", ELASTIC_SCHEDULE_EVERY="3", ELASTIC_LR_SCALING="linear")
        try:
            model, optimizer, loader, scheduler = make_job()
            elastic.init_process_group("gloo", "env://", world_size=8, rank=3, batch_size=4)  # torch's call
            self.assertTrue(torch.distributed.is_initialized())
            self.assertEqual((torch.distributed.get_rank(), torch.distributed.get_world_size()), (0, 1))
            self.assertEqual((os.environ["RANK"], os.environ["WORLD_SIZE"]), ("0", "1"))
            ddp = elastic.DistributedDataParallel(model)
            with self.assertRaises(RuntimeError) as ctx:
                ddp(torch.zeros(1, 3))
            self.assertIn("before elastic_mpi.torch.elastic", str(ctx.exception))
            job = elastic.elastic(ddp, optimizer, loader, scheduler, extras={"note": "a"})
            self.assertIs(loader.batch_sampler, loader.sampler)  # installed as the batch sampler
            seen, lrs, batches = [], [], []
            for epoch in job.epochs(2):
                for x, y, ids in job.batches():
                    optimizer.zero_grad()
                    nn.functional.cross_entropy(ddp(x), y).backward()
                    optimizer.step()
                    seen += [(epoch, int(i)) for i in ids]
                    lrs.append(optimizer.param_groups[0]["lr"])
                    batches.append(len(ids))
                scheduler.step()
            self.assertEqual(sorted(seen), [(e, i) for e in range(2) for i in range(40)])
            self.assertEqual(batches[:4], [4, 4, 4, 8])
            self.assertEqual(job.step, len(batches))
            self.assertEqual(job.lr_factor, 2.0)
            # epoch 0 at lr 0.1 x factor, epoch 1 at 0.05 x factor (StepLR kept its shape)
            self.assertEqual([round(v, 12) for v in lrs[:5]], [0.1, 0.1, 0.1, 0.2, 0.2])
            self.assertAlmostEqual(lrs[-1], 0.1)
            self.assertEqual(job.epoch, 2)
            self.assertEqual(len(loader), 5)  # steps of an epoch at the current global batch
        finally:
            restore(saved)

    def test_state_dict_roundtrip(self):
        saved = environment()
        try:
            model, optimizer, loader, scheduler = make_job(sampler_as="batch_sampler")
            job = elastic.elastic(model, optimizer, loader, scheduler, extras={"best": 0.5, "history": [1]})
            self.assertEqual(job.global_batch, 4)  # the sampler's batch size x 1 rank
            for x, y, _ in job.batches():
                optimizer.zero_grad()
                nn.functional.cross_entropy(job.model(x), y).backward()
                optimizer.step()
                if job.step == 3:
                    break  # the step counts: the epoch goes on from the next one
            self.assertEqual((job.step, job.sampler.position), (4, 16))
            buffer = handover.serialize(job.state_dict())
            state = handover.deserialize(buffer.getvalue())
            expected = torch.rand(3)
            torch.manual_seed(99)
            with torch.no_grad():
                for p in model.parameters():
                    p.zero_()
            job.extras["best"] = 0.0
            job.sampler.advance(8)
            job.load_state_dict(state)
            self.assertTrue(torch.equal(torch.rand(3), expected))  # the generator came back
            self.assertEqual((job.step, job.sampler.position, job.extras["best"]), (4, 16, 0.5))
            self.assertNotEqual(float(model.weight.abs().sum()), 0.0)
            self.assertIn("momentum_buffer", optimizer.state[model.weight])
            remaining = [int(i) for _, _, ids in job.batches() for i in ids]
            self.assertEqual(len(remaining), 40 - 16)
            bad = dict(state, scheduler=None)
            with self.assertRaises(ValueError) as ctx:
                job.load_state_dict(bad)
            self.assertIn("scheduler", str(ctx.exception))
        finally:
            restore(saved)

    def test_reading_ahead_moves_nothing(self):
        # DataLoader workers read batches ahead; a peek with iter() too: the position moves only
        # with the job's steps.
        saved = environment()
        try:
            model, optimizer, loader, scheduler = make_job(workers=1)
            job = elastic.elastic(model, optimizer, loader, scheduler)
            next(iter(loader))
            self.assertEqual(job.sampler.position, 0)
            seen = []
            for epoch in job.epochs(1):
                for x, y, ids in job.batches():
                    seen += ids.tolist()
            self.assertEqual(sorted(seen), list(range(40)))
        finally:
            restore(saved)

    def test_drop_last(self):
        saved = environment()
        try:
            torch.manual_seed(0)
            dataset = TensorDataset(torch.randn(10, 3), torch.zeros(10, dtype=torch.long), torch.arange(10))
            loader = DataLoader(dataset, batch_size=4, sampler=elastic.ElasticSampler(dataset, drop_last=True))
            model = nn.Linear(3, 2)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            job = elastic.elastic(model, optimizer, loader)
            per_epoch = collections.Counter()
            for epoch in job.epochs(3):
                for x, y, ids in job.batches():
                    per_epoch[epoch] += len(ids)
                    self.assertEqual(len(set(ids.tolist())), 4)
            self.assertEqual(dict(per_epoch), {0: 8, 1: 8, 2: 8})
            self.assertEqual((job.step, job.epoch), (6, 3))
        finally:
            restore(saved)

    def test_distributed_sampler_taken_over(self):
        # A DDP script's DataLoader, unchanged: elastic() samples its data set elastically in place
        # of the DistributedSampler (its shuffle and seed, the loader's batch size and drop_last).
        saved = environment()
        try:
            elastic.init_process_group("gloo", batch_size=4)
            dataset = TensorDataset(torch.randn(22, 3), torch.zeros(22, dtype=torch.long), torch.arange(22))
            theirs = torch.utils.data.distributed.DistributedSampler(dataset, shuffle=False, seed=3)
            loader = DataLoader(dataset, batch_size=4, sampler=theirs, drop_last=True)
            model = nn.Linear(3, 2)
            job = elastic.elastic(model, torch.optim.SGD(model.parameters(), lr=0.1), loader)
            self.assertIsInstance(loader.batch_sampler, elastic.ElasticSampler)
            self.assertIs(loader.sampler, theirs)
            self.assertEqual((job.sampler.shuffle, job.sampler.seed, job.sampler.drop_last), (False, 3, True))
            seen = []
            for epoch in job.epochs(1):
                loader.sampler.set_epoch(epoch)  # the script's call on its own sampler: harmless
                for x, y, ids in job.batches():
                    seen += ids.tolist()
            self.assertEqual(seen, list(range(20)))  # unshuffled; the short last step dropped
        finally:
            restore(saved)

    def test_torch_calls_through_the_distributed_module(self):
        # A DDP script's own calls with `import elastic_mpi.torch.distributed as dist`: torch's
        # init_process_group("gloo") without a batch size (the DataLoader's decides in elastic()),
        # torch's names for the rest, destroy_process_group() ending the job; every step's samples
        # in the ELASTIC_SAMPLE_LOG file.
        import elastic_mpi.torch.distributed as dist
        with tempfile.TemporaryDirectory() as logdir:
            saved = environment(ELASTIC_SAMPLE_LOG=logdir)
            try:
                dist.init_process_group("gloo")
                self.assertEqual((dist.get_rank(), dist.get_world_size(), dist.get_backend()), (0, 1, "gloo"))
                self.assertIs(dist.all_reduce, torch.distributed.all_reduce)
                self.assertIs(dist.ReduceOp, torch.distributed.ReduceOp)
                self.assertEqual(elastic.session().global_batch, 0)  # not known yet
                dataset = TensorDataset(torch.randn(10, 3), torch.zeros(10, dtype=torch.long), torch.arange(10))
                loader = DataLoader(dataset, batch_size=4,
                                    sampler=torch.utils.data.distributed.DistributedSampler(dataset, shuffle=False))
                model = nn.Linear(3, 2)
                optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
                ddp = elastic.DistributedDataParallel(model)
                job = elastic.elastic(ddp, optimizer, loader)
                self.assertEqual((job.global_batch, job.session.lr_factor), (4, 1.0))
                for epoch in job.epochs(2):
                    for x, y, ids in job.batches():
                        optimizer.zero_grad()
                        nn.functional.cross_entropy(ddp(x), y).backward()
                        optimizer.step()
                self.assertIsNotNone(ddp.ddp)
                dist.destroy_process_group()
                self.assertFalse(torch.distributed.is_initialized())
                self.assertIsNone(elastic.session())
                self.assertIsNone(ddp.ddp)  # no torch DDP outlives its group
                files = glob.glob(os.path.join(logdir, "samples.*"))
                self.assertEqual(len(files), 1)
                with open(files[0]) as f:
                    lines = f.read().splitlines()
                self.assertEqual(lines, ["0 0 1 0 1 2 3", "0 1 1 4 5 6 7", "0 2 1 8 9",
                                         "1 3 1 0 1 2 3", "1 4 1 4 5 6 7", "1 5 1 8 9"])
            finally:
                restore(saved)

    def test_errors_say_what_to_write(self):
        saved = environment()
        try:
            model, optimizer, _, scheduler = make_job()
            dataset = TensorDataset(torch.zeros(8, 3))
            plain = DataLoader(dataset, batch_size=2, shuffle=True)
            with self.assertRaises(TypeError) as ctx:
                elastic.elastic(model, optimizer, plain, scheduler)
            self.assertIn("sampler=elastic_mpi.torch.ElasticSampler(dataset)", str(ctx.exception))
            self.assertIn("RandomSampler", str(ctx.exception))
            unsized = DataLoader(dataset, batch_sampler=elastic.ElasticSampler(dataset))
            with self.assertRaises(ValueError) as ctx:
                elastic.elastic(model, optimizer, unsized, scheduler)
            self.assertIn("batch_size=B", str(ctx.exception))
            elastic.init_process_group("gloo", batch_size=2)
            with self.assertRaises(RuntimeError) as ctx:
                elastic.init_process_group("gloo", batch_size=2)
            self.assertIn("already", str(ctx.exception))
            ddp = nn.parallel.DistributedDataParallel(model)
            with self.assertRaises(TypeError) as ctx:
                elastic.elastic(ddp, optimizer, plain, scheduler)
            self.assertIn("not a torch DistributedDataParallel", str(ctx.exception))
            with self.assertRaises(TypeError):
                elastic.DistributedDataParallel(model, process_group=None)
            elastic.close()
            # No batch size in init_process_group nor in the DataLoader: elastic() says where to give one.
            elastic.init_process_group("gloo")
            with self.assertRaises(ValueError) as ctx:
                elastic.elastic(model, optimizer, unsized, scheduler)
            self.assertIn("batch_size=B", str(ctx.exception))
            elastic.close()
            with self.assertRaises(ValueError) as ctx:
                elastic.init_process_group("mpi", batch_size=2)
            self.assertIn("gloo", str(ctx.exception))
        finally:
            restore(saved)


if __name__ == "__main__":
    unittest.main()
