#!/bin/sh
# netsetup.sh NODE...: simulated nodes on one machine. Run as root inside a
# private network + mount namespace (repro.sh does that). Each NODE gets a
# network namespace with one veth link onto bridge br0 (10.9.0.0/24); the
# caller's namespace is 10.9.0.1. /etc/hosts is replaced (in this mount
# namespace only) by one that names the nodes.
set -e
mkdir -p /run/netns && mount -t tmpfs netns /run/netns   # private set of node names
ip link set lo up
ip link add br0 type bridge
ip addr add 10.9.0.1/24 dev br0
ip link set br0 up
hosts=$(mktemp /tmp/hosts.XXXXXX)
printf '127.0.0.1 localhost\n10.9.0.1 head\n' > "$hosts"
i=11
for n in "$@"; do
    ip netns add "$n"
    ip link add "v$n" type veth peer name eth0 netns "$n"
    ip link set "v$n" master br0 up
    ip -n "$n" link set lo up
    ip -n "$n" addr add 10.9.0.$i/24 dev eth0
    ip -n "$n" link set eth0 up
    echo "10.9.0.$i $n" >> "$hosts"
    i=$((i + 1))
done
mount --bind "$hosts" /etc/hosts
