// Fuzz target: the simulator's trace readers (simulator/include/elastic/simulator/workload.h):
// the input as a site's sacct export (ParseSacct: `-P` text, or `--json` when it starts with
// '{') and as a Pollux workload CSV (ParsePolluxWorkload), against the test fixture's "flat"
// application standing for every Pollux model; ParseTimestamp on the input too.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "elastic/simulator/workload.h"

#ifndef ELASTIC_FUZZ_SIM_APP_DIR
#error "ELASTIC_FUZZ_SIM_APP_DIR (an application folder of tests/simulator/fixtures) must be defined"
#endif

namespace {

const elastic::simulator::AppTable& Apps() {
  static const elastic::simulator::AppTable apps = [] {
    auto app = elastic::simulator::LoadApplication(ELASTIC_FUZZ_SIM_APP_DIR, "flat", 1);
    if (!app.ok()) {
      std::fprintf(stderr, "fuzz_sim_trace: %s\n", app.status().message().c_str());
      std::abort();
    }
    elastic::simulator::AppTable t;
    for (const char* n : {"flat", "cifar10", "ncf", "bert", "deepspeech2", "yolov3", "imagenet"}) t[n] = app.value();
    return t;
  }();
  return apps;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  (void)elastic::simulator::ParseSacct(text, "fuzz.txt", Apps(), 64, 1);
  (void)elastic::simulator::ParsePolluxWorkload(text, "fuzz.csv", Apps());
  (void)elastic::simulator::ParseTimestamp(text);
  return 0;
}
