"""The SPANK plugin on the local cluster: sbatch options, validation at submit, the batch step's
ELASTIC_* variables, site configuration errors, and jobs without elastic flags."""

import os
import re
import shutil
import subprocess
import unittest

from clustertest import (CLUSTER_DIR, JOB_USER, SLURM_CONF, ClusterTestCase, job_workdir, read, run,
                         sbatch, slurm_env, wait_job)

OPTIONS = ["elastic-gpus", "elastic-gpu-step", "elastic-batch", "elastic-local-batch", "elastic-lr-scaling",
           "elastic-model", "elastic-fuse", "no-elastic", "elastic-extension"]
CONTROLLER = f"127.0.0.1:{int(os.environ.get('ELASTIC_CLUSTER_PORT_BASE', '16800')) + 3}"

# (options, message the user must see); each is refused by sbatch before a job exists.
MALFORMED = [
    (["--elastic-gpus=8:4"], "elastic: --elastic-gpus: MIN 8 is greater than MAX 4"),
    (["--elastic-gpus=0:4"], "elastic: --elastic-gpus MIN must be at least 1"),
    (["--elastic-gpus=4"], "elastic: --elastic-gpus: '4' is not MIN:MAX (e.g. 2:8)"),
    (["--elastic-gpus=two:8"], "elastic: --elastic-gpus MIN 'two' is not a positive integer"),
    (["--elastic-gpus=2:8", "--elastic-gpu-step=3"], "elastic: --elastic-gpu-step 3 must divide --elastic-gpus MIN 2 and MAX 8"),
    (["--elastic-gpus=2:8", "--elastic-gpu-step=0"], "elastic: --elastic-gpu-step must be at least 1"),
    (["--elastic-gpus=2:8", "--elastic-batch=4096:256"], "elastic: --elastic-batch: MIN 4096 is greater than MAX 256"),
    (["--elastic-gpus=2:8", "--elastic-local-batch=x:64"], "elastic: --elastic-local-batch MIN 'x' is not a positive integer"),
    (["--elastic-gpus=2:8", "--elastic-lr-scaling=cubic"],
     "elastic: --elastic-lr-scaling: 'cubic' is not one of none, linear, sqrt or adascale"),
    (["--elastic-gpus=2:8", "--elastic-model=a b"],
     "elastic: --elastic-model: 'a b' may contain only letters, digits, '.', '-' and '_'"),
    (["--elastic-batch=256:512"], "elastic: --elastic-batch needs --elastic-gpus=MIN:MAX, which makes the job elastic"),
    (["--elastic-gpus=2:8", "--elastic-gpus=4:8"],
     "elastic: --elastic-gpus is given twice with different values (2:8 and 4:8)"),
    (["--elastic-gpus=4:8", "--elastic-batch=64:100", "--elastic-local-batch=32:64"],
     "elastic: the smallest global batch the job can run (--elastic-local-batch MIN 32 x --elastic-gpus MIN 4 = 128) "
     "exceeds --elastic-batch MAX 100"),
    (["--elastic-gpus=2:200000"], "elastic: --elastic-gpus MAX '200000' is too large (at most 100000)"),
    (["--elastic-gpus=2:2048"], "elastic: --elastic-gpus: MAX 2048 exceeds this cluster's limit of 1024 GPUs per elastic job"),
    (["--elastic-gpus=1:4", "--elastic-fuse=4"],
     "elastic: --elastic-fuse=4 is for job arrays, whose tasks are the sweep's trials: submit with --array "
     "(e.g. sbatch --array=0-7 --elastic-fuse=4 ...), or drop --elastic-fuse"),
    (["--array=0-3", "--elastic-gpus=2:4", "--elastic-gpu-step=2", "--elastic-fuse=4"],
     "elastic: --elastic-fuse cannot be combined with --elastic-gpu-step 2"),
    (["--array=0-3", "--elastic-gpus=1:4", "--elastic-fuse=65"], "elastic: --elastic-fuse '65' is too large (at most 64)"),
    (["--elastic-extension=5:1"], "elastic: --elastic-extension is set by elasticd on the jobs it submits; users cannot give it"),
]


def user_jobs():
    return run(["squeue", "-h", "-u", JOB_USER, "-o", "%i"]).stdout.split()


def env_of(output):
    return dict(line.split("=", 1) for line in output.splitlines() if re.match(r"^[A-Z_][A-Z0-9_]*=", line))


class SpankPluginTest(ClusterTestCase):

    @staticmethod
    def job_uid():
        return int(run(["id", "-u", JOB_USER]).stdout.strip())

    def test_help_lists_every_option(self):
        out = run(["sbatch", "--help"], user=JOB_USER).stdout
        for name in OPTIONS:
            self.assertRegex(out, rf"--{name}(=\S+)?\s+\[elastic\] ", f"--{name} missing from sbatch --help")

    def test_valid_elastic_job_sees_its_variables(self):
        wd = job_workdir("valid")
        job, proc = sbatch(["--elastic-gpus=2:8", "--elastic-batch=64:1024", "--elastic-local-batch=16:128",
                            "--elastic-lr-scaling=sqrt", "--elastic-model=mlp", "--gres=gpu:2", "-o", "out.txt"],
                           wrap="env | grep -E '^(ELASTIC_|SLURM_SPANK_ELASTIC)' | sort", workdir=wd)
        self.assertEqual(wait_job(job), "COMPLETED")
        out = read(os.path.join(wd, "out.txt"))
        env = env_of(out)
        expected = {"ELASTIC_GPUS_MIN": "2", "ELASTIC_GPUS_MAX": "8", "ELASTIC_GPU_STEP": "1",
                    "ELASTIC_BATCH_MIN": "64", "ELASTIC_BATCH_MAX": "1024", "ELASTIC_LOCAL_BATCH_MIN": "16",
                    "ELASTIC_LOCAL_BATCH_MAX": "128", "ELASTIC_LR_SCALING": "sqrt", "ELASTIC_MODEL": "mlp",
                    "ELASTIC_ROLE": "parent", "ELASTIC_JOB_ID": str(job), "ELASTIC_CONTROLLER": CONTROLLER,
                    "ELASTIC_SPEC_VERSION": "1"}
        for k, v in expected.items():
            self.assertEqual(env.get(k), v, f"{k} in\n{out}")
        self.assertEqual(env.get("SLURM_SPANK_ELASTIC_SPEC"),
                         "gpus=2:8 step=1 batch=64:1024 local_batch=16:128 lr=sqrt model=mlp")
        # No controller runs in this test: the job runs rigid, with exactly one clear warning.
        self.assertEqual(env.get("ELASTIC_MODE"), "rigid")
        warnings = re.findall(r"^elastic: warning: .*$", out, re.M)
        self.assertEqual(len(warnings), 1, out)
        self.assertIn(f"could not register with the elastic controller at {CONTROLLER}", warnings[0])
        self.assertIn("the job runs rigid at 2 GPUs", warnings[0])

    def test_malformed_values_are_refused_before_a_job_exists(self):
        before = user_jobs()
        for options, message in MALFORMED:
            with self.subTest(options=options):
                job, proc = sbatch(options + ["--gres=gpu:2"], wrap="true", workdir=job_workdir("bad"), check=False)
                self.assertIsNone(job)
                self.assertNotEqual(proc.returncode, 0)
                self.assertIn(message, proc.stderr)
                self.assertNotIn("Submitted batch job", proc.stdout)
        self.assertEqual(user_jobs(), before, "a refused submission left a job behind")
        states = run(["sinfo", "-h", "-N", "-o", "%t"]).stdout.split()
        self.assertTrue(all(s in ("idle", "mix", "alloc") for s in states), f"node states after refusals: {states}")

    def test_sbatch_lines_behave_like_the_command_line(self):
        before = user_jobs()
        for options, message in MALFORMED[:8]:
            with self.subTest(options=options):
                wd = job_workdir("script")
                lines = "".join(f"#SBATCH {o}\n" for o in options + ["--gres=gpu:2"])
                job, proc = sbatch([], script=f"#!/bin/bash\n{lines}true\n", workdir=wd, check=False)
                self.assertIsNone(job)
                self.assertIn(message, proc.stderr)
        self.assertEqual(user_jobs(), before)
        # A valid spec in #SBATCH lines reaches the job like one on the command line.
        wd = job_workdir("script-ok")
        job, _ = sbatch([], script="#!/bin/bash\n#SBATCH --elastic-gpus=2:6\n#SBATCH --elastic-gpu-step=2\n"
                                   "#SBATCH --gres=gpu:2\n#SBATCH -o out.txt\nenv | grep ^ELASTIC_ | sort\n", workdir=wd)
        self.assertEqual(wait_job(job), "COMPLETED")
        env = env_of(read(os.path.join(wd, "out.txt")))
        self.assertEqual((env.get("ELASTIC_GPUS_MIN"), env.get("ELASTIC_GPUS_MAX"), env.get("ELASTIC_GPU_STEP")),
                         ("2", "6", "2"))
        # The same value on an #SBATCH line and the command line is fine; a different one is not.
        wd = job_workdir("script-both")
        script = "#!/bin/bash\n#SBATCH --elastic-gpus=2:6\n#SBATCH --gres=gpu:2\ntrue\n"
        job, _ = sbatch(["--elastic-gpus=2:6"], script=script, workdir=wd)
        self.assertEqual(wait_job(job), "COMPLETED")
        job, proc = sbatch(["--elastic-gpus=2:8"], script=script, workdir=wd, check=False)
        self.assertIsNone(job)
        self.assertIn("--elastic-gpus is given twice with different values", proc.stderr)

    def test_fused_sweep_is_accepted_as_an_array_only(self):
        # --array on the command line, in an #SBATCH line and in SBATCH_ARRAY_INX alike.
        wd = job_workdir("fuse")
        job, _ = sbatch(["--array=0-1", "--elastic-gpus=1:2", "--elastic-fuse=2", "--gres=gpu:1", "-o", "out-%a.txt"],
                        wrap="env | grep ^ELASTIC_FUSE", workdir=wd)
        self.assertEqual([wait_job(f"{job}_{i}") for i in (0, 1)], ["COMPLETED", "COMPLETED"])
        self.assertEqual(env_of(read(os.path.join(wd, "out-0.txt"))).get("ELASTIC_FUSE_MAX_PER_GPU"), "2")
        script = "#!/bin/bash\n#SBATCH --array=0\n#SBATCH --elastic-gpus=1:2\n#SBATCH --elastic-fuse=2\n" \
                 "#SBATCH --gres=gpu:1\ntrue\n"
        job, proc = sbatch([], script=script, workdir=wd, check=False)
        self.assertIsNotNone(job, proc.stderr)
        self.assertEqual(wait_job(f"{job}_0"), "COMPLETED")
        script = "#!/bin/bash\n#SBATCH --elastic-gpus=1:2\n#SBATCH --elastic-fuse=2\n#SBATCH --gres=gpu:1\ntrue\n"
        job, proc = sbatch([], script=script, workdir=wd, check=False)
        self.assertIsNone(job)
        self.assertIn("--elastic-fuse=2 is for job arrays", proc.stderr)

    def test_min_inconsistent_with_the_gpu_request_never_reaches_the_program(self):
        wd = job_workdir("inconsistent")
        marker = os.path.join(wd, "program-ran")
        job, _ = sbatch(["--elastic-gpus=4:8", "--gres=gpu:2", "-o", "out.txt"], wrap=f"touch {marker}", workdir=wd)
        self.assertEqual(wait_job(job), "FAILED")
        self.assertFalse(os.path.exists(marker), "the user's program ran")
        out = read(os.path.join(wd, "out.txt"))
        self.assertIn("elastic: error: --elastic-gpus MIN is 4 but the job was allocated 2 GPUs: MIN must equal "
                      "the job's own GPU request", out)
        states = run(["sinfo", "-h", "-N", "-o", "%N %t"]).stdout
        self.assertNotIn("drain", states)

    def test_job_without_elastic_flags_is_untouched(self):
        wd = job_workdir("plain")
        # The user's own ELASTIC_* variables pass through a rigid job exactly as without the plugin.
        proc = run(["sbatch", "--parsable", f"--chdir={wd}", "--gres=gpu:1", "-o", "out.txt", "--wrap", "env | sort"],
                   user=JOB_USER, env={"ELASTIC_MODE": "user-value", "MY_VAR": "1"})
        self.assertEqual(proc.stderr, "")
        job = int(proc.stdout.strip())
        self.assertEqual(wait_job(job), "COMPLETED")
        env = env_of(read(os.path.join(wd, "out.txt")))
        self.assertEqual(env.get("ELASTIC_MODE"), "user-value")
        self.assertEqual(env.get("MY_VAR"), "1")
        self.assertNotIn("SLURM_SPANK_ELASTIC_SPEC", env)
        self.assertEqual([k for k in env if k.startswith("ELASTIC_")], ["ELASTIC_MODE"])
        self.assertNotRegex(read(os.path.join(wd, "out.txt")), r"(?m)^elastic: ")

    def test_forged_variables_are_replaced_in_elastic_jobs(self):
        wd = job_workdir("forged")
        proc = run(["sbatch", "--parsable", f"--chdir={wd}", "--elastic-gpus=1:4", "--gres=gpu:1", "-o", "out.txt",
                    "--wrap", "env | grep ^ELASTIC_ | sort"], user=JOB_USER,
                   env={"ELASTIC_MODE": "elastic", "ELASTIC_JOIN_TOKEN": "forged", "ELASTIC_ROLE": "extension",
                        "ELASTIC_RENDEZVOUS_URI": "evil"})
        job = int(proc.stdout.strip())
        self.assertEqual(wait_job(job), "COMPLETED")
        env = env_of(read(os.path.join(wd, "out.txt")))
        self.assertEqual(env.get("ELASTIC_MODE"), "rigid")
        self.assertEqual(env.get("ELASTIC_ROLE"), "parent")
        self.assertNotIn("ELASTIC_JOIN_TOKEN", env)
        self.assertNotIn("ELASTIC_RENDEZVOUS_URI", env)

    def test_hostile_environment_never_reaches_privileged_code(self):
        """LD_PRELOAD and PATH chosen by the user: the plugin's root code in slurmstepd and
        slurmd never loads or runs what they name (it execs nothing and links munge directly);
        only the user's own processes see them."""
        wd = job_workdir("hostile")
        evil_dir = os.path.join(wd, "evil")
        os.makedirs(evil_dir)
        marks = os.path.join(wd, "marks")
        os.makedirs(marks)
        os.chmod(marks, 0o1777)
        src = os.path.join(evil_dir, "evil.c")
        with open(src, "w") as f:
            f.write('#include <stdio.h>\n#include <unistd.h>\n'
                    '__attribute__((constructor)) static void mark(void) {\n'
                    f'  char p[512]; snprintf(p, sizeof p, "{marks}/preload-uid-%u-pid-%d", geteuid(), getpid());\n'
                    '  FILE* f = fopen(p, "w"); if (f) fclose(f);\n}\n')
        lib = os.path.join(evil_dir, "evil.so")
        run(["gcc", "-shared", "-fPIC", "-o", lib, src])
        # Programs a privileged helper might look up through PATH.
        for name in ("munge", "scontrol", "sh", "env", "sbatch", "elastic-launch"):
            path = os.path.join(evil_dir, name)
            with open(path, "w") as f:
                f.write(f"#!/bin/bash\ntouch {marks}/path-{name}-uid-$(id -u)\nexit 0\n")
            os.chmod(path, 0o755)
        for root, dirs, files in os.walk(wd):
            for n in dirs + files:
                shutil.chown(os.path.join(root, n), user=JOB_USER, group=JOB_USER)
        # Set by the user's own env(1), so that no root process of the test itself sees them.
        hostile = [f"LD_PRELOAD={lib}", f"PATH={evil_dir}:/usr/bin:/bin", "ELASTIC_MODE=elastic",
                   "ELASTIC_CONTROLLER=127.0.0.1:1", "ELASTIC_MUNGE_SOCKET=/tmp/evil.socket"]
        proc = run(["/usr/bin/env", *hostile, "/usr/bin/sbatch", "--parsable", f"--chdir={wd}", "--elastic-gpus=1:4",
                    "--gres=gpu:1", "-o", "out.txt", "--wrap", "/usr/bin/env | /usr/bin/grep ^ELASTIC_ | /usr/bin/sort"],
                   user=JOB_USER)
        job = int(proc.stdout.strip())
        self.assertEqual(wait_job(job), "COMPLETED")
        got = env_of(read(os.path.join(wd, "out.txt")))
        # The plugin tried the site's controller (none runs here), not the user's: rigid, with the
        # site's address in its warning and the site's munge socket in the job.
        self.assertEqual(got.get("ELASTIC_MODE"), "rigid")
        self.assertIn(f"could not register with the elastic controller at {CONTROLLER}", read(os.path.join(wd, "out.txt")))
        self.assertNotEqual(got.get("ELASTIC_MUNGE_SOCKET"), "/tmp/evil.socket")
        made = sorted(os.listdir(marks))
        # The user's own processes (the job's shell, sbatch itself) loaded the library: the test is live.
        self.assertTrue(any(m.startswith(f"preload-uid-{self.job_uid()}-") for m in made), made)
        self.assertEqual([m for m in made if "-uid-0" in m], [], "root code loaded or ran what the user chose")
        self.assertEqual([m for m in made if m.startswith("path-")], [])

    def test_extension_not_submitted_by_the_controller_fails_before_the_program(self):
        wd = job_workdir("fake-ext")
        marker = os.path.join(wd, "program-ran")
        proc = run(["sbatch", "--parsable", f"--chdir={wd}", "--gres=gpu:1", "-o", "out.txt",
                    "--export=ALL,_SLURM_SPANK_OPTION_elastic_elastic_extension=5:1", "--wrap", f"touch {marker}"],
                   user=JOB_USER)
        job = int(proc.stdout.strip())
        self.assertEqual(wait_job(job), "FAILED")
        self.assertFalse(os.path.exists(marker))
        self.assertIn("elastic: error: this job claims to extend job 5 but was not submitted by the elastic "
                      "controller", read(os.path.join(wd, "out.txt")))

    def test_salloc_and_srun_refuse_elastic_options(self):
        for tool in ("salloc", "srun"):
            with self.subTest(tool=tool):
                proc = run([tool, "--elastic-gpus=2:8", "--gres=gpu:2", "true"], user=JOB_USER, check=False,
                           cwd=CLUSTER_DIR)
                self.assertNotEqual(proc.returncode, 0)
                self.assertIn(f"elastic: elastic jobs are batch jobs: submit them with sbatch ({tool} cannot run them)",
                              proc.stderr)

    def test_srun_inside_an_elastic_job_works(self):
        wd = job_workdir("steps")
        job, _ = sbatch(["-N2", "--elastic-gpus=4:8", "--gres=gpu:2", "-o", "out.txt"],
                        wrap='srun -l bash -c "echo step \\$SLURMD_NODENAME \\$ELASTIC_GPUS_MIN"', workdir=wd)
        self.assertEqual(wait_job(job), "COMPLETED")
        steps = re.findall(r"^\d+: step (n\d) 4$", read(os.path.join(wd, "out.txt")), re.M)
        self.assertEqual(len(set(steps)), 2)

    def test_srun_inside_a_no_elastic_job_works(self):
        # sbatch passes --no-elastic on to the job's sruns through the environment: each srun
        # must accept it as the flag it is.
        wd = job_workdir("no-elastic-steps")
        job, _ = sbatch(["--no-elastic", "--elastic-gpus=2:8", "--gres=gpu:2", "-o", "out.txt"],
                        wrap=r'srun -n1 bash -c "echo step ok \${ELASTIC_GPUS_MIN:-rigid}"', workdir=wd)
        self.assertEqual(wait_job(job), "COMPLETED", read(os.path.join(wd, "out.txt")))
        self.assertIn("step ok rigid", read(os.path.join(wd, "out.txt")))

    def test_bad_plugstack_argument_keeps_the_plugin_from_loading(self):
        # A private copy of slurm.conf whose PlugStackConfig names a broken plugin line; only the
        # sbatch of this test reads it.
        d = os.path.join(CLUSTER_DIR, "jobs", "badconf")
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        plugin = os.path.join(CLUSTER_DIR, "lib", "elastic.so")
        cases = [
            (f"required {plugin} controller={CONTROLLER} colour=blue",
             "elastic: plugstack.conf: unknown key 'colour' (known keys: enabled, controller, max_gpus, max_batch, "
             "partitions, default_lr_scaling, register_timeout, gpu_types, munge_socket); the plugin is not loaded"),
            (f"required {plugin} controller={CONTROLLER} max_gpus=-3",
             "elastic: plugstack.conf: max_gpus: '-3' is not a non-negative integer; the plugin is not loaded"),
            (f"required {plugin}", "elastic: plugstack.conf: controller=HOST:PORT is required (or enabled=0)"),
        ]
        for line, message in cases:
            with self.subTest(line=line):
                with open(os.path.join(d, "plugstack.conf"), "w") as f:
                    f.write(line + "\n")
                conf = os.path.join(d, "slurm.conf")
                with open(SLURM_CONF) as src, open(conf, "w") as dst:
                    for l in src:
                        dst.write(f"PlugStackConfig={d}/plugstack.conf\n" if l.startswith("PlugStackConfig=") else l)
                os.chmod(d, 0o755)
                proc = run(["sbatch", "--gres=gpu:1", "--wrap", "true"], user=JOB_USER, check=False,
                           env={"SLURM_CONF": conf}, cwd=d)
                self.assertNotEqual(proc.returncode, 0)
                self.assertIn(message, proc.stderr)
                self.assertNotIn("Submitted batch job", proc.stdout)

    def test_disabled_site_accepts_flags_and_runs_rigid(self):
        d = os.path.join(CLUSTER_DIR, "jobs", "disabled")
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        plugin = os.path.join(CLUSTER_DIR, "lib", "elastic.so")
        with open(os.path.join(d, "plugstack.conf"), "w") as f:
            f.write(f"required {plugin} enabled=0\n")
        conf = os.path.join(d, "slurm.conf")
        with open(SLURM_CONF) as src, open(conf, "w") as dst:
            for l in src:
                dst.write(f"PlugStackConfig={d}/plugstack.conf\n" if l.startswith("PlugStackConfig=") else l)
        os.chmod(d, 0o777)
        proc = run(["sbatch", "--parsable", "--elastic-gpus=1:4", "--gres=gpu:1", "--wrap", "true"], user=JOB_USER,
                   env={"SLURM_CONF": conf}, cwd=d)
        self.assertIn("elastic: elastic scheduling is disabled on this cluster; the job will run rigid at 1 GPUs",
                      proc.stderr)
        self.assertEqual(wait_job(int(proc.stdout.strip())), "COMPLETED")


if __name__ == "__main__":
    unittest.main(verbosity=2)
