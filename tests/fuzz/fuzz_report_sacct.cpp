// Fuzz target: elastic-report's sacct reader (report/include/elastic/report/sacct.h): the whole
// input as sacct's output, and as one AllocTRES string and one admin comment; the time parser
// (period.h) on the input too.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "elastic/report/period.h"
#include "elastic/report/sacct.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  (void)elastic::report::ParseSacct(in);
  (void)elastic::report::GpusOfTres(in);
  (void)elastic::report::ParseExtensionComment(in);
  (void)elastic::report::ParseTime(in, 1.7e9, "--since");
  return 0;
}
