// The HTML page: one file, inline CSS and SVG drawn here, no scripts, fonts or external resources.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>

#include "elastic/report/output.h"
#include "elastic/report/period.h"

namespace elastic::report {
namespace {

const char* const kPalette[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};

std::string Esc(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string Num(double v, int decimals = 1) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string LocalFormat(double t, const char* fmt) {
  time_t tt = static_cast<time_t>(t);
  struct tm tm {};
  localtime_r(&tt, &tm);
  char buf[64];
  size_t n = strftime(buf, sizeof buf, fmt, &tm);
  return std::string(buf, n);
}

// A "nice" axis maximum and tick step for values up to `max`.
std::pair<double, double> NiceAxis(double max, int ticks = 5) {
  if (max <= 0) return {1.0, 0.2};
  double raw = max / ticks;
  double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  }
  return {std::ceil(max / step) * step, step};
}

constexpr double kW = 1000, kH = 320, kL = 70, kR = 170, kT = 20, kB = 60;

std::string UsageChart(const Report& r) {
  const TimeSeries& ts = r.series;
  double pw = kW - kL - kR, ph = kH - kT - kB;
  std::vector<double> stack(ts.buckets, 0.0);
  for (const auto& [acct, v] : ts.gpu_hours) {
    for (size_t b = 0; b < v.size(); ++b) stack[b] += v[b];
  }
  double max = stack.empty() ? 0 : *std::max_element(stack.begin(), stack.end());
  // Plain variables, not structured bindings: lambdas below capture them (clang < 16 cannot).
  const auto axis = NiceAxis(max);
  const double ymax = axis.first;
  const double ystep = axis.second;
  std::string s = "<svg id=\"usage-chart\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 " + Num(kW, 0) + " " +
                  Num(kH, 0) + "\" width=\"" + Num(kW, 0) + "\" height=\"" + Num(kH, 0) +
                  "\" role=\"img\" aria-label=\"GPU-hours per account over time\">\n";
  auto y_of = [&](double v) { return kT + ph - v / ymax * ph; };
  // Grid and y axis.
  for (double v = 0; v <= ymax + ystep / 2; v += ystep) {
    double y = y_of(v);
    s += "<line class=\"grid\" x1=\"" + Num(kL) + "\" y1=\"" + Num(y) + "\" x2=\"" + Num(kL + pw) + "\" y2=\"" + Num(y) +
         "\"/>\n<text class=\"tick\" x=\"" + Num(kL - 6) + "\" y=\"" + Num(y + 4) + "\" text-anchor=\"end\">" +
         Num(v, ystep < 1 ? 2 : 0) + "</text>\n";
  }
  s += "<text class=\"axis-label\" transform=\"translate(16," + Num(kT + ph / 2) +
       ") rotate(-90)\" text-anchor=\"middle\">GPU-hours per " + (ts.bucket_s >= 86400 ? "day" : "hour") + "</text>\n";
  // Bars, stacked in account order.
  double bw = ts.buckets ? pw / static_cast<double>(ts.buckets) : pw;
  std::vector<double> base(ts.buckets, 0.0);
  size_t color = 0;
  for (const auto& [acct, v] : ts.gpu_hours) {
    std::string fill = kPalette[color++ % std::size(kPalette)];
    for (size_t b = 0; b < v.size(); ++b) {
      if (v[b] <= 0) continue;
      double y0 = y_of(base[b]), y1 = y_of(base[b] + v[b]);
      base[b] += v[b];
      s += "<rect class=\"bar\" x=\"" + Num(kL + static_cast<double>(b) * bw + bw * 0.1, 2) + "\" y=\"" + Num(y1, 2) +
           "\" width=\"" + Num(std::max(0.5, bw * 0.8), 2) + "\" height=\"" + Num(std::max(0.5, y0 - y1), 2) +
           "\" fill=\"" + fill + "\"><title>" + Esc(acct) + " " +
           LocalFormat(ts.start + static_cast<double>(b) * ts.bucket_s, "%Y-%m-%d %H:00") + ": " + Num(v[b], 2) +
           " GPU-hours</title></rect>\n";
    }
  }
  // x labels: at most ~12.
  size_t every = std::max<size_t>(1, (ts.buckets + 7) / 8);
  std::string last_day;
  for (size_t b = 0; b < ts.buckets; b += every) {
    double x = kL + (static_cast<double>(b) + 0.5) * bw;
    double t = ts.start + static_cast<double>(b) * ts.bucket_s;
    std::string day = LocalFormat(t, "%m-%d");
    // Hourly buckets: the date only where it changes.
    std::string label = ts.bucket_s >= 86400 ? day : day != last_day ? LocalFormat(t, "%m-%d %H:00") : LocalFormat(t, "%H:00");
    last_day = day;
    s += "<text class=\"tick\" x=\"" + Num(x) + "\" y=\"" + Num(kT + ph + 18) + "\" text-anchor=\"middle\">" +
         Esc(label) + "</text>\n";
  }
  s += "<line class=\"axis\" x1=\"" + Num(kL) + "\" y1=\"" + Num(kT + ph) + "\" x2=\"" + Num(kL + pw) + "\" y2=\"" +
       Num(kT + ph) + "\"/>\n";
  // Legend.
  color = 0;
  double ly = kT + 10;
  for (const auto& [acct, v] : ts.gpu_hours) {
    double total = 0;
    for (double x : v) total += x;
    s += "<rect class=\"legend\" x=\"" + Num(kL + pw + 16) + "\" y=\"" + Num(ly - 9) + "\" width=\"12\" height=\"12\" fill=\"" +
         kPalette[color++ % std::size(kPalette)] + "\"/>\n<text class=\"legend-text\" x=\"" + Num(kL + pw + 34) +
         "\" y=\"" + Num(ly + 1) + "\">" + Esc(acct) + " (" + Num(total, 1) + ")</text>\n";
    ly += 20;
  }
  if (ts.gpu_hours.empty()) {
    s += "<text class=\"empty\" x=\"" + Num(kL + pw / 2) + "\" y=\"" + Num(kT + ph / 2) +
         "\" text-anchor=\"middle\">no GPU usage in this period</text>\n";
  }
  return s + "</svg>\n";
}

std::string JobChart(const JobTimeline& tl) {
  double pw = kW - kL - kR, ph = kH - kT - kB;
  double t0 = tl.steps.front().first, t1 = tl.steps.back().first;
  if (t1 <= t0) t1 = t0 + 1;
  int64_t gmax = 0;
  for (const auto& [t, g] : tl.steps) gmax = std::max(gmax, g);
  const auto axis = NiceAxis(static_cast<double>(gmax) * 1.1 + 1);
  double ymax = axis.first;
  double ystep = axis.second;
  ystep = std::max(1.0, std::round(ystep));
  ymax = std::ceil(ymax / ystep) * ystep;
  auto x_of = [&](double t) { return kL + (t - t0) / (t1 - t0) * pw; };
  auto y_of = [&](double g) { return kT + ph - g / ymax * ph; };
  std::string s = "<svg id=\"job-chart\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 " + Num(kW, 0) + " " +
                  Num(kH, 0) + "\" width=\"" + Num(kW, 0) + "\" height=\"" + Num(kH, 0) +
                  "\" role=\"img\" aria-label=\"GPU count of job " + std::to_string(tl.job) + " over time\">\n";
  for (double v = 0; v <= ymax + ystep / 2; v += ystep) {
    double y = y_of(v);
    s += "<line class=\"grid\" x1=\"" + Num(kL) + "\" y1=\"" + Num(y) + "\" x2=\"" + Num(kL + pw) + "\" y2=\"" + Num(y) +
         "\"/>\n<text class=\"tick\" x=\"" + Num(kL - 6) + "\" y=\"" + Num(y + 4) + "\" text-anchor=\"end\">" +
         Num(v, 0) + "</text>\n";
  }
  s += "<text class=\"axis-label\" transform=\"translate(16," + Num(kT + ph / 2) +
       ") rotate(-90)\" text-anchor=\"middle\">GPUs</text>\n";
  // Step line and the area under it.
  std::string line = "M" + Num(x_of(t0), 2) + "," + Num(y_of(0), 2);
  for (const auto& [t, g] : tl.steps) {
    line += " H" + Num(x_of(t), 2) + " V" + Num(y_of(static_cast<double>(g)), 2);
  }
  std::string area = line + " H" + Num(x_of(t1), 2) + " V" + Num(y_of(0), 2) + " Z";
  s += "<path class=\"area\" d=\"" + area + "\" fill=\"#4e79a7\" fill-opacity=\"0.25\" stroke=\"none\"/>\n";
  s += "<path class=\"step\" d=\"" + line + "\" fill=\"none\" stroke=\"#4e79a7\" stroke-width=\"2.5\"/>\n";
  bool same_day = LocalFormat(t0, "%Y%m%d") == LocalFormat(t1, "%Y%m%d");
  for (int i = 0; i <= 5; ++i) {
    double t = t0 + (t1 - t0) * i / 5.0;
    s += "<text class=\"tick\" x=\"" + Num(x_of(t)) + "\" y=\"" + Num(kT + ph + 18) + "\" text-anchor=\"middle\">" +
         LocalFormat(t, same_day ? "%H:%M:%S" : "%m-%d %H:%M") + "</text>\n";
  }
  s += "<line class=\"axis\" x1=\"" + Num(kL) + "\" y1=\"" + Num(kT + ph) + "\" x2=\"" + Num(kL + pw) + "\" y2=\"" +
       Num(kT + ph) + "\"/>\n";
  s += "<text class=\"legend-text\" x=\"" + Num(kL + pw + 16) + "\" y=\"" + Num(kT + 10) + "\">peak " +
       std::to_string(gmax) + " GPUs</text>\n";
  return s + "</svg>\n";
}

const char* kStyle = R"css(
body { font-family: "DejaVu Sans", "Liberation Sans", Arial, sans-serif; color: #222; margin: 24px; max-width: 1100px; }
h1 { font-size: 22px; margin-bottom: 4px; } h2 { font-size: 17px; margin-top: 28px; }
.meta { color: #555; font-size: 13px; }
table { border-collapse: collapse; font-size: 13px; margin-top: 8px; }
th, td { padding: 4px 9px; border-bottom: 1px solid #ddd; }
th { background: #f2f4f7; text-align: right; } th:first-child, td:first-child { text-align: left; }
td { text-align: right; font-variant-numeric: tabular-nums; } tr.total td { font-weight: bold; border-top: 2px solid #999; }
svg { background: #fff; border: 1px solid #e3e3e3; max-width: 100%; height: auto; }
svg .grid { stroke: #e6e6e6; stroke-width: 1; } svg .axis { stroke: #555; stroke-width: 1; }
svg text { font-size: 12px; fill: #333; } svg .axis-label { font-size: 13px; }
.note { font-size: 12px; color: #555; } .warn { color: #8a4b00; font-size: 12px; }
)css";

}  // namespace

std::string RenderHtml(const Report& r, const std::optional<JobTimeline>& timeline) {
  std::string by(GroupByName(r.options.by));
  std::string h = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>GPU usage report " +
                  Esc(FormatTime(r.options.since)) + " to " + Esc(FormatTime(r.options.until)) +
                  "</title>\n<style>" + kStyle + "</style>\n</head>\n<body>\n";
  h += "<h1>GPU usage report</h1>\n<p class=\"meta\">" + Esc(FormatTime(r.options.since)) + " to " +
       Esc(FormatTime(r.options.until)) + " &middot; by " + Esc(by) + " &middot; generated " +
       Esc(FormatTime(r.options.now)) + " by elastic-report from Slurm accounting" +
       (r.have_journal ? " and elasticd's journal" : "") + "</p>\n";
  h += "<p><b>" + Num(r.total.gpu_hours, 1) + "</b> GPU-hours in " + std::to_string(r.total.jobs) + " jobs (" +
       std::to_string(r.total.elastic_jobs) + " elastic); <b>" + Num(r.total.extension_gpu_hours, 1) +
       "</b> GPU-hours (" + Num(100 * r.total.extension_share, 1) +
       "%) came from extensions, GPUs that elastic jobs took when they were free" +
       (r.have_journal ? "; estimated time saved against running rigid: <b>" + Num(r.total.time_saved_h, 1) +
                             "</b> hours"
                       : std::string()) +
       ".</p>\n";
  h += "<h2>GPU-hours per account over time</h2>\n" + UsageChart(r);
  h += "<h2>Usage by " + Esc(by) + "</h2>\n<table>\n<tr><th>" + Esc(by) +
       "</th><th>jobs</th><th>elastic</th><th>GPU-hours</th><th>from extensions</th><th>share</th>"
       "<th>rescales</th><th>paused (s)</th><th>avg GPUs</th><th>peak GPUs</th><th>mean wait (s)</th>"
       "<th>time saved (h)</th></tr>\n";
  auto row = [&](const GroupRow& g, bool total) {
    std::string dash = "&ndash;";
    h += std::string(total ? "<tr class=\"total\">" : "<tr>") + "<td>" + Esc(total ? "total" : g.group) + "</td><td>" +
         std::to_string(g.jobs) + "</td><td>" + std::to_string(g.elastic_jobs) + "</td><td>" + Num(g.gpu_hours, 2) +
         "</td><td>" + Num(g.extension_gpu_hours, 2) + "</td><td>" + Num(100 * g.extension_share, 1) + "%</td><td>" +
         (r.have_journal ? std::to_string(g.rescales) : dash) + "</td><td>" +
         (r.have_journal ? Num(g.rescale_pause_s, 1) : dash) + "</td><td>" + Num(g.avg_job_gpus, 2) + "</td><td>" +
         std::to_string(g.peak_job_gpus) + "</td><td>" + Num(g.queue_wait_mean_s, 0) + "</td><td>" +
         (r.have_journal ? Num(g.time_saved_h, 2) : dash) + "</td></tr>\n";
  };
  for (const auto& g : r.groups) row(g, false);
  row(r.total, true);
  h += "</table>\n";
  if (timeline && !timeline->steps.empty()) {
    h += "<h2>GPUs of job " + std::to_string(timeline->job) + " over time</h2>\n" + JobChart(*timeline);
    h += "<p class=\"note\">From " +
         std::string(timeline->source == "journal" ? "elasticd's GPU-count intervals"
                                                   : "Slurm accounting (the job's allocation and its extension jobs)") +
         ".</p>\n";
  }
  h += "<p class=\"note\">GPU-hours: gres/gpu of each Slurm allocation times its elapsed time, as sacct reports it; "
       "extension jobs count for the elastic job that started them. Time saved: work done at the sizes the job "
       "held, measured in time at its base size, minus the time it took (docs/report.md).</p>\n";
  for (const auto& w : r.warnings) h += "<p class=\"warn\">" + Esc(w) + "</p>\n";
  return h + "</body>\n</html>\n";
}

}  // namespace elastic::report
