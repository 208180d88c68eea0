"""Run under mpirun by run_mpi_collectives.py: a Python program on the elastic session that grows
by spawning itself and shrinks (ELASTIC_SCHEDULE), checking state hand-over, allreduce (sum and
mean, float32 and float64), broadcast and the sharder cursor at every step. Exits non-zero on the
first wrong value; rank 0 writes a summary line to argv[1]."""

import json
import sys

import numpy as np

import elastic_mpi as em

STEPS = 24


def main():
    out_path = sys.argv[1]
    state = np.zeros(1000, dtype=np.float64)       # advances by 1 per step on every rank
    counter = np.zeros(1, dtype=np.uint64)         # steps done
    sharder = em.EpochSharder(97, 11)
    s = em.Session(global_batch=12, bind=False)
    s.register("state", state)
    s.register("counter", counter)
    s.register("cursor", sharder.cursor)
    s.begin()
    sizes, seen = [], []
    while counter[0] < STEPS:
        if s.rescale_point():
            if s.should_stop:
                break
        if int(counter[0]) != s.step - 1:
            raise SystemExit(f"rank {s.rank}: counter {counter[0]} but session step {s.step}")
        if not np.all(state == float(counter[0])):
            raise SystemExit(f"rank {s.rank}: state {state[0]} at step {counter[0]}")
        # Sum and mean over the world, both element types.
        ones32 = np.full(5, s.rank + 1, dtype=np.float32)
        s.allreduce(ones32)
        n = s.size
        if not np.all(ones32 == n * (n + 1) / 2):
            raise SystemExit(f"rank {s.rank}: float32 sum {ones32[0]} in a world of {n}")
        m = np.full(3, float(s.rank), dtype=np.float64)
        s.allreduce(m, op="mean")
        if not np.allclose(m, (n - 1) / 2):
            raise SystemExit(f"rank {s.rank}: mean {m[0]} in a world of {n}")
        # Broadcast from the last rank.
        b = np.array([s.rank, 7], dtype=np.int64)
        s.broadcast(b, root=n - 1)
        if b.tolist() != [n - 1, 7]:
            raise SystemExit(f"rank {s.rank}: broadcast {b.tolist()}")
        # Exactly-once data: gather every rank's samples of this step at rank 0 through a sum.
        shard = sharder.next(s.global_batch, s.rank, n)
        mask = np.zeros(97, dtype=np.float64)
        mask[shard.samples.astype(np.int64)] = 1
        s.allreduce(mask)
        if mask.max() > 1 or mask.sum() != shard.global_count:
            raise SystemExit(f"rank {s.rank}: step samples overlap or are missing")
        seen.append(shard.global_count)
        state += 1
        counter += 1
        sizes.append(n)
        s.report_step(0.001, shard.global_count)
    if s.rank == 0 and not s.left:
        with open(out_path, "w") as f:
            json.dump({"steps": int(counter[0]), "sizes": sizes, "samples": sum(seen), "epoch": sharder.epoch,
                       "newcomer": s.newcomer}, f)
    s.close()


if __name__ == "__main__":
    main()
