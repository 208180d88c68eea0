"""Driver of python.mpi_collectives: mpirun -np 2 of mpi_collectives_program.py with the
standalone schedule 2->3->5->3->2 (every 4 steps). usage: run_mpi_collectives.py MPIEXEC"""

import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    mpiexec = sys.argv[1]
    with tempfile.TemporaryDirectory(prefix="elastic-py-mpi.") as work:
        out = os.path.join(work, "summary.json")
        metrics = os.path.join(work, "metrics.jsonl")
        env = dict(os.environ, ELASTIC_STANDALONE="1", ELASTIC_SCHEDULE="2->3->5->3->2", ELASTIC_SCHEDULE_EVERY="4",
                   ELASTIC_METRICS_FILE=metrics)
        cmd = [mpiexec, "--oversubscribe", "-np", "2", sys.executable, "-B",
               os.path.join(HERE, "mpi_collectives_program.py"), out]
        print(" ".join(cmd), flush=True)
        rc = subprocess.run(cmd, env=env, timeout=150).returncode
        if rc != 0:
            sys.exit(f"FAIL: mpirun exited with {rc}")
        with open(out) as f:
            summary = json.load(f)
        print(summary)
        with open(metrics) as f:
            rescales = [json.loads(line) for line in f if '"type":"rescale"' in line]
        for r in rescales:
            print(r)
        sizes = summary["sizes"]
        expected = [2] * 4 + [3] * 4 + [5] * 4 + [3] * 4 + [2] * 8
        if summary["steps"] != 24 or sizes != expected:
            sys.exit(f"FAIL: sizes per step {sizes}, expected {expected}")
        # 24 steps of 12 over epochs of 97 samples (the last step of an epoch is short).
        if summary["samples"] != 24 * 12 - 2 * 11 or summary["epoch"] != 2:
            sys.exit(f"FAIL: {summary['samples']} samples, epoch {summary['epoch']}")
        if [r["gpus"] for r in rescales] != [3, 5, 3, 2]:
            sys.exit(f"FAIL: rescales {[r['gpus'] for r in rescales]}")
    print("PASS")


if __name__ == "__main__":
    main()
