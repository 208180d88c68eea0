// SessionOptions and the schedule's text form (elastic_mpi/session.h); setters validate like
// SessionOptions::FromConfig does.
#include <pybind11/stl.h>

#include <optional>
#include <sstream>

#include "binding.h"

namespace elastic::mpi::python {

namespace {

std::string ScheduleText(const std::vector<elastic::mpi::ScheduleEntry>& schedule) {
  std::ostringstream out;
  for (std::size_t i = 0; i < schedule.size(); ++i) {
    if (i > 0) out << "->";
    out << schedule[i].world_size;
    if (schedule[i].global_batch != 0) out << ':' << schedule[i].global_batch;
  }
  return out.str();
}

py::object OptionalU64(const std::optional<std::uint64_t>& v) {
  return v ? py::cast(*v) : py::none();
}

}  // namespace

void BindOptions(py::module_& m) {
  m.def(
      "parse_schedule",
      [](const std::string& text) {
        std::vector<std::pair<int, std::uint64_t>> out;
        for (const auto& e : Unwrap(elastic::mpi::ParseSchedule(text))) out.emplace_back(e.world_size, e.global_batch);
        return out;
      },
      py::arg("text"), "[(world_size, global_batch or 0)] of a schedule such as '2->4:128->2'.");

  py::class_<SessionOptions>(m, "SessionOptions",
                             "Options of a session (docs/runtime.md); from_environment() reads ELASTIC_*.")
      .def(py::init<>())
      .def_static("from_environment", []() { return Unwrap(SessionOptions::FromEnvironment()); })
      .def_readwrite("standalone", &SessionOptions::standalone)
      .def_readwrite("rigid", &SessionOptions::rigid)
      .def_readwrite("job_id", &SessionOptions::job_id)
      .def_readwrite("group_id", &SessionOptions::group_id)
      .def_readwrite("join", &SessionOptions::join)
      .def_readwrite("join_token", &SessionOptions::join_token)
      .def_readwrite("command_dir", &SessionOptions::command_dir)
      .def_readwrite("controller", &SessionOptions::controller)
      .def_readwrite("metrics_interval_s", &SessionOptions::metrics_interval_s)
      .def_readwrite("global_batch", &SessionOptions::global_batch)
      .def_readwrite("local_batch", &SessionOptions::local_batch,
                     "initial per-rank batch; with global_batch 0 the initial global batch is local_batch x the "
                     "initial world size")
      .def_readwrite("defer_batch", &SessionOptions::defer_batch,
                     "neither global_batch nor local_batch yet: Session.set_initial_local_batch(n) gives it before "
                     "the first rescale point")
      .def_readwrite("base_global_batch", &SessionOptions::base_global_batch)
      .def_property(
          "batch_min", [](const SessionOptions& o) { return OptionalU64(o.batch_min); },
          [](SessionOptions& o, std::optional<std::uint64_t> v) { o.batch_min = v; })
      .def_property(
          "batch_max", [](const SessionOptions& o) { return OptionalU64(o.batch_max); },
          [](SessionOptions& o, std::optional<std::uint64_t> v) { o.batch_max = v; })
      .def_property(
          "lr_rule", [](const SessionOptions& o) { return std::string(elastic::mpi::LrRuleName(o.lr_rule)); },
          [](SessionOptions& o, py::handle rule) { o.lr_rule = RuleFrom(rule); })
      .def_property(
          "grad_noise_smoothing", [](const SessionOptions& o) { return o.grad_noise_smoothing; },
          [](SessionOptions& o, double v) {
            if (!(v >= 0 && v < 1)) Invalid("grad_noise_smoothing must be in [0, 1)");
            o.grad_noise_smoothing = v;
          })
      .def_property(
          "schedule", [](const SessionOptions& o) { return ScheduleText(o.schedule); },
          [](SessionOptions& o, const std::string& text) { o.schedule = Unwrap(elastic::mpi::ParseSchedule(text)); },
          "Standalone schedule as text, e.g. '2->4->2' or '2:64->4:128'.")
      .def_property(
          "schedule_every", [](const SessionOptions& o) { return o.schedule_every; },
          [](SessionOptions& o, std::uint64_t v) {
            if (v == 0) Invalid("schedule_every must be > 0");
            o.schedule_every = v;
          })
      .def_readwrite("spawn_timeout_s", &SessionOptions::spawn_timeout_s)
      .def_readwrite("connect_timeout_s", &SessionOptions::connect_timeout_s)
      .def_readwrite("respawn_delay_s", &SessionOptions::respawn_delay_s)
      .def_readwrite("poll_interval_s", &SessionOptions::poll_interval_s)
      .def_property(
          "backend", [](const SessionOptions& o) { return std::string(elastic::mpi::BackendKindName(o.backend)); },
          [](SessionOptions& o, const std::string& name) { o.backend = Unwrap(elastic::mpi::ParseBackendKind(name)); })
      .def_readwrite("bind", &SessionOptions::bind)
      .def_readwrite("metrics_file", &SessionOptions::metrics_file)
      .def_readwrite("checkpoint_dir", &SessionOptions::checkpoint_dir)
      .def_property(
          "total_samples", [](const SessionOptions& o) { return o.total_samples; },
          [](SessionOptions& o, double v) {
            if (!(v >= 0) || v > 1e18) Invalid("total_samples must be a number of samples >= 0");
            o.total_samples = v;
          },
          "samples the job trains in all (0: unknown); sent to elasticd for its remaining-time objective")
      .def_readwrite("handle_sigterm", &SessionOptions::handle_sigterm)
      .def_readwrite("spawn_command", &SessionOptions::spawn_command,
                     "argv that MPI_Comm_spawn starts; empty: this interpreter with its own arguments.");
}

}  // namespace elastic::mpi::python
