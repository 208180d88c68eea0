#!/usr/bin/env python3
"""docs.man_pages: every manual page in docs/man renders without a single groff warning, and every
option of the SPANK plugin (the option table of spank_plugin/src/spec.cpp, the source of
`sbatch --help`) is documented in elastic_spank.8 and docs/user-guide.md.

Usage: check_docs.py SOURCE_DIR [GROFF]
"""
import glob
import os
import re
import subprocess
import sys


def fail(errors):
    for e in errors:
        print(f"docs: {e}", file=sys.stderr)
    return 1 if errors else 0


def render(groff, page):
    """Renders one page as man(1) does; returns a list of problems (warnings, errors, empty output)."""
    proc = subprocess.run([groff, "-man", "-Tutf8", "-ww", page], capture_output=True, text=True)
    problems = []
    if proc.returncode != 0:
        problems.append(f"{page}: groff exited with {proc.returncode}")
    for line in proc.stderr.splitlines():
        if line.strip():
            problems.append(f"{page}: {line}")
    # Plain text: drop SGR escapes and backspace overstriking (bold, underline).
    plain = re.sub(r".\x08", "", re.sub(r"\x1b\[[0-9;]*m", "", proc.stdout))
    if "NAME" not in plain or "SYNOPSIS" not in plain:
        problems.append(f"{page}: rendered page has no NAME or SYNOPSIS section")
    return problems


def plugin_options(source_dir):
    """The option names of the plugin's option table (Options() in spec.cpp)."""
    path = os.path.join(source_dir, "spank_plugin", "src", "spec.cpp")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    names = re.findall(r'\{\s*OptionId::k\w+\s*,\s*"([a-z0-9-]+)"', text)
    return path, names


def roff_text(path):
    """The page's source with roff escapes for '-' and font changes removed."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    text = text.replace("\\-", "-").replace("\\(hy", "-")
    return re.sub(r"\\f(\[[^\]]*\]|\(..|.)", "", text)


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    source_dir = sys.argv[1]
    groff = sys.argv[2] if len(sys.argv) > 2 and sys.argv[2] else "groff"
    errors = []

    pages = sorted(glob.glob(os.path.join(source_dir, "docs", "man", "*.[18]")))
    if not pages:
        errors.append("no manual pages in docs/man")
    for page in pages:
        try:
            errors += render(groff, page)
        except FileNotFoundError:
            return fail([f"'{groff}' not found: install groff-base (Debian) to check the manual pages"])

    spec, names = plugin_options(source_dir)
    if len(names) < 8:
        errors.append(f"{spec}: found only {len(names)} options ({names}); has the option table changed shape?")
    documents = {
        "docs/man/elastic_spank.8": roff_text(os.path.join(source_dir, "docs", "man", "elastic_spank.8")),
    }
    with open(os.path.join(source_dir, "docs", "user-guide.md"), encoding="utf-8") as f:
        documents["docs/user-guide.md"] = f.read()
    for doc, text in documents.items():
        for name in names:
            if not re.search(rf"--{re.escape(name)}(?![a-z0-9-])", text):
                errors.append(f"{doc} does not document --{name}")

    if not errors:
        print(f"docs: {len(pages)} manual pages render without warnings; "
              f"{len(names)} plugin options documented in {', '.join(documents)}")
    return fail(errors)


if __name__ == "__main__":
    sys.exit(main())
