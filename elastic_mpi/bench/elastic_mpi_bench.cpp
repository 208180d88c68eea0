// elastic-mpi-bench: the parent's pause for grow and shrink with 100 MB of state, and the cost of
// collectives in a merged world. One JSON line per case on rank 0's standard output:
//   {"case": "grow1", "pause_s": ..., "from": 2, "to": 3, "state_mb": 100, "phases": {...}}
//   {"case": "merged_allreduce", "pause_s": 0, "ratio": ..., "merged_s": ..., "launched_s": ...}
// pause_s = the time the parent does not train: from entering the rescale point to the end of
// its first collective at the new size (newcomers must have received the state by then).
//
// Usage (bench/run_bench.sh does both):
//   mpirun -np 4 elastic-mpi-bench --allreduce-only        prints {"launched_allreduce_s": X}
//   mpirun -np 2 elastic-mpi-bench [--launched-allreduce-s X] [--state-mb 100]
// The schedule 2->3->2->4->2->6->2 is built in (ELASTIC_SCHEDULE is ignored); the steps between
// changes last longer than the respawn delay, so no grow waits for it.
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "elastic_mpi/session.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kAllreduceDoubles = 64 * 1024;  // 512 KB, as in the measurements of the notes
constexpr int kAllreduceRepeats = 50;

// Times the allreduce the training step uses: the session's backend (backend != null; in a
// merged world it reduces hierarchically, see MakeBackend) or plain MPI_Allreduce on comm.
double TimeAllreduce(MPI_Comm comm, elastic::mpi::CollectiveBackend* backend = nullptr) {
  std::vector<double> buf(kAllreduceDoubles, 1.0);
  auto once = [&] {
    if (backend != nullptr) {
      (void)backend->AllreduceSum(buf.data(), buf.size(), elastic::mpi::MemorySpace::kHost);
    } else {
      MPI_Allreduce(MPI_IN_PLACE, buf.data(), kAllreduceDoubles, MPI_DOUBLE, MPI_SUM, comm);
    }
  };
  once();  // warm-up
  MPI_Barrier(comm);
  const auto t = Clock::now();
  for (int i = 0; i < kAllreduceRepeats; ++i) once();
  double s = std::chrono::duration<double>(Clock::now() - t).count() / kAllreduceRepeats;
  MPI_Bcast(&s, 1, MPI_DOUBLE, 0, comm);  // rank 0's figure for everyone
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  bool allreduce_only = false;
  double launched_s = 0;
  std::size_t state_mb = 100;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--allreduce-only") allreduce_only = true;
    else if (a == "--launched-allreduce-s" && i + 1 < argc) launched_s = std::atof(argv[++i]);
    else if (a == "--state-mb" && i + 1 < argc) state_mb = std::strtoull(argv[++i], nullptr, 10);
    else {
      std::fprintf(stderr, "usage: elastic-mpi-bench [--allreduce-only] [--launched-allreduce-s X] [--state-mb N]\n");
      return 2;
    }
  }
  if (allreduce_only) {
    MPI_Init(&argc, &argv);
    const double s = TimeAllreduce(MPI_COMM_WORLD);
    int rank = 0;
    int size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank == 0) std::printf("{\"launched_allreduce_s\": %.6g, \"ranks\": %d}\n", s, size);
    MPI_Finalize();
    return 0;
  }

  auto options = elastic::mpi::SessionOptions::FromEnvironment();
  if (!options.ok()) {
    std::fprintf(stderr, "elastic-mpi-bench: %s\n", options.status().ToString().c_str());
    return 2;
  }
  options.value().global_batch = 64;
  options.value().schedule = elastic::mpi::ParseSchedule("2->3->2->4->2->6->2").value();
  options.value().schedule_every = 12;  // 12 steps of 0.1 s > the 1 s respawn delay
  auto created = elastic::mpi::Session::Create(options.value(), &argc, &argv);
  if (!created.ok()) {
    std::fprintf(stderr, "elastic-mpi-bench: %s\n", created.status().ToString().c_str());
    return 1;
  }
  auto session = std::move(created).value();
  std::vector<char> state(state_mb << 20, 1);
  session->RegisterBytes("state", state.data(), state.size());
  if (auto s = session->Begin(); !s.ok()) {
    std::fprintf(stderr, "elastic-mpi-bench: %s\n", s.ToString().c_str());
    return 1;
  }
  const std::uint64_t steps = 12 * 7;
  bool merged_done = false;
  while (session->step() < steps || session->newcomer()) {
    const auto start = Clock::now();
    auto changed = session->RescalePoint();
    if (!changed.ok()) {
      std::fprintf(stderr, "elastic-mpi-bench: %s\n", changed.status().ToString().c_str());
      return 1;
    }
    if (session->left()) break;
    if (changed.value()) {
      double one = 1;
      if (auto s = session->backend().AllreduceSum(&one, 1, elastic::mpi::MemorySpace::kHost); !s.ok()) return 1;  // first step
      const double pause = std::chrono::duration<double>(Clock::now() - start).count();
      const auto& info = session->last_rescale();
      if (session->rank() == 0 && !session->newcomer()) {
        const int delta = info.new_size - info.old_size;
        std::string name = info.what == "grow" ? "grow" + std::to_string(delta)
                                               : "shrink" + std::to_string(-delta);
        std::string phases;
        for (const auto& [k, v] : info.phases) phases += (phases.empty() ? "" : ", ") + ("\"" + k + "\": " + std::to_string(v));
        std::printf("{\"case\": \"%s\", \"pause_s\": %.4f, \"from\": %d, \"to\": %d, \"state_mb\": %zu, \"phases\": {%s}}\n",
                    name.c_str(), pause, info.old_size, info.new_size, state_mb, phases.c_str());
        if (name == "shrink4") {  // the case the issue names "shrink": the largest group leaving
          std::printf("{\"case\": \"shrink\", \"pause_s\": %.4f, \"leavers\": 4, \"state_mb\": %zu}\n", pause, state_mb);
        }
        std::fflush(stdout);
      }
      if (session->size() == 4 && !merged_done) {
        merged_done = true;
        const double merged = TimeAllreduce(session->world(), &session->backend());
        if (session->rank() == 0) {
          std::printf("{\"case\": \"merged_allreduce\", \"pause_s\": 0, \"ratio\": %.3f, \"merged_s\": %.6g, "
                      "\"launched_s\": %.6g, \"ranks\": 4, \"bytes\": %d}\n",
                      launched_s > 0 ? merged / launched_s : 0.0, merged, launched_s,
                      kAllreduceDoubles * 8);
          std::fflush(stdout);
        }
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (session->step() >= steps) break;
  }
  return 0;
}
