# node_hostnames.sh: the local cluster's node host names, sourced by scripts/cluster (which
# defines NODES, node_name and node_addr).
#
# Whether each node runs under a host name of its own (its node name) instead of the machine's:
# where the MPI runtime is PRRTE's (Open MPI 5), which tells nodes apart by host name (a DVM
# whose daemons on two "nodes" report one name mixed up their processes: docs/interfaces.md
# section 5). Elsewhere the nodes keep the machine's name, as they always have.
own_hostnames() { command -v prte >/dev/null 2>&1; }

# Node names resolve to the nodes' addresses where the nodes have host names of their own, as
# on a real cluster (torchrun's MASTER_ADDR is the first node's name): lines in /etc/hosts that
# end with this cluster's mark (hosts_mark: it names the cluster's state directory), added by `up`
# and removed by `down`. The addresses are the same for every cluster of this script, whatever
# its ports, so two clusters at once (the test suite's and a test's private one) each add their
# own lines and a `down` removes only its own: with one mark for all, the private cluster's
# `down` took the shared cluster's names away (its multi-node jobs then failed: "this node's
# name 'n1' does not resolve").
hosts_mark() { printf '# scripts/cluster node (elastic-slurm) of %s' "$DIR"; }
hosts_add() {
  local i line
  for ((i = 1; i <= NODES; i++)); do
    line="$(node_addr "$i") $(node_name "$i") $(hosts_mark)"
    grep -qxF "$line" /etc/hosts || echo "$line" >> /etc/hosts
  done
}
hosts_remove() {
  local kept
  # Every line but those that end with this cluster's mark (compared as text, not a pattern), and
  # those that end with the mark every cluster used before the marks named their directory.
  kept=$(MARK="$(hosts_mark)" OLD="# scripts/cluster node (elastic-slurm)" awk '
    function ends(s, m) { return length(s) >= length(m) && substr(s, length(s) - length(m) + 1) == m }
    !(ends($0, ENVIRON["MARK"]) || ends($0, ENVIRON["OLD"]))' /etc/hosts) || return 0
  [[ $kept == "$(cat /etc/hosts)" ]] && return 0
  printf '%s\n' "$kept" > /etc/hosts   # in place: /etc/hosts may be a bind mount
}
