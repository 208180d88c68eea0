// The models on a cluster of several GPU types (hetero.h): the six applications with the step
// times of every type's profile in the Sia artifact, and Sia's measured per-model costs (restart
// time, calibration slowdown).
#include <algorithm>
#include <thread>
#include <utility>

#include "elastic/simulator/hetero.h"

namespace elastic::simulator {

double RestartCostS(const std::string& app) {
  if (app == "deepspeech2") return 25.0;
  if (app == "imagenet") return 250.0;
  if (app == "cifar10") return 30.0;
  if (app == "bert") return 120.0;
  if (app == "yolov3") return 45.0;
  return 30.0;
}

double SiaSlowdown(const std::string& app) {
  if (app == "cifar10") return 1.8;
  if (app == "ncf") return 1.5;
  if (app == "imagenet" || app == "yolov3" || app == "bert" || app == "deepspeech2") return 1.2;
  return 1.0;
}

double ChangeCostS(const std::string& app, int from_type, int from_gpus, int to_type, int to_gpus,
                   const ChangeCosts& costs) {
  if (to_gpus <= 0) return 0.0;
  if (from_gpus == to_gpus && from_type == to_type) return 0.0;
  if (costs.mode == RescaleMode::kStopFree && from_gpus > 0 && from_type == to_type) {
    return to_gpus > from_gpus ? costs.grow_s : costs.shrink_s;
  }
  return RestartCostS(app);
}

Result<TypedApps> LoadTypedApplications(const std::string& traces_dir, const std::vector<std::string>& profiles) {
  std::vector<std::pair<std::string, const AppSpec*>> work;
  for (const std::string& p : profiles) {
    for (const AppSpec& s : PolluxAppSpecs()) work.emplace_back(p, &s);
  }
  std::vector<Result<std::shared_ptr<const Application>>> loaded(work.size(), Status(ErrorKind::kInternal, "not loaded"));
  // Loading is dominated by the oracle fits: two threads at a time.
  for (size_t base = 0; base < work.size(); base += 2) {
    std::vector<std::thread> threads;
    for (size_t i = base; i < std::min(work.size(), base + 2); ++i) {
      threads.emplace_back([&, i]() {
        const AppSpec& s = *work[i].second;
        loaded[i] = LoadApplication(traces_dir + "/" + s.name, s.name, s.epochs, s.max_local, work[i].first);
      });
    }
    for (std::thread& t : threads) t.join();
  }
  TypedApps apps;
  for (size_t i = 0; i < work.size(); ++i) {
    if (!loaded[i].ok()) return loaded[i].status();
    apps[work[i].first][work[i].second->name] = loaded[i].value();
  }
  return apps;
}

}  // namespace elastic::simulator
