# fresh_root.sh: the fresh-machine check, sourced by scripts/test (`scripts/test --fresh RELEASE`).
#
# What a centre's engineer does first, on a machine that has nothing installed: from a clean
# `git archive` of HEAD, inside a new minimal Debian root made by debootstrap, run the README's
# set-up exactly as written (as root, from the source directory), then build with the README's
# preset and run the unit tests. On both releases the set-up is the quick start (the commands
# of its first code block: the demo, which installs, builds and grows and shrinks jobs; on Debian
# 13 since 2026-11-28, when its check that a batch changes with a GPU count stopped depending on
# the moment of the change: docs/admin-guide.md, "Supported versions"). The root has its own PID and mount namespaces: when the check ends, the kernel ends every process
# it started, and its mounts go with it. It shares the host's network (apt needs Debian's
# mirror); its cluster uses ports from FRESH_PORT_BASE, apart from the host's suite (16800 for
# the demo, 26800 for the tests), and below the kernel's ephemeral ports (from 32768), which any
# program's connection may take first (a MariaDB on 36800 once found its port taken).
#
# Cached between runs: only the bare debootstrap base of each release (no package of the
# project's), as a tar file in FRESH_CACHE. Everything else is made anew every run and deleted
# afterwards (unless --keep-root).

FRESH_CACHE=${ELASTIC_FRESH_CACHE:-/var/cache/elastic-slurm/fresh-root}
FRESH_PORT_BASE=${ELASTIC_FRESH_PORT_BASE:-21800}
FRESH_TIMEOUT=${ELASTIC_FRESH_TIMEOUT:-3000}   # seconds for everything inside the root
# The tests after the set-up: the README's build line, then ctest with the labels asked for
# (`scripts/test --fresh RELEASE --labels L`; the README's test line runs `unit`).
FRESH_BUILD='cmake --preset default && cmake --build --preset default'
# LABELS with commas (mpi,slurm,unit): one ctest per label expression, in that order, every one
# run whatever the one before gave (CI's Debian 13 check: its mpi tests, the ones most sensitive to
# a busy machine, first, while the host's own check is still in its lighter set-up).
# Every ctest prints a failed test's output (each label's run writes over LastTest.log, so the
# log of the check is where it stays; fresh_failed_output shows it).
fresh_tests() {
  local ctest='ctest --test-dir build --output-on-failure -L'
  if [[ $1 != *,* ]]; then printf '%s && %s %q' "$FRESH_BUILD" "$ctest" "$1"; return; fi
  local l out="$FRESH_BUILD && { s=0"
  local IFS=,
  for l in $1; do out+="; $ctest $(printf %q "$l") || s=1"; done
  printf '%s; (exit $s); }' "$out"
}
# The releases the project supports (scripts/bootstrap installs their packages), and those whose
# set-up is the README's quick start (the demo): all of them.
FRESH_RELEASES=(bookworm trixie)
FRESH_DEMO_RELEASES=(bookworm trixie)

fresh_say() { printf 'fresh-root: %s\n' "$*"; }

# fresh_failed_output LOG: the last lines of the output of each test that failed in LOG (a log
# of ctest --output-on-failure), so that CI's log says why without the kept root.
fresh_failed_output() {
  awk -v keep=80 '
    function flush() { while (n > 0 && buf[n] == "") n--
                       if (name != "") { printf "fresh-root: the output of %s (up to its last %d lines):\n", name, keep
                                         for (i = (n > keep ? n - keep + 1 : 1); i <= n; i++) print "  > " buf[i] }
                       name = ""; n = 0 }
    / Test +#[0-9]+: / { flush(); if ($0 ~ /\*\*\*(Failed|Timeout|Exception)/) name = $4; next }
    /^ +Start +[0-9]+: |^[0-9]+% tests passed/ { flush(); next }
    name != "" { buf[++n] = $0 }
    END { flush() }' "$1"
}

# The Debian mirror the host uses (its first deb.debian.org-like URI), so that the root's apt
# goes where the host's does.
fresh_mirror() {
  local uri=""
  if [[ -n ${ELASTIC_FRESH_MIRROR:-} ]]; then echo "$ELASTIC_FRESH_MIRROR"; return; fi
  if [[ -r /etc/apt/sources.list.d/debian.sources ]]; then
    uri=$(awk '/^URIs:/ && $2 !~ /security/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources)
  fi
  if [[ -z $uri && -r /etc/apt/sources.list ]]; then
    uri=$(awk '$1 == "deb" && $0 !~ /security/ {print $2; exit}' /etc/apt/sources.list)
  fi
  echo "${uri:-http://deb.debian.org/debian}"
}

# fresh_readme_block FILE HEADING: the command lines of the first code block after the line that
# starts with HEADING, without their comments.
fresh_readme_block() {
  awk -v heading="$2" 'index($0, heading) == 1 {q = 1; next}
       q && /^```/ {if (inblock) exit; inblock = 1; next}
       inblock && NF {sub(/[ \t]+#.*$/, ""); print}' "$1"
}

# fresh_setup RELEASE README: the README's set-up commands for RELEASE (see the top of this file).
fresh_setup() {
  local r
  for r in "${FRESH_DEMO_RELEASES[@]}"; do
    if [[ $r == "$1" ]]; then fresh_readme_block "$2" "## Quick start"; return; fi
  done
  fresh_readme_block "$2" "## Working with the local cluster" | head -n 1
}

# fresh_base RELEASE: the cached bare root of RELEASE (made with debootstrap when missing).
fresh_base() {
  local release=$1 base=$FRESH_CACHE/$1-minbase.tar mirror tmp t0=$SECONDS
  if [[ -s $base ]]; then echo "$base"; return; fi
  command -v debootstrap >/dev/null \
    || { echo "fresh-root: debootstrap is missing: run scripts/bootstrap (it installs it)" >&2; return 1; }
  mirror=$(fresh_mirror)
  install -d -m 755 "$FRESH_CACHE"
  tmp=$(mktemp -d "$FRESH_CACHE/debootstrap.XXXXXX")
  fresh_say "making the bare $release base with debootstrap from $mirror (once; cached in $base)" >&2
  if ! debootstrap --variant=minbase "$release" "$tmp" "$mirror" > "$tmp.log" 2>&1; then
    tail -n 20 "$tmp.log" >&2
    rm -rf --one-file-system "$tmp"
    echo "fresh-root: debootstrap of $release failed (log: $tmp.log)" >&2
    return 1
  fi
  tar -C "$tmp" --numeric-owner -cf "$base.new" .
  mv "$base.new" "$base"
  rm -rf --one-file-system "$tmp" "$tmp.log"
  fresh_say "base made in $((SECONDS - t0)) s" >&2
  echo "$base"
}

# fresh_enter ROOT PORT_BASE COMMAND [APT_CACHE]: runs COMMAND (bash -c) as root inside ROOT, with its own
# PID and mount namespaces (every process it starts ends with it; its mounts go with it), /proc,
# /sys (with /sys/fs/cgroup, which slurmd needs) and /dev of the host, a new /dev/shm and /run, a
# clean environment, and PORT_BASE for its local cluster: ELASTIC_CLUSTER_PORT_BASE (the demo's,
# scripts/cluster's) and ELASTIC_TEST_PORT_BASE (the slurm tests', read when the build is
# configured; the demo takes its cluster down before the tests run). APT_CACHE (optional): a
# host directory mounted on the root's /var/cache/apt/archives, so that the packages apt
# downloaded in an earlier check are not downloaded again (apt still reads the release's current
# indexes and installs every package: a package gone from Debian is not installable from it).
# FRESH_CCACHE (environment, optional): a host directory that is the root's compiler cache
# (ccache, which scripts/bootstrap installs there; CMake takes the launcher from the environment).
# A file compiled in an earlier check with the same compiler, flags and inputs is not compiled
# again; every header it includes must still be there and unchanged, so a missing package still
# fails the build.
# Also used by the benchmark that compares the two stacks (tests/elastic_mpi/stacks_bench.sh).
fresh_enter() {
  unshare --pid --fork --kill-child --mount --propagation private -- /bin/bash -c '
    set -e
    root=$1
    mount -t proc proc "$root/proc"
    mount --rbind /sys "$root/sys"
    mount --rbind /dev "$root/dev"
    mount -t tmpfs -o mode=1777 tmpfs "$root/dev/shm"
    mount -t tmpfs -o mode=755 tmpfs "$root/run"
    if [[ -n ${4:-} ]]; then mount --bind "$4" "$root/var/cache/apt/archives"; fi
    compile=()
    if [[ -n ${FRESH_CCACHE:-} ]]; then
      mkdir -p "$root/var/cache/elastic-ccache"
      mount --bind "$FRESH_CCACHE" "$root/var/cache/elastic-ccache"
      compile=(CCACHE_DIR=/var/cache/elastic-ccache CCACHE_BASEDIR=/root CCACHE_NOHASHDIR=1
               CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache)
    fi
    exec chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb "${compile[@]}" \
      PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      ELASTIC_CLUSTER_PORT_BASE="$2" ELASTIC_TEST_PORT_BASE="$2" /bin/bash -c "$3"' fresh "$@"
}

# Every process whose root directory is ROOT (a process the check started that survived it).
fresh_processes_in() {
  local root=$1 p
  for p in /proc/[0-9]*; do
    [[ $(readlink "$p/root" 2>/dev/null) == "$root" ]] && echo "${p#/proc/}"
  done
  return 0
}

# fresh_check RELEASE REPO_DIR KEEP_ROOT [LABELS]: the whole check (the tests: ctest -L LABELS,
# default unit); returns its status.
fresh_check() {
  local release=$1 repo=$2 keep_root=$3 labels=${4:-unit} base work root mirror security status t0=$SECONDS
  local quick log tests
  tests=$(fresh_tests "$labels")
  [[ $(id -u) == 0 ]] || { echo "fresh-root: needs root (debootstrap, chroot, namespaces)" >&2; return 1; }
  if [[ " ${FRESH_RELEASES[*]} " != *" $release "* ]]; then
    echo "fresh-root: '$release' is not a Debian release the project supports: give one of ${FRESH_RELEASES[*]}" >&2
    return 2
  fi
  quick=$(fresh_setup "$release" "$repo/README.md")
  [[ -n $quick ]] || { echo "fresh-root: README.md has no set-up code block for $release (see scripts/lib/fresh_root.sh)" >&2; return 1; }

  fail_step "fresh-root: the bare $release base"
  base=$(fresh_base "$release")
  fail_step "fresh-root: a new root from $base"
  work=$(mktemp -d /var/tmp/elastic-fresh.XXXXXX)
  root=$work/root
  log=$work/check.log
  mkdir "$root"
  tar -C "$root" --numeric-owner -xf "$base"
  # / of a Debian system is 755 (the base was made in a private temporary directory).
  chmod 755 "$root"
  # apt as on a new installation: the release, its updates and its security archive.
  mirror=$(fresh_mirror)
  security=${mirror%/debian}/debian-security
  [[ $security == "$mirror" ]] && security=http://deb.debian.org/debian-security
  rm -f "$root/etc/apt/sources.list"
  cat > "$root/etc/apt/sources.list.d/debian.sources" <<SRC
Types: deb
URIs: $mirror
Suites: $release $release-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $security
Suites: $release-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  cp /etc/resolv.conf "$root/etc/resolv.conf"
  # As Debian's installer writes it: the machine's name resolves (munged looks it up).
  printf '127.0.0.1\tlocalhost\n127.0.1.1\t%s\n::1\tlocalhost ip6-localhost ip6-loopback\n' \
    "$(hostname)" > "$root/etc/hosts"
  # The project, as a clone would bring it: HEAD only, nothing uncommitted, no build trees.
  install -d -m 755 "$root/root/elastic-slurm"
  git -C "$repo" archive --format=tar HEAD | tar -C "$root/root/elastic-slurm" -xf -
  fresh_say "root $root ($release, from $base); source: $(git -C "$repo" rev-parse --short HEAD)"
  fresh_say "inside: the README's set-up for $release:"
  sed 's/^/    /' <<<"$quick"
  fresh_say "then the tests ($labels): $tests"
  fresh_say "log: $log (cluster ports from $FRESH_PORT_BASE)"

  # Inside the root: one script, run by bash as PID 1 of a new PID namespace.
  cat > "$root/root/fresh-check.sh" <<SH
#!/bin/bash
set -o pipefail
cd /root/elastic-slurm
t0=\$SECONDS
phase() { printf '\\nfresh-root: == %s (at %d s)\\n' "\$1" "\$((SECONDS - t0))"; }
phase "set-up (README.md)"
$(while IFS= read -r line; do printf '%s || { echo "fresh-root: FAILED: the set-up command %q exited with status $?" >&2; exit 1; }\n' "$line" "$line"; done <<<"$quick")
labels=$(printf %q "$labels")
phase "tests (\$labels)"
$tests || { echo "fresh-root: FAILED: the tests (\$labels) (exit \$?)" >&2; exit 1; }
phase "done"
SH
  chmod 755 "$root/root/fresh-check.sh"

  # The packages apt downloads, kept between checks of this release (fresh_enter); the oldest
  # files go once they were not used for 30 days.
  # CI's compiler cache (ELASTIC_CCACHE_DIR, .ci/run), shared with the host's builds.
  if [[ -n ${ELASTIC_CCACHE_DIR:-} ]]; then
    install -d -m 755 "$ELASTIC_CCACHE_DIR"
    export FRESH_CCACHE=$ELASTIC_CCACHE_DIR
  fi
  local apt_cache=$FRESH_CACHE/apt-$release
  install -d -m 755 "$apt_cache" "$apt_cache/partial"
  find "$apt_cache" -maxdepth 1 -name '*.deb' -atime +30 -delete 2>/dev/null || true

  fail_step "fresh-root: the set-up and the tests ($labels) inside the root"
  status=0
  timeout --kill-after=30 "$FRESH_TIMEOUT" \
    bash -c "$(declare -f fresh_enter); fresh_enter \"\$@\"" fresh "$root" "$FRESH_PORT_BASE" /root/fresh-check.sh \
    "$apt_cache" > "$log" 2>&1 < /dev/null || status=$?
  # Show the phases and the outcome; the whole log stays in $work when the check failed.
  grep -E '^fresh-root: |^(demo|bootstrap|cluster|test|nothing_left): |^==> |^E: |tests passed|tests failed|^The following tests|^	[0-9]+ - |^Total Test time' "$log" \
    | sed 's/^/  | /' || true

  fail_step "fresh-root: the root's processes and mounts after the check"
  local left
  left=$(fresh_processes_in "$root" | tr '\n' ' ')
  if [[ -n ${left// /} ]]; then
    echo "fresh-root: FAILED: processes of the root outlived it: $left" >&2
    status=1
  fi
  if (( status != 0 )); then
    fresh_failed_output "$log" >&2
    echo "fresh-root: FAILED (exit $status) after $((SECONDS - t0)) s; the last lines of $log:" >&2
    tail -n 40 "$log" >&2
    (( status == 124 )) && echo "fresh-root: it ran past ${FRESH_TIMEOUT} s (ELASTIC_FRESH_TIMEOUT)" >&2
    echo "fresh-root: the root is kept for a look: $root" >&2
    fail_step "fresh-root: the check failed (see above)"
    return "$status"
  fi
  if (( keep_root )); then
    fresh_say "root kept (--keep-root): $root"
  elif grep -qF " $root/" /proc/self/mountinfo || grep -qF " $root " /proc/self/mountinfo; then
    echo "fresh-root: warning: something is still mounted under $root: not deleting it" >&2
  else
    rm -rf --one-file-system "$work"
  fi
  fresh_say "passed in $((SECONDS - t0)) s ($release)"
}
