#!/usr/bin/env python3
"""slurm.nothing_left: after the suite, no process of it is left on the machine.

A process is the suite's when it is one of the programs the suite starts (Slurm's daemons and
step daemons, munged, MariaDB, elasticd, the MPI launchers, the project's programs) and it
refers to one of the suite's paths: the test clusters' directories, elasticd's test
directories, the build trees or the source tree, in its command line, environment, working
directory, executable or open files. slurmstepd rewrites its environment for its process title,
so its open log file is what ties it to a cluster. Processes in another root (a chroot such as
the fresh-machine check), processes of another local cluster (one whose files they use lies in a
directory with an etc/slurm.conf that is not the suite's: the demo's elasticd left by
`scripts/demo --keep` runs from the build tree, yet is not the suite's) and this process's own
ancestors are not looked at.

Usage: nothing_left.py [PATH-PREFIX...]   (default: the CTest environment's cluster, build and
source directories (ELASTIC_BUILD_DIR may list several, separated by ':'), and the suite's fixed
/tmp prefixes). Exit 0 when nothing is left, 1 with
one line per process otherwise.
"""
import os
import sys

PROGRAMS = {
    "slurmd", "slurmstepd", "slurmctld", "slurmdbd", "munged", "mariadbd", "mysqld",
    "elasticd", "elasticctl", "elasticd-bench", "mpirun", "mpiexec", "orterun", "orted", "prte",
    "prted", "prterun", "ompi-server", "srun", "sbatch", "salloc", "sleep",
}
# Fixed prefixes the suite's tests use for their private clusters and daemons.
SUITE_PREFIXES = ["/tmp/elastic-ctest-lifecycle/", "/tmp/elasticd-test-", "/tmp/elastic-bench-live",
                  "/tmp/elastic-py-", "/tmp/report-test-"]


def default_prefixes():
    prefixes = list(SUITE_PREFIXES)
    for var in ("ELASTIC_CLUSTER_DIR", "ELASTIC_BUILD_DIR", "ELASTIC_SOURCE_DIR"):
        for path in os.environ.get(var, "").split(":"):  # ELASTIC_BUILD_DIR may list several
            if path:
                prefixes.append(path.rstrip("/") + "/")
    if os.environ.get("ELASTIC_CLUSTER_DIR"):  # the load tests' own cluster (tests/controller/CMakeLists.txt)
        prefixes.append(os.environ["ELASTIC_CLUSTER_DIR"].rstrip("/") + "-load/")
    return prefixes


def read(path, binary=False):
    try:
        with open(path, "rb") as f:
            data = f.read()
        return data if binary else data.decode(errors="replace")
    except OSError:
        return b"" if binary else ""


def link(path):
    try:
        return os.readlink(path)
    except OSError:
        return ""


def cluster_dir_of(path):
    """The local cluster directory (one with etc/slurm.conf) that `path` lies in, or None."""
    d = os.path.dirname(path)
    while d not in ("", "/"):
        if os.path.isfile(os.path.join(d, "etc", "slurm.conf")):
            return d + "/"
        if os.path.dirname(d) == d:  # "//": POSIX keeps a leading double slash as the root
            break
        d = os.path.dirname(d)
    return None


def of_another_cluster(texts, prefixes):
    """Whether the process uses files of a local cluster that is not one of the suite's."""
    for text in texts:
        for token in text.split():
            token = token.split("=", 1)[-1]
            if not token.startswith("/"):
                continue
            d = cluster_dir_of(token)
            if d and not any(d.startswith(p) or p.startswith(d) for p in prefixes):
                return True
    return False


def ancestors():
    mine, pid = set(), os.getpid()
    while pid > 1:
        mine.add(pid)
        stat = read(f"/proc/{pid}/stat")
        try:
            pid = int(stat.rsplit(")", 1)[1].split()[1])
        except (IndexError, ValueError):
            break
    return mine


def leftovers(prefixes):
    own_root, mine, found = link("/proc/self/root"), ancestors(), []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in mine:
            continue
        base = f"/proc/{entry}"
        stat = read(f"{base}/stat")
        if not stat or stat.rsplit(")", 1)[-1].split()[0] == "Z" or link(f"{base}/root") != own_root:
            continue
        comm = read(f"{base}/comm").strip()
        exe = link(f"{base}/exe")
        texts = [read(f"{base}/cmdline").replace("\0", " "), read(f"{base}/environ").replace("\0", " "),
                 link(f"{base}/cwd") + "/", exe]
        try:
            texts += [link(f"{base}/fd/{fd}") for fd in os.listdir(f"{base}/fd")]
        except OSError:
            pass
        hit = next((p for p in prefixes for t in texts if p in t), None)
        ours = comm in PROGRAMS or any(exe.startswith(p) for p in prefixes)
        if hit and ours and not of_another_cluster(texts, prefixes):
            cmd = read(f"{base}/cmdline").replace("\0", " ").strip() or comm
            found.append(f"pid {entry} ({comm}): {cmd[:160]}  [refers to {hit}]")
    return found


def main():
    prefixes = sys.argv[1:] or default_prefixes()
    left = leftovers(prefixes)
    for line in left:
        print(f"nothing_left: a process of the suite is still running: {line}", file=sys.stderr)
    if left:
        print(f"nothing_left: {len(left)} processes left (stop them by PID)", file=sys.stderr)
        return 1
    print(f"nothing_left: no process of the suite is left (looked for {len(PROGRAMS)} programs "
          f"referring to {', '.join(prefixes)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
