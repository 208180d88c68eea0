// Exactly-once sharding across rescales and the portable generator (elastic_mpi/sharding.h).
#include <pybind11/numpy.h>

#include <cstddef>
#include <cstdint>

#include "binding.h"
#include "elastic_mpi/sharding.h"

namespace elastic::mpi::python {

void BindSharding(py::module_& m) {
  py::class_<elastic::mpi::StepShard>(m, "StepShard", "One rank's samples of one step.")
      .def_readonly("epoch", &elastic::mpi::StepShard::epoch)
      .def_readonly("global_count", &elastic::mpi::StepShard::global_count)
      .def_property_readonly("samples",
                             [](const elastic::mpi::StepShard& s) {
                               return py::array_t<std::uint64_t>(static_cast<py::ssize_t>(s.samples.size()),
                                                                 s.samples.data());
                             })
      .def("__len__", [](const elastic::mpi::StepShard& s) { return s.samples.size(); });

  py::class_<EpochSharder>(m, "EpochSharder",
                           "Per-epoch permutation from a seed and a global cursor: exactly-once across "
                           "rescales when `cursor` is registered with the session.")
      .def(py::init<std::uint64_t, std::uint64_t>(), py::arg("num_samples"), py::arg("seed"))
      .def(
          "next",
          [](EpochSharder& s, std::uint64_t global_batch, int rank, int world_size) {
            return s.Next(global_batch, rank, world_size);
          },
          py::arg("global_batch"), py::arg("rank"), py::arg("world_size"))
      .def(
          "sample_at",
          [](EpochSharder& s, std::uint64_t epoch, std::uint64_t i) {
            if (i >= s.num_samples()) Invalid("sample_at: index out of range");
            return s.SampleAt(epoch, i);
          },
          py::arg("epoch"), py::arg("i"))
      .def_property_readonly("num_samples", &EpochSharder::num_samples)
      .def_property_readonly("epoch", [](const EpochSharder& s) { return s.cursor().epoch; })
      .def_property_readonly("position", [](const EpochSharder& s) { return s.cursor().cursor; })
      .def_property_readonly(
          "cursor",
          [](py::object self) {
            EpochSharder& s = self.cast<EpochSharder&>();
            // A uint64 [epoch, cursor] view of the sharder's own cursor (register it as state).
            return py::array_t<std::uint64_t>({static_cast<py::ssize_t>(2)}, {sizeof(std::uint64_t)},
                                              &s.cursor().epoch, self);
          },
          "uint64 array [epoch, position] sharing the sharder's memory: register it with the session.")
      .def_static(
          "slice_of",
          [](std::uint64_t count, int rank, int world_size) {
            if (world_size <= 0 || rank < 0 || rank >= world_size) Invalid("slice_of: need 0 <= rank < world_size");
            std::uint64_t b = 0, e = 0;
            EpochSharder::SliceOf(count, rank, world_size, &b, &e);
            return std::make_pair(b, e);
          },
          py::arg("count"), py::arg("rank"), py::arg("world_size"));

  static_assert(offsetof(elastic::mpi::ShardCursor, cursor) == sizeof(std::uint64_t));

  py::class_<elastic::mpi::SplitMix64>(m, "SplitMix64", "The runtime's portable pseudo-random generator.")
      .def(py::init<std::uint64_t>(), py::arg("seed"))
      .def("next", &elastic::mpi::SplitMix64::Next)
      .def(
          "below",
          [](elastic::mpi::SplitMix64& r, std::uint64_t bound) {
            if (bound == 0) Invalid("below: bound must be > 0");
            return r.Below(bound);
          },
          py::arg("bound"))
      .def("uniform", &elastic::mpi::SplitMix64::Uniform);
}

}  // namespace elastic::mpi::python
