// The session's collectives on the caller's buffers: allreduce and broadcast of NumPy arrays and
// CPU tensors (host memory: MPI) or CUDA tensors (device memory: NCCL when the world's backend is
// NCCL, else a staged host copy over MPI; a build without CUDA refuses them, buffers.cpp),
// and the gradient-statistics allreduce (host arithmetic: CUDA tensors are copied to the host).
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
              const bool torch_dtype = b.format.rfind("torch.", 0) == 0;
              Invalid("allreduce: float32 or float64 arrays and tensors only, got " +
                      (torch_dtype ? "dtype " + b.format + " (reduce a .float() or .double() copy)"
                                   : "format '" + b.format + "'"));
            }
            auto& backend = session.backend();
            CheckDevice(b, backend, "allreduce");
            SyncDevice(b);
            const bool host = b.space == MemorySpace::kHost;
            Status st;
            {
              py::gil_scoped_release release;
              if (b.elem == Elem::kFloat32) {
                auto* p = static_cast<float*>(b.data);
                st = backend.AllreduceSum(p, b.count, b.space);
                if (st.ok() && host && op == "mean") {
                  const float n = static_cast<float>(session.size());
                  for (std::size_t i = 0; i < b.count; ++i) p[i] /= n;
                }
              } else {
                auto* p = static_cast<double*>(b.data);
                st = backend.AllreduceSum(p, b.count, b.space);
                if (st.ok() && host && op == "mean") {
                  const double n = static_cast<double>(session.size());
                  for (std::size_t i = 0; i < b.count; ++i) p[i] /= n;
                }
              }
            }
            Check(st);
            if (!host && op == "mean") array.attr("div_")(session.size());  // on the device, by torch
            return py::reinterpret_borrow<py::object>(array);
          },
          py::arg("array"), py::arg("op") = "sum",
          "Collective: in-place sum (or mean over ranks) of a float32/float64 array, CPU tensor or CUDA tensor; "
          "returns it.")
      .def(
          "broadcast",
          [](PySession& s, py::handle array, int root) -> py::object {
            Session& session = s.Ready("broadcast");
            if (root < 0 || root >= session.size()) {
              Invalid("broadcast: root " + std::to_string(root) + " outside the world of " +
                      std::to_string(session.size()) + " ranks");
            }
            Buffer b = GetBuffer(array, "broadcast");
            auto& backend = session.backend();
            CheckDevice(b, backend, "broadcast");
            SyncDevice(b);
            Status st;
            {
              py::gil_scoped_release release;
              st = backend.Broadcast(b.data, b.bytes, root, b.space);
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
            // The statistics are host arithmetic: CUDA tensors come over as host copies.
            auto on_host = [](py::handle t) -> py::object {
              py::object o = py::reinterpret_borrow<py::object>(t);
              return py::hasattr(o, "is_cuda") && o.attr("is_cuda").cast<bool>() ? o.attr("cpu")() : o;
            };
            py::object local_host = on_host(local_mean);
            py::object global_host = on_host(global_mean);
            Buffer l = GetBuffer(local_host, "observe_gradients(local_mean)");
            Buffer g = GetBuffer(global_host, "observe_gradients(global_mean)");
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
          "the world's mean gradient.")
      .def(
          "observe_gradient_norms",
          [](PySession& s, double local_sqr, std::uint64_t local_count, double global_sqr) {
            Session& session = s.Ready("observe_gradient_norms");
            Status st;
            {
              py::gil_scoped_release release;
              st = session.ObserveGradientNorms(local_sqr, local_count, global_sqr);
            }
            Check(st);
          },
          py::arg("local_sqr"), py::arg("local_count"), py::arg("global_sqr"),
          "Collective: the same statistics from squared norms: |this rank's mean gradient|^2 over local_count "
          "samples and |the world's mean gradient|^2 (for gradients reduced elsewhere, e.g. a DDP hook).");
}

}  // namespace elastic::mpi::python
