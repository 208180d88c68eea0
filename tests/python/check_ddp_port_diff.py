"""python.ddp_port_diff (label unit): the elastic port of the DDP example stays a small edit of it.

Runs `diff ORIGINAL PORT` (POSIX diff, its default output) and counts the changed lines the way a
reader of the diff counts them: every line that is only in one of the two files, that is every
line diff prints with "< " (only in the original) or "> " (only in the port). A line changed in
place counts twice (once removed, once added); the "NcN" headers and "---" separators are not
lines of either file. Prints the diff and the count; fails when the count exceeds LIMIT, when
either file is missing, when the files are the same (no port) or when diff itself fails.

With GUIDE (docs/user-guide.md), also checks that the diff the guide shows after its MARKER line
is `diff -u` of the two files as they are, and prints the block to paste when it is not.

usage: check_ddp_port_diff.py ORIGINAL PORT [GUIDE]
"""

import os
import subprocess
import sys

LIMIT = 10
MARKER = "<!-- generated: diff -u train_ddp.py train_ddp_elastic.py; python.ddp_port_diff checks it -->"


def guide_block(guide):
    """The lines of the ```diff block that follows MARKER in the guide, or None."""
    with open(guide) as f:
        lines = f.read().splitlines()
    if MARKER not in lines:
        return None
    rest = lines[lines.index(MARKER) + 1:]
    if not rest or rest[0] != "```diff" or "```" not in rest[1:]:
        return None
    return rest[1:rest.index("```", 1)]


def check_guide(guide, original, port):
    unified = subprocess.run(["diff", "-u", "--label", os.path.basename(original), "--label",
                              os.path.basename(port), original, port], capture_output=True, text=True).stdout
    shown = guide_block(guide)
    if shown is None:
        sys.exit(f"FAIL: {guide} has no ```diff block after the line {MARKER}")
    if shown != unified.splitlines():
        sys.exit(f"FAIL: the diff in {guide} is not the files' diff any more; put this between the ```diff "
                 f"fences after {MARKER}:\n{unified}")
    print(f"{guide}: its diff is the files' diff")


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit("usage: check_ddp_port_diff.py ORIGINAL PORT [GUIDE]")
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
    if len(sys.argv) == 4:
        check_guide(sys.argv[3], original, port)
    print("PASS")


if __name__ == "__main__":
    main()
