// Learning-rate rules and gradient-noise statistics (elastic_mpi/scaling.h).
#include "binding.h"

namespace elastic::mpi::python {

LrRule RuleFrom(py::handle rule) {
  if (py::isinstance<py::str>(rule)) return Unwrap(elastic::mpi::ParseLrRule(rule.cast<std::string>()));
  return rule.cast<LrRule>();
}

void BindScaling(py::module_& m) {
  py::enum_<LrRule>(m, "LrRule", "Learning-rate rule for a changing global batch.")
      .value("none", LrRule::kNone)
      .value("linear", LrRule::kLinear)
      .value("sqrt", LrRule::kSqrt)
      .value("adascale", LrRule::kAdaScale);

  m.def("parse_lr_rule", [](const std::string& name) { return Unwrap(elastic::mpi::ParseLrRule(name)); },
        py::arg("name"), "LrRule from 'none', 'linear', 'sqrt' or 'adascale'.");

  py::class_<GradientNoise>(m, "GradientNoise", "Smoothed gradient-noise statistics (Pollux).")
      .def(py::init([](double smoothing) {
             if (!(smoothing >= 0 && smoothing < 1)) Invalid("smoothing must be in [0, 1)");
             return GradientNoise(smoothing);
           }),
           py::arg("smoothing") = 0.9)
      .def(
          "observe",
          [](GradientNoise& n, double weighted_local_sqr, double global_sqr, double global_batch, int ranks) {
            return n.Observe(weighted_local_sqr, global_sqr, global_batch, ranks);
          },
          py::arg("weighted_local_sqr"), py::arg("global_sqr"), py::arg("global_batch"), py::arg("ranks"))
      .def_property_readonly("valid", &GradientNoise::valid)
      .def_property_readonly("grad_sqr", &GradientNoise::grad_sqr)
      .def_property_readonly("grad_var", &GradientNoise::grad_var)
      .def_property_readonly("noise_scale", &GradientNoise::noise_scale);

  m.def(
      "lr_factor",
      [](py::handle rule, double global_batch, double base_batch, const GradientNoise* noise) {
        if (!(global_batch > 0) || !(base_batch > 0)) Invalid("global_batch and base_batch must be > 0");
        const GradientNoise none;
        return elastic::mpi::LrFactor(RuleFrom(rule), global_batch, base_batch, noise ? *noise : none);
      },
      py::arg("rule"), py::arg("global_batch"), py::arg("base_batch"), py::arg("noise") = nullptr,
      "Learning-rate factor of rule (LrRule or its name) at global_batch with base batch base_batch.");
}

}  // namespace elastic::mpi::python
