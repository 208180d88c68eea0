# node_hostnames.sh: the local cluster's node host names, sourced by scripts/cluster (which
# defines NODES, node_name and node_addr).
#
# Whether each node runs under a host name of its own (its node name) instead of the machine's:
# where the MPI runtime is PRRTE's (Open MPI 5), which tells nodes apart by host name (a DVM
# whose daemons on two "nodes" report one name mixed up their processes: docs/interfaces.md
# section 5). Elsewhere the nodes keep the machine's name, as they always have.
own_hostnames() { command -v prte >/dev/null 2>&1; }

# Node names resolve to the nodes' addresses where the nodes have host names of their own, as
# on a real cluster (torchrun's MASTER_ADDR is the first node's name): lines marked HOSTS_MARK
# in /etc/hosts, added by `up` and removed by `down` (the addresses are the same for every
# cluster of this script, whatever its ports).
HOSTS_MARK="# scripts/cluster node (elastic-slurm)"
hosts_add() {
  local i line
  for ((i = 1; i <= NODES; i++)); do
    line="$(node_addr "$i") $(node_name "$i") $HOSTS_MARK"
    grep -qxF "$line" /etc/hosts || echo "$line" >> /etc/hosts
  done
}
hosts_remove() {
  grep -qF "$HOSTS_MARK" /etc/hosts 2>/dev/null || return 0
  local kept
  kept=$(grep -vF "$HOSTS_MARK" /etc/hosts)
  printf '%s\n' "$kept" > /etc/hosts   # in place: /etc/hosts may be a bind mount
}
