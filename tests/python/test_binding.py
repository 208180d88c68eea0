"""Unit tests of the elastic_mpi Python module in one process (an MPI singleton, standalone mode):
every binding, its results and its errors. Run by ctest (python.binding) with the module's build
folder on PYTHONPATH, by Debian's /usr/bin/python3."""

import os
import tempfile
import unittest

import numpy as np

import elastic_mpi as em

try:
    import torch
except ImportError:  # the torch tests are skipped without python3-torch
    torch = None


def session(**kw):
    kw.setdefault("standalone", True)
    kw.setdefault("bind", False)
    kw.setdefault("handle_sigterm", False)
    return em.Session(**kw)


class ExceptionsTest(unittest.TestCase):
    def test_hierarchy(self):
        self.assertTrue(issubclass(em.Error, RuntimeError))
        for name, kind in [("InvalidArgumentError", "invalid-argument"), ("ConfigError", "config"),
                           ("UnavailableError", "unavailable"), ("PermissionDeniedError", "permission"),
                           ("NotFoundError", "not-found"), ("TimeoutError", "timeout"),
                           ("ProtocolError", "protocol"), ("InternalError", "internal")]:
            cls = getattr(em, name)
            self.assertTrue(issubclass(cls, em.Error), name)
            self.assertEqual(cls.kind, kind)
        self.assertTrue(issubclass(em.InvalidArgumentError, ValueError))
        self.assertTrue(issubclass(em.PermissionDeniedError, PermissionError))
        self.assertTrue(issubclass(em.NotFoundError, LookupError))

    def test_runtime_message_carried(self):
        with self.assertRaises(em.InvalidArgumentError) as ctx:
            em.EpochSharder(0, 1)
        self.assertIn("no samples", str(ctx.exception))
        self.assertEqual(ctx.exception.kind, "invalid-argument")


class ScalingTest(unittest.TestCase):
    def test_rules(self):
        self.assertEqual(em.lr_factor("none", 256, 64), 1.0)
        self.assertEqual(em.lr_factor("linear", 256, 64), 4.0)
        self.assertAlmostEqual(em.lr_factor(em.LrRule.sqrt, 256, 64), 2.0)
        self.assertEqual(em.lr_factor("adascale", 256, 64), 1.0)  # no statistics yet
        self.assertEqual(em.parse_lr_rule("sqrt"), em.LrRule.sqrt)

    def test_adascale_with_noise(self):
        noise = em.GradientNoise(0.0)
        self.assertFalse(noise.valid)
        self.assertIsNone(noise.noise_scale)
        # Two ranks, 32 samples each: |g_i|^2 = 2 and 1.5, |G|^2 = 1.
        self.assertTrue(noise.observe(32 * 2.0 + 32 * 1.5, 1.0, 64, 2))
        self.assertFalse(noise.observe(1.0, 1.0, 64, 1))  # one rank: no information
        var = 64 * ((32 * 2.0 + 32 * 1.5) / 64 - 1.0) / 1
        sqr = 1.0 - var / 64
        self.assertAlmostEqual(noise.grad_var, var)
        self.assertAlmostEqual(noise.grad_sqr, sqr)
        self.assertAlmostEqual(noise.noise_scale, var / sqr)
        s = 4.0
        var0 = var / 64
        self.assertAlmostEqual(em.lr_factor("adascale", 256, 64, noise), (var0 + sqr) / (var0 / s + sqr))

    def test_errors(self):
        with self.assertRaises(em.InvalidArgumentError) as ctx:
            em.parse_lr_rule("cubic")
        self.assertIn("cubic", str(ctx.exception))
        with self.assertRaises(em.InvalidArgumentError):
            em.lr_factor("linear", 0, 64)
        with self.assertRaises(em.InvalidArgumentError):
            em.lr_factor("bogus", 128, 64)
        with self.assertRaises(em.InvalidArgumentError):
            em.GradientNoise(1.0)
        options = em.SessionOptions()
        options.total_samples = 3 * 4096
        self.assertEqual(options.total_samples, 12288)
        with self.assertRaises(em.InvalidArgumentError) as ctx:
            options.total_samples = -1
        self.assertIn("total_samples", str(ctx.exception))

    def test_schedule(self):
        self.assertEqual(em.parse_schedule("2->4:128->2"), [(2, 0), (4, 128), (2, 0)])
        self.assertEqual(em.parse_schedule(""), [])
        with self.assertRaises(em.InvalidArgumentError) as ctx:
            em.parse_schedule("2->0")
        self.assertIn("0", str(ctx.exception))


class ShardingTest(unittest.TestCase):
    def test_exactly_once_across_world_sizes(self):
        n, seed = 1000, 7
        sharder = em.EpochSharder(n, seed)
        seen = {0: [], 1: []}
        sizes = [2, 4, 6, 4, 2, 3, 1]
        step = 0
        while sharder.epoch < 2:
            world = sizes[(step // 5) % len(sizes)]
            cursor = sharder.cursor.copy()
            parts = []
            for r in range(world):  # every rank computes its share from the same cursor
                sharder.cursor[:] = cursor
                parts.append(sharder.next(64, r, world))
            epoch = parts[0].epoch
            self.assertEqual(sum(len(p) for p in parts), parts[0].global_count)
            self.assertLessEqual(max(len(p) for p in parts) - min(len(p) for p in parts), 1)
            for p in parts:
                seen[epoch].extend(p.samples.tolist())
            step += 1
        for e in (0, 1):
            self.assertEqual(sorted(seen[e]), list(range(n)))
        self.assertNotEqual(seen[0], seen[1])  # a new permutation each epoch

    def test_cursor_shares_memory(self):
        s = em.EpochSharder(100, 1)
        cur = s.cursor
        self.assertEqual(cur.dtype, np.uint64)
        s.next(30, 0, 1)
        self.assertEqual(cur.tolist(), [0, 30])
        cur[:] = [1, 90]  # what a newcomer's Begin() does
        self.assertEqual((s.epoch, s.position), (1, 90))
        shard = s.next(30, 0, 1)
        self.assertEqual((shard.epoch, shard.global_count), (1, 10))
        self.assertEqual((s.epoch, s.position), (2, 0))
        self.assertEqual(s.sample_at(1, 99), shard.samples[-1])

    def test_slices_and_errors(self):
        self.assertEqual(em.EpochSharder.slice_of(10, 0, 3), (0, 4))
        self.assertEqual(em.EpochSharder.slice_of(10, 2, 3), (7, 10))
        s = em.EpochSharder(10, 1)
        with self.assertRaises(em.InvalidArgumentError):
            s.next(0, 0, 1)
        with self.assertRaises(em.InvalidArgumentError):
            s.next(4, 2, 2)
        with self.assertRaises(em.InvalidArgumentError):
            s.sample_at(0, 10)
        with self.assertRaises(em.InvalidArgumentError):
            em.EpochSharder.slice_of(10, 3, 3)

    def test_splitmix(self):
        a, b = em.SplitMix64(5), em.SplitMix64(5)
        self.assertEqual([a.next() for _ in range(3)], [b.next() for _ in range(3)])
        u = a.uniform()
        self.assertTrue(0 <= u < 1)
        self.assertLess(a.below(10), 10)
        with self.assertRaises(em.InvalidArgumentError):
            a.below(0)


class OptionsTest(unittest.TestCase):
    def test_fields(self):
        o = em.SessionOptions()
        o.lr_rule = "linear"
        self.assertEqual(o.lr_rule, "linear")
        o.lr_rule = em.LrRule.sqrt
        self.assertEqual(o.lr_rule, "sqrt")
        o.schedule = "2:64->4:128"
        self.assertEqual(o.schedule, "2:64->4:128")
        o.batch_min = 32
        self.assertEqual(o.batch_min, 32)
        o.batch_min = None
        self.assertIsNone(o.batch_min)
        o.backend = "mpi"
        self.assertEqual(o.backend, "mpi")
        o.spawn_command = ["/usr/bin/python3", "train.py"]
        self.assertEqual(o.spawn_command, ["/usr/bin/python3", "train.py"])

    def test_bad_values(self):
        o = em.SessionOptions()
        with self.assertRaises(em.InvalidArgumentError):
            o.lr_rule = "cubic"
        with self.assertRaises(em.InvalidArgumentError):
            o.schedule = "2->x"
        with self.assertRaises(em.InvalidArgumentError):
            o.backend = "gloo"
        with self.assertRaises(em.InvalidArgumentError):
            o.schedule_every = 0
        with self.assertRaises(em.InvalidArgumentError):
            o.grad_noise_smoothing = 1.5

    def test_environment(self):
        saved = dict(os.environ)
        try:
            os.environ.update(ELASTIC_LR_SCALING="sqrt", ELASTIC_SCHEDULE="2->4", ELASTIC_SCHEDULE_EVERY="7",
                              ELASTIC_STANDALONE="1")
            o = em.SessionOptions.from_environment()
            self.assertEqual((o.lr_rule, o.schedule, o.schedule_every, o.standalone), ("sqrt", "2->4", 7, True))
            os.environ["ELASTIC_LR_SCALING"] = "cubic"
            with self.assertRaises(em.Error) as ctx:
                em.SessionOptions.from_environment()
            self.assertIn("ELASTIC_LR_SCALING", str(ctx.exception))
        finally:
            os.environ.clear()
            os.environ.update(saved)


class SessionTest(unittest.TestCase):
    def test_create_errors(self):
        with self.assertRaises(em.InvalidArgumentError) as ctx:
            session(global_batch=0)
        self.assertIn("global_batch", str(ctx.exception))
        with self.assertRaises(em.InvalidArgumentError) as ctx:
            session(global_batch=8, no_such_option=1)
        self.assertIn("no_such_option", str(ctx.exception))
        with self.assertRaises(em.InvalidArgumentError):
            session(global_batch=8, lr_rule="cubic")

    def test_lifecycle_state_and_collectives(self):
        params = np.arange(6, dtype=np.float64)
        mom = np.zeros((2, 3), dtype=np.float32)
        sharder = em.EpochSharder(50, 3)
        with session(global_batch=16, lr_rule="linear", options=em.SessionOptions()) as s:
            self.assertTrue(em.mpi_initialized())
            self.assertEqual((s.rank, s.size, s.world_size), (0, 1, 1))
            self.assertEqual((s.global_batch, s.local_batch), (16, 16))
            self.assertEqual(s.lr_factor, 1.0)
            self.assertEqual(s.lr_rule, "linear")
            s.register("params", params)
            s.register("momentum", mom)
            s.register("cursor", sharder.cursor)
            with self.assertRaises(em.InvalidArgumentError) as ctx:
                s.register("params", np.zeros(3))
            self.assertIn("twice", str(ctx.exception))
            with self.assertRaises(em.InvalidArgumentError):
                s.allreduce(params)  # before begin
            with self.assertRaises(em.InvalidArgumentError):
                s.rescale_point()  # before begin
            s.begin()
            with self.assertRaises(em.InvalidArgumentError) as ctx:
                s.register("late", np.zeros(3))
            self.assertIn("after Begin", str(ctx.exception))
            with self.assertRaises(em.InvalidArgumentError):
                s.begin()
            self.assertEqual(s.registered, ["params", "momentum", "cursor"])
            # NCCL where the build has it and a GPU is visible (a GPU node), MPI elsewhere.
            on_gpu = em.nccl_compiled() and em.cuda_device_count() > 0
            self.assertEqual(s.backend_name, "nccl" if on_gpu else "mpi")
            self.assertEqual(s.memory_space, "device" if on_gpu else "host")
            if not on_gpu:
                self.assertEqual(s.device, -1)
            self.assertFalse(s.newcomer)
            for _ in range(3):
                self.assertFalse(s.rescale_point())
                self.assertFalse(s.should_stop)
                self.assertFalse(s.left)
            self.assertEqual(s.step, 3)
            # Collectives in place on the caller's memory (one rank: sum is identity).
            out = s.allreduce(params, op="mean")
            self.assertIs(out, params)
            np.testing.assert_array_equal(params, np.arange(6))
            s.allreduce(mom)
            s.broadcast(sharder.cursor, root=0)
            s.broadcast(np.zeros(4, dtype=np.int32))
            s.report_step(0.01, 16)
            self.assertEqual(s.last_rescale["what"], "")
            self.assertGreaterEqual(s.grad_var, 0.0)
            self.assertIsNone(s.noise_scale)
            s.observe_gradients(np.ones(3), 16, np.ones(3))  # one rank: no statistics
            self.assertIsNone(s.noise_scale)
        self.assertTrue(s.closed)
        with self.assertRaises(em.InvalidArgumentError) as ctx:
            s.rank
        self.assertIn("closed", str(ctx.exception))

    def test_buffer_errors(self):
        s = session(global_batch=8)
        with self.assertRaises(em.InvalidArgumentError) as ctx:
            s.register("strided", np.zeros(10)[::2])
        self.assertIn("contiguous", str(ctx.exception))
        ro = np.zeros(3)
        ro.setflags(write=False)
        with self.assertRaises(em.InvalidArgumentError) as ctx:
            s.register("ro", ro)
        self.assertIn("writable", str(ctx.exception))
        with self.assertRaises(em.InvalidArgumentError) as ctx:
            s.register("list", [1.0, 2.0])
        self.assertIn("list", str(ctx.exception))
        with self.assertRaises(em.InvalidArgumentError):
            s.register("", np.zeros(2))
        s.register("bytes", bytearray(8))  # any writable buffer
        s.begin()
        with self.assertRaises(em.InvalidArgumentError) as ctx:
            s.allreduce(np.zeros(3, dtype=np.int64))
        self.assertIn("float32 or float64", str(ctx.exception))
        with self.assertRaises(em.InvalidArgumentError):
            s.allreduce(np.zeros(3), op="max")
        with self.assertRaises(em.InvalidArgumentError):
            s.broadcast(np.zeros(3), root=1)
        with self.assertRaises(em.InvalidArgumentError):
            s.observe_gradients(np.zeros(3), 1, np.zeros(4))
        with self.assertRaises(em.InvalidArgumentError):
            s.observe_gradients(np.zeros(3), 1, np.zeros(3, dtype=np.float32))
        with self.assertRaises(em.InvalidArgumentError):
            s.report_step(-1.0, 8)
        with self.assertRaises(em.InvalidArgumentError):
            s.add_metrics_sink(42)
        s.close()
        s.close()  # idempotent

    def test_metrics_sink_and_file(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "metrics.jsonl")
            steps = []
            s = session(global_batch=8, metrics_file=path)
            s.add_metrics_sink(steps.append)
            s.begin()
            s.rescale_point()
            s.report_step(0.5, 8)
            s.close()
            self.assertEqual(len(steps), 1)
            self.assertEqual(steps[0]["global_batch"], 8)
            self.assertEqual(steps[0]["gpus"], 1)
            self.assertAlmostEqual(steps[0]["step_time_s"], 0.5)
            with open(path) as f:
                self.assertIn('"global_batch":8', f.read())

    def test_checkpoint_roundtrip_and_errors(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "ckpt.bin")
            a = np.array([1.5, 2.5])
            b = np.array([7, 8], dtype=np.uint64)
            s = session(global_batch=8)
            s.register("a", a)
            s.register("b", b)
            s.begin()
            s.write_checkpoint(path)
            a[:] = 0
            b[:] = 0
            s.read_checkpoint(path)
            np.testing.assert_array_equal(a, [1.5, 2.5])
            np.testing.assert_array_equal(b, [7, 8])
            with self.assertRaises(em.Error) as ctx:
                s.read_checkpoint(os.path.join(d, "missing.bin"))
            self.assertIn("missing.bin", str(ctx.exception))
            s.close()
            # A session with other buffers refuses the checkpoint, naming them.
            s2 = session(global_batch=8)
            s2.register("a", np.zeros(3))
            s2.begin()
            with self.assertRaises(em.Error) as ctx:
                s2.read_checkpoint(path)
            self.assertIn("'a'", str(ctx.exception))
            s2.close()

    def test_local_batch_and_gradient_norms(self):
        # local_batch in place of global_batch: the initial global batch is local_batch x the
        # initial world size (1 here) and the base of the learning-rate rule.
        s = session(local_batch=12, lr_rule="linear")
        self.assertEqual((s.global_batch, s.options.local_batch), (12, 12))
        s.begin()
        self.assertEqual(s.lr_factor, 1.0)
        s.observe_gradient_norms(4.0, 12, 1.0)  # one rank: no statistics, but a valid call
        s.observe_gradient_norms(float("nan"), 12, float("inf"))  # not numbers: nothing counted
        self.assertIsNone(s.noise_scale)
        s.close()
        with self.assertRaises(em.InvalidArgumentError) as ctx:
            session()
        self.assertIn("local_batch", str(ctx.exception))

    def test_deferred_batch(self):
        # defer_batch: no batch at creation; set_initial_local_batch gives it before the first
        # rescale point (local_batch x the world size, 1 here), once.
        s = session(defer_batch=True, lr_rule="linear")
        s.begin()
        self.assertEqual(s.global_batch, 0)
        with self.assertRaises(em.InvalidArgumentError) as ctx:
            s.rescale_point()
        self.assertIn("SetInitialLocalBatch", str(ctx.exception))
        with self.assertRaises(em.InvalidArgumentError):
            s.set_initial_local_batch(0)
        s.set_initial_local_batch(24)
        s.set_initial_local_batch(5)  # it has its batch: kept
        self.assertEqual((s.global_batch, s.local_batch), (24, 24))
        self.assertFalse(s.rescale_point())
        self.assertEqual(s.lr_factor, 1.0)  # the rule's base is the batch given
        s.close()

    def test_batch_schedule_single_rank(self):
        # A standalone schedule that only changes the batch: rescale points report it and the
        # learning-rate factor follows the rule.
        s = session(global_batch=16, schedule="1:16->1:64", schedule_every=2, lr_rule="sqrt")
        s.begin()
        changed = [s.rescale_point() for _ in range(4)]
        self.assertEqual(changed, [False, False, True, False])
        self.assertEqual(s.global_batch, 64)
        self.assertAlmostEqual(s.lr_factor, 2.0)
        self.assertEqual(s.last_rescale["what"], "batch")
        self.assertEqual((s.last_rescale["old_batch"], s.last_rescale["new_batch"]), (16, 64))
        s.close()


@unittest.skipIf(torch is None, "python3-torch is not installed")
class TorchTest(unittest.TestCase):
    def test_tensors_without_copies(self):
        w = torch.zeros(4, dtype=torch.float32, requires_grad=True)
        step = torch.tensor(0.0)  # Adam's 0-d step counter
        s = session(global_batch=8)
        s.register("w", w)
        s.register("step", step)
        s.begin()
        with torch.no_grad():
            w.add_(1.0)
        buf = torch.full((3,), 2.0, dtype=torch.float64)
        self.assertIs(s.allreduce(buf, op="mean"), buf)
        s.broadcast(w)
        self.assertEqual(w.tolist(), [1.0] * 4)
        ckpt = tempfile.NamedTemporaryFile(delete=False)
        ckpt.close()
        try:
            with torch.no_grad():
                step.fill_(5.0)
            s.write_checkpoint(ckpt.name)
            with torch.no_grad():
                w.zero_()
                step.zero_()
            s.read_checkpoint(ckpt.name)  # written straight into the tensors' storage
            self.assertEqual(w.tolist(), [1.0] * 4)
            self.assertEqual(step.item(), 5.0)
        finally:
            os.unlink(ckpt.name)
        s.close()

    def test_tensor_errors(self):
        s = session(global_batch=8)
        with self.assertRaises(em.InvalidArgumentError) as ctx:
            s.register("t", torch.zeros(4, 4).t())
        self.assertIn("contiguous", str(ctx.exception))
        with self.assertRaises(em.InvalidArgumentError) as ctx:
            s.register("sparse", torch.zeros(4, 4).to_sparse())
        self.assertIn("to_dense", str(ctx.exception))
        with self.assertRaises(em.InvalidArgumentError) as ctx:
            s.register("meta", torch.zeros(4, device="meta"))
        self.assertIn("meta", str(ctx.exception))
        s.close()

    def test_tensor_dtypes(self):
        # Any dtype is handed over and broadcast through the tensor's own memory (bfloat16 has no
        # NumPy view); allreduce takes float32/float64 and names the dtype otherwise.
        s = session(global_batch=8)
        half = torch.full((5,), 1.5, dtype=torch.bfloat16)
        base = torch.arange(10, dtype=torch.float64)
        view = base[4:]  # a view with a storage offset: its own elements, not the storage's first
        s.register("bf16", half)
        s.register("view", view)
        s.begin()
        s.broadcast(half)
        self.assertEqual(half.tolist(), [1.5] * 5)
        for dtype in (torch.bfloat16, torch.float16, torch.int64):
            with self.assertRaises(em.InvalidArgumentError) as ctx:
                s.allreduce(torch.zeros(3, dtype=dtype))
            self.assertIn(f"dtype {dtype}", str(ctx.exception))
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "state.bin")
            s.write_checkpoint(path)
            half.zero_()
            view.zero_()
            s.read_checkpoint(path)
        self.assertEqual(half.tolist(), [1.5] * 5)
        self.assertEqual(base.tolist(), [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0])
        s.close()


if __name__ == "__main__":
    unittest.main()
