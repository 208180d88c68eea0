#!/bin/bash
# Configures the project in a scratch directory with ELASTIC_WITH_CUDA=OFF and builds only the
# elastic_mpi library: proves the runtime compiles without CUDA/NCCL (the main build has them).
set -euo pipefail
src=$1 build=$2 type=${3:-RelWithDebInfo}
rm -rf "$build"
cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE="$type" -DELASTIC_WITH_CUDA=OFF \
  -DELASTIC_WARNINGS_AS_ERRORS=ON -DELASTIC_BUILD_TESTS=OFF -DELASTIC_BUILD_BENCHMARKS=OFF >"$build.log" 2>&1 \
  || { cat "$build.log"; exit 1; }
grep -q "ELASTIC_WITH_CUDA=OFF: MPI collectives only" "$build.log" || { echo "CUDA was not hidden"; exit 1; }
cmake --build "$build" -j2 --target elastic_mpi >>"$build.log" 2>&1 || { tail -50 "$build.log"; exit 1; }
if nm -D "$build/lib/libelastic_mpi.so" | grep -q nccl; then echo "NCCL symbols in a no-CUDA build"; exit 1; fi
echo "elastic_mpi builds without CUDA"
rm -rf "$build" "$build.log"
