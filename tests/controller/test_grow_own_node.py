"""A job grows on its own node through an extension job, on either MPI stack: at 1 GPU of a node
with 4, elasticd extends it to 4 and its ranks join the running world. Where the runtime can
start ranks only on the node of the job's leader, and only while the world is on that node (Open
MPI 5: the job's PRRTE DVM; the launcher reports "grows_onto": "leader_node"), every extension
runs on that node, the job is never planned beyond what that node holds, and a job on two nodes
is not grown; with Open MPI 4 an extension may go to any node, and a two-node job grows."""

import json
import os
import re
import subprocess
import time
import unittest

from clustertest import job_workdir, read, run, sbatch, wait_job
from e2e import (CTL, LAUNCH, ElasticdTestCase, extension_jobs, gpus_of, status, submit_trainer, trainer_script,
                 wait_until)


def leader_node_only():
    """Whether this build's runtime reaches only the job leader's node (the rendezvous named by
    elastic-launch --help: prte-dvm)."""
    out = subprocess.run([LAUNCH, "--help"], capture_output=True, text=True, check=False).stdout
    return "prte-dvm" in out


def nodes_of(job):
    return run(["squeue", "-h", "-j", str(job), "-o", "%N", "--states=all"]).stdout.strip()


class GrowOwnNodeTest(ElasticdTestCase):
    def test_a_job_grows_on_its_own_node(self):
        # Every rank writes its environment: the ranks that join run with the job's own (a BLAS
        # tunable, say) and Slurm's variables of their own job. And the slurmstepd it runs under
        # (its nearest ancestor of that name, "slurmstepd: [JOB.STEP]"): the ranks that join run
        # inside their extension job, whose devices they use (with Slurm's device cgroup, GPUs of
        # another job are out of reach), also where the DVM's daemon that starts them runs in the
        # base job (Open MPI 5: elasticd's --rank-agent).
        dump = ("sh -c 'env > \"env-$SLURM_JOB_ID-$ELASTIC_LOCAL_RANK\"; p=$$; while [ \"$p\" -gt 1 ]; do "
                "c=$(tr \"\\0\" \" \" < /proc/$p/cmdline); case \"$c\" in slurmstepd*) "
                "echo \"$c\" > \"stepd-$SLURM_JOB_ID-$ELASTIC_LOCAL_RANK\"; break;; esac; n=1; "
                "while read k v r; do [ \"$k\" = PPid: ] && n=$v; done < /proc/$p/status; p=$n; done; "
                "exec \"$0\" \"$@\"' ")
        job, wd = submit_trainer("own-node", gpus=1, max_gpus=4, gpu_type="a100", epochs=100, wrapper=dump,
                                 env="OPENBLAS_CORETYPE=Haswell GROW_TEST_MARK='the job'\\''s own'")
        self.jobs.append(job)
        wait_until(lambda: status().get(job, {}).get("metrics_received", 0) > 0, 90, "the job's first step")
        parent_node = nodes_of(job)
        wait_until(lambda: gpus_of(job) == 4, 90, "the job at 4 GPUs")
        exts = extension_jobs(job)
        self.assertTrue(exts, "no extension job")
        if leader_node_only():
            for ext, _state, _user, _account in exts:
                self.assertEqual(nodes_of(ext), parent_node, f"extension {ext} ran outside the job's node")
        # The ranks joined the running world: the program says so, then trains on to the end.
        wait_until(lambda: re.search(r"join at step \d+: \d -> 4 ranks", read(os.path.join(wd, f"job-{job}.out"))),
                   60, "the join in the job's output")
        self.assertEqual(wait_job(job, timeout=240), "COMPLETED", read(os.path.join(wd, f"job-{job}.out"))[-2000:])
        for ext, _state, _user, _account in exts:
            dumps = [f for f in os.listdir(wd) if f.startswith(f"env-{ext}-")]
            self.assertTrue(dumps, f"no rank of extension {ext} wrote its environment")
            for f in dumps:
                env = dict(line.split("=", 1) for line in read(os.path.join(wd, f)).splitlines() if "=" in line)
                self.assertEqual(env.get("GROW_TEST_MARK"), "the job's own", f)
                self.assertEqual(env.get("OPENBLAS_CORETYPE"), "Haswell", f)
                self.assertEqual(env.get("SLURM_JOB_ID"), str(ext), f)
                self.assertEqual(env.get("ELASTIC_PARENT_JOB_ID"), str(job), f)
            stepds = [f for f in os.listdir(wd) if f.startswith(f"stepd-{ext}-")]
            self.assertEqual(len(stepds), len(dumps), f"ranks of extension {ext} without their slurmstepd: {stepds}")
            for f in stepds:
                self.assertTrue(read(os.path.join(wd, f)).startswith(f"slurmstepd: [{ext}."),
                                f"{f}: a rank of extension {ext} runs under {read(os.path.join(wd, f)).strip()!r}")

    def test_a_two_node_job_grows_only_where_its_runtime_can(self):
        # 1 GPU on each of two a100 nodes (n1, n2: 4 each), up to 8. With Open MPI 4 extensions
        # join a world of two node groups from those nodes; with Open MPI 5 a world on several
        # nodes cannot take new ranks (not even on the leader's node), so elasticd keeps the job
        # at 2 and says why in its plan ("several_nodes"); its world, one launch over both nodes
        # whose other launcher holds n2 until it ends, refuses a relaunch sent by hand.
        wd = job_workdir("two-node-grow")
        commands = os.path.join(wd, "commands")
        os.makedirs(commands)
        os.chmod(commands, 0o777)
        script = trainer_script(gpus=1, max_gpus=8, epochs=30, sbatch_lines="#SBATCH -N2",
                                env=f"ELASTIC_COMMAND_DIR={commands} ELASTIC_POLL_INTERVAL_S=0.2")
        script = script.replace("--elastic-gpus=1:8", "--elastic-gpus=2:8")
        job, _ = sbatch([], script=script, workdir=wd)
        self.jobs.append(job)
        out = os.path.join(wd, f"job-{job}.out")
        wait_until(lambda: status().get(job, {}).get("metrics_received", 0) > 0, 90, "the job's first step")
        self.assertEqual(len(expand(nodes_of(job))), 2, nodes_of(job))
        if leader_node_only():
            def decision():
                plan = json.loads(run([CTL, "--json", "plan", "--dry-run"]).stdout)
                return next((d for d in plan.get("decisions", []) if d.get("job") == job), None)
            d = wait_until(decision, 30, "elasticd's decision on the job")
            self.assertTrue(d.get("several_nodes"), d)
            self.assertEqual(d.get("target"), 2, d)
            with open(os.path.join(commands, "relaunch.tmp"), "w") as f:
                json.dump({"action": "relaunch", "world": [{"node": "n1", "ranks": 1}]}, f)
            os.rename(os.path.join(commands, "relaunch.tmp"), os.path.join(commands, "relaunch.json"))
            wait_until(lambda: "relaunch refused: the job's world spans 2 nodes whose launchers hold them until it "
                               "ends" in read(out), 30, "the relaunch refused")
            time.sleep(3 * self.EPOCH)  # epochs in which it would have grown
            self.assertEqual(gpus_of(job), 2)
            self.assertEqual(extension_jobs(job), [])
        else:
            wait_until(lambda: (gpus_of(job) or 0) > 2, 90, "the job above 2 GPUs")
            self.assertTrue(extension_jobs(job), "no extension job")
            wait_until(lambda: re.search(r"join at step \d+: \d -> \d ranks", read(out)), 60, "a join in the job's output")
        self.assertEqual(wait_job(job, timeout=300), "COMPLETED", read(out)[-3000:])


def expand(hostlist):
    return run(["scontrol", "show", "hostnames", hostlist]).stdout.split()


if __name__ == "__main__":
    unittest.main(verbosity=2)
