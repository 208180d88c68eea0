#!/bin/bash
# A mixed workload: submits an elastic data-parallel job and a rigid job side by side, as a
# group would on a shared cluster. The rigid job needs 2 GPUs on each of two v100 nodes; the elastic job takes
# whatever a100 GPUs it can get, between 2 and 6. When other elastic jobs hold the GPUs these
# need with extensions, elasticd releases extensions so both can start.
#
#   jobscripts/mixed_workload.sh [SBATCH-OPTIONS...]    (options go to both sbatch calls)
#
# Prints the two job ids ("elastic ID" and "rigid ID" lines).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

elastic=$(sbatch --parsable "$@" --job-name=mixed-elastic "$here/data_parallel.sbatch")
rigid=$(sbatch --parsable "$@" "$here/rigid.sbatch")
echo "elastic $elastic"
echo "rigid $rigid"
