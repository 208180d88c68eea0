// What the files of the Python module share (internal header): the error helpers, the caller's
// buffers without copies, the session wrapper, and one Bind* function per concern, called in
// order by module.cpp. Each concern's file says what it binds.
#pragma once

#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "elastic/common/error.h"
#include "elastic_mpi/scaling.h"
#include "elastic_mpi/session.h"

namespace elastic::mpi::python {

namespace py = pybind11;

// kInvalidArgument: InvalidArgumentError (a ValueError) in Python.
[[noreturn]] inline void Invalid(const std::string& message) {
  throw Error(ErrorKind::kInvalidArgument, message);
}

inline void Check(const Status& status) {
  if (!status.ok()) throw Error(status.kind(), status.message());
}

template <typename T>
T Unwrap(Result<T> result) {
  Check(result.status());
  return std::move(result).value();
}

// --- buffers.cpp: the caller's memory, without copies.

enum class Elem { kFloat32, kFloat64, kUint64, kOther };

struct Buffer {
  void* data = nullptr;
  std::size_t bytes = 0;
  std::size_t count = 0;  // elements
  Elem elem = Elem::kOther;
  std::string format;
  MemorySpace space = MemorySpace::kHost;  // kDevice: a CUDA torch tensor
  int device = -1;                         // its CUDA device (kDevice only)
  py::object owner;  // keeps the memory alive (the array, or the tensor and its NumPy view)
};

// A C-contiguous writable buffer (NumPy array, CPU or CUDA torch tensor, bytearray, ...); what
// names the argument in messages.
Buffer GetBuffer(py::handle obj, const std::string& what);
// Waits for the work torch queued on a device buffer's device (its collectives and hand-over
// read the memory outside torch's streams); nothing for host buffers.
void SyncDevice(const Buffer& b);
// A device buffer handed to a collective must be on the device the world's backend uses (NCCL's
// communicator is bound to one device): InvalidArgumentError otherwise.
void CheckDevice(const Buffer& b, CollectiveBackend& backend, const std::string& what);

// --- bind_scaling.cpp: an LrRule from the enum or its name.
LrRule RuleFrom(py::handle rule);

// --- bind_session.cpp: the session wrapper.
struct PySession {
  std::unique_ptr<Session> session;
  py::list keep;  // registered objects
  std::vector<Buffer> device_state;  // registered CUDA tensors (synchronized before hand-overs)
  bool begun = false;
  std::vector<std::string> names;

  explicit PySession(std::unique_ptr<Session> s);
  ~PySession();
  Session& get() {
    if (!session) Invalid("the session is closed");
    return *session;
  }
  void Close();
  // Before the session reads registered CUDA tensors (hand-over, checkpoint): torch's queued work
  // on them is done.
  void SyncState() {
    for (const Buffer& b : device_state) SyncDevice(b);
  }
  // Collective calls need a begun session whose rank is still part of the world.
  Session& Ready(const char* what) {
    Session& s = get();
    if (!begun) Invalid(std::string(what) + " before begin()");
    if (s.left()) Invalid(std::string(what) + ": this rank's group left the world");
    return s;
  }
};
using PySessionClass = py::class_<PySession>;

// Closes the sessions still open and finalises MPI when the module initialised it (atexit).
void CloseAllAtExit();

// --- one per concern, in the order module.cpp calls them.
void BindErrors(py::module_& m);                // errors.cpp: elastic_mpi.Error and one class per kind
void BindScaling(py::module_& m);               // LrRule, parse_lr_rule, GradientNoise, lr_factor
void BindSharding(py::module_& m);              // StepShard, EpochSharder, SplitMix64
void BindOptions(py::module_& m);               // parse_schedule, SessionOptions
PySessionClass BindSession(py::module_& m);     // Session: life cycle, rescale points, accessors
void BindCollectives(PySessionClass& cls);      // allreduce, broadcast, observe_gradients
void BindMetrics(PySessionClass& cls);          // report_step, add_metrics_sink
void BindCheckpoints(PySessionClass& cls);      // write_checkpoint, read_checkpoint
void BindMpi(py::module_& m);                   // mpi_initialized, nccl_compiled, cuda_device_count

}  // namespace elastic::mpi::python
