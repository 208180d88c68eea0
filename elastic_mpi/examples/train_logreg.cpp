// elastic-train-logreg: a real data-parallel training program on the elastic_mpi runtime.
//
// Logistic regression with momentum SGD on a synthetic, linearly separable-with-noise data set
// generated deterministically from a seed. It uses every feature of the session: state
// registration (parameters, momentum, the data cursor), exactly-once sharding that survives
// rescales, the global batch and learning-rate factor of the session, gradient-noise statistics,
// step metrics, and (in standalone mode) a scripted rescale schedule (ELASTIC_SCHEDULE).
//
// Gradients are averaged by sample count over the whole world (sum of per-sample gradients,
// divided by the step's global sample count), so the result does not depend on the world size
// except for floating-point reduction order.
//
// Modes without MPI, used by the tests:
//   --verify-ids DIR --samples N --epochs E   every (epoch, sample) in DIR/ids.* exactly once
//   --compare A B --tolerance T               max |a_i - b_i| / max(1, |a|_inf) <= T
#include <unistd.h>

#include <csignal>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "elastic_mpi/session.h"
#include "elastic_mpi/sharding.h"

namespace {

using elastic::mpi::EpochSharder;
using elastic::mpi::Session;
using elastic::mpi::SplitMix64;

using elastic::kExitCheckFailed;
using elastic::kExitFailure;
using elastic::kExitJoinRefused;
using elastic::kExitOk;
using elastic::kExitUsage;

struct Options {
  std::uint64_t samples = 4096;
  int features = 16;
  std::uint64_t epochs = 3;
  std::uint64_t batch = 64;
  double lr = 0.5;
  double momentum = 0.9;
  std::uint64_t seed = 42;
  int sleep_ms = 0;  // extra time per step (the join test needs a slow trainer)
  int compute_us_per_sample = 0;  // emulated accelerator time per local sample (scales with the world)
  int sync_ms = 0;  // emulated gradient synchronisation per step with more than one rank (does not scale)
  std::string model_out;
  std::string ids_dir;
  std::string verify_ids;
  std::string compare_a, compare_b;
  double tolerance = 1e-9;
  std::string checkpoint;     // written (collectively) when training ends or stops at --stop-at-step
  std::string restore_from;   // read on every rank after Begin(): continue where the checkpoint was
  bool resume = false;        // restore the session's own checkpoint (checkpoint_path()) if there is one
  std::uint64_t stop_at_step = 0;  // stop at this step (0: never), after the checkpoint
  std::size_t state_mb = 0;   // extra registered state (MB), to measure hand-over and restart costs
  std::uint64_t die_at_step = 0;   // tests: the last rank of group --die-group SIGKILLs itself
  std::uint32_t die_group = 1;
  std::uint64_t stall_at_step = 0;  // tests: the last rank sleeps --stall-s seconds at this step boundary
  double stall_s = 0;
};

double WallClock() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void Usage() {
  std::fprintf(stderr,
               "usage: elastic-train-logreg [--samples N] [--features D] [--epochs E] [--batch B]\n"
               "         [--lr X] [--momentum X] [--seed S] [--sleep-ms MS] [--compute-us-per-sample US]\n"
               "         [--sync-ms MS]\n"
               "         [--model-out FILE] [--ids-dir DIR] [--checkpoint FILE] [--restore-from FILE]\n"
               "         [--resume]\n"
               "         [--stop-at-step N] [--state-mb MB] [--die-at-step N --die-group G] [--stall-at-step N --stall-s S]\n"
               "       elastic-train-logreg --verify-ids DIR --samples N --epochs E\n"
               "       elastic-train-logreg --compare A B [--tolerance T]\n");
}

bool Parse(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&](const char* what) -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "elastic-train-logreg: %s needs a value\n", what);
        return nullptr;
      }
      return argv[++i];
    };
    const char* v = nullptr;
    if (a == "--resume") {  // a restarted job (elasticd requeued it) continues from its checkpoint
      o->resume = true;
      continue;
    }
    if (a == "--compare") {
      if (i + 2 >= argc) return false;
      o->compare_a = argv[++i];
      o->compare_b = argv[++i];
      continue;
    }
    if ((v = next(a.c_str())) == nullptr) return false;
    if (a == "--samples") o->samples = std::strtoull(v, nullptr, 10);
    else if (a == "--features") o->features = std::atoi(v);
    else if (a == "--epochs") o->epochs = std::strtoull(v, nullptr, 10);
    else if (a == "--batch") o->batch = std::strtoull(v, nullptr, 10);
    else if (a == "--lr") o->lr = std::atof(v);
    else if (a == "--momentum") o->momentum = std::atof(v);
    else if (a == "--seed") o->seed = std::strtoull(v, nullptr, 10);
    else if (a == "--sleep-ms") o->sleep_ms = std::atoi(v);
    else if (a == "--compute-us-per-sample") o->compute_us_per_sample = std::atoi(v);
    else if (a == "--sync-ms") o->sync_ms = std::atoi(v);
    else if (a == "--model-out") o->model_out = v;
    else if (a == "--ids-dir") o->ids_dir = v;
    else if (a == "--verify-ids") o->verify_ids = v;
    else if (a == "--tolerance") o->tolerance = std::atof(v);
    else if (a == "--checkpoint") o->checkpoint = v;
    else if (a == "--restore-from") o->restore_from = v;
    else if (a == "--stop-at-step") o->stop_at_step = std::strtoull(v, nullptr, 10);
    else if (a == "--state-mb") o->state_mb = std::strtoull(v, nullptr, 10);
    else if (a == "--die-at-step") o->die_at_step = std::strtoull(v, nullptr, 10);
    else if (a == "--stall-at-step") o->stall_at_step = std::strtoull(v, nullptr, 10);
    else if (a == "--stall-s") o->stall_s = std::strtod(v, nullptr);
    else if (a == "--die-group") o->die_group = static_cast<std::uint32_t>(std::strtoul(v, nullptr, 10));
    else {
      std::fprintf(stderr, "elastic-train-logreg: unknown option %s\n", a.c_str());
      return false;
    }
  }
  return o->samples > 0 && o->features > 0 && o->batch > 0 && o->sync_ms >= 0 && o->compute_us_per_sample >= 0;
}

// "noise scale N" from the session's gradient statistics (tr(Sigma) / |g|^2, the batch at which
// gradient noise and signal are equal), or why there is none.
std::string NoiseText(const elastic::mpi::GradientNoise& noise) {
  if (!noise.valid()) return "gradient noise not measured (it needs two ranks)";
  char buf[128];
  if (const auto scale = noise.noise_scale()) {
    std::snprintf(buf, sizeof buf, "gradient noise scale %.0f (|g|^2 %.3g, tr(Sigma) %.3g)", *scale, noise.grad_sqr(),
                  noise.grad_var());
  } else {
    std::snprintf(buf, sizeof buf, "gradient noise scale above what the estimator resolves (|g|^2 ~ 0, tr(Sigma) %.3g)",
                  noise.grad_var());
  }
  return buf;
}

// The synthetic data set: x uniform in [-1, 1]^D, y = sign(w* . x + 0.3 * noise), w* from the seed.
struct DataSet {
  int d = 0;
  std::vector<double> x;  // samples * d
  std::vector<double> y;  // +-1
};

DataSet Generate(const Options& o) {
  DataSet data;
  data.d = o.features;
  SplitMix64 rng(o.seed);
  std::vector<double> truth(static_cast<std::size_t>(o.features));
  for (double& w : truth) w = 4.0 * rng.Uniform() - 2.0;
  data.x.resize(o.samples * static_cast<std::size_t>(o.features));
  data.y.resize(o.samples);
  for (std::uint64_t i = 0; i < o.samples; ++i) {
    double z = 0;
    for (int j = 0; j < o.features; ++j) {
      const double v = 2.0 * rng.Uniform() - 1.0;
      data.x[i * static_cast<std::size_t>(o.features) + static_cast<std::size_t>(j)] = v;
      z += v * truth[static_cast<std::size_t>(j)];
    }
    z += 0.3 * (2.0 * rng.Uniform() - 1.0);
    data.y[i] = z >= 0 ? 1.0 : -1.0;
  }
  return data;
}

// Adds the per-sample gradients of the logistic loss log(1 + exp(-y (w.x + b))) over the given
// samples to grad (size d + 1; the last entry is the bias); returns the summed loss.
double AccumulateGradient(const DataSet& data, const std::vector<double>& w,
                          const std::vector<std::uint64_t>& samples, std::vector<double>* grad) {
  const auto d = static_cast<std::size_t>(data.d);
  double loss = 0;
  for (std::uint64_t s : samples) {
    const double* x = &data.x[s * d];
    double z = w[d];
    for (std::size_t j = 0; j < d; ++j) z += w[j] * x[j];
    const double margin = data.y[s] * z;
    loss += margin > 0 ? std::log1p(std::exp(-margin)) : -margin + std::log1p(std::exp(margin));
    const double coef = -data.y[s] / (1.0 + std::exp(margin));  // d loss / d z
    for (std::size_t j = 0; j < d; ++j) (*grad)[j] += coef * x[j];
    (*grad)[d] += coef;
  }
  return loss;
}

int VerifyIds(const Options& o) {
  // ids files: one "epoch sample" pair per line.
  std::map<std::pair<std::uint64_t, std::uint64_t>, int> seen;
  std::string cmd;
  std::vector<std::string> files;
  if (FILE* ls = popen(("ls " + o.verify_ids + "/ids.* 2>/dev/null").c_str(), "r")) {
    char line[4096];
    while (std::fgets(line, sizeof line, ls)) {
      std::string f(line);
      if (!f.empty() && f.back() == '\n') f.pop_back();
      files.push_back(f);
    }
    pclose(ls);
  }
  std::uint64_t total = 0;
  for (const std::string& f : files) {
    std::ifstream in(f);
    std::uint64_t e = 0;
    std::uint64_t s = 0;
    while (in >> e >> s) {
      ++seen[{e, s}];
      ++total;
    }
  }
  std::uint64_t missing = 0;
  std::uint64_t repeated = 0;
  for (std::uint64_t e = 0; e < o.epochs; ++e) {
    for (std::uint64_t s = 0; s < o.samples; ++s) {
      auto it = seen.find({e, s});
      if (it == seen.end()) ++missing;
      else if (it->second > 1) repeated += static_cast<std::uint64_t>(it->second - 1);
    }
  }
  const std::uint64_t expected = o.epochs * o.samples;
  const bool ok = missing == 0 && repeated == 0 && total == expected;
  std::printf("{\"files\": %zu, \"records\": %llu, \"expected\": %llu, \"missing\": %llu, \"repeated\": %llu, \"ok\": %s}\n",
              files.size(), static_cast<unsigned long long>(total), static_cast<unsigned long long>(expected),
              static_cast<unsigned long long>(missing), static_cast<unsigned long long>(repeated),
              ok ? "true" : "false");
  return ok ? kExitOk : kExitCheckFailed;
}

std::vector<double> ReadModel(const std::string& path) {
  std::vector<double> v;
  std::ifstream in(path);
  double x = 0;
  while (in >> x) v.push_back(x);
  return v;
}

int Compare(const Options& o) {
  const auto a = ReadModel(o.compare_a);
  const auto b = ReadModel(o.compare_b);
  if (a.empty() || a.size() != b.size()) {
    std::printf("{\"ok\": false, \"error\": \"models missing or of different sizes (%zu, %zu)\"}\n", a.size(), b.size());
    return kExitCheckFailed;
  }
  double diff = 0;
  double scale = 1;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::fabs(a[i] - b[i]));
    scale = std::max(scale, std::fabs(a[i]));
  }
  const double rel = diff / scale;
  const bool ok = rel <= o.tolerance;
  std::printf("{\"max_abs_diff\": %.3e, \"relative\": %.3e, \"tolerance\": %.1e, \"ok\": %s}\n", diff, rel,
              o.tolerance, ok ? "true" : "false");
  return ok ? kExitOk : kExitCheckFailed;
}

int Train(int argc, char** argv, const Options& o) {
  auto options = elastic::mpi::SessionOptions::FromEnvironment();
  if (!options.ok()) {
    std::fprintf(stderr, "elastic-train-logreg: %s\n", options.status().ToString().c_str());
    return kExitUsage;
  }
  options.value().global_batch = o.batch;
  // The training goal, for elasticd's remaining-time objective (ELASTIC_TOTAL_SAMPLES wins).
  if (options.value().total_samples == 0) options.value().total_samples = static_cast<double>(o.epochs * o.samples);
  auto created = Session::Create(options.value(), &argc, &argv);
  if (!created.ok()) {
    std::fprintf(stderr, "elastic-train-logreg: %s\n", created.status().ToString().c_str());
    return created.status().kind() == elastic::ErrorKind::kPermission ? kExitJoinRefused : kExitFailure;
  }
  std::unique_ptr<Session> session = std::move(created).value();

  const DataSet data = Generate(o);
  const auto d = static_cast<std::size_t>(o.features);
  std::vector<double> w(d + 1, 0.0);
  std::vector<double> velocity(d + 1, 0.0);
  EpochSharder sharder(o.samples, o.seed);
  session->RegisterDoubles("params", w.data(), w.size());
  session->RegisterDoubles("momentum", velocity.data(), velocity.size());
  session->RegisterU64("data_cursor", &sharder.cursor().epoch, 2);
  static_assert(sizeof(elastic::mpi::ShardCursor) == 2 * sizeof(std::uint64_t));
  std::vector<char> extra(o.state_mb << 20, 1);
  if (!extra.empty()) session->RegisterBytes("extra_state", extra.data(), extra.size());
  if (auto s = session->Begin(); !s.ok()) {
    std::fprintf(stderr, "elastic-train-logreg: %s\n", s.ToString().c_str());
    return kExitFailure;
  }
  bool restored = false;
  std::string restore_from = o.restore_from;
  if (restore_from.empty() && o.resume && !session->newcomer() && !session->relaunched() &&
      !session->checkpoint_path().empty()) {
    // Rank 0 decides for every rank of the starting world (ReadCheckpoint is per rank: all must
    // read, or none). A joining group receives the state from the running world instead.
    int found = session->rank() == 0 && std::filesystem::exists(session->checkpoint_path()) ? 1 : 0;
    MPI_Bcast(&found, 1, MPI_INT, 0, session->world());
    if (found != 0) restore_from = session->checkpoint_path();
  }
  if (!restore_from.empty() && !session->newcomer() && !session->relaunched()) {
    if (auto s = session->ReadCheckpoint(restore_from); !s.ok()) {
      std::fprintf(stderr, "elastic-train-logreg: %s\n", s.ToString().c_str());
      return kExitFailure;
    }
    restored = true;
    if (session->rank() == 0) {
      std::fprintf(stderr, "elastic-train-logreg: restored %s at epoch %llu, cursor %llu (world %d)\n",
                   restore_from.c_str(), static_cast<unsigned long long>(sharder.cursor().epoch),
                   static_cast<unsigned long long>(sharder.cursor().cursor), session->size());
    }
  }
  // A broken world (a rank died: MPI failed, kUnavailable) ends with kExitWorldLost, so that
  // elasticd restarts the job from its last checkpoint; any other error is the program's own.
  auto failure_code = [](const elastic::Status& s) {
    return s.kind() == elastic::ErrorKind::kUnavailable ? elastic::mpi::kExitWorldLost : kExitFailure;
  };

  std::vector<std::pair<std::uint64_t, std::uint64_t>> processed;  // (epoch, sample)
  std::vector<double> local(d + 1);
  std::vector<double> reduced(d + 3);
  std::vector<double> global_mean(d + 1);
  std::vector<double> local_mean(d + 1);
  double last_loss = 0;
  bool stopped = false;
  while (true) {
    auto changed = session->RescalePoint();
    if (!changed.ok()) {
      std::fprintf(stderr, "elastic-train-logreg: rescale failed: %s\n", changed.status().ToString().c_str());
      return failure_code(changed.status());
    }
    if (session->should_stop()) break;
    if (changed.value() && session->rank() == 0) {  // the batch and learning rate the job now trains with
      std::fprintf(stderr, "elastic-train-logreg: step %llu: world %d, batch %llu, lr %.4g (%.4g x factor %.3f), %s\n",
                   static_cast<unsigned long long>(session->step()), session->size(),
                   static_cast<unsigned long long>(session->global_batch()), o.lr * session->lr_factor(), o.lr,
                   session->lr_factor(), NoiseText(session->gradient_noise()).c_str());
    }
    if (sharder.cursor().epoch >= o.epochs) break;  // identical on every rank
    if (o.stop_at_step > 0 && session->step() >= o.stop_at_step) {
      // Checkpoint-restart as a rigid job would do it: the event's time starts the pause.
      if (session->rank() == 0) std::printf("{\"event\": \"stop\", \"t\": %.6f, \"world\": %d}\n", WallClock(), session->size());
      std::fflush(stdout);
      stopped = true;
      break;
    }
    if (o.die_at_step > 0 && session->step() >= o.die_at_step && session->group_id() == o.die_group &&
        session->rank() == session->size() - 1) {
      std::fprintf(stderr, "elastic-train-logreg: rank %d of group %u kills itself (SIGKILL) at step %llu\n",
                   session->rank(), session->group_id(), static_cast<unsigned long long>(session->step()));
      std::fflush(stderr);
      std::raise(SIGKILL);  // the others are about to enter the step's allreduce
    }
    if (o.stall_at_step > 0 && session->step() == o.stall_at_step && session->rank() == session->size() - 1) {
      // Slow, not dead (a checkpoint write, an evaluation): the others wait at the next collective.
      std::fprintf(stderr, "elastic-train-logreg: rank %d stalls %g s at step %llu\n", session->rank(), o.stall_s,
                   static_cast<unsigned long long>(session->step()));
      std::fflush(stderr);
      std::this_thread::sleep_for(std::chrono::duration<double>(o.stall_s));
    }
    const auto start = std::chrono::steady_clock::now();
    const auto shard = sharder.Next(session->global_batch(), session->rank(), session->size());
    std::fill(local.begin(), local.end(), 0.0);
    const double loss = AccumulateGradient(data, w, shard.samples, &local);
    for (std::uint64_t s : shard.samples) processed.emplace_back(shard.epoch, s);
    // One allreduce: gradient sums, sample count, loss sum.
    std::copy(local.begin(), local.end(), reduced.begin());
    reduced[d + 1] = static_cast<double>(shard.samples.size());
    reduced[d + 2] = loss;
    // Host memory (this trainer computes on the CPU): under NCCL it goes through MPI.
    if (auto s = session->backend().AllreduceSum(reduced.data(), reduced.size(), elastic::mpi::MemorySpace::kHost);
        !s.ok()) {
      std::fprintf(stderr, "elastic-train-logreg: allreduce failed: %s\n", s.ToString().c_str());
      return failure_code(s);
    }
    const double count = reduced[d + 1];
    for (std::size_t j = 0; j <= d; ++j) {
      global_mean[j] = reduced[j] / count;
      local_mean[j] = shard.samples.empty() ? 0.0 : local[j] / static_cast<double>(shard.samples.size());
    }
    last_loss = reduced[d + 2] / count;
    if (auto s = session->ObserveGradients(std::span<const double>(local_mean), shard.samples.size(),
                                           std::span<const double>(global_mean));
        !s.ok()) {
      std::fprintf(stderr, "elastic-train-logreg: %s\n", s.ToString().c_str());
      return kExitFailure;
    }
    const double lr = o.lr * session->lr_factor();
    for (std::size_t j = 0; j <= d; ++j) {
      velocity[j] = o.momentum * velocity[j] + global_mean[j];
      w[j] -= lr * velocity[j];
    }
    if (o.sleep_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(o.sleep_ms));
    if (o.sync_ms > 0 && session->size() > 1) {
      // What the gradient allreduce of a larger model would take: the same for any batch.
      std::this_thread::sleep_for(std::chrono::milliseconds(o.sync_ms));
    }
    if (o.compute_us_per_sample > 0) {
      // What a GPU would spend on this rank's share: more ranks, shorter steps.
      std::this_thread::sleep_for(std::chrono::microseconds(
          static_cast<std::int64_t>(o.compute_us_per_sample) * static_cast<std::int64_t>(shard.samples.size())));
    }
    session->ReportStep(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
                        shard.global_count);
    if (restored) {  // the first step after a restart: ends the restart's pause
      restored = false;
      if (session->rank() == 0) std::printf("{\"event\": \"first_step\", \"t\": %.6f, \"world\": %d}\n", WallClock(), session->size());
      std::fflush(stdout);
    }
  }
  if (!o.checkpoint.empty() && !session->should_stop()) {
    if (auto s = session->WriteCheckpoint(o.checkpoint); !s.ok()) {
      std::fprintf(stderr, "elastic-train-logreg: %s\n", s.ToString().c_str());
      return kExitFailure;
    }
  }
  if (stopped) return kExitOk;

  if (!o.ids_dir.empty()) {
    const std::string path = o.ids_dir + "/ids.g" + std::to_string(session->group_id()) + ".p" +
                             std::to_string(getpid()) + ".txt";
    std::ofstream out(path);
    for (const auto& [e, s] : processed) out << e << ' ' << s << '\n';
  }
  if (!session->should_stop() && session->rank() == 0) {
    std::fprintf(stderr, "elastic-train-logreg: done: %llu steps, world %d, batch %llu, loss %.6f, %s\n",
                 static_cast<unsigned long long>(session->step()), session->size(),
                 static_cast<unsigned long long>(session->global_batch()), last_loss,
                 NoiseText(session->gradient_noise()).c_str());
    if (!o.model_out.empty()) {
      std::ofstream out(o.model_out);
      out.precision(17);
      for (double v : w) out << v << '\n';
    }
  }
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!Parse(argc, argv, &o)) {
    Usage();
    return kExitUsage;
  }
  if (!o.verify_ids.empty()) return VerifyIds(o);
  if (!o.compare_a.empty()) return Compare(o);
  try {
    return Train(argc, argv, o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "elastic-train-logreg: %s\n", e.what());
    return kExitFailure;
  }
}
