#include "spec.h"

#include <algorithm>
#include <charconv>

#include "elastic/common/config.h"
#include "elastic/common/gpu_types.h"

namespace elastic::spank {
namespace {

Status Bad(std::string message) { return Status(ErrorKind::kInvalidArgument, std::move(message)); }

std::string Flag(OptionId id) { return std::string("--") + Info(id).name; }

// Quotes user text for a message; control characters never reach a terminal or a log.
std::string Quote(std::string_view s) {
  std::string out = "'";
  for (char c : s.substr(0, 80)) out += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? '?' : c;
  if (s.size() > 80) out += "...";
  return out + "'";
}

// A positive decimal integer in [1, max]; `what` is e.g. "--elastic-gpus MIN".
Result<int64_t> PositiveInt(std::string_view text, int64_t max, const std::string& what) {
  if (text.empty()) return Bad(what + " is missing");
  if (!std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return Bad(what + " " + Quote(text) + " is not a positive integer");
  }
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec == std::errc::result_out_of_range || (ec == std::errc() && v > max)) {
    return Bad(what + " " + Quote(text) + " is too large (at most " + std::to_string(max) + ")");
  }
  if (ec != std::errc() || ptr != text.data() + text.size()) return Bad(what + " " + Quote(text) + " is not a positive integer");
  if (v < 1) return Bad(what + " must be at least 1");
  return v;
}

Result<Range> ParseRange(OptionId id, std::string_view text, int64_t max, const char* example) {
  const std::string flag = Flag(id);
  if (text.empty()) return Bad(flag + ": empty value; expected MIN:MAX, e.g. " + example);
  auto colon = text.find(':');
  if (colon == std::string_view::npos || text.find(':', colon + 1) != std::string_view::npos) {
    return Bad(flag + ": " + Quote(text) + " is not MIN:MAX (e.g. " + example + ")");
  }
  auto lo = PositiveInt(text.substr(0, colon), max, flag + " MIN");
  if (!lo.ok()) return lo.status();
  auto hi = PositiveInt(text.substr(colon + 1), max, flag + " MAX");
  if (!hi.ok()) return hi.status();
  if (lo.value() > hi.value()) {
    return Bad(flag + ": MIN " + std::to_string(lo.value()) + " is greater than MAX " + std::to_string(hi.value()));
  }
  return Range{lo.value(), hi.value()};
}

std::string RangeText(const Range& r) { return std::to_string(r.min) + ":" + std::to_string(r.max); }

// Stores `value` into `slot` unless a different value is already there.
template <typename T, typename Show>
Status Store(std::optional<T>& slot, T value, OptionId id, Show show) {
  if (slot && !(*slot == value)) {
    return Bad(Flag(id) + " is given twice with different values (" + show(*slot) + " and " + show(value) +
               "); give it once (an #SBATCH line and the command line count as two)");
  }
  slot = std::move(value);
  return Status::Ok();
}

const std::vector<std::string>& LrRules() {
  static const std::vector<std::string> rules{"none", "linear", "sqrt", "adascale"};
  return rules;
}

}  // namespace

const std::vector<OptionInfo>& Options() {
  static const std::vector<OptionInfo> options{
      {OptionId::kGpus, "elastic-gpus", "MIN:MAX",
       "[elastic] Make the job elastic between MIN and MAX GPUs; MIN is the job's own GPU request "
       "(--gpus, --gres=gpu or --gpus-per-node), the controller grows it up to MAX."},
      {OptionId::kGpuStep, "elastic-gpu-step", "N",
       "[elastic] GPU counts are multiples of N (model-parallel groups); N divides MIN and MAX."},
      {OptionId::kBatch, "elastic-batch", "MIN:MAX", "[elastic] Bounds of the global batch size, in samples."},
      {OptionId::kLocalBatch, "elastic-local-batch", "MIN:MAX",
       "[elastic] Bounds of the per-GPU batch size, in samples (larger global batches use gradient accumulation)."},
      {OptionId::kLrScaling, "elastic-lr-scaling", "RULE",
       "[elastic] How the learning rate follows the batch size: none, linear, sqrt or adascale."},
      {OptionId::kModel, "elastic-model", "NAME", "[elastic] Name of a throughput profile the site keeps for this model."},
      {OptionId::kFuse, "elastic-fuse", "MAX_PER_GPU",
       "[elastic] Array jobs: train the array's tasks (trials) fused as one elastic job, up to MAX_PER_GPU "
       "trials per GPU; the controller picks the GPU count and trials per GPU."},
      {OptionId::kGpuTypes, "elastic-gpu-types", "TYPE,...",
       "[elastic] GPU types the job may run on, e.g. a100,v100 (must include the type of its --gres request); "
       "elasticd may move it to another of them through a checkpoint and requeue."},
      {OptionId::kNoElastic, "no-elastic", nullptr,
       "[elastic] Run rigid even if elastic options are given (e.g. to override #SBATCH lines)."},
      {OptionId::kExtension, "elastic-extension", "PARENT:GROUP",
       "[elastic] Set by elasticd on the extension jobs it submits; not for users."},
  };
  return options;
}

const OptionInfo& Info(OptionId id) {
  for (const auto& o : Options()) {
    if (o.id == id) return o;
  }
  throw Error(ErrorKind::kInternal, "unknown option id " + std::to_string(static_cast<int>(id)));
}

bool ElasticSpec::AnyElasticOption() const {
  return gpus || gpu_step || batch || local_batch || lr_scaling || model || fuse || gpu_types;
}

Status SetOption(ElasticSpec& spec, OptionId id, const char* value) {
  const OptionInfo& info = Info(id);
  if (info.arginfo != nullptr && value == nullptr) return Bad(Flag(id) + " needs a value: " + Flag(id) + "=" + info.arginfo);
  std::string_view v = value ? std::string_view(value) : std::string_view();
  switch (id) {
    case OptionId::kGpus: {
      auto r = ParseRange(id, v, kMaxGpus, "2:8");
      if (!r.ok()) return r.status();
      return Store(spec.gpus, r.value(), id, RangeText);
    }
    case OptionId::kBatch: {
      auto r = ParseRange(id, v, kMaxBatch, "256:4096");
      if (!r.ok()) return r.status();
      return Store(spec.batch, r.value(), id, RangeText);
    }
    case OptionId::kLocalBatch: {
      auto r = ParseRange(id, v, kMaxBatch, "32:256");
      if (!r.ok()) return r.status();
      return Store(spec.local_batch, r.value(), id, RangeText);
    }
    case OptionId::kGpuStep: {
      auto n = PositiveInt(v, kMaxGpus, Flag(id));
      if (!n.ok()) return n.status();
      return Store(spec.gpu_step, n.value(), id, [](int64_t x) { return std::to_string(x); });
    }
    case OptionId::kLrScaling: {
      auto rule = config::ParseChoice(v, LrRules(), Flag(id));
      if (!rule.ok()) return Bad(rule.status().message());
      return Store(spec.lr_scaling, rule.value(), id, [](const std::string& s) { return s; });
    }
    case OptionId::kModel: {
      if (v.empty()) return Bad(Flag(id) + ": empty name");
      if (static_cast<int64_t>(v.size()) > kMaxModelNameLength) {
        return Bad(Flag(id) + ": name is longer than " + std::to_string(kMaxModelNameLength) + " characters");
      }
      for (char c : v) {
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                  c == '_' || c == '.';
        if (!ok) return Bad(Flag(id) + ": " + Quote(v) + " may contain only letters, digits, '.', '-' and '_'");
      }
      if (v.front() == '.' || v.front() == '-') return Bad(Flag(id) + ": " + Quote(v) + " must start with a letter, digit or '_'");
      return Store(spec.model, std::string(v), id, [](const std::string& s) { return s; });
    }
    case OptionId::kFuse: {
      auto n = PositiveInt(v, kMaxFusePerGpu, Flag(id));
      if (!n.ok()) return n.status();
      return Store(spec.fuse, n.value(), id, [](int64_t x) { return std::to_string(x); });
    }
    case OptionId::kGpuTypes: {
      auto types = contract::ParseGpuTypes(v, {}, Flag(id));
      if (!types.ok()) return types.status();
      return Store(spec.gpu_types, types.value(), id, contract::JoinGpuTypes);
    }
    case OptionId::kNoElastic:
      // A flag. sbatch hands its options on to the job's sruns through the environment, where
      // Slurm writes a flag's absent value as the text "(null)"; srun gives that back to us.
      if (!v.empty() && v != "(null)") return Bad(Flag(id) + " takes no value");
      spec.no_elastic = true;
      return Status::Ok();
    case OptionId::kExtension: {
      auto colon = v.find(':');
      if (colon == std::string_view::npos) return Bad(Flag(id) + ": " + Quote(v) + " is not PARENT:GROUP");
      auto parent = PositiveInt(v.substr(0, colon), 0xfffffff0, Flag(id) + " PARENT");
      if (!parent.ok()) return parent.status();
      auto group = PositiveInt(v.substr(colon + 1), 1000000, Flag(id) + " GROUP");
      if (!group.ok()) return group.status();
      ExtensionRef ref{static_cast<uint32_t>(parent.value()), static_cast<uint32_t>(group.value())};
      return Store(spec.extension, ref, id,
                   [](const ExtensionRef& r) { return std::to_string(r.parent) + ":" + std::to_string(r.group); });
    }
  }
  return Status(ErrorKind::kInternal, "unhandled option");
}

Status Validate(ElasticSpec& spec, const SiteConfig& site, const std::vector<std::string>& known_gpu_types) {
  if (spec.no_elastic) return Status::Ok();  // everything else is ignored: the job is rigid
  if (!spec.gpus) {
    for (OptionId id : {OptionId::kGpuStep, OptionId::kBatch, OptionId::kLocalBatch, OptionId::kLrScaling,
                        OptionId::kModel, OptionId::kFuse, OptionId::kGpuTypes}) {
      bool given = (id == OptionId::kGpuStep && spec.gpu_step) || (id == OptionId::kBatch && spec.batch) ||
                   (id == OptionId::kLocalBatch && spec.local_batch) || (id == OptionId::kLrScaling && spec.lr_scaling) ||
                   (id == OptionId::kModel && spec.model) || (id == OptionId::kFuse && spec.fuse) ||
                   (id == OptionId::kGpuTypes && spec.gpu_types);
      if (given) return Bad(Flag(id) + " needs --elastic-gpus=MIN:MAX, which makes the job elastic");
    }
    return Status::Ok();
  }
  const Range& g = *spec.gpus;
  if (g.max > site.max_gpus) {
    return Bad("--elastic-gpus: MAX " + std::to_string(g.max) + " exceeds this cluster's limit of " +
               std::to_string(site.max_gpus) + " GPUs per elastic job");
  }
  int64_t step = spec.gpu_step.value_or(1);
  if (g.min % step != 0 || g.max % step != 0) {
    return Bad("--elastic-gpu-step " + std::to_string(step) + " must divide --elastic-gpus MIN " +
               std::to_string(g.min) + " and MAX " + std::to_string(g.max));
  }
  if (spec.fuse) {
    // A fused sweep's ranks each train whole trials, at each trial's own batch size.
    if (step > 1) {
      return Bad("--elastic-fuse cannot be combined with --elastic-gpu-step " + std::to_string(step) +
                 ": each GPU of a fused sweep trains whole trials; drop --elastic-gpu-step");
    }
    for (OptionId id : {OptionId::kBatch, OptionId::kLocalBatch}) {
      if ((id == OptionId::kBatch && spec.batch) || (id == OptionId::kLocalBatch && spec.local_batch)) {
        return Bad("--elastic-fuse cannot be combined with " + Flag(id) +
                   ": each trial of a fused sweep keeps its own batch size; drop " + Flag(id));
      }
    }
  }
  if (spec.batch && site.max_batch && spec.batch->max > *site.max_batch) {
    return Bad("--elastic-batch: MAX " + std::to_string(spec.batch->max) + " exceeds this cluster's limit of " +
               std::to_string(*site.max_batch));
  }
  if (spec.batch && spec.local_batch) {
    int64_t smallest = spec.local_batch->min * g.min;
    if (smallest > spec.batch->max) {
      return Bad("the smallest global batch the job can run (--elastic-local-batch MIN " +
                 std::to_string(spec.local_batch->min) + " x --elastic-gpus MIN " + std::to_string(g.min) + " = " +
                 std::to_string(smallest) + ") exceeds --elastic-batch MAX " + std::to_string(spec.batch->max));
    }
    if (spec.local_batch->min > spec.batch->max) {
      return Bad("--elastic-local-batch MIN " + std::to_string(spec.local_batch->min) + " exceeds --elastic-batch MAX " +
                 std::to_string(spec.batch->max));
    }
  }
  if (spec.gpu_types) {
    // The syntax was checked when the option was set; now the names against the cluster's types.
    auto types = contract::ParseGpuTypes(contract::JoinGpuTypes(*spec.gpu_types), known_gpu_types, Flag(OptionId::kGpuTypes));
    if (!types.ok()) return types.status();
  }
  if (!spec.lr_scaling) spec.lr_scaling = site.default_lr_scaling;
  if (!spec.gpu_step) spec.gpu_step = 1;
  return Status::Ok();
}

Status CheckOwnGpuType(const ElasticSpec& spec, const std::string& job_type) {
  if (!spec.Elastic() || !spec.gpu_types) return Status::Ok();
  return contract::CheckOwnGpuType(*spec.gpu_types, job_type, Flag(OptionId::kGpuTypes));
}

Status CheckBaseGpus(const ElasticSpec& spec, int64_t allocated_gpus) {
  if (!spec.Elastic()) return Status::Ok();
  if (allocated_gpus != spec.gpus->min) {
    return Bad("--elastic-gpus MIN is " + std::to_string(spec.gpus->min) + " but the job was allocated " +
               std::to_string(allocated_gpus) + " GPU" + (allocated_gpus == 1 ? "" : "s") +
               ": MIN must equal the job's own GPU request (--gpus, --gres=gpu or --gpus-per-node)");
  }
  return Status::Ok();
}

Status CheckFusedArray(const ElasticSpec& spec, bool array_job) {
  if (!spec.Elastic() || !spec.fuse || array_job) return Status::Ok();
  return Bad("--elastic-fuse=" + std::to_string(*spec.fuse) +
             " is for job arrays, whose tasks are the sweep's trials: submit with --array (e.g. sbatch --array=0-7 "
             "--elastic-fuse=" + std::to_string(*spec.fuse) + " ...), or drop --elastic-fuse");
}

contract::JobSpec ToJobSpec(const ElasticSpec& spec) {
  contract::JobSpec out;
  if (spec.gpus) out.gpus = {spec.gpus->min, spec.gpus->max};
  out.gpu_step = spec.gpu_step.value_or(1);
  if (spec.batch) out.batch = {spec.batch->min, spec.batch->max};
  if (spec.local_batch) out.local_batch = {spec.local_batch->min, spec.local_batch->max};
  out.lr_scaling = spec.lr_scaling.value_or("none");
  out.model = spec.model;
  out.fuse_max_per_gpu = spec.fuse;
  if (spec.gpu_types) out.gpu_types = contract::JoinGpuTypes(*spec.gpu_types);
  return out;
}

std::map<std::string, std::string> SpecEnvironment(const ElasticSpec& spec) { return ToJobSpec(spec).ToEnvironment(); }

std::string Describe(const ElasticSpec& spec) {
  if (spec.no_elastic) return "rigid (--no-elastic)";
  std::string s;
  auto add = [&](const std::string& part) { s += (s.empty() ? "" : " ") + part; };
  if (spec.gpus) add("gpus=" + RangeText(*spec.gpus));
  if (spec.gpu_step) add("step=" + std::to_string(*spec.gpu_step));
  if (spec.batch) add("batch=" + RangeText(*spec.batch));
  if (spec.local_batch) add("local_batch=" + RangeText(*spec.local_batch));
  if (spec.lr_scaling) add("lr=" + *spec.lr_scaling);
  if (spec.model) add("model=" + *spec.model);
  if (spec.fuse) add("fuse=" + std::to_string(*spec.fuse));
  if (spec.gpu_types) add("gpu_types=" + contract::JoinGpuTypes(*spec.gpu_types));
  if (spec.extension) add("extension_of=" + std::to_string(spec.extension->parent) + ":" + std::to_string(spec.extension->group));
  return s.empty() ? "rigid" : s;
}

}  // namespace elastic::spank
