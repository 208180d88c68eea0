#include "type_moves.h"

#include <algorithm>

#include "job_model.h"

namespace elastic::controller {

std::optional<double> MeasuredSpeedPerGpu(const ElasticJob& job) {
  double sum = 0;
  int n = 0;
  for (const auto& s : job.samples) {
    if (s.gpus != job.base_gpus || s.step_time <= 0 || s.local_batch <= 0) continue;
    sum += s.local_batch / s.step_time;
    ++n;
  }
  if (n == 0) return std::nullopt;
  return sum / n;
}

std::optional<double> SpeedPerGpu(const ElasticJob& job, const std::string& type, const ControllerConfig& config) {
  std::map<std::string, double> measured = job.type_speed;
  if (auto now = MeasuredSpeedPerGpu(job); now && !job.gpu_type.empty()) measured[job.gpu_type] = *now;
  if (auto it = measured.find(type); it != measured.end()) return it->second;
  auto relative = [&](const std::string& t) {
    auto it = config.type_speed.find(t);
    return it != config.type_speed.end() ? it->second : 1.0;
  };
  // From the current type when measured there, else from any measured type.
  auto from = measured.find(job.gpu_type);
  if (from == measured.end()) from = measured.begin();
  if (from == measured.end()) return std::nullopt;
  return from->second * relative(type) / relative(from->first);
}

std::vector<std::string> OtherTypes(const ElasticJob& job) {
  std::vector<std::string> out;
  for (const auto& t : job.Spec().GpuTypes()) {
    if (t != job.gpu_type) out.push_back(t);
  }
  return out;
}

nlohmann::json MoveCheck::ToJson() const {
  return {{"left_s", left_s}, {"left_new_s", left_new_s}, {"saved_s", left_s - left_new_s},
          {"cost_s", cost_s}, {"payback", payback},      {"worth", worth}};
}

std::optional<MoveCheck> CheckMove(const ElasticJob& job, const std::string& to, double cost_s, double payback,
                                   const ControllerConfig& config, double now) {
  const auto left = TimeLeftAtCurrentSize(job, now);
  const auto speed = SpeedPerGpu(job, to, config);
  if (!left || !speed || *speed <= 0 || job.base_gpus <= 0 || job.total_samples <= job.samples_done) return std::nullopt;
  MoveCheck c;
  c.left_s = *left;
  c.left_new_s = static_cast<double>(job.total_samples - job.samples_done) / (*speed * job.base_gpus);
  c.cost_s = cost_s;
  c.payback = payback;
  c.worth = c.left_s - c.left_new_s > cost_s * payback;
  return c;
}

void SwitchTypeSamples(ElasticJob& job, const std::string& from, const std::string& to) {
  if (from == to) return;
  if (auto s = MeasuredSpeedPerGpu(job); s && !from.empty()) job.type_speed[from] = *s;
  if (!from.empty() && !job.samples.empty()) job.samples_by_type[from] = job.samples;
  job.samples.clear();
  if (auto it = job.samples_by_type.find(to); it != job.samples_by_type.end()) {
    job.samples = it->second;
    job.samples_by_type.erase(it);
  }
  // The fit described the old type: the next one starts cold on the new type's samples.
  job.fit.reset();
  job.fit_generation++;
  job.fit_samples = 0;
  job.fit_sizes = 0;
  job.fit_wanted_since = 0;
  job.options_cache.reset();
}

std::string NodesWithout(const std::vector<NodeInfo>& nodes, const std::string& type) {
  std::string out;
  for (const auto& n : nodes) {
    bool has = false;
    for (const auto& t : n.Types()) has = has || (t.type == type && t.gpus > 0);
    if (!has) out += (out.empty() ? "" : ",") + n.name;
  }
  return out;
}

}  // namespace elastic::controller
