#include "elastic/common/job_spec.h"

#include <charconv>
#include <cstdint>

#include "elastic/common/env_vars.h"

namespace elastic::contract {
namespace {

// Each integer field once: its JSON key, its variable and where it lives in a JobSpec.
struct IntField {
  const char* key;
  const char* var;
  std::optional<int64_t> JobSpec::*direct;  // nullptr: a bound of `range`
  Bounds JobSpec::*range;
  std::optional<int64_t> Bounds::*bound;
};

constexpr IntField kIntFields[] = {
    {"gpus_min", kGpusMin, nullptr, &JobSpec::gpus, &Bounds::min},
    {"gpus_max", kGpusMax, nullptr, &JobSpec::gpus, &Bounds::max},
    {"gpu_step", kGpuStep, &JobSpec::gpu_step, nullptr, nullptr},
    {"batch_min", kBatchMin, nullptr, &JobSpec::batch, &Bounds::min},
    {"batch_max", kBatchMax, nullptr, &JobSpec::batch, &Bounds::max},
    {"local_batch_min", kLocalBatchMin, nullptr, &JobSpec::local_batch, &Bounds::min},
    {"local_batch_max", kLocalBatchMax, nullptr, &JobSpec::local_batch, &Bounds::max},
    {"fuse_max_per_gpu", kFuseMaxPerGpu, &JobSpec::fuse_max_per_gpu, nullptr, nullptr},
};

struct StringField {
  const char* key;
  const char* var;
  std::optional<std::string> JobSpec::*field;
};

constexpr StringField kStringFields[] = {
    {"lr_scaling", kLrScaling, &JobSpec::lr_scaling},
    {"model", kModel, &JobSpec::model},
    {"gpu_types", kGpuTypes, &JobSpec::gpu_types},
};

std::optional<int64_t>& Slot(JobSpec& spec, const IntField& f) {
  return f.direct != nullptr ? spec.*f.direct : (spec.*f.range).*f.bound;
}
const std::optional<int64_t>& Slot(const JobSpec& spec, const IntField& f) {
  return f.direct != nullptr ? spec.*f.direct : (spec.*f.range).*f.bound;
}

// A whole decimal integer (optional '-'), or nothing.
std::optional<int64_t> ParseInt(const std::string& text) {
  int64_t v = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc() || ptr != end) return std::nullopt;
  return v;
}

}  // namespace

std::vector<std::string> JobSpec::GpuTypes() const {
  std::vector<std::string> out;
  if (!gpu_types) return out;
  size_t start = 0;
  while (start <= gpu_types->size()) {
    const size_t comma = gpu_types->find(',', start);
    const std::string item = gpu_types->substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!item.empty()) out.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

nlohmann::json JobSpec::ToJson() const {
  nlohmann::json j = nlohmann::json::object();
  for (const IntField& f : kIntFields) {
    if (const auto& v = Slot(*this, f)) j[f.key] = *v;
  }
  for (const StringField& f : kStringFields) {
    if (const auto& v = this->*f.field) j[f.key] = *v;
  }
  return j;
}

JobSpec JobSpec::FromJson(const nlohmann::json& j) {
  JobSpec spec;
  if (!j.is_object()) return spec;
  for (const IntField& f : kIntFields) {
    auto it = j.find(f.key);
    // An unsigned value above int64's range is not a count any component sends: absent.
    if (it != j.end() && it->is_number_integer() && !(it->is_number_unsigned() && it->get<uint64_t>() > INT64_MAX)) {
      Slot(spec, f) = it->get<int64_t>();
    }
  }
  for (const StringField& f : kStringFields) {
    auto it = j.find(f.key);
    if (it != j.end() && it->is_string()) spec.*f.field = it->get<std::string>();
  }
  return spec;
}

std::map<std::string, std::string> JobSpec::ToEnvironment() const {
  std::map<std::string, std::string> env;
  env.emplace(kSpecVersion, kSpecVersionValue);
  for (const IntField& f : kIntFields) {
    if (const auto& v = Slot(*this, f)) env[f.var] = std::to_string(*v);
  }
  for (const StringField& f : kStringFields) {
    if (const auto& v = this->*f.field) env[f.var] = *v;
  }
  return env;
}

JobSpec JobSpec::FromEnvironment(const std::map<std::string, std::string>& env) {
  JobSpec spec;
  for (const IntField& f : kIntFields) {
    if (auto it = env.find(f.var); it != env.end()) Slot(spec, f) = ParseInt(it->second);
  }
  for (const StringField& f : kStringFields) {
    if (auto it = env.find(f.var); it != env.end()) spec.*f.field = it->second;
  }
  return spec;
}

}  // namespace elastic::contract
