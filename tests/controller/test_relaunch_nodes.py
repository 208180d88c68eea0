"""A relaunch onto another node and back (docs/runtime.md, "Relaunch"), as elasticd is to drive it
where the MPI cannot grow a world onto a node in place (Open MPI 5.0). A job of the job user
holds n2 (an extension job's stand-in); a job on n1 trains with `elastic-launch -n 2`, and the
test plays elasticd through the runtime's command directory:
- relaunch over n1 (2 ranks) + n2 (2 ranks, its daemon started through `srun --jobid=<holder>
  --overlap`): the world ends at a rescale point and the launcher starts it again, 4 ranks on two
  nodes, from the step it reached;
- relaunch over n1 alone: the DVM is started again without n2, and nothing of the job is left
  running in the holder's allocation (its node could be given back);
then the job trains to the end at 2 ranks: every sample exactly once, the model as a 2-rank run's.
On Open MPI 4 (rendezvous ompi-server) the launcher relaunches on its own node only: the runtime
refuses the first command before the world stops, and the job trains to the end unchanged."""

import json
import os
import re
import subprocess
import time
import unittest

from clustertest import ClusterTestCase, job_state, job_workdir, read, run, sbatch, wait_job
from e2e import LAUNCH, TRAINER, wait_until

ENV = ("export OMPI_MCA_btl=self,tcp OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo "
       "OMPI_MCA_pml=ob1 OMPI_MCA_mtl=^ofi")
TRAIN = f"{TRAINER} --samples 2000 --epochs 3 --batch 64"
STATE_MB = 100  # registered state besides the model, as the rescale bench's (docs/runtime.md, "Measured")


def rendezvous_kind():
    out = subprocess.run([LAUNCH, "--help"], capture_output=True, text=True).stdout
    return "prte-dvm" if "prte-dvm" in out else "ompi-server"


class RelaunchNodesTest(ClusterTestCase):

    def setUp(self):
        self.jobs = []

    def tearDown(self):
        for j in self.jobs:
            run(["scancel", str(j)], check=False)

    def submit(self, args, script, wd):
        job, proc = sbatch(args, script=script, workdir=wd)
        self.assertIsNotNone(job, proc.stderr)
        self.jobs.append(job)
        return job

    def steps_of(self, job):
        out = run(["squeue", "-h", "-s", "-j", str(job), "-o", "%i"], check=False).stdout.split()
        return [s for s in out if not s.endswith((".batch", ".extern"))]

    def test_relaunch_onto_another_node_and_back(self):
        prte = rendezvous_kind() == "prte-dvm"
        wd = job_workdir("relaunch-nodes")
        commands = os.path.join(wd, "commands")
        os.makedirs(commands)
        os.chmod(commands, 0o777)
        os.makedirs(os.path.join(wd, "ids"))
        os.chmod(os.path.join(wd, "ids"), 0o777)
        # The reference: the same training at 2 ranks, never relaunched (n3).
        ref = self.submit(["-N1", "-w", "n3", "--gres=gpu:1", "-o", "ref.out"], f"""#!/bin/bash
{ENV}
{LAUNCH} -n 2 --oversubscribe --run-dir {wd}/ref-run -- {TRAIN} --model-out {wd}/ref.model
""", wd)
        holder = self.submit(["-N1", "-w", "n2", "--gres=gpu:1", "-o", "/dev/null"], "#!/bin/bash\nsleep 600\n", wd)
        job = self.submit(["-N1", "-w", "n1", "--gres=gpu:1", "-o", "job.out"], f"""#!/bin/bash
{ENV}
export ELASTIC_COMMAND_DIR={commands} ELASTIC_POLL_INTERVAL_S=0.2
{LAUNCH} -n 2 --oversubscribe --run-dir {wd}/run -- {TRAIN} --sleep-ms 100 --model-out {wd}/job.model \\
  --ids-dir {wd}/ids --state-mb {STATE_MB}
""", wd)
        wait_until(lambda: job_state(holder) == "RUNNING" and os.path.exists(os.path.join(wd, "run", "rendezvous.uri")),
                   60, "the holder running and the job's rendezvous up")
        out_path = os.path.join(wd, "job.out")
        # elasticd's agent for a node its extension job holds: a process started inside that job.
        agent = ["env", "-u", "SLURM_JOB_ID", "-u", "SLURM_JOBID", "-u", "SLURM_STEP_ID", "-u", "SLURM_STEPID",
                 "srun", f"--jobid={holder}", "--overlap", "-N1", "-n1", "-w", "n2"]

        def relaunch(name, world):
            with open(os.path.join(commands, name + ".tmp"), "w") as f:
                json.dump({"action": "relaunch", "world": world}, f)
            os.rename(os.path.join(commands, name + ".tmp"), os.path.join(commands, name + ".json"))

        time.sleep(2)
        relaunch("a", [{"node": "n1", "ranks": 2}, {"node": "n2", "ranks": 2, "agent": agent}])
        if not prte:
            wait_until(lambda: "relaunch refused" in read(out_path), 30, "the relaunch refused")
            self.assertEqual(wait_job(job, timeout=180), "COMPLETED", read(out_path))
            self.assertRegex(read(out_path), r"done: \d+ steps, world 2,")
            return
        wait_until(lambda: "relaunched world of 4 ranks" in read(out_path), 60, "the world relaunched over n1 and n2")
        # Ranks really run on n2: its daemon is a step of the holder's job.
        wait_until(lambda: self.steps_of(holder), 10, "the DVM's daemon on n2 as a step of the holder")
        time.sleep(2)
        relaunch("b", [{"node": "n1", "ranks": 2}])
        wait_until(lambda: "relaunched world of 2 ranks" in read(out_path), 60, "the world relaunched on n1 alone")
        wait_until(lambda: not self.steps_of(holder), 20, "nothing of the job left in the holder's allocation")
        run(["scancel", str(holder)], check=False)
        self.assertEqual(wait_job(job, timeout=240), "COMPLETED", read(out_path))
        self.assertEqual(wait_job(ref, timeout=120), "COMPLETED", read(os.path.join(wd, "ref.out")))
        out = read(out_path)
        at = [int(x) for x in re.findall(r"relaunch at step (\d+)", out)]
        began = [int(x) for x in re.findall(r"relaunched world of \d+ ranks at step (\d+)", out)]
        self.assertEqual(len(at), 2, out)
        self.assertEqual(at, began, "each world goes on from the step the one before it reached")
        steps = re.search(r"done: (\d+) steps", read(os.path.join(wd, "ref.out"))).group(1)
        self.assertRegex(out, rf"done: {steps} steps, world 2,")
        ids = run([TRAINER, "--verify-ids", os.path.join(wd, "ids"), "--samples", "2000", "--epochs", "3"], check=False)
        self.assertEqual(ids.returncode, 0, ids.stdout + ids.stderr)
        pauses = [float(x) for x in re.findall(r"relaunch done: \d+ ranks at step \d+, pause ([0-9.e+-]+) s", out)]
        self.assertEqual(len(pauses), 2, out)
        for line in out.splitlines():  # where the pauses went (the launcher's and the new worlds' lines)
            if line.startswith("elastic-launch: relaunch:") or "relaunch done:" in line or "restored its state" in line:
                print(line)
        print(json.dumps({"bench": "relaunch_nodes", "worlds": ["n1:2+n2:2", "n1:2"], "pause_s": pauses,
                          "state_mb": STATE_MB}), flush=True)
        same = run([TRAINER, "--compare", os.path.join(wd, "ref.model"), os.path.join(wd, "job.model"),
                    "--tolerance", "1e-9"], check=False)
        self.assertEqual(same.returncode, 0, same.stdout + same.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
