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
  join4    the same change the way elasticd makes it (path (b) of docs/runtime.md): a group of 4
           ranks is launched separately (as an extension job's elastic-launch --join), starts and
           initialises while the 2-rank parent trains with 100 MB of state, and joins through
           connect/accept when the grow command arrives. pause_s = the parent's pause, as for grow4.
Prints one JSON line per case, then {"case": "restart_vs_grow4", "ratio": ...} and
{"case": "restart_vs_join4", "ratio": ...} (target >= 10 each, with "targets" and "met"), and exits 1
with one line naming each ratio below its target (docs/results.md, "Benchmark targets";
ELASTIC_BENCH_TIGHTEN tightens every target, tests/bench/benchtarget.py).
"""

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time

import benchtarget
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


def join4():
    """A 4-rank group joins a running 2-rank world through connect/accept, as an extension does."""
    work = tempfile.mkdtemp(prefix="bench-join4-")
    os.makedirs(os.path.join(work, "commands"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("ELASTIC_")}
    env.update(MPI_ENV)
    env.update({"ELASTIC_JOB_ID": f"join4-{os.getpid()}", "ELASTIC_POLL_INTERVAL_S": "0.05",
                "ELASTIC_CONNECT_TIMEOUT_S": "60", "ELASTIC_LOG_LEVEL": "verbose"})
    bin_dir = os.path.join(BUILD_DIR, "bin")
    trainer = [os.path.join(bin_dir, "elastic-train-logreg"), "--sleep-ms", "20", "--samples", "4096",
               "--epochs", "1000", "--state-mb", str(STATE_MB)]
    token = "0123456789abcdef0123456789abcdef"
    parent_log = open(os.path.join(work, "parent.log"), "w")
    joiner_log = open(os.path.join(work, "joiner.log"), "w")
    parent = subprocess.Popen([os.path.join(bin_dir, "elastic-launch"), "-n", "2", "--oversubscribe", "--run-dir",
                               os.path.join(work, "run"), "--", *trainer], stdout=parent_log, stderr=subprocess.STDOUT,
                              env=dict(env, ELASTIC_COMMAND_DIR=os.path.join(work, "commands"),
                                       ELASTIC_METRICS_FILE=os.path.join(work, "metrics.jsonl")))
    joiner = None
    try:
        uri = os.path.join(work, "run", "rendezvous.uri")
        end = time.time() + 60
        while not (os.path.exists(uri) and os.path.getsize(uri) > 0) and time.time() < end:
            time.sleep(0.05)
        joiner = subprocess.Popen([os.path.join(bin_dir, "elastic-launch"), "--join", "-n", "4", "--oversubscribe",
                                   "--uri", uri, "--", *trainer], stdout=joiner_log, stderr=subprocess.STDOUT,
                                  env=dict(env, ELASTIC_GROUP_ID="1", ELASTIC_JOIN_TOKEN=token))
        # The group is up (MPI initialised, its state allocated) before elasticd would send the grow.
        while "is up: waiting for" not in read(os.path.join(work, "joiner.log")):
            if time.time() > end or joiner.poll() is not None:
                raise SystemExit("the joining group did not come up:\n" + read(os.path.join(work, "joiner.log")))
            time.sleep(0.05)
        time.sleep(1)  # the parent trains on meanwhile
        with open(os.path.join(work, "commands", "001.json"), "w") as f:
            json.dump({"action": "grow", "group": 1, "join_token": token}, f)
        metrics = os.path.join(work, "metrics.jsonl")
        record = None
        while record is None:
            if time.time() > end + 60:
                raise SystemExit("no join:\n" + read(os.path.join(work, "parent.log")))
            for line in (read(metrics) if os.path.exists(metrics) else "").splitlines():
                if '"what":"join"' in line:
                    record = json.loads(line)
            time.sleep(0.1)
        return {"case": "join4", "pause_s": round(record["pause_s"], 3), "from": 2, "to": record["gpus"],
                "state_mb": STATE_MB, "phases": record.get("phases", {})}
    finally:
        for p in (joiner, parent):
            if p is not None and p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in (joiner, parent):
            if p is not None:
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    p.kill()
        parent_log.close()
        joiner_log.close()
        shutil.rmtree(work, ignore_errors=True)


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


TARGET_RATIO = 10  # a checkpoint-restart pauses the job at least 10x longer than growing it in place


def main():
    factor = benchtarget.tighten_factor()  # a bad value stops the run before it starts
    g = grow4()
    print(json.dumps(g), flush=True)
    j = join4()
    print(json.dumps(j), flush=True)
    r = restart()
    print(json.dumps(r), flush=True)
    all_checks = []
    for name, case in (("grow4", g), ("join4", j)):
        ratio = r["pause_s"] / case["pause_s"]
        checks = [benchtarget.check(f"restart_vs_{name}", ratio, ">=", TARGET_RATIO, factor)]
        line = {"case": f"restart_vs_{name}", "pause_s": 0, "ratio": round(ratio, 2), "target": TARGET_RATIO}
        print(json.dumps(benchtarget.add_checks(line, checks, factor)), flush=True)
        all_checks += checks
    benchtarget.finish("bench_restart", all_checks, f"restart pause {r['pause_s']} s")


if __name__ == "__main__":
    main()
