"""Benchmark (label bench): checkpoint-restart through Slurm versus growth without restart.

In the same run:
  grow4    elastic-mpi-bench (mpirun, 2 ranks, 100 MB of state): the parent's pause while a group of
           4 ranks is spawned and merged (2 -> 6 ranks), from stopping at the rescale point to the
           first step at the new size.
  restart  the same change the way a rigid job makes it, on the local Slurm cluster: job A trains
           at 2 GPUs (2 ranks) with 100 MB of extra state, stops at a step boundary, writes a
           checkpoint and ends; as soon as Slurm reports it ended, job B is submitted at 6 GPUs
           (2 nodes x 3, one elastic-launch per node, its node groups merge into one world),
           starts, reloads the checkpoint and trains. pause_s = from A's stop to B's first step
           (both timestamps from the trainer, same machine clock).
Prints one JSON line per case, then {"case": "restart_vs_grow4", "ratio": ...} (target >= 10).
"""

import json
import os
import re
import subprocess
import time

from clustertest import CLUSTER_DIR, job_workdir, read, run, sbatch, job_state, TERMINAL_STATES

BUILD_DIR = os.environ.get("ELASTIC_BUILD_DIR", "")
LAUNCH = os.path.join(CLUSTER_DIR, "bin", "elastic-launch")
TRAINER = os.path.join(CLUSTER_DIR, "bin", "elastic-train-logreg")
STATE_MB = int(os.environ.get("ELASTIC_BENCH_STATE_MB", "100"))

MPI_ENV = {
    "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
    "OMPI_MCA_rmaps_base_oversubscribe": "1", "OMPI_MCA_mpi_yield_when_idle": "1",
    "OMPI_MCA_btl": "self,vader,tcp", "OMPI_MCA_btl_tcp_if_include": "lo", "OMPI_MCA_oob_tcp_if_include": "lo",
    "ELASTIC_STANDALONE": "1", "ELASTIC_BIND": "0",
}


def grow4():
    env = {k: v for k, v in os.environ.items() if not k.startswith("ELASTIC_")}
    env.update(MPI_ENV)
    proc = subprocess.run(["mpirun", "--oversubscribe", "-np", "2", os.path.join(BUILD_DIR, "bin", "elastic-mpi-bench"),
                           "--state-mb", str(STATE_MB)], capture_output=True, text=True, env=env, timeout=300)
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            case = json.loads(line)
            if case.get("case") == "grow4":
                return case
    raise SystemExit(f"elastic-mpi-bench gave no grow4 line (rc {proc.returncode}):\n{proc.stdout}\n{proc.stderr}")


def job_script(nodes, gpus_per_node, trainer_args):
    # A per-job run dir: job B must never read job A's rendezvous file.
    return f"""#!/bin/bash
#SBATCH -N{nodes}
#SBATCH --gres=gpu:{gpus_per_node}
#SBATCH -o job-%j.out
export OMPI_MCA_btl=self,tcp OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
export ELASTIC_RUN_DIR=$PWD/.elastic/$SLURM_JOB_ID ELASTIC_BIND=0
srun --ntasks-per-node=1 {LAUNCH} --oversubscribe -- {TRAINER} --samples 4096 --epochs 100 --batch 64 \\
     --state-mb {STATE_MB} {trainer_args}
exit $?
"""


def event(out, name):
    for line in out.splitlines():
        if line.startswith("{") and f'"event": "{name}"' in line:
            return json.loads(line)
    return None


def restart():
    wd = job_workdir("bench-restart")
    ckpt = os.path.join(wd, "checkpoint.bin")
    a, _ = sbatch([], script=job_script(1, 2, f"--stop-at-step 20 --checkpoint {ckpt}"), workdir=wd)
    end = time.time() + 180
    while job_state(a) not in TERMINAL_STATES:  # what a controller would watch for
        if time.time() > end:
            raise SystemExit(f"job {a} did not end")
        time.sleep(0.05)
    t_ended = time.time()
    b, _ = sbatch([], script=job_script(2, 3, f"--restore-from {ckpt} --stop-at-step 5"), workdir=wd)
    end = time.time() + 180
    while job_state(b) not in TERMINAL_STATES:
        if time.time() > end:
            raise SystemExit(f"job {b} did not end")
        time.sleep(0.2)
    out_a = read(os.path.join(wd, f"job-{a}.out"))
    out_b = read(os.path.join(wd, f"job-{b}.out"))
    stop, first = event(out_a, "stop"), event(out_b, "first_step")
    if not stop or not first or job_state(a) != "COMPLETED" or job_state(b) != "COMPLETED":
        raise SystemExit(f"restart failed: A {job_state(a)}:\n{out_a}\nB {job_state(b)}:\n{out_b}")
    return {"case": "restart", "pause_s": round(first["t"] - stop["t"], 3), "from": stop["world"],
            "to": first["world"], "state_mb": STATE_MB, "phases": {"stop_to_job_end": round(t_ended - stop["t"], 3),
                                                                   "resubmit_to_first_step": round(first["t"] - t_ended, 3)}}


def main():
    g = grow4()
    print(json.dumps(g), flush=True)
    r = restart()
    print(json.dumps(r), flush=True)
    ratio = r["pause_s"] / g["pause_s"]
    print(json.dumps({"case": "restart_vs_grow4", "pause_s": 0, "ratio": round(ratio, 2), "target": 10,
                      "met": ratio >= 10}), flush=True)


if __name__ == "__main__":
    main()
