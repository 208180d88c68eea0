#include "elastic/simulator/application.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iterator>
#include <set>
#include <thread>

#include "csv.h"

namespace elastic::simulator {
namespace {

// Linear interpolation over a curve sorted by local batch, clamped at both ends.
StepTimes Interp(const std::vector<StepPoint>& c, double local) {
  if (c.size() == 1 || local <= c.front().local_batch) return {c.front().step_time, c.front().sync_time};
  if (local >= c.back().local_batch) return {c.back().step_time, c.back().sync_time};
  size_t i = 1;
  while (c[i].local_batch < local) ++i;
  const StepPoint& a = c[i - 1];
  const StepPoint& b = c[i];
  const double w = (local - a.local_batch) / (b.local_batch - a.local_batch);
  return {a.step_time + w * (b.step_time - a.step_time), a.sync_time + w * (b.sync_time - a.sync_time)};
}

// Sorts by local batch and averages duplicates.
void SortAverage(std::vector<StepPoint>& v) {
  std::sort(v.begin(), v.end(), [](const StepPoint& a, const StepPoint& b) { return a.local_batch < b.local_batch; });
  std::vector<StepPoint> out;
  size_t i = 0;
  while (i < v.size()) {
    size_t j = i;
    StepPoint m{v[i].local_batch, 0.0, 0.0};
    while (j < v.size() && v[j].local_batch == v[i].local_batch) {
      m.step_time += v[j].step_time;
      m.sync_time += v[j].sync_time;
      ++j;
    }
    m.step_time /= static_cast<double>(j - i);
    m.sync_time /= static_cast<double>(j - i);
    out.push_back(m);
    i = j;
  }
  v = std::move(out);
}

StepTimes Lerp(const StepTimes& a, const StepTimes& b, double w) {
  return {a.step + w * (b.step - a.step), a.sync + w * (b.sync - a.sync)};
}

}  // namespace

std::string NormalisePlacement(const std::vector<int>& gpus_per_node) {
  std::vector<int> p;
  for (int g : gpus_per_node) {
    if (g > 0) p.push_back(g);
  }
  std::vector<int> best = p;
  for (size_t r = 1; r < p.size(); ++r) {
    std::vector<int> rot(p.begin() + static_cast<std::ptrdiff_t>(r), p.end());
    rot.insert(rot.end(), p.begin(), p.begin() + static_cast<std::ptrdiff_t>(r));
    if (rot < best) best = rot;
  }
  std::string s;
  for (int g : best) s += std::to_string(g);
  return s;
}

Status Application::Finalize(int epochs, int64_t max_local_batch_override) {
  if (placements.empty()) return Status(ErrorKind::kInvalidArgument, name + ": no placement measurements");
  if (curves.empty()) return Status(ErrorKind::kInvalidArgument, name + ": no validation curves");
  max_epochs = epochs;
  double lo = 1e300, hi = 0.0;
  std::map<std::pair<int, int>, std::vector<StepPoint>> grouped;
  for (auto& [key, pts] : placements) {
    SortAverage(pts);
    int nodes = 0, replicas = 0;
    for (char c : key) {
      ++nodes;
      replicas += c - '0';
    }
    for (const StepPoint& p : pts) {
      lo = std::min(lo, p.local_batch);
      hi = std::max(hi, p.local_batch);
      grouped[{nodes, replicas}].push_back(p);
    }
  }
  for (auto& [key, pts] : grid) grouped[key].insert(grouped[key].end(), pts.begin(), pts.end());
  for (auto& [key, pts] : grouped) SortAverage(pts);
  grid = std::move(grouped);
  min_local_batch = static_cast<int64_t>(lo);
  max_local_batch = max_local_batch_override > 0 ? max_local_batch_override : static_cast<int64_t>(hi);
  init_batch = curves.begin()->first;
  max_batch = curves.rbegin()->first;
  for (const auto& [b, c] : curves) {
    if (static_cast<int>(c.size()) < max_epochs) {
      return Status(ErrorKind::kInvalidArgument, name + ": validation-" + std::to_string(b) + ".csv has " +
                                                     std::to_string(c.size()) + " epochs, " +
                                                     std::to_string(max_epochs) + " needed");
    }
  }
  // The oracle throughput model: the Pollux form fitted on the (nodes, replicas) means.
  std::vector<optimizer::StepSample> samples;
  // Up to three local batches per (nodes, replicas) (smallest, middle, largest) keep the fit
  // fast (it runs at every start of the tool) while covering every measured scale.
  for (const auto& [key, pts] : grid) {
    std::set<size_t> pick{0, pts.size() / 2, pts.size() - 1};
    for (size_t i : pick) samples.push_back({key.first, key.second, pts[i].local_batch, pts[i].step_time});
  }
  Result<optimizer::PolluxParams> fit = optimizer::FitPollux(samples);
  if (!fit.ok()) return Status(ErrorKind::kInvalidArgument, name + ": " + fit.status().message());
  oracle_fit = fit.value();
  return Status::Ok();
}

StepTimes Application::StepTime(const std::vector<int>& gpus_per_node, double local_batch) const {
  const std::string key = NormalisePlacement(gpus_per_node);
  if (auto it = placements.find(key); it != placements.end()) return Interp(it->second, local_batch);
  int nodes = 0, replicas = 0;
  for (int g : gpus_per_node) {
    if (g > 0) {
      ++nodes;
      replicas += g;
    }
  }
  nodes = std::min(nodes, 16);
  // Node levels present in the grid, each with its replica counts.
  std::map<int, std::vector<int>> levels;
  for (const auto& [k, pts] : grid) levels[k.first].push_back(k.second);
  auto at_level = [&](int n) {
    const std::vector<int>& rs = levels.at(n);  // sorted: the map iterates keys in order
    const int r = std::clamp(replicas, rs.front(), rs.back());
    size_t i = 0;
    while (i + 1 < rs.size() && rs[i + 1] <= r) ++i;
    const StepTimes a = Interp(grid.at({n, rs[i]}), local_batch);
    if (rs[i] == r || i + 1 == rs.size()) return a;
    const StepTimes b = Interp(grid.at({n, rs[i + 1]}), local_batch);
    return Lerp(a, b, static_cast<double>(r - rs[i]) / static_cast<double>(rs[i + 1] - rs[i]));
  };
  auto above = levels.lower_bound(nodes);
  if (above == levels.end()) return at_level(levels.rbegin()->first);
  if (above->first == nodes || above == levels.begin()) return at_level(above->first);
  auto below = std::prev(above);
  const StepTimes a = at_level(below->first);
  const StepTimes b = at_level(above->first);
  return Lerp(a, b, static_cast<double>(nodes - below->first) / static_cast<double>(above->first - below->first));
}

GradStats Application::Stats(double batch, int epoch) const {
  const auto e = static_cast<size_t>(std::clamp(epoch, 0, max_epochs - 1));
  auto hi = curves.lower_bound(static_cast<int64_t>(std::ceil(batch)));
  if (hi == curves.end()) {
    const CurvePoint& p = curves.rbegin()->second[e];
    return {p.grad_sqr, p.grad_var};
  }
  if (hi == curves.begin() || static_cast<double>(hi->first) == batch) {
    const CurvePoint& p = hi->second[e];
    return {p.grad_sqr, p.grad_var};
  }
  auto lo = std::prev(hi);
  const double w = (batch - static_cast<double>(lo->first)) / static_cast<double>(hi->first - lo->first);
  const CurvePoint& a = lo->second[e];
  const CurvePoint& b = hi->second[e];
  return {a.grad_sqr + w * (b.grad_sqr - a.grad_sqr), a.grad_var + w * (b.grad_var - a.grad_var)};
}

double Application::ProgressAt(int epoch) const {
  if (epoch <= 0) return 0.0;
  double p = 1e300;
  for (const auto& [b, c] : curves) p = std::min(p, c[static_cast<size_t>(std::min(epoch, max_epochs) - 1)].progress);
  return p;
}

double Application::IterationsToFinish(int64_t batch) const {
  auto it = curves.find(batch);
  if (it == curves.end()) return 0.0;
  return it->second[static_cast<size_t>(max_epochs - 1)].iteration;
}

Result<std::shared_ptr<const Application>> LoadApplication(const std::string& dir, const std::string& name,
                                                           int epochs, int64_t max_local_batch_override,
                                                           const std::string& profile) {
  namespace fs = std::filesystem;
  auto app = std::make_shared<Application>();
  app->name = name;
  const std::string tail = profile.empty() ? ".csv" : "-" + profile + ".csv";
  {
    Result<csv::Table> t = csv::Read(dir + "/placements" + tail);
    if (!t.ok()) return t.status();
    const csv::Table& tab = t.value();
    const int cp = tab.Column("placement"), cl = tab.Column("local_bsz"), cs = tab.Column("step_time"),
              cy = tab.Column("sync_time");
    if (cp < 0 || cl < 0 || cs < 0 || cy < 0) {
      return Status(ErrorKind::kInvalidArgument, tab.path + ": expected columns placement,local_bsz,step_time,sync_time");
    }
    for (size_t r = 0; r < tab.rows.size(); ++r) {
      const std::string& pl = tab.rows[r][static_cast<size_t>(cp)];
      std::vector<int> digits;
      for (char c : pl) {
        if (c < '1' || c > '9') {
          return Status(ErrorKind::kInvalidArgument,
                        csv::Where(tab, r, "placement") + ": expected digits 1-9, got '" + pl + "'");
        }
        digits.push_back(c - '0');
      }
      if (digits.empty()) return Status(ErrorKind::kInvalidArgument, csv::Where(tab, r, "placement") + ": empty");
      Result<double> l = csv::Number(tab, r, cl), s = csv::Number(tab, r, cs), y = csv::Number(tab, r, cy);
      if (!l.ok()) return l.status();
      if (!s.ok()) return s.status();
      if (!y.ok()) return y.status();
      if (!(l.value() > 0.0) || !(s.value() > 0.0) || y.value() < 0.0) {
        return Status(ErrorKind::kInvalidArgument, tab.path + ":" + std::to_string(tab.line[r]) +
                                                       ": local_bsz and step_time must be > 0, sync_time >= 0");
      }
      app->placements[NormalisePlacement(digits)].push_back({l.value(), s.value(), y.value()});
    }
  }
  if (fs::exists(dir + "/scalability" + tail)) {
    Result<csv::Table> t = csv::Read(dir + "/scalability" + tail);
    if (!t.ok()) return t.status();
    const csv::Table& tab = t.value();
    const int cn = tab.Column("num_nodes"), cr = tab.Column("num_replicas"), cl = tab.Column("local_bsz"),
              cs = tab.Column("step_time"), cy = tab.Column("sync_time");
    if (cn < 0 || cr < 0 || cl < 0 || cs < 0 || cy < 0) {
      return Status(ErrorKind::kInvalidArgument,
                    tab.path + ": expected columns num_nodes,num_replicas,local_bsz,step_time,sync_time");
    }
    for (size_t r = 0; r < tab.rows.size(); ++r) {
      Result<int64_t> n = csv::Integer(tab, r, cn), rep = csv::Integer(tab, r, cr);
      Result<double> l = csv::Number(tab, r, cl), s = csv::Number(tab, r, cs), y = csv::Number(tab, r, cy);
      for (const Status* st : {&n.status(), &rep.status(), &l.status(), &s.status(), &y.status()}) {
        if (!st->ok()) return *st;
      }
      app->grid[{static_cast<int>(n.value()), static_cast<int>(rep.value())}].push_back(
          {l.value(), s.value(), y.value()});
    }
  }
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string file = entry.path().filename().string();
    if (file.rfind("validation-", 0) != 0 || entry.path().extension() != ".csv") continue;
    const std::string num = file.substr(11, file.size() - 15);
    char* end = nullptr;
    const long long b = std::strtoll(num.c_str(), &end, 10);
    if (num.empty() || *end != '\0' || b <= 0) {
      return Status(ErrorKind::kInvalidArgument, entry.path().string() + ": cannot read the batch size from the name");
    }
    Result<csv::Table> t = csv::Read(entry.path().string());
    if (!t.ok()) return t.status();
    const csv::Table& tab = t.value();
    const int cp = tab.Column("progress"), ci = tab.Column("iteration"), cq = tab.Column("grad_sqr"),
              cv = tab.Column("grad_var");
    if (cp < 0 || ci < 0 || cq < 0 || cv < 0) {
      return Status(ErrorKind::kInvalidArgument, tab.path + ": expected columns progress,iteration,grad_sqr,grad_var");
    }
    std::vector<CurvePoint> curve;
    for (size_t r = 0; r < tab.rows.size(); ++r) {
      Result<double> p = csv::Number(tab, r, cp), it = csv::Number(tab, r, ci), q = csv::Number(tab, r, cq),
                     v = csv::Number(tab, r, cv);
      for (const Status* st : {&p.status(), &it.status(), &q.status(), &v.status()}) {
        if (!st->ok()) return *st;
      }
      curve.push_back({p.value(), it.value(), q.value(), v.value()});
    }
    app->curves[static_cast<int64_t>(b)] = std::move(curve);
  }
  if (ec) return Status(ErrorKind::kNotFound, dir + ": " + ec.message());
  if (Status s = app->Finalize(epochs, max_local_batch_override); !s.ok()) {
    return Status(s.kind(), dir + ": " + s.message());
  }
  return std::shared_ptr<const Application>(std::move(app));
}

const std::vector<AppSpec>& PolluxAppSpecs() {
  static const std::vector<AppSpec> specs = {{"bert", 2, 0},      {"cifar10", 100, 0},    {"ncf", 10, 0},
                                             {"imagenet", 90, 0}, {"deepspeech2", 80, 0}, {"yolov3", 50, 8}};
  return specs;
}

Result<AppTable> LoadPolluxApplications(const std::string& traces_dir) {
  const std::vector<AppSpec>& kSpecs = PolluxAppSpecs();
  // One thread per application: loading is dominated by the oracle fit.
  const size_t kApps = kSpecs.size();
  std::vector<Result<std::shared_ptr<const Application>>> loaded(kApps, Status(ErrorKind::kInternal, "not loaded"));
  std::vector<std::thread> threads;
  for (size_t i = 0; i < kApps; ++i) {
    threads.emplace_back([&, i]() {
      const AppSpec& s = kSpecs[i];
      loaded[i] = LoadApplication(traces_dir + "/" + s.name, s.name, s.epochs, s.max_local);
    });
  }
  for (std::thread& t : threads) t.join();
  AppTable apps;
  for (size_t i = 0; i < kApps; ++i) {
    if (!loaded[i].ok()) return loaded[i].status();
    apps[kSpecs[i].name] = loaded[i].value();
  }
  return apps;
}

}  // namespace elastic::simulator
