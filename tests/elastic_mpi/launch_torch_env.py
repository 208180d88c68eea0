"""elastic_mpi.launch_torchrun_env: torchrun's environment as elastic-launch sets it (docs/interfaces.md
section 2, "torchrun's variables"), without torch: every rank prints its variables as JSON.

* Two node groups of one job (node group 0 with 2 ranks through mpirun and the rank shim, node
  group 1 with 1 rank as a direct child; shared run dir) give ranks 0..2 of one world of 3:
  RANK = ranks of the groups before + LOCAL_RANK, one MASTER_ADDR (a name that resolves) and
  MASTER_PORT for all, GROUP_RANK, TORCHELASTIC_RUN_ID = the job id, restart counts 0.
* A joining group (--join) gets only LOCAL_RANK, LOCAL_WORLD_SIZE and TORCHELASTIC_*; the world's
  variables are removed even when its launcher's environment has stale ones.
* The job script's MASTER_ADDR/MASTER_PORT win; a bad MASTER_PORT stops the launch with a clear
  error (exit 69); a node group that never comes, or only a stale record from an earlier launch
  in the same run dir, stops it after --wait (exit 69) instead of starting a world that would hang.
* The rank shim run by hand (outside mpirun) is refused with a usage error (exit 2); given each
  node's first rank (one mpirun over several nodes), it numbers each rank's node, and refuses a
  rank mapped off its node's place (exit 71) and a malformed list (exit 2).

usage: launch_torch_env.py BIN
"""

import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time

DUMP = ("import json, os; print('ENV ' + json.dumps({k: v for k, v in os.environ.items() if k in ("
        "'RANK', 'LOCAL_RANK', 'WORLD_SIZE', 'LOCAL_WORLD_SIZE', 'GROUP_RANK', 'GROUP_WORLD_SIZE', 'ROLE_RANK', "
        "'ROLE_WORLD_SIZE', 'ROLE_NAME', 'MASTER_ADDR', 'MASTER_PORT', 'TORCHELASTIC_RESTART_COUNT', "
        "'TORCHELASTIC_MAX_RESTARTS', 'TORCHELASTIC_RUN_ID', 'TORCHELASTIC_USE_AGENT_STORE', "
        "'ELASTIC_LOCAL_RANK', 'USE_LIBUV')}, sort_keys=True), flush=True)")
failures = []
started = []  # every launcher, stopped on the way out


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)


def ranks_of(out):
    # mpirun forwards the ranks' output through its own I/O channel, where two ranks' lines may
    # end up on one line: find each rank's object wherever it is (the objects hold no braces).
    return [json.loads(obj) for obj in re.findall(r"ENV (\{[^{}]*\})", out)]


def start(launcher, args, env, program=None):
    cmd = [launcher] + args + ["--", sys.executable, "-c", DUMP] if program is None else [launcher] + args + program
    started.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    return started[-1]


def finish(proc, timeout=60):
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.terminate()  # the launcher forwards it to its ranks and stops its ompi-server
        out, _ = proc.communicate()
        out += f"\n(did not end within {timeout} s)"
    return proc.returncode, out


def main():
    with tempfile.TemporaryDirectory(prefix="elastic-torch-env.") as work:
        try:
            checks(os.path.join(sys.argv[1], "elastic-launch"), work)
        finally:
            for proc in started:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
    if failures:
        sys.exit(f"FAIL: {len(failures)} check(s): " + "; ".join(failures))
    print("all checks passed")


def checks(launcher, work):
    run_dir = os.path.join(work, "run")
    base = dict(os.environ, ELASTIC_JOB_ID=f"torchenv{os.getpid()}", ELASTIC_NODE_GROUPS="2",
                TORCHELASTIC_USE_AGENT_STORE="True")  # must not reach the ranks: rank 0 serves the store
    for k in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "USE_LIBUV"):
        base.pop(k, None)

    # Two node groups, 2 + 1 ranks.
    g0 = start(launcher, ["-n", "2", "--oversubscribe", "--run-dir", run_dir], dict(base, ELASTIC_NODE_GROUP="0"))
    g1 = start(launcher, ["-n", "1", "--run-dir", run_dir], dict(base, ELASTIC_NODE_GROUP="1"))
    (rc0, out0), (rc1, out1) = finish(g0), finish(g1)
    print(out0, out1)
    check(rc0 == 0 and rc1 == 0, f"both node groups exit 0 ({rc0}, {rc1})")
    r0, r1 = ranks_of(out0), ranks_of(out1)
    check(len(r0) == 2 and len(r1) == 1, f"2 + 1 ranks report ({len(r0)}, {len(r1)})")
    every = r0 + r1
    check(sorted(int(r.get("RANK", -1)) for r in every) == [0, 1, 2], "RANK 0..2 across the node groups")
    for r in every:
        rank = int(r.get("RANK", -1))
        group = 0 if r in r0 else 1
        check(int(r.get("LOCAL_RANK", -1)) == rank - (0 if group == 0 else 2), f"rank {rank}: RANK = offset + LOCAL_RANK")
        check(r.get("ELASTIC_LOCAL_RANK") == r.get("LOCAL_RANK"), f"rank {rank}: ELASTIC_LOCAL_RANK = LOCAL_RANK")
        check(r.get("ROLE_RANK") == r.get("RANK"), f"rank {rank}: ROLE_RANK = RANK")
        check(r.get("WORLD_SIZE") == "3" and r.get("ROLE_WORLD_SIZE") == "3", f"rank {rank}: WORLD_SIZE 3")
        check(r.get("LOCAL_WORLD_SIZE") == ("2" if group == 0 else "1"), f"rank {rank}: LOCAL_WORLD_SIZE")
        check(r.get("GROUP_RANK") == str(group) and r.get("GROUP_WORLD_SIZE") == "2", f"rank {rank}: GROUP_RANK {group}")
        check(r.get("TORCHELASTIC_RUN_ID") == base["ELASTIC_JOB_ID"], f"rank {rank}: TORCHELASTIC_RUN_ID = the job id")
        check(r.get("TORCHELASTIC_RESTART_COUNT") == "0" and r.get("TORCHELASTIC_MAX_RESTARTS") == "0",
              f"rank {rank}: TORCHELASTIC_RESTART_COUNT and _MAX_RESTARTS 0")
        check("TORCHELASTIC_USE_AGENT_STORE" not in r, f"rank {rank}: no TORCHELASTIC_USE_AGENT_STORE")
        check(r.get("ROLE_NAME") == "default", f"rank {rank}: ROLE_NAME default")
        check(r.get("USE_LIBUV") == "0", f"rank {rank}: USE_LIBUV=0 (env:// without libuv, in every PyTorch)")
    masters = {(r.get("MASTER_ADDR"), r.get("MASTER_PORT")) for r in every}
    check(len(masters) == 1, f"one MASTER_ADDR:MASTER_PORT for all ranks ({masters})")
    addr, port = next(iter(masters))
    check(port is not None and 1 <= int(port) <= 65535, f"MASTER_PORT {port} is a TCP port")
    try:
        socket.getaddrinfo(addr, int(port))
        check(True, f"MASTER_ADDR {addr} resolves")
    except (OSError, TypeError) as e:
        check(False, f"MASTER_ADDR {addr} resolves ({e})")

    # A joining group: only the local values, whatever its launcher's environment holds. It joins
    # a job whose rendezvous runs (on Open MPI 5 the job's DVM launches the group's ranks): a
    # base of one rank that waits, stopped afterwards.
    uri_file = os.path.join(run_dir, "rendezvous.uri")
    with open(uri_file) as f:
        old_uri = f.read()
    holder = start(launcher, ["-n", "1", "--run-dir", run_dir], dict(base, ELASTIC_NODE_GROUPS="1"),
                   program=["--", sys.executable, "-c", "import time; time.sleep(60)"])
    for _ in range(200):
        try:
            with open(uri_file) as f:
                new_uri = f.read()
        except FileNotFoundError:
            new_uri = ""
        if new_uri.endswith("\n") and new_uri != old_uri:
            break
        time.sleep(0.1)
    stale = dict(base, RANK="7", WORLD_SIZE="9", MASTER_ADDR="stale.example", MASTER_PORT="1", GROUP_RANK="3")
    stale.pop("ELASTIC_NODE_GROUPS")
    rc, out = finish(start(launcher, ["--join", "--uri", uri_file, "-n", "2", "--oversubscribe", "--run-dir", run_dir],
                           stale))
    print(out)
    joined = ranks_of(out)
    holder.terminate()  # the launcher forwards SIGTERM to its rank and stops the rendezvous
    finish(holder)
    check(rc == 0 and len(joined) == 2, f"a joining group of 2 runs (exit {rc}, {len(joined)} ranks)")
    check(sorted(r.get("LOCAL_RANK") for r in joined) == ["0", "1"], "joining ranks: LOCAL_RANK 0, 1")
    for r in joined:
        check(r.get("LOCAL_WORLD_SIZE") == "2" and r.get("TORCHELASTIC_RUN_ID") == base["ELASTIC_JOB_ID"],
              f"joining rank {r.get('LOCAL_RANK')}: LOCAL_WORLD_SIZE 2, TORCHELASTIC_RUN_ID")
        absent = [k for k in ("RANK", "ROLE_RANK", "WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT") if k in r]
        check(not absent, f"joining rank {r.get('LOCAL_RANK')}: no world variables ({absent})")

    # The job script's MASTER_ADDR/MASTER_PORT win (one node: one rank, a direct child).
    one = dict(base, ELASTIC_NODE_GROUPS="1", MASTER_ADDR="localhost", MASTER_PORT="29555")
    rc, out = finish(start(launcher, ["--run-dir", os.path.join(work, "one")], one))
    got = ranks_of(out)
    check(rc == 0 and len(got) == 1 and got[0].get("MASTER_ADDR") == "localhost" and got[0].get("MASTER_PORT") == "29555"
          and got[0].get("RANK") == "0" and got[0].get("WORLD_SIZE") == "1", f"the job script's MASTER_* win: {out}")
    rc, out = finish(start(launcher, ["--run-dir", os.path.join(work, "bad")], dict(one, MASTER_PORT="port")))
    check(rc == 69 and "MASTER_PORT='port' is not a TCP port" in out, f"a bad MASTER_PORT: exit 69 and why ({rc}: {out})")

    # Node group 1 never comes; its record of the first launch is stale (another rendezvous URI).
    rc, out = finish(start(launcher, ["-n", "1", "--wait", "5", "--run-dir", run_dir], dict(base, ELASTIC_NODE_GROUP="0")))
    check(rc == 69 and "node group(s) 1 published no rank count" in out and "ENV " not in out,
          f"a missing node group: exit 69 and why, no rank started ({rc}: {out})")

    # The shim by hand.
    env = {k: v for k, v in os.environ.items() if not k.startswith("OMPI_COMM_WORLD")}
    proc = subprocess.run([launcher, "--rank-shim", "0", "--", "true"], env=env, capture_output=True, text=True)
    check(proc.returncode == 2 and "OMPI_COMM_WORLD_LOCAL_RANK" in proc.stderr,
          f"the rank shim outside mpirun: exit 2 and why ({proc.returncode}: {proc.stderr})")

    # The shim of one mpirun over several nodes (spanning_world.h): the nodes' first ranks "0,2,3"
    # (2, 1 and 2 ranks); Open MPI's values as it would set them for each rank.
    def shim(offset, rank, local, size=5):
        e = dict(env, OMPI_COMM_WORLD_RANK=str(rank), OMPI_COMM_WORLD_LOCAL_RANK=str(local),
                 OMPI_COMM_WORLD_SIZE=str(size))
        p = subprocess.run([launcher, "--rank-shim", offset, "--", sys.executable, "-c", DUMP + "\n" +
                            "print('NODE', os.environ.get('GROUP_RANK'), os.environ.get('LOCAL_WORLD_SIZE'), "
                            "os.environ.get('ELASTIC_LOCAL_SIZE'), flush=True)"],
                           env=e, capture_output=True, text=True)
        got = ranks_of(p.stdout)
        node = re.search(r"^NODE (\S+) (\S+) (\S+)$", p.stdout, re.M)
        return p.returncode, (got[0] if got else {}), (node.groups() if node else None), p.stderr
    for rank, local, want in ((0, 0, ("0", "2", "2")), (1, 1, ("0", "2", "2")), (2, 0, ("1", "1", "1")),
                              (4, 1, ("2", "2", "2"))):
        rc, r, node, err = shim("0,2,3", rank, local)
        check(rc == 0 and r.get("RANK") == str(rank) and r.get("LOCAL_RANK") == str(local) and node == want,
              f"spanning shim, rank {rank}: RANK, LOCAL_RANK, GROUP_RANK/LOCAL_WORLD_SIZE {want} ({rc}: {r} {node} {err})")
    rc, r, node, err = shim("0,2,3", 3, 1)
    check(rc == 71 and "not mapped node by node" in err, f"a rank off its node's place: exit 71 and why ({rc}: {err})")
    for bad in ("2,4", "0,,3", "0,3,3", "x"):
        rc, r, node, err = shim(bad, 0, 0)
        check(rc == 2 and "the offset must be" in err, f"shim offset {bad!r}: exit 2 and why ({rc}: {err})")


if __name__ == "__main__":
    main()
