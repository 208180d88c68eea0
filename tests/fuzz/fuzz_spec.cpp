// Fuzz target: the plugin's flag parser (spank_plugin/src/spec.h). The input is a list of
// option callbacks, one per line: the first byte picks the option ('1'..'8' in --help order,
// any other byte modulo the number of options), the rest of the line is its value (a line of
// the selector alone passes nullptr, as Slurm does for an option without an argument). Then
// Validate against a default SiteConfig and one with tighter limits.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "spec.h"

namespace {

using elastic::spank::ElasticSpec;

void CheckValid(ElasticSpec spec, const elastic::spank::SiteConfig& site) {
  if (!elastic::spank::Validate(spec, site).ok()) return;
  (void)elastic::spank::Describe(spec);
  (void)elastic::spank::SpecEnvironment(spec);
  if (spec.gpus) {
    (void)elastic::spank::CheckBaseGpus(spec, spec.gpus->min);
    (void)elastic::spank::CheckBaseGpus(spec, spec.gpus->max);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const auto& options = elastic::spank::Options();
  ElasticSpec spec;
  size_t pos = 0;
  for (int calls = 0; pos < in.size() && calls < 64; ++calls) {
    size_t end = in.find('\n', pos);
    if (end == std::string_view::npos) end = in.size();
    const std::string_view line = in.substr(pos, end - pos);
    pos = end + 1;
    if (line.empty()) continue;
    const auto b = static_cast<unsigned char>(line[0]);
    const size_t index = (b >= '1' && b <= '9') ? static_cast<size_t>(b - '1') : b;
    const elastic::spank::OptionId id = options[index % options.size()].id;
    const std::string value(line.substr(1));
    (void)elastic::spank::SetOption(spec, id, line.size() == 1 ? nullptr : value.c_str());
  }
  CheckValid(spec, elastic::spank::SiteConfig{});
  elastic::spank::SiteConfig tight;
  tight.max_gpus = 8;
  tight.max_batch = 4096;
  tight.default_lr_scaling = "sqrt";
  CheckValid(spec, tight);
  return 0;
}
