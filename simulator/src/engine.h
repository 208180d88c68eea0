// The simulation engine's state, shared by its source files: simulator.cpp (the event loop,
// progress, the optimizer's snapshot, placement) and engine_sweeps.cpp (fused sweeps). Internal to
// simulator/.
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <tuple>
#include <vector>

#include "elastic/optimizer/fusion.h"
#include "elastic/optimizer/goodput.h"
#include "elastic/optimizer/policy.h"
#include "elastic/simulator/simulator.h"

namespace elastic::simulator::internal {

namespace opt = elastic::optimizer;

struct SimJob {
  const JobSpec* spec = nullptr;
  const Application* app = nullptr;
  JobResult* res = nullptr;
  int min_gpus = 1;
  int max_gpus = 1;
  bool frozen = false;     // batch fixed at fixed_batch
  int64_t fixed_batch = 0;
  double target = 0.0;

  // Ground-truth state.
  double progress = 0.0;
  int epoch = 0;
  std::vector<int> alloc;  // GPUs per node (cluster-wide node index)
  int gpus = 0;
  int64_t batch = 0;
  int64_t local = 0;
  int accum = 0;
  double pause = 0.0;
  bool started = false;
  bool done = false;

  // Fused sweeps (engine_sweeps.cpp): the job's sweep (-1: none) and, while it trains, how many
  // trials share its GPU (0: not fused: the job holds `alloc`; >= 1: the GPU is its sweep's, the
  // job counts 1/fused_width of it and trains at fuse_speed = speedup(w) / w of its speed alone).
  int sweep = -1;
  int fused_width = 0;
  int fused_gpu = -1;  // which of its sweep's GPUs (its fused array), while fused_width > 0
  double fuse_speed = 1.0;

  // What the job has observed (ModelSource::kObserved).
  std::set<std::tuple<int, int, int64_t>> seen;
  std::vector<opt::StepSample> samples;
  bool dirty = false;
  bool has_fit = false;
  opt::PolluxParams fit;
  int max_observed = 0;

  // Option-table cache: rebuilt when the inputs change.
  std::vector<opt::Option> options;
  double base_goodput = 0.0;  // the model's goodput at min_gpus [samples/s, efficiency-weighted]
  bool cache_valid = false;
  double cache_sqr = -1.0, cache_var = -1.0;
  int cache_max = -1;
};

// A fused sweep: its trials (job indices, arrival order), its profile, the GPUs it holds (per
// node) and the option table of this epoch.
struct SimSweep {
  std::vector<size_t> trials;
  opt::FusionProfile profile;
  std::vector<int> alloc;  // GPUs per node (cluster-wide node index)
  int gpus = 0;
  int rescales = 0;  // changes of its GPU count after its start
  std::vector<opt::FusedChoice> choices;
};

int NodesOf(const std::vector<int>& alloc);
// Local batch and accumulation for a global batch on `gpus` GPUs (the optimizer's rule).
void SplitBatch(const Application& app, int64_t batch, int gpus, int64_t& local, int& accum);
// Progress per second of the job in its current configuration (ground truth), and the
// synchronised step time it observes.
double Rate(const SimJob& j, double* step_out);

class Engine {
 public:
  Engine(const AppTable& apps, const std::vector<JobSpec>& specs, const SimConfig& c) : apps_(apps), specs_(specs), c_(c) {}

  Result<SimResult> Run();

 private:
  // One holder of GPUs for Place(): a job or a sweep.
  struct Holder {
    std::vector<int>* alloc;
    int have;
    int want;
  };

  Status Setup();
  void Observe(SimJob& j, double step);
  void Advance(SimJob& j, double t0, double dt);
  const std::vector<opt::Option>& Options(SimJob& j, double now);
  Status Schedule(double now, size_t epoch_index);
  std::vector<size_t> FifoAdmit(double now, const std::vector<size_t>& active);
  void Place(std::vector<Holder>& holders);
  double RestEstimate(const SimJob& j) const;

  // Fused sweeps (engine_sweeps.cpp).
  Status SetupSweeps();
  // Appends one job per sweep with an active trial or GPUs to `snap`; `rows` gets their sweeps.
  void AddSweepJobs(double now, std::vector<size_t>& rows, opt::Snapshot& snap);
  // After the plan (`want`: GPUs per row) and placement: each trial's width, costs, counters.
  void ApplySweeps(double now, const std::vector<size_t>& rows, const std::vector<int>& want, int& allocated,
                   int& running, int& active);

  const AppTable& apps_;
  const std::vector<JobSpec>& specs_;
  const SimConfig& c_;
  std::unique_ptr<opt::Policy> policy_;
  opt::PolicyOptions popt_;
  bool fifo_ = false;
  bool rigid_ = false;   // static/fifo: the request exactly
  bool frozen_ = false;  // batch frozen at the request
  int capacity_ = 0;
  std::vector<SimJob> jobs_;
  std::vector<SimSweep> sweeps_;
  SimResult result_;
};

}  // namespace elastic::simulator::internal
