// The compiled part of the Python package `elastic_mpi` (elastic_mpi._core, re-exported as it is
// by the package's __init__.py): the runtime's C++ API (session, sharding, learning-rate rules,
// gradient noise, metrics) for Python training scripts. The package's pure-Python parts (the
// torch.distributed path, elastic_mpi.torch) are in python/elastic_mpi/. docs/user-guide.md
// ("Python and PyTorch") is its manual; tests/python its tests. Each concern is bound by its own Bind* function
// (binding.h lists them); this file only calls them, in an order where every type is bound
// before a later signature names it.
//
// Memory: state and collectives work on the caller's memory, never on copies. Any object with
// the buffer protocol (NumPy arrays, bytearray, memoryview) that is C-contiguous and writable is
// accepted, and CPU torch tensors through tensor.detach().numpy() (which shares the tensor's
// storage). The module keeps a reference to every registered object for the session's lifetime.
//
// Errors: elastic::Error and failed Status values become exceptions of the module
// (elastic_mpi.Error and one subclass per error kind) carrying the runtime's message.
#include "binding.h"

PYBIND11_MODULE(_core, m) {
  namespace bind = elastic::mpi::python;
  namespace py = pybind11;
  m.doc() =
      "Elastic data-parallel training on the elastic_mpi runtime: sessions that grow and shrink at "
      "step boundaries, state hand-over without copies, exactly-once sharding, learning-rate rules.";
  bind::BindErrors(m);
  // The exit status of a rank whose world broke (a peer died, a state that did not come through):
  // elasticd requeues a job whose batch script ends with it (docs/interfaces.md, exit codes).
  m.attr("EXIT_WORLD_LOST") = elastic::mpi::kExitWorldLost;
  bind::BindScaling(m);
  bind::BindSharding(m);
  bind::BindOptions(m);
  auto session = bind::BindSession(m);
  bind::BindCollectives(session);
  bind::BindMetrics(session);
  bind::BindCheckpoints(session);
  bind::BindMpi(m);
  py::module_::import("atexit").attr("register")(py::cpp_function(&bind::CloseAllAtExit));
}
