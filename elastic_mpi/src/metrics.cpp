#include "elastic_mpi/metrics.h"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "elastic/common/log.h"

namespace elastic::mpi {
namespace {

class JsonLinesSink final : public MetricsSink {
 public:
  explicit JsonLinesSink(const std::string& path) : file_(std::fopen(path.c_str(), "a")) {
    if (file_ == nullptr) {
      Log(LogLevel::kWarning, "elastic_mpi", "cannot open metrics file ", path, ": metrics dropped");
    }
  }
  ~JsonLinesSink() override {
    if (file_ != nullptr) std::fclose(file_);
  }
  JsonLinesSink(const JsonLinesSink&) = delete;
  JsonLinesSink& operator=(const JsonLinesSink&) = delete;

  void OnStep(const StepMetrics& m) noexcept override {
    Write({{"type", "metrics"}, {"step", m.step}, {"gpus", m.gpus},
           {"global_batch", m.global_batch}, {"local_batch", m.local_batch},
           {"accum_steps", m.accum_steps}, {"step_time_s", m.step_time_s},
           {"grad_sqr", m.grad_sqr}, {"grad_var", m.grad_var}, {"samples", m.samples},
           {"lr_factor", m.lr_factor}});
  }
  void OnRescale(const std::string& what, int world_size, double pause_s) noexcept override {
    Write({{"type", "rescale"}, {"what", what}, {"gpus", world_size}, {"pause_s", pause_s}});
  }

 private:
  void Write(const nlohmann::json& j) noexcept {
    if (file_ == nullptr) return;
    try {
      const std::string line = j.dump() + "\n";
      std::fwrite(line.data(), 1, line.size(), file_);
      std::fflush(file_);
    } catch (...) {  // a sink must not throw
    }
  }
  std::FILE* file_;
};

}  // namespace

std::shared_ptr<MetricsSink> MakeJsonLinesSink(const std::string& path) {
  return std::make_shared<JsonLinesSink>(path);
}

}  // namespace elastic::mpi
