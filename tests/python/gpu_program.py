"""The Python binding with CUDA torch tensors, run by run_gpu_test.sh (label gpu) under mpirun
on a node with a GPU: every rank puts its state on its launch's GPU (its local rank), and checks
NCCL collectives on device tensors, a NumPy array's allreduce while the backend is NCCL (it goes
through MPI), a device tensor's broadcast and the registered device state. Exit 0 when right."""
import os
import sys

import numpy as np
import torch

import elastic_mpi as em


def main():
    local = int(os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK", "0"))
    device = torch.device("cuda", local % torch.cuda.device_count())
    torch.cuda.set_device(device)
    params = torch.full((1 << 16,), 3.0, device=device)
    with em.Session(global_batch=8) as s:
        s.register("params", params)
        s.begin()
        assert s.backend_name == "nccl", s.backend_name
        assert s.memory_space == "device", s.memory_space
        assert s.device == device.index, (s.device, device)  # the device of the registered state
        n = s.size
        t = torch.full((1 << 20,), float(s.rank + 1), device=device)
        assert s.allreduce(t) is t
        assert torch.all(t == n * (n + 1) / 2).item(), "device allreduce (sum)"
        d = torch.ones(1000, dtype=torch.float64, device=device)
        s.allreduce(d, op="mean")
        assert torch.all(d == 1.0).item(), "device allreduce (mean)"
        h = np.full(1000, 2.0)
        s.allreduce(h)  # host memory under NCCL: through MPI
        assert np.all(h == 2.0 * n), "host allreduce under NCCL"
        b = torch.full((4096,), 7 if s.rank == 0 else 0, dtype=torch.int32, device=device)
        s.broadcast(b, root=0)
        assert torch.all(b == 7).item(), "device broadcast"
        s.observe_gradients(torch.ones(3, device=device), 8, torch.ones(3, device=device))
        if n > 1:
            other = torch.ones(4, device=torch.device("cuda", (device.index + 1) % torch.cuda.device_count()))
            try:
                s.allreduce(other)
                raise AssertionError("a tensor on another device was accepted")
            except em.InvalidArgumentError as e:
                assert "session.device" in str(e), e
        for _ in range(3):
            s.rescale_point()
        assert torch.all(params == 3.0).item(), "registered device state"
        if s.rank == 0:
            print(f"python ok: {n} ranks, backend nccl")
    return 0


if __name__ == "__main__":
    sys.exit(main())
