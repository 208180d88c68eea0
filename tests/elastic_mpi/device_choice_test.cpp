// The NCCL backend's device choice (elastic_mpi/src/device_choice.h) without a GPU: 4 ranks of
// one node (mpirun -np 4) stand for ranks of different jobs and groups, with device counts and
// held devices given, and every rank checks the device each rank gets. Exit 0 when all agree
// with the rule: per numbering, held devices stay, the others take the lowest free in rank order.
#include <mpi.h>

#include <cstdio>
#include <string>
#include <vector>

#include "device_choice.h"

namespace {

int failures = 0;

// Runs one case: numbering[r], held[r] per world rank, devices visible to each rank; expects
// want[r].
void Case(const char* what, MPI_Comm world, const std::vector<std::string>& numbering, const std::vector<int>& held,
          int devices, const std::vector<int>& want) {
  int rank = 0;
  MPI_Comm_rank(world, &rank);
  const auto r = static_cast<std::size_t>(rank);
  auto got = elastic::mpi::detail::ChooseDevice(world, held[r], devices, numbering[r]);
  int device = got.ok() ? got.value() : -100;
  std::vector<int> all(want.size());
  MPI_Allgather(&device, 1, MPI_INT, all.data(), 1, MPI_INT, world);
  if (all != want) {
    ++failures;
    if (rank == 0) {
      std::string text;
      for (int d : all) text += std::to_string(d) + " ";
      std::fprintf(stderr, "FAIL %s: got %s\n", what, text.c_str());
    }
  } else if (rank == 0) {
    std::printf("ok   %s\n", what);
  }
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != 4) {
    std::fprintf(stderr, "run with 4 ranks\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const std::string a = "101/0,1,2,3";
  // One launch numbering its 4 GPUs alike: each rank its local rank.
  Case("one launch", MPI_COMM_WORLD, {a, a, a, a}, {-1, -1, -1, -1}, 4, {0, 1, 2, 3});
  // A parent job (2 ranks, its own CUDA_VISIBLE_DEVICES) and an extension job (2 ranks, its own):
  // each job's ranks take their own local rank, not their rank in the merged world's node.
  Case("two jobs on one node", MPI_COMM_WORLD, {"101/0,1", "101/0,1", "102/0,1", "102/0,1"}, {-1, -1, -1, -1}, 2,
       {0, 1, 0, 1});
  // A spawned group inherits its parents' numbering: it takes the GPUs the parents do not hold.
  Case("spawned after parents", MPI_COMM_WORLD, {a, a, a, a}, {0, 2, -1, -1}, 4, {0, 2, 1, 3});
  // Parents that moved their state to devices 1 and 3 keep them; newcomers avoid them.
  Case("program's devices kept", MPI_COMM_WORLD, {a, a, a, a}, {3, 1, -1, -1}, 4, {3, 1, 0, 2});
  // More ranks than GPUs: the extra ones share (and say so); NCCL then refuses, MPI is used.
  Case("oversubscribed", MPI_COMM_WORLD, {a, a, a, a}, {-1, -1, -1, -1}, 2, {0, 1, 0, 1});
  int all_failures = 0;
  MPI_Allreduce(&failures, &all_failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Finalize();
  return all_failures == 0 ? 0 : 1;
}
