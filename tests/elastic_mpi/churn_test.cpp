// elastic-mpi-churn: one world grows and shrinks in place hundreds of times through the session's
// real paths (a separately launched group joins by connect/accept as an extension job does, then
// leaves by a shrink command), and every change is checked.
//
// Two roles, one program (run_mpi_test.sh churn starts both):
//   base:   elastic-launch -n 2 ... elastic-mpi-churn --changes N
//           the job. Trains until N changes happened and it is back at its size; its rank 0 then
//           prints one JSON line: {"test": "churn", "changes": N, "pause_median_s": ..., ...}.
//   joiner: elastic-launch --join -n 2 ... elastic-mpi-churn --joiner --changes N
//           one launch whose processes join, train --steps-in-world steps, leave, and join again
//           (a new Session, group id 1, 2, ...), N/2 times. Its rank 0 plays elasticd: it writes
//           the grow command before each join and the shrink command after the steps in the world
//           into ELASTIC_COMMAND_DIR, which the world's rank 0 polls.
//
// Every step of every rank: the samples of the step come from EpochSharder (its cursor is the
// state newcomers receive); each rank adds 1 per sample it took to a vector over all samples,
// plus 1 in a rank counter, and the world allreduces it through the session's backend. Every rank
// checks the result against the known sum: the rank counter is the world size, and the vector is
// exactly the step's slice of the epoch's permutation (one 1 per sample, nothing else). Rank 0
// (never leaves) also adds the steps up per epoch: at the end of each epoch every sample was taken
// exactly once. pause = base rank 0's time from entering the rescale point that took a change to
// the end of the first correct allreduce in the new world.
//
// Exit status: 0 passed, 1 a session or backend call failed, 3 a check failed or the deadline
// passed, 2 usage.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "elastic_mpi/session.h"
#include "elastic_mpi/sharding.h"

namespace {

using elastic::mpi::EpochSharder;
using elastic::mpi::Session;
using Clock = std::chrono::steady_clock;

enum ExitCode { kExitOk = 0, kExitError = 1, kExitUsage = 2, kExitCheckFailed = 3 };

struct Options {
  bool joiner = false;
  int changes = 200;            // grows + shrinks, alternating; even
  int steps_in_world = 2;       // the joiner's steps between its join and its shrink command
  std::uint64_t samples = 1024;
  std::uint64_t batch = 32;
  double deadline_s = 150;      // the whole churn; a hang fails the test before ctest's timeout
  int sleep_ms = 2;             // per step: leaves the two shared cores to the other launch
  std::string token = "0123456789abcdef0123456789abcdef";
};

double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Writes a command file the way elasticd's stand-in must: complete before it has a .json name.
void WriteCommand(const std::string& dir, int serial, const std::string& json) {
  char name[32];
  std::snprintf(name, sizeof name, "%06d", serial);
  const std::string path = dir + "/" + name;
  {
    std::ofstream out(path + ".tmp");
    out << json << "\n";
  }
  std::rename((path + ".tmp").c_str(), (path + ".json").c_str());
}

// One step: take this rank's samples, allreduce the sample counts, check the result.
class Stepper {
 public:
  Stepper(const Options& o, EpochSharder* sharder) : o_(o), sharder_(sharder) {}

  // Returns kExitOk, kExitError or kExitCheckFailed; *stop is the world's stop flag (any rank).
  int Step(Session& session, bool stop_here, bool* stop) {
    const auto before = sharder_->cursor();
    const auto shard = sharder_->Next(session.global_batch(), session.rank(), session.size());
    const std::uint64_t n = sharder_->num_samples();
    std::vector<double> v(n + 2, 0.0);
    for (std::uint64_t id : shard.samples) v[id] += 1;
    v[n] = 1;
    v[n + 1] = stop_here ? 1 : 0;
    if (auto s = session.backend().AllreduceSum(v.data(), v.size(), elastic::mpi::MemorySpace::kHost); !s.ok()) {
      std::fprintf(stderr, "churn: allreduce at step %llu: %s\n", static_cast<unsigned long long>(session.step()),
                   s.ToString().c_str());
      return kExitError;
    }
    *stop = v[n + 1] > 0;
    if (v[n] != session.size()) {
      std::fprintf(stderr, "churn: rank %d: %g ranks in the allreduce, world of %d\n", session.rank(), v[n],
                   session.size());
      return kExitCheckFailed;
    }
    // The known sum: one 1 for each sample of the step's slice of the permutation.
    std::vector<double> expected(n, 0.0);
    const std::uint64_t start = shard.epoch == before.epoch ? before.cursor : 0;
    for (std::uint64_t i = 0; i < shard.global_count; ++i) expected[sharder_->SampleAt(shard.epoch, start + i)] += 1;
    if (!std::equal(expected.begin(), expected.end(), v.begin())) {
      std::fprintf(stderr, "churn: rank %d: step %llu (epoch %llu, cursor %llu, world %d): the allreduced samples "
                   "are not the step's slice\n", session.rank(), static_cast<unsigned long long>(session.step()),
                   static_cast<unsigned long long>(shard.epoch), static_cast<unsigned long long>(start),
                   session.size());
      return kExitCheckFailed;
    }
    if (session.rank() == 0) return Account(shard.epoch, v);
    return kExitOk;
  }

  // Rank 0: the samples of each epoch, exactly once when the epoch ends.
  int Account(std::uint64_t epoch, const std::vector<double>& v) {
    const std::uint64_t n = sharder_->num_samples();
    if (epoch != epoch_) {
      if (!seen_.empty()) {
        if (std::any_of(seen_.begin(), seen_.end(), [](double c) { return c != 1; })) {
          std::fprintf(stderr, "churn: epoch %llu did not take every sample exactly once\n",
                       static_cast<unsigned long long>(epoch_));
          return kExitCheckFailed;
        }
        ++epochs_checked_;
      }
      seen_.assign(n, 0.0);
      epoch_ = epoch;
    }
    for (std::uint64_t i = 0; i < n; ++i) seen_[i] += v[i];
    return kExitOk;
  }
  int epochs_checked() const { return epochs_checked_; }

 private:
  const Options& o_;
  EpochSharder* sharder_;
  std::uint64_t epoch_ = UINT64_MAX;
  std::vector<double> seen_;
  int epochs_checked_ = 0;
};

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(q * static_cast<double>(v.size() - 1) + 0.5)];
}

elastic::Result<std::unique_ptr<Session>> NewSession(const Options& o, int group, int* argc, char*** argv) {
  auto options = elastic::mpi::SessionOptions::FromEnvironment();
  if (!options.ok()) return options.status();
  options.value().global_batch = o.batch;
  if (o.joiner) {
    options.value().join = true;
    options.value().group_id = static_cast<std::uint32_t>(group);
    options.value().join_token = o.token;
  }
  return Session::Create(options.value(), argc, argv);
}

int RunBase(const Options& o, int* argc, char*** argv) {
  auto created = NewSession(o, 0, argc, argv);
  if (!created.ok()) {
    std::fprintf(stderr, "churn: %s\n", created.status().ToString().c_str());
    return kExitError;
  }
  auto session = std::move(created).value();
  EpochSharder sharder(o.samples, 7);
  session->RegisterU64("sharder", &sharder.cursor().epoch, 2);
  if (auto s = session->Begin(); !s.ok()) {
    std::fprintf(stderr, "churn: %s\n", s.ToString().c_str());
    return kExitError;
  }
  const int base_size = session->size();
  Stepper stepper(o, &sharder);
  std::vector<double> pauses, join_pauses, shrink_pauses, intervals;
  int joins = 0, shrinks = 0;
  const auto begin = Clock::now();
  auto last_change = begin;
  bool late = false;
  for (;;) {
    const auto at = Clock::now();
    auto changed = session->RescalePoint();
    if (!changed.ok()) {
      std::fprintf(stderr, "churn: rescale point: %s\n", changed.status().ToString().c_str());
      return kExitError;
    }
    const std::string what = changed.value() ? session->last_rescale().what : "";
    const bool done = joins + shrinks >= o.changes && session->size() == base_size;
    late = late || (session->rank() == 0 && Since(begin) > o.deadline_s);
    bool stop = false;
    if (int rc = stepper.Step(*session, session->rank() == 0 && (done || late), &stop); rc != kExitOk) return rc;
    if (session->rank() == 0 && (what == "join" || what == "shrink")) {
      const double pause = Since(at);
      pauses.push_back(pause);
      (what == "join" ? join_pauses : shrink_pauses).push_back(pause);
      (what == "join" ? joins : shrinks) += 1;
      intervals.push_back(Since(last_change) - pause);
      last_change = Clock::now();
    }
    if (stop) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(o.sleep_ms));
  }
  if (session->rank() == 0) {
    const double wall = Since(begin);
    std::printf("{\"test\": \"churn\", \"changes\": %d, \"joins\": %d, \"shrinks\": %d, \"pause_median_s\": %.4f, "
                "\"pause_max_s\": %.4f, \"join_pause_median_s\": %.4f, \"join_pause_max_s\": %.4f, "
                "\"shrink_pause_median_s\": %.4f, \"shrink_pause_max_s\": %.4f, \"interval_mean_s\": %.4f, "
                "\"interval_max_s\": %.4f, \"steps\": %llu, \"epochs_checked\": %d, \"backend\": \"%s\", "
                "\"wall_s\": %.1f}\n",
                joins + shrinks, joins, shrinks, Percentile(pauses, 0.5), Percentile(pauses, 1.0),
                Percentile(join_pauses, 0.5), Percentile(join_pauses, 1.0), Percentile(shrink_pauses, 0.5),
                Percentile(shrink_pauses, 1.0),
                intervals.empty() ? 0.0 : wall / static_cast<double>(intervals.size()), Percentile(intervals, 1.0),
                static_cast<unsigned long long>(session->step()), stepper.epochs_checked(),
                std::string(session->backend().name()).c_str(), wall);
    std::fflush(stdout);
    if (late) {
      std::fprintf(stderr, "churn: %d changes of %d within the deadline of %g s\n", joins + shrinks, o.changes,
                   o.deadline_s);
      return kExitCheckFailed;
    }
  }
  return late ? kExitCheckFailed : kExitOk;
}

int RunJoiner(const Options& o, int* argc, char*** argv) {
  // MPI outlives the sessions: each join is a new Session in the same processes.
  int provided = 0;
  MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
  int launch_rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &launch_rank);
  const char* dir = std::getenv("ELASTIC_COMMAND_DIR");
  if (dir == nullptr || *dir == '\0') {
    std::fprintf(stderr, "churn: the joiner needs ELASTIC_COMMAND_DIR\n");
    return kExitUsage;
  }
  EpochSharder sharder(o.samples, 7);
  Stepper stepper(o, &sharder);
  const auto begin = Clock::now();
  int serial = 0;
  int rc = kExitOk;
  for (int group = 1; group <= o.changes / 2 && rc == kExitOk; ++group) {
    if (Since(begin) > o.deadline_s) {
      rc = kExitCheckFailed;
      break;
    }
    if (launch_rank == 0) {
      WriteCommand(dir, ++serial, "{\"action\":\"grow\",\"group\":" + std::to_string(group) + ",\"join_token\":\"" +
                                      o.token + "\"}");
    }
    auto created = NewSession(o, group, argc, argv);
    if (!created.ok()) {
      std::fprintf(stderr, "churn: join of group %d: %s\n", group, created.status().ToString().c_str());
      rc = kExitError;
      break;
    }
    auto session = std::move(created).value();
    session->RegisterU64("sharder", &sharder.cursor().epoch, 2);
    if (auto s = session->Begin(); !s.ok()) {
      std::fprintf(stderr, "churn: group %d: %s\n", group, s.ToString().c_str());
      rc = kExitError;
      break;
    }
    for (int steps = 0;; ++steps) {
      auto changed = session->RescalePoint();
      if (!changed.ok()) {
        std::fprintf(stderr, "churn: group %d: %s\n", group, changed.status().ToString().c_str());
        rc = kExitError;
        break;
      }
      if (session->left()) break;
      bool stop = false;  // the base's deadline passed: leave with it at the end of the job
      if (rc = stepper.Step(*session, false, &stop); rc != kExitOk) break;
      if (stop) {
        rc = kExitCheckFailed;
        break;
      }
      if (steps + 1 == o.steps_in_world && launch_rank == 0) {
        WriteCommand(dir, ++serial, "{\"action\":\"shrink\",\"group\":" + std::to_string(group) + "}");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(o.sleep_ms));
    }
  }
  MPI_Finalize();
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    const char* v = nullptr;
    if (a == "--joiner") o.joiner = true;
    else if (a == "--changes" && (v = value())) o.changes = std::atoi(v);
    else if (a == "--steps-in-world" && (v = value())) o.steps_in_world = std::atoi(v);
    else if (a == "--deadline-s" && (v = value())) o.deadline_s = std::atof(v);
    else {
      std::fprintf(stderr, "usage: elastic-mpi-churn [--joiner] [--changes N] [--steps-in-world K] [--deadline-s S]\n");
      return kExitUsage;
    }
  }
  if (o.changes < 2 || o.changes % 2 != 0 || o.steps_in_world < 1) {
    std::fprintf(stderr, "elastic-mpi-churn: --changes must be even and >= 2, --steps-in-world >= 1\n");
    return kExitUsage;
  }
  return o.joiner ? RunJoiner(o, &argc, &argv) : RunBase(o, &argc, &argv);
}
