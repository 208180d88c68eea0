"""Benchmark (label bench): elasticd's epoch time with 300 running elastic jobs on an enlarged
local cluster (76 nodes x 4 fake GPUs), target under 1 s.

Brings up its own cluster (directory /tmp/elastic-bench-live, ports from 39800), starts elasticd,
submits 300 elastic jobs (one GPU each, up to four), registers a launcher for each (so that the
optimizer plans every job, none is frozen), lets elasticd run a few epochs and prints one JSON
line with the median epoch time from elasticd's journal and the time of a dry-run plan.
Everything it started is stopped at the end.
"""

import json
import os
import sqlite3
import statistics
import subprocess
import sys
import time

JOBS = int(os.environ.get("ELASTIC_BENCH_JOBS", "300"))
NODES = int(os.environ.get("ELASTIC_BENCH_NODES", "76"))
os.environ["ELASTIC_CLUSTER_DIR"] = os.environ.get("ELASTIC_BENCH_CLUSTER_DIR", "/tmp/elastic-bench-live")
os.environ["ELASTIC_CLUSTER_PORT_BASE"] = os.environ.get("ELASTIC_BENCH_PORT_BASE", "39800")

from clustertest import CLUSTER_DIR, JOB_USER, PORT_BASE, run  # noqa: E402  (after the environment)
from elasticd_fixture import PORT, Elasticd  # noqa: E402
from wireclient import WireClient  # noqa: E402

CLUSTER = os.path.join(os.environ.get("ELASTIC_SOURCE_DIR", ""), "scripts", "cluster")


def cluster(*args):
    return subprocess.run([CLUSTER, *args, "--dir", CLUSTER_DIR, "--port-base", PORT_BASE, "--nodes", str(NODES)],
                          capture_output=True, text=True, timeout=600)


def main():
    up = cluster("up")
    if up.returncode != 0:
        sys.exit(f"cluster up failed: {up.stderr}")
    d = None
    try:
        d = Elasticd("bench-live", epoch=5).start()
        jobs_dir = os.path.join(CLUSTER_DIR, "jobs")
        out = run(["sbatch", "--parsable", f"--array=0-{JOBS - 1}", "--elastic-gpus=1:4", "--gres=gpu:1",
                   f"--chdir={jobs_dir}", "-o", "/dev/null", "--wrap", "sleep 1800"], user=JOB_USER, cwd=jobs_dir)
        array = out.stdout.strip().split(";")[0]
        end = time.time() + 600
        registered = []
        while time.time() < end:
            registered = json.loads(d.ctl("status", "--json").stdout)["jobs"]
            if len(registered) >= JOBS:
                break
            time.sleep(2)
        if len(registered) < JOBS:
            sys.exit(f"only {len(registered)} of {JOBS} jobs registered within 600 s")
        client = WireClient(PORT, user=JOB_USER)
        for j in registered:
            reply = client.call({"type": "launcher", "job": j["job_id"], "rendezvous_uri": "bench",
                                 "argv": ["/bin/sleep", "1"], "cwd": jobs_dir, "env": {}})
            if not reply.get("ok"):
                sys.exit(f"launcher registration refused: {reply}")
        t0 = time.time()
        time.sleep(6 * 5)  # six epochs with every job plannable
        db = sqlite3.connect(d.db)
        rows = db.execute("SELECT duration_ms, jobs FROM epochs WHERE started_at >= ? ORDER BY id", (t0,)).fetchall()
        db.close()
        plan = json.loads(d.ctl("plan", "--dry-run", "--json").stdout)
        durations = [r[0] for r in rows]
        print(json.dumps({"bench": "elasticd_epoch_live", "elastic_jobs": len(registered), "nodes": NODES,
                          "epochs": len(durations), "epoch_ms_median": round(statistics.median(durations), 2),
                          "epoch_ms_max": round(max(durations), 2), "dry_run_plan_ms": plan.get("stage_ms"),
                          "target_ms": 1000}), flush=True)
        run(["scancel", array], check=False)
    finally:
        if d:
            d.stop()
        cluster("down", "--purge")


if __name__ == "__main__":
    main()
