// The session's collectives on the caller's host buffers: allreduce, broadcast, and the
// gradient-statistics allreduce.
#include <span>

#include "binding.h"

namespace elastic::mpi::python {

void BindCollectives(PySessionClass& cls) {
  cls
      .def(
          "allreduce",
          [](PySession& s, py::handle array, const std::string& op) -> py::object {
            Session& session = s.Ready("allreduce");
            if (op != "sum" && op != "mean") Invalid("allreduce: op must be 'sum' or 'mean', got '" + op + "'");
            Buffer b = GetBuffer(array, "allreduce");
            if (b.elem != Elem::kFloat32 && b.elem != Elem::kFloat64) {
              Invalid("allreduce: float32 or float64 arrays only, got format '" + b.format + "'");
            }
            Status st;
            {
              py::gil_scoped_release release;
              auto& backend = session.backend();
              if (b.elem == Elem::kFloat32) {
                auto* p = static_cast<float*>(b.data);
                st = backend.AllreduceSum(p, b.count);
                if (st.ok() && op == "mean") {
                  const float n = static_cast<float>(session.size());
                  for (std::size_t i = 0; i < b.count; ++i) p[i] /= n;
                }
              } else {
                auto* p = static_cast<double*>(b.data);
                st = backend.AllreduceSum(p, b.count);
                if (st.ok() && op == "mean") {
                  const double n = static_cast<double>(session.size());
                  for (std::size_t i = 0; i < b.count; ++i) p[i] /= n;
                }
              }
            }
            Check(st);
            return py::reinterpret_borrow<py::object>(array);
          },
          py::arg("array"), py::arg("op") = "sum",
          "Collective: in-place sum (or mean over ranks) of a float32/float64 array or CPU tensor; returns it.")
      .def(
          "broadcast",
          [](PySession& s, py::handle array, int root) -> py::object {
            Session& session = s.Ready("broadcast");
            if (root < 0 || root >= session.size()) {
              Invalid("broadcast: root " + std::to_string(root) + " outside the world of " +
                      std::to_string(session.size()) + " ranks");
            }
            Buffer b = GetBuffer(array, "broadcast");
            Status st;
            {
              py::gil_scoped_release release;
              st = session.backend().Broadcast(b.data, b.bytes, root);
            }
            Check(st);
            return py::reinterpret_borrow<py::object>(array);
          },
          py::arg("array"), py::arg("root") = 0,
          "Collective: root's bytes into every rank's array (any dtype, in place); returns it.")
      .def(
          "observe_gradients",
          [](PySession& s, py::handle local_mean, std::uint64_t local_count, py::handle global_mean) {
            Session& session = s.Ready("observe_gradients");
            Buffer l = GetBuffer(local_mean, "observe_gradients(local_mean)");
            Buffer g = GetBuffer(global_mean, "observe_gradients(global_mean)");
            if (l.elem != g.elem || (l.elem != Elem::kFloat32 && l.elem != Elem::kFloat64)) {
              Invalid("observe_gradients: local_mean and global_mean must both be float32 or both float64");
            }
            if (l.count != g.count) Invalid("observe_gradients: local and global sizes differ");
            Status st;
            {
              py::gil_scoped_release release;
              if (l.elem == Elem::kFloat32) {
                st = session.ObserveGradients(std::span<const float>(static_cast<const float*>(l.data), l.count),
                                              local_count,
                                              std::span<const float>(static_cast<const float*>(g.data), g.count));
              } else {
                st = session.ObserveGradients(std::span<const double>(static_cast<const double*>(l.data), l.count),
                                              local_count,
                                              std::span<const double>(static_cast<const double*>(g.data), g.count));
              }
            }
            Check(st);
          },
          py::arg("local_mean"), py::arg("local_count"), py::arg("global_mean"),
          "Collective: gradient-noise statistics from this rank's mean gradient over local_count samples and "
          "the world's mean gradient.");
}

}  // namespace elastic::mpi::python
