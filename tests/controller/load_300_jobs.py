"""Load test: elasticd with many running elastic jobs on an enlarged local cluster of its own and a
stream of metrics messages at 10x their normal rate. Two ctest names run it:

  bench.elasticd_load      (label bench, on demand): 300 jobs on 76 nodes x 4 fake GPUs
  slurm.elasticd_load_100  (label slurm, in scripts/test): 100 jobs on 26 nodes x 4 fake GPUs

(ELASTIC_BENCH_JOBS, ELASTIC_BENCH_NODES). Promises: every array task of the jobs launched (it
registered with elasticd, was never requeued or held, and ended as it was ended: cancelled by the
test, nothing else), no message lost (each one sent is accepted and counted for its job), and,
timed (ELASTIC_LOAD_TIMED_TARGETS, below), every epoch under 1 s and the stream at its rate.

Brings up its own cluster (ELASTIC_BENCH_CLUSTER_DIR, ports from ELASTIC_BENCH_PORT_BASE; CMake
derives both from the test cluster's so that build trees on one machine do not collide), starts
elasticd, submits an array of elastic jobs (one GPU each, up to four), registers a launcher for
each (so that the optimizer plans every job, none is frozen). Then, for six epochs,
`elasticd-bench metrics` sends metrics as the jobs' owner: rank 0 of a job sends one message per
metrics interval (5 s), so 10x is 2 messages per job per second (600 per second for 300 jobs).
Then it cancels the array and checks every task's end in accounting. Prints one JSON line (epoch
times from elasticd's journal, the stream's figures, the per-job counts compared, the tasks'
launch and end, and the target checks: "targets", "met") and exits 1 with one line naming every
missed target (docs/results.md, "Benchmark targets"; ELASTIC_BENCH_TIGHTEN tightens every target,
tests/bench/benchtarget.py). A task that fails to launch stops the test at once, with what the
job's output, accounting and the Slurm logs say about it. Everything it started is stopped at the
end.
"""

import glob
import json
import os
import re
import sqlite3
import statistics
import subprocess
import sys
import time

import benchtarget

JOBS = int(os.environ.get("ELASTIC_BENCH_JOBS", "300"))
METRICS_INTERVAL_S = 5  # the runtime's default (docs/interfaces.md)
LOAD_FACTOR = 10
NODES = int(os.environ.get("ELASTIC_BENCH_NODES", "76"))
os.environ["ELASTIC_CLUSTER_DIR"] = os.environ.get("ELASTIC_BENCH_CLUSTER_DIR", "/tmp/elastic-bench-live")
os.environ["ELASTIC_CLUSTER_PORT_BASE"] = os.environ.get("ELASTIC_BENCH_PORT_BASE", "39800")
# Reasons a pending array task may show before it starts; any other (held, requeued, begin time
# after a failed start, a node down) is a launch that went wrong.
STARTING_REASONS = {"None", "Priority", "Resources"}
# Timed targets (epochs in the window, the longest epoch, the stream's rate) are benchmark figures:
# "enforce" (bench.elasticd_load) fails on a miss; "report" (slurm.elasticd_load_100, which also
# runs in CI's Debian 13 check on the cycles the rest leaves idle) prints them under "timed_targets"
# and on stderr, and fails on the exact promises (messages, jobs, tasks) and on loose floors (an
# epoch ran; none took 10 s or more).
TIMED_TARGETS = os.environ.get("ELASTIC_LOAD_TIMED_TARGETS", "enforce")
if TIMED_TARGETS not in ("enforce", "report"):
    sys.exit(f"ELASTIC_LOAD_TIMED_TARGETS='{TIMED_TARGETS}' is neither 'enforce' nor 'report'")

from clustertest import CLUSTER_DIR, JOB_USER, PORT_BASE, run  # noqa: E402  (after the environment)
from elasticd_fixture import MUNGE_SOCKET, PORT, Elasticd  # noqa: E402
from wireclient import WireClient  # noqa: E402

CLUSTER = os.path.join(os.environ.get("ELASTIC_SOURCE_DIR", ""), "scripts", "cluster")


def cluster(*args):
    return subprocess.run([CLUSTER, *args, "--dir", CLUSTER_DIR, "--port-base", PORT_BASE, "--nodes", str(NODES)],
                          capture_output=True, text=True, timeout=600)


def launch_diagnostics(jobs_dir, tasks):
    """What the job outputs, accounting and the Slurm logs say about array tasks (ARRAY_TASK ids)
    that failed to start."""
    lines = []
    for task in tasks:
        path = os.path.join(jobs_dir, f"{task}.out")
        if os.path.exists(path):
            with open(path) as f:
                lines.append(f"--- {path}\n{f.read()[-2000:]}")
        jid = run(["squeue", "-h", "-j", task, "-t", "all", "-o", "%A"], check=False).stdout.strip()
        if not jid:
            continue
        fields = "JobID,State,Reason,ExitCode,DerivedExitCode,NodeList,Start,End"
        acct = run(["sacct", "-n", "-P", "-D", "-j", jid, "-o", fields], check=False).stdout.strip()
        lines.append(f"--- sacct -D -j {jid} ({fields.replace(',', '|')})\n{acct}")
        # slurmctld names a task JobId=N or JobId=A_T(N), slurmd "job N" or "[N.batch]".
        mention = re.compile(rf"(JobId={jid}\b|JobId=\d+_\d+\({jid}\)|\bjob {jid}\b|\[{jid}\.)")
        for log in sorted(glob.glob(os.path.join(CLUSTER_DIR, "log", "*.log"))):
            with open(log, errors="replace") as f:
                hits = [line.rstrip() for line in f if mention.search(line)]
            if hits:
                lines.append(f"--- {os.path.basename(log)} (job {jid})\n" + "\n".join(hits[-15:]))
    return "\n".join(lines)


def array_states(array):
    """squeue's view of every task of the array: [(task, job id, state, reason)]."""
    out = run(["squeue", "-h", "-r", "-j", array, "-t", "all", "-o", "%i|%A|%T|%r"]).stdout
    return [tuple(line.split("|", 3)) for line in out.splitlines() if line.count("|") == 3]


def launch_problems(array):
    """Array tasks whose start went wrong: ended, or pending for a reason other than waiting to start."""
    return [t for t in array_states(array)
            if t[2] not in ("RUNNING", "PENDING") or (t[2] == "PENDING" and t[3] not in STARTING_REASONS)]


def stop_on_launch_problems(array, jobs_dir, when):
    bad = launch_problems(array)
    if bad:
        sys.exit(f"{len(bad)} tasks of the array did not launch as submitted ({when}): {bad[:5]}\n" +
                 launch_diagnostics(jobs_dir, [t[0] for t in bad[:3]]))


def accounted_ends(array, jobs, timeout=90):
    """Every run of every task of the array in accounting once all have ended (sacct -D: a requeued
    task has a row per run): {job id: [(state, reason)]}; waits for slurmdbd to have them all."""
    end = time.time() + timeout
    runs = {}
    while time.time() < end:
        out = run(["sacct", "-n", "-P", "-X", "-D", "-j", array, "-o", "JobIDRaw,State,Reason"], check=False).stdout
        runs = {}
        for line in out.splitlines():
            parts = line.split("|")
            if len(parts) == 3 and parts[0].isdigit():
                runs.setdefault(int(parts[0]), []).append((parts[1], parts[2]))
        done = [r for rs in runs.values() for r in rs if r[0] not in ("RUNNING", "PENDING", "REQUEUED", "COMPLETING")]
        if len(runs) >= jobs and len(done) == sum(len(rs) for rs in runs.values()):
            break
        time.sleep(2)
    return runs


def main():
    factor = benchtarget.tighten_factor()  # a bad value stops the run before the cluster starts
    up = cluster("up")
    if up.returncode != 0:
        sys.exit(f"cluster up failed: {up.stderr}")
    d = None
    try:
        d = Elasticd(f"load-{os.path.basename(CLUSTER_DIR)}", epoch=5).start()
        jobs_dir = os.path.join(CLUSTER_DIR, "jobs")
        submitted = time.time()
        out = run(["sbatch", "--parsable", f"--array=0-{JOBS - 1}", "--elastic-gpus=1:4", "--gres=gpu:1",
                   f"--chdir={jobs_dir}", "-o", "%A_%a.out", "--wrap", "sleep 1800"], user=JOB_USER, cwd=jobs_dir)
        array = out.stdout.strip().split(";")[0]
        limit_s = 60 + JOBS  # measured on 2 cores: 100 jobs ~5 s, 300 ~33 s (a second wave by backfill)
        end = time.time() + limit_s
        registered = []
        while time.time() < end:
            registered = json.loads(d.ctl("status", "--json").stdout)["jobs"]
            if len(registered) >= JOBS:
                break
            stop_on_launch_problems(array, jobs_dir, "before the load was applied")
            time.sleep(2)
        registered_s = time.time() - submitted
        if len(registered) < JOBS:
            sys.exit(f"only {len(registered)} of {JOBS} jobs registered within {limit_s} s: "
                     f"{[t for t in array_states(array) if t[2] != 'RUNNING'][:5]}")
        tasks = {int(t[1]) for t in array_states(array)}
        strangers = sorted({j["job_id"] for j in registered} - tasks)
        if strangers or len(tasks) != JOBS:
            sys.exit(f"elasticd's jobs are not the array's {JOBS} tasks: {len(tasks)} tasks, registered but "
                     f"not of the array: {strangers[:5]}")
        client = WireClient(PORT, user=JOB_USER)
        for j in registered:
            reply = client.call({"type": "launcher", "job": j["job_id"], "rendezvous_uri": "bench",
                                 "argv": ["/bin/sleep", "1"], "cwd": jobs_dir, "env": {}})
            if not reply.get("ok"):
                stop_on_launch_problems(array, jobs_dir, "while their launchers registered")
                sys.exit(f"launcher registration refused: {reply}")
        before = {j["job_id"]: j["metrics_received"] for j in json.loads(d.ctl("status", "--json").stdout)["jobs"]}
        rate = LOAD_FACTOR * len(registered) / METRICS_INTERVAL_S
        t0 = time.time()
        # Six epochs with every job plannable, under the metrics stream.
        stream = run([os.path.join(CLUSTER_DIR, "bin", "elasticd-bench"), "metrics",
                      "--jobs", ",".join(str(j["job_id"]) for j in registered), "--rate", str(rate),
                      "--seconds", str(6 * 5), "--connections", "8", "--controller", f"127.0.0.1:{PORT}",
                      "--munge-socket", MUNGE_SOCKET], user=JOB_USER, check=False, timeout=300)
        if not stream.stdout.strip():
            sys.exit(f"elasticd-bench metrics printed nothing (exit {stream.returncode}): {stream.stderr}")
        figures = json.loads(stream.stdout.strip().splitlines()[-1])
        after = {j["job_id"]: j["metrics_received"] for j in json.loads(d.ctl("status", "--json").stdout)["jobs"]}
        db = sqlite3.connect(d.db)
        rows = db.execute("SELECT duration_ms, jobs FROM epochs WHERE started_at >= ? ORDER BY id", (t0,)).fetchall()
        db.close()
        plan = json.loads(d.ctl("plan", "--dry-run", "--json").stdout)
        durations = [r[0] for r in rows]
        counted = {job: after.get(job, 0) - before.get(job, 0) for job in before}
        accepted = {int(k): v for k, v in figures["accepted_per_job"].items()}
        mismatched = [job for job in set(counted) | set(accepted) if counted.get(job, 0) != accepted.get(job, 0)]
        result = {"bench": "elasticd_load", "elastic_jobs": len(registered), "nodes": NODES,
                  "epochs": len(durations), "epoch_ms_median": round(statistics.median(durations), 2) if durations else None,
                  "epoch_ms_max": round(max(durations), 2) if durations else None, "target_ms": 1000,
                  "dry_run_plan_ms": plan.get("stage_ms"),
                  "metrics_rate_target": rate, "metrics_rate_achieved": round(figures["rate_achieved"], 1),
                  "metrics_sent": figures["sent"], "metrics_ok": figures["ok"],
                  "metrics_refused": figures["refused"], "metrics_failed": figures["failed"],
                  "metrics_counted": sum(counted.values()), "jobs_mismatched": len(mismatched),
                  "latency_ms_p50": round(figures["latency_ms_p50"], 2),
                  "latency_ms_p99": round(figures["latency_ms_p99"], 2)}
        # The promises: every message accepted and counted for its job (exact); 5 or more epochs in
        # the 30 s (6 are due), every epoch under 1 s, the stream at 90% of its rate or more (timed:
        # enforced by the bench, reported by the suite's run, see TIMED_TARGETS).
        checks = [benchtarget.check("metrics_not_accepted", figures["sent"] - figures["ok"], "<=", 0, factor),
                  benchtarget.check("metrics_miscounted", abs(sum(counted.values()) - figures["sent"]), "<=", 0,
                                    factor),
                  benchtarget.check("jobs_mismatched", len(mismatched), "<=", 0, factor)]
        timed = [benchtarget.check("epochs", len(durations), ">=", 5, factor),
                 benchtarget.check("epoch_ms_max", max(durations) if durations else None, "<", 1000, factor),
                 benchtarget.check("metrics_rate_fraction", figures["rate_achieved"] / rate, ">=", 0.9, factor)]
        if TIMED_TARGETS == "enforce":
            checks += timed
        else:
            # Loose floors still hold however busy the machine: elasticd ran epochs under the load,
            # none of them stalled.
            checks += [benchtarget.check("epochs_run", len(durations), ">=", 1, factor),
                       benchtarget.check("epoch_ms_max_stall", max(durations) if durations else None, "<", 10000,
                                         factor)]
            result["timed_targets"] = timed
            if benchtarget.missed(timed):
                print(f"elasticd_load: timed figure missed (reported only; bench.elasticd_load enforces it): "
                      f"{benchtarget.missed(timed)}", file=sys.stderr)
        # Every task launched once and ends as the test ends it: cancelled, nothing else.
        stop_on_launch_problems(array, jobs_dir, "under the load")
        run(["scancel", array], user=JOB_USER)
        runs = accounted_ends(array, JOBS)
        # sacct's state of a cancelled job reads "CANCELLED by UID".
        not_cancelled = {job: rs for job, rs in runs.items()
                         if len(rs) != 1 or rs[0][0].split()[0] != "CANCELLED"}
        result.update({"registered_s": round(registered_s, 1), "tasks_accounted": len(runs),
                       "tasks_not_cancelled_once": len(not_cancelled)})
        # Counts of the array's own tasks: exact, never tightened.
        checks += [benchtarget.check("tasks_accounted", len(runs), ">=", JOBS, 1),
                   benchtarget.check("tasks_not_cancelled_once", len(not_cancelled), "<=", 0, 1)]
        print(json.dumps(benchtarget.add_checks(result, checks, factor)), flush=True)
        if not_cancelled:
            print(f"tasks that did not end as cancelled, once: {dict(list(not_cancelled.items())[:5])}",
                  file=sys.stderr)
        if figures["sent"] != figures["ok"] and stream.stderr.strip():
            print("elasticd-bench metrics: " + stream.stderr.strip()[-500:], file=sys.stderr)
        benchtarget.finish("elasticd_load", checks, f"{len(registered)} elastic jobs")
    finally:
        if d:
            d.stop()
        # ELASTIC_BENCH_KEEP=1 keeps the cluster's directory (logs, job outputs) for a look after a failure.
        cluster("down", *([] if os.environ.get("ELASTIC_BENCH_KEEP") else ["--purge"]))


if __name__ == "__main__":
    main()
