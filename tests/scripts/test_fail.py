#!/usr/bin/env python3
"""scripts.fail: every script of scripts/ fails loudly (scripts/lib/fail.sh).

On an error a script names its step, the command, its exit status, the file and the line; a
command used as a condition is not an error; and every executable script of scripts/ sources
the library before anything else can fail.
"""
import os
import re
import subprocess
import sys
import tempfile
import unittest

SOURCE_DIR = os.environ.get("ELASTIC_SOURCE_DIR",
                            os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
LIB = os.path.join(SOURCE_DIR, "scripts", "lib", "fail.sh")


def run_script(body):
    with tempfile.NamedTemporaryFile("w", suffix=".sh", delete=False) as f:
        f.write(f"#!/usr/bin/env bash\nsource {LIB}\n{body}")
        path = f.name
    try:
        return subprocess.run(["bash", path], capture_output=True, text=True, timeout=30), path
    finally:
        os.unlink(path)


class FailTest(unittest.TestCase):

    def test_a_failure_names_step_command_status_and_line(self):
        proc, path = run_script('fail_step "copying the plugin"\n'
                                'cp() { command cp "$@"; }\n'
                                'cp /nonexistent/elastic.so /tmp/\n'
                                'echo "not reached"\n')
        self.assertEqual(proc.returncode, 1)
        self.assertNotIn("not reached", proc.stdout)
        name = os.path.basename(path)
        self.assertRegex(proc.stderr, re.escape(f'{name}: FAILED in step "copying the plugin": ')
                         + r'`command cp "\$@"` exited with status 1 \(' + re.escape(path) + r', line 4\)')
        self.assertEqual(proc.stderr.count("FAILED"), 1, proc.stderr)

    def test_the_status_is_kept(self):
        proc, _ = run_script('fail_step "exit 7"\n( exit 7 )\n')
        self.assertEqual(proc.returncode, 7)
        self.assertIn('FAILED in step "exit 7"', proc.stderr)

    def test_conditions_and_pipes(self):
        proc, _ = run_script('if false; then :; fi\nfalse || true\n! false\nwhile false; do :; done\n'
                             'echo ok\n')
        self.assertEqual((proc.returncode, proc.stdout, proc.stderr), (0, "ok\n", ""))
        proc, _ = run_script('fail_step "a pipe"\nfalse | cat\necho "not reached"\n')
        self.assertEqual(proc.returncode, 1)
        # bash names the pipeline's last command; the line says which pipeline it was.
        self.assertRegex(proc.stderr, r'FAILED in step "a pipe": `cat` exited with status 1 \(.*, line 4\)')

    def test_unset_variable_is_an_error(self):
        proc, _ = run_script('echo "$NO_SUCH_VARIABLE_HERE"\necho "not reached"\n')
        self.assertNotEqual(proc.returncode, 0)
        self.assertNotIn("not reached", proc.stdout)

    def test_every_script_sources_the_library_first(self):
        scripts_dir = os.path.join(SOURCE_DIR, "scripts")
        checked = 0
        for name in sorted(os.listdir(scripts_dir)):
            path = os.path.join(scripts_dir, name)
            if not os.path.isfile(path) or not os.access(path, os.X_OK):
                continue
            with open(path) as f:
                code = [line for line in f.read().splitlines() if line.strip() and not line.startswith("#")]
            self.assertTrue(code and "lib/fail.sh" in code[0],
                            f"scripts/{name}: its first command must source lib/fail.sh, not {code[:1]}")
            checked += 1
        self.assertGreaterEqual(checked, 4)


if __name__ == "__main__":
    unittest.main(verbosity=2)
