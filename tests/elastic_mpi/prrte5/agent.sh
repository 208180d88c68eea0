#!/bin/sh
# Launch agent standing in for ssh: "agent.sh HOST CMD..." runs CMD on the
# simulated node HOST, i.e. in HOST's network namespace (made by netsetup.sh)
# and in a fresh UTS namespace whose host name is HOST.
host=$1; shift
exec ip netns exec "$host" unshare --uts sh -c "hostname $host; exec $*"
