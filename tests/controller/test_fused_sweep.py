"""slurm-labelled: a fused sweep (jobscripts/sweep_fused.sbatch, --elastic-fuse) on the local
cluster. The array's first task to start leads the sweep and trains all 8 trials fused; elasticd
holds the other tasks (they take no GPU even when GPUs are free), widens the leader onto the idle
GPUs (its trials spread over the new ranks) and narrows it when a rigid job waits, ends each task
when the leader reports its trial done; every trial writes its own result, the same as the trial
trained alone; elastic-report's per-trial GPU-hours add up to sacct's GPU-hours of the array."""

import json
import os
import subprocess
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(SOURCE, "tests", "python"))

from clustertest import (CLUSTER_DIR, TERMINAL_STATES, job_workdir, read, run, sbatch, slurm_env,  # noqa: E402
                         tres)
from cluster_files import install_example, install_package  # noqa: E402
from e2e import ElasticdTestCase, extension_jobs, gpus_of, status, wait_until  # noqa: E402
from elasticd_fixture import BUILD_DIR  # noqa: E402

REPORT = os.path.join(BUILD_DIR, "bin", "elastic-report")
TRIALS = 8


def stamp(t):
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(t))


def array_tasks(array_job):
    """{task index: (state, reason)} of the array's tasks that have not ended."""
    out = run(["squeue", "-h", "-r", "-j", str(array_job), "-o", "%K|%T|%r", "--states=all"]).stdout
    rows = {}
    for line in out.splitlines():
        task, state, reason = line.split("|")
        if task.isdigit() and state not in TERMINAL_STATES:
            rows[int(task)] = (state, reason)
    return rows


def extension_accounting(leader, since):
    """sacct's allocations of the leader's extension jobs (admin comment elastic-ext parent=LEADER)."""
    out = run(["sacct", "-n", "-P", "-X", "--allusers", "-S", stamp(since), "-o",
               "JobID,AdminComment,AllocTRES,ElapsedRaw,State"]).stdout
    rows = []
    for line in out.splitlines():
        job, comment, alloc, elapsed, state = line.split("|")
        if comment.startswith(f"elastic-ext parent={leader} "):
            rows.append({"JobID": job, "State": state,
                         "gpu_s": int(tres(alloc).get("gres/gpu", "0")) * int(elapsed or 0)})
    return rows


def array_accounting(array_job, timeout=60):
    """sacct's allocations of the array's tasks once all have ended: [{JobID, State, gpu_s}]."""
    end = time.time() + timeout
    rows = []
    while time.time() < end:
        out = run(["sacct", "-n", "-P", "-X", "-j", str(array_job), "-o", "JobID,State,AllocTRES,ElapsedRaw"]).stdout
        rows = [dict(zip(["JobID", "State", "AllocTRES", "ElapsedRaw"], line.split("|"))) for line in out.splitlines()]
        if len(rows) == TRIALS and all(r["State"].split()[0] in TERMINAL_STATES for r in rows):
            for r in rows:
                r["gpu_s"] = int(tres(r["AllocTRES"]).get("gres/gpu", "0")) * int(r["ElapsedRaw"] or 0)
            return rows
        time.sleep(0.5)
    raise AssertionError(f"sacct has not every task of array {array_job} ended: {rows}")


class FusedSweepTest(ElasticdTestCase):

    def test_array_trains_fused_in_one_leader_and_bills_per_trial(self):
        pydir, script = install_package(), install_example("train_sweep_fused.py")
        with open(os.path.join(SOURCE, "jobscripts", "sweep_fused.sbatch")) as f:
            text = f.read()
        since = time.time() - 1
        # Every a100 GPU but one is busy: the array's first task starts alone and leads.
        blockers = [sbatch(["-N1", f"--gres=gpu:a100:{n}", "-o", "/dev/null"], wrap="sleep 300",
                           workdir=job_workdir("blocker"))[0] for n in (4, 3)]
        self.jobs += blockers
        wait_until(lambda: all(run(["squeue", "-h", "-j", str(b), "-o", "%T"]).stdout.strip() == "RUNNING"
                               for b in blockers), 30, "the blockers to run")
        wd = job_workdir("sweep")
        env = (f"ELASTIC_PREFIX={CLUSTER_DIR},ELASTIC_PYTHONPATH={pydir},TRAIN_SCRIPT={script},"
               f"ELASTIC_LOCAL_CLUSTER=1,TRAIN_STEPS=300,TRAIN_SLEEP_MS=120")
        array, _ = sbatch([f"--export=ALL,{env}", f"--array=0-{TRIALS - 1}", "--gres=gpu:a100:1",
                           "-o", "task-%a.out"], script=text, workdir=wd)
        self.jobs.append(array)
        leader = wait_until(lambda: next((j for j, s in status().items() if s.get("fuse")), None), 60,
                            "a fused sweep's leader to register")
        print(f"\narray {array}: leader job {leader}")
        # The other tasks are held: freed GPUs do not start them.
        for b in blockers:
            run(["scancel", str(b)])
        wait_until(lambda: all(run(["squeue", "-h", "-j", str(b), "-o", "%T"]).stdout.strip() in ("", "COMPLETED",
                                                                                                 "CANCELLED")
                               for b in blockers), 30, "the blockers to end")
        # Widened onto the idle GPUs while the other tasks stay held.
        wait_until(lambda: (gpus_of(leader) or 0) >= 2, 90, "the leader widened onto idle GPUs")
        widest = gpus_of(leader)
        tasks = array_tasks(array)
        running = [t for t, (state, _) in tasks.items() if state == "RUNNING"]
        self.assertLessEqual(len(running), 1, f"tasks besides the leader started: {tasks}")
        # Narrowed when a rigid job waits for the GPUs its extensions hold.
        rigid, _ = sbatch(["-N2", "--gres=gpu:a100:3", "-o", "/dev/null"], wrap="sleep 5",
                          workdir=job_workdir("rigid"))
        self.jobs.append(rigid)
        wait_until(lambda: run(["squeue", "-h", "-j", str(rigid), "-o", "%T", "--states=all"]).stdout.strip()
                   in ("RUNNING", "COMPLETING", "COMPLETED"), 90, "the rigid job to start")
        narrowed = gpus_of(leader)
        print(f"leader at 1 -> {widest} GPUs, {narrowed} once the rigid job started")
        self.assertIsNotNone(narrowed, "the sweep ended before the rigid job started: nothing was narrowed")
        self.assertLess(narrowed, widest)
        # Every trial completes with its own result, trained in the leader.
        wait_until(lambda: not array_tasks(array), 240, "every task of the array to end", interval=1)
        results = {}
        for t in range(TRIALS):
            path = os.path.join(wd, f"results-{array}", f"trial-{t}.json")
            self.assertTrue(os.path.exists(path), f"trial {t} has no result; leader's output:\n"
                            + "\n".join(read(os.path.join(wd, f)) for f in os.listdir(wd) if f.endswith(".out")))
            results[t] = json.loads(read(path))
            self.assertEqual(int(results[t]["job"]), leader, results[t])
            self.assertIn(results[t]["state"], ("finished", "stopped"))
            self.assertTrue(os.path.exists(results[t]["checkpoint"]))
        print("trials:", {t: (r["lr"], r["steps"], r["state"], round(r["loss"], 3)) for t, r in results.items()})
        # Nothing lost in the moves: each trial's run is the one it has trained alone in one process.
        ref = os.path.join(wd, "reference")
        p = subprocess.run(["/usr/bin/python3", script, "--out", ref, "--steps", "300", "--elasticctl", "/bin/true"],
                           env=dict(os.environ, PYTHONPATH=pydir, ELASTIC_FUSE_TRIALS=",".join(map(str, range(TRIALS))),
                                    ELASTIC_FUSE_MAX_PER_GPU="1", ELASTIC_JOB_ID="0", OMP_NUM_THREADS="1"),
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        for t in range(TRIALS):
            alone = json.loads(read(os.path.join(ref, f"trial-{t}.json")))
            self.assertEqual((results[t]["steps"], results[t]["state"]), (alone["steps"], alone["state"]), t)
            self.assertAlmostEqual(results[t]["loss"], alone["loss"], delta=1e-4, msg=f"trial {t}")
        # Accounting: per trial, adding up to sacct's GPU-hours of the array.
        rows = array_accounting(array)
        until = time.time() + 1
        p = subprocess.run([REPORT, "--since", stamp(since), "--until", stamp(until), "--by", "job", "--format", "json",
                            "--db", self.d.db], capture_output=True, text=True, timeout=60, env=slurm_env())
        self.assertEqual(p.returncode, 0, p.stderr)
        sweeps = [s for s in json.loads(p.stdout)["sweeps"] if s["array_job"] == array]
        self.assertEqual(len(sweeps), 1, p.stdout)
        sweep = sweeps[0]
        self.assertEqual(sweep["leader"], leader)
        self.assertEqual(sorted(t["task"] for t in sweep["trials"]), list(range(TRIALS)))
        for t in sweep["trials"]:
            self.assertEqual(t["steps"], results[t["task"]]["steps"], t)
        extensions = extension_accounting(leader, since)
        self.assertTrue(extensions, "sacct lists no extension job of the leader")
        sacct_h = sum(r["gpu_s"] for r in rows + extensions) / 3600.0
        trials_h = sum(t["gpu_hours"] for t in sweep["trials"])
        print(f"GPU-hours: sacct {sacct_h:.6f} (array tasks and {len(extensions)} extension jobs), "
              f"trials {trials_h:.6f}, leader {sweep['leader_gpu_hours']:.6f}")
        for t in sweep["trials"]:
            print(f"  {t['job_id']}: steps {t['steps']} {t['state']} {t['gpu_hours']:.6f} GPU-h "
                  f"(fused {t['fused_gpu_hours']:.6f}, own {t['own_gpu_hours']:.6f})")
        self.assertGreater(sacct_h, 0)
        self.assertAlmostEqual(trials_h, sacct_h, delta=1e-6 + 0.001 * sacct_h)
        self.assertAlmostEqual(sweep["gpu_hours"], sacct_h, delta=1e-6 + 0.001 * sacct_h)


if __name__ == "__main__":
    unittest.main()
