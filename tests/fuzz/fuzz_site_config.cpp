// Fuzz target: the plugstack.conf parser (spank_plugin/src/site_config.h ParseSiteConfig, on the
// input split into whitespace-separated arguments as Slurm splits the plugstack.conf line) and
// the value parsers under it (common/include/elastic/common/config.h), each on the whole input.
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "elastic/common/config.h"
#include "site_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> args;
  size_t pos = 0;
  while (pos < in.size()) {
    const size_t start = in.find_first_not_of(" \t\r\n\v\f", pos);
    if (start == std::string_view::npos) break;
    size_t end = in.find_first_of(" \t\r\n\v\f", start);
    if (end == std::string_view::npos) end = in.size();
    args.emplace_back(in.substr(start, end - start));
    pos = end;
  }
  (void)elastic::spank::ParseSiteConfig(args);

  namespace config = elastic::config;
  (void)config::ParseHostPort(in, "controller");
  (void)config::ParseList(in, "partitions");
  (void)config::ParseInt(in, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), "n");
  (void)config::ParseInt(in, 0, 100, "n");
  (void)config::ParseInt(in, -5, 5, "n");
  return 0;
}
