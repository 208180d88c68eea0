"""python.ddp_port_diff (label unit): the elastic port of the DDP example stays a small edit of it.

Runs `diff ORIGINAL PORT` (POSIX diff, its default output) and counts the changed lines the way a
reader of the diff counts them: every line that is only in one of the two files, that is every
line diff prints with "< " (only in the original) or "> " (only in the port). A line changed in
place counts twice (once removed, once added); the "NcN" headers and "---" separators are not
lines of either file. Prints the diff and the count; fails when the count exceeds LIMIT, when
either file is missing, when the files are the same (no port) or when diff itself fails.

usage: check_ddp_port_diff.py ORIGINAL PORT
"""

import os
import subprocess
import sys

LIMIT = 10


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: check_ddp_port_diff.py ORIGINAL PORT")
    original, port = sys.argv[1:3]
    for path in (original, port):
        if not os.path.isfile(path):
            sys.exit(f"FAIL: {path} does not exist (the DDP example and its elastic port live side by side in "
                     f"elastic_mpi/python/examples)")
    proc = subprocess.run(["diff", original, port], capture_output=True, text=True)
    if proc.returncode not in (0, 1):
        sys.exit(f"FAIL: diff exited {proc.returncode}: {proc.stderr.strip()}")
    print(proc.stdout, end="")
    removed = sum(line.startswith("< ") or line == "<" for line in proc.stdout.splitlines())
    added = sum(line.startswith("> ") or line == ">" for line in proc.stdout.splitlines())
    count = removed + added
    print(f"{os.path.basename(port)} differs from {os.path.basename(original)} in {count} lines "
          f"({removed} only in the original, {added} only in the port; limit {LIMIT})")
    if count == 0:
        sys.exit("FAIL: the files are the same: the port makes no change")
    if count > LIMIT:
        sys.exit(f"FAIL: {count} changed lines, more than {LIMIT}: keep the port a small edit of the original "
                 f"(docs/user-guide.md shows the diff to users)")
    print("PASS")


if __name__ == "__main__":
    main()
