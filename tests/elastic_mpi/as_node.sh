#!/bin/sh
# as_node.sh HOST COMMAND...: the remote-shell agent that lets mpirun place ranks on several
# "nodes" of this one machine (Open MPI 4: --mca plm_rsh_agent; PRRTE: --prtemca plm_ssh_agent).
# mpirun calls it as it would call ssh, with the node's name and the daemon's command line; the
# daemon then runs in a UTS namespace of its own whose host name is HOST, so that Open MPI sees
# separate nodes: ranks on different ones talk over the network (TCP on loopback here), never
# through shared memory, as on separate hosts. Root makes the namespace directly; another user
# through a user namespace (unshare --map-root-user), where the daemon is that namespace's root:
# Open MPI must then be allowed to run as root (OMPI_ALLOW_RUN_AS_ROOT, as the mpi-labelled tests'
# environment has it).
set -eu
host=$1
shift
if [ "$(id -u)" -eq 0 ]; then
  exec unshare --uts -- sh -c 'hostname "$0" && exec sh -c "$*"' "$host" "$@"
fi
exec unshare --map-root-user --uts -- sh -c 'hostname "$0" && exec sh -c "$*"' "$host" "$@"
