// Checkpoints of the registered state.
#include "binding.h"

namespace elastic::mpi::python {

void BindCheckpoints(PySessionClass& cls) {
  cls
      .def(
          "write_checkpoint",
          [](PySession& s, const std::string& path) {
            Session& session = s.Ready("write_checkpoint");
            Status st;
            s.SyncState();
            {
              py::gil_scoped_release release;
              st = session.WriteCheckpoint(path);
            }
            Check(st);
          },
          py::arg("path"), "Collective: rank 0 writes every registered buffer to path (atomically).")
      .def(
          "read_checkpoint",
          [](PySession& s, const std::string& path) {
            Session& session = s.get();
            Status st;
            s.SyncState();  // torch may still be writing them
            {
              py::gil_scoped_release release;
              st = session.ReadCheckpoint(path);
            }
            Check(st);
          },
          py::arg("path"), "Reads path into the registered buffers (names and sizes must match).");
}

}  // namespace elastic::mpi::python
