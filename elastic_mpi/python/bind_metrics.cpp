// Step metrics: report_step, and sinks that call Python on rank 0.
#include "binding.h"
#include "elastic_mpi/metrics.h"

namespace elastic::mpi::python {

namespace {

class PySink final : public elastic::mpi::MetricsSink {
 public:
  PySink(py::object on_step, py::object on_rescale)
      : on_step_(std::move(on_step)), on_rescale_(std::move(on_rescale)) {}
  ~PySink() override {
    py::gil_scoped_acquire gil;
    on_step_ = py::object();
    on_rescale_ = py::object();
  }
  void OnStep(const elastic::mpi::StepMetrics& m) noexcept override {
    py::gil_scoped_acquire gil;
    if (!on_step_ || on_step_.is_none()) return;
    try {
      py::dict d;
      d["step"] = m.step;
      d["gpus"] = m.gpus;
      d["global_batch"] = m.global_batch;
      d["local_batch"] = m.local_batch;
      d["accum_steps"] = m.accum_steps;
      d["step_time_s"] = m.step_time_s;
      d["grad_sqr"] = m.grad_sqr;
      d["grad_var"] = m.grad_var;
      d["samples"] = m.samples;
      d["lr_factor"] = m.lr_factor;
      on_step_(d);
    } catch (py::error_already_set& e) {
      e.discard_as_unraisable("elastic_mpi metrics sink (on_step)");
    } catch (...) {
    }
  }
  void OnRescale(const std::string& what, int world_size, double pause_s) noexcept override {
    py::gil_scoped_acquire gil;
    if (!on_rescale_ || on_rescale_.is_none()) return;
    try {
      on_rescale_(what, world_size, pause_s);
    } catch (py::error_already_set& e) {
      e.discard_as_unraisable("elastic_mpi metrics sink (on_rescale)");
    } catch (...) {
    }
  }

 private:
  py::object on_step_;
  py::object on_rescale_;
};

}  // namespace

void BindMetrics(PySessionClass& cls) {
  cls
      .def(
          "report_step",
          [](PySession& s, double step_time_s, std::uint64_t samples) {
            Session& session = s.Ready("report_step");
            if (!(step_time_s >= 0)) Invalid("report_step: step_time_s must be >= 0");
            session.ReportStep(step_time_s, samples);
          },
          py::arg("step_time_s"), py::arg("samples_in_step"))
      .def(
          "add_metrics_sink",
          [](PySession& s, py::object on_step, py::object on_rescale) {
            if (!on_step.is_none() && !PyCallable_Check(on_step.ptr())) Invalid("add_metrics_sink: on_step is not callable");
            if (!on_rescale.is_none() && !PyCallable_Check(on_rescale.ptr())) {
              Invalid("add_metrics_sink: on_rescale is not callable");
            }
            s.get().AddMetricsSink(std::make_shared<PySink>(std::move(on_step), std::move(on_rescale)));
          },
          py::arg("on_step"), py::arg("on_rescale") = py::none(),
          "Rank 0 calls on_step(dict) after each reported step and on_rescale(what, world_size, pause_s).");
}

}  // namespace elastic::mpi::python
