#!/bin/bash
# Driver of the gpu-labelled tests (ctest -L gpu). On a machine without a GPU, or a build
# without CUDA and NCCL, each test prints why and exits 77, which CTest reports as skipped.
# Usage:
#   run_gpu_test.sh capi    MPIEXEC BIN      C API collectives on device and host memory under NCCL
#   run_gpu_test.sh cxx     MPIEXEC BIN      C++ API collectives, device state, no rescale
#   run_gpu_test.sh rescale MPIEXEC BIN      C++ API through a grow 1->2 and a shrink with NCCL
#   run_gpu_test.sh python  MPIEXEC SCRIPT   the Python binding with CUDA torch tensors
#   run_gpu_test.sh torch   MPIEXEC SCRIPT   elastic_mpi.torch: NCCL process group, DDP on CUDA,
#                                            autocast + GradScaler, a batch change, state round trip
# Without CUDA in the build, BIN has no elastic-gpu-test: that is the skip's reason.
set -uo pipefail
mode=$1 mpiexec=$2 target=$3
skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }
if [[ $mode == torch ]]; then
  # The torch path's GPU work is torch's own (its NCCL process group); the session uses MPI.
  probe=$(/usr/bin/python3 -c 'import torch, torch.distributed as d; print(int(torch.cuda.is_available() and d.is_nccl_available()), torch.cuda.device_count())' 2>/dev/null) \
    || skip "torch is not installed here"
  read -r nccl gpus <<<"$probe"
  [[ $nccl == 1 ]] || skip "torch with CUDA and NCCL is not installed here"
elif [[ $mode == python ]]; then
  probe=$(/usr/bin/python3 -c 'import elastic_mpi as em; print(int(em.nccl_compiled()), em.cuda_device_count())') \
    || fail "cannot import elastic_mpi"
  read -r nccl gpus <<<"$probe"
else
  [[ -x $target/elastic-gpu-test ]] || skip "this build has no CUDA/NCCL (elastic-gpu-test not built)"
  nccl=1 gpus=$("$target/elastic-gpu-test" gpus) || fail "elastic-gpu-test gpus failed"
fi
[[ $nccl == 1 ]] || skip "this build has no NCCL"
[[ $gpus -ge 1 ]] || skip "no GPU visible here (CUDA device count 0)"
# One rank per GPU, at most 2 (NCCL refuses two ranks on one GPU).
np=$(( gpus < 2 ? gpus : 2 ))
run() { timeout -k 10 240 "$mpiexec" --oversubscribe -np "$@"; }
case $mode in
capi) run "$np" "$target/elastic-gpu-test" capi || fail "C API on device memory" ;;
cxx) ELASTIC_SCHEDULE="" run 1 "$target/elastic-gpu-test" cxx || fail "C++ API on device memory" ;;
rescale)
  [[ $gpus -ge 2 ]] || skip "a rescale with NCCL needs 2 GPUs, this machine has $gpus"
  ELASTIC_SCHEDULE="1->2->1" ELASTIC_SCHEDULE_EVERY=10 run 1 "$target/elastic-gpu-test" cxx \
    || fail "rescale with NCCL"
  ;;
python)
  /usr/bin/python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null \
    || skip "torch with CUDA is not installed here"
  run "$np" /usr/bin/python3 -B "$target" || fail "Python binding on CUDA tensors"
  ;;
torch)
  ELASTIC_STANDALONE=1 ELASTIC_SCHEDULE="$np->$np:$((32 * np))" ELASTIC_SCHEDULE_EVERY=10 ELASTIC_LR_SCALING=sqrt \
    run "$np" /usr/bin/python3 -B "$target" --device cuda --amp --batch 16 || fail "elastic_mpi.torch on CUDA with NCCL"
  ;;
*) fail "unknown mode $mode" ;;
esac
