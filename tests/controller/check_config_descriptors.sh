#!/bin/sh
# elasticd --check-config warns when the open-file limit it runs under (systemd runs
# ExecStartPre with the unit's LimitNOFILE) cannot hold controller.max_connections, and accepts
# the file. Usage: check_config_descriptors.sh ELASTICD
set -u
elasticd=$1
dir=$(mktemp -d /tmp/elastic-check-config-XXXXXX) || exit 1
trap 'rm -rf "$dir"' EXIT
printf '[controller]\nmax_connections = 1000\n' > "$dir/elasticd.conf"
out=$(prlimit --nofile=256 "$elasticd" --check-config "$dir/elasticd.conf" 2>&1)
rc=$?
printf '%s\n' "$out"
[ "$rc" -eq 0 ] || { echo "FAIL: --check-config exited $rc"; exit 1; }
expected="elasticd: warning: controller.max_connections is 1000 but the open-file limit (256, RLIMIT_NOFILE) leaves room for 192 connections"
printf '%s\n' "$out" | grep -qF "$expected" || { echo "FAIL: no warning: $expected"; exit 1; }
# Within the limit: no warning.
printf '[controller]\nmax_connections = 192\n' > "$dir/elasticd.conf"
out=$(prlimit --nofile=256 "$elasticd" --check-config "$dir/elasticd.conf" 2>&1)
printf '%s\n' "$out" | grep -q "open-file limit" && { echo "FAIL: warned within the limit: $out"; exit 1; }
echo "ok"
