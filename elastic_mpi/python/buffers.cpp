// Buffers: the caller's memory, without copies (NumPy arrays and any other object with the buffer
// protocol: host memory; torch tensors through their data pointer: host memory for CPU tensors,
// device memory for CUDA tensors, any dtype), checked C-contiguous and writable.
#include <bit>
#include <cstdint>

#include "binding.h"

namespace elastic::mpi::python {

namespace {

bool IsTorchTensor(py::handle obj) {
  py::object cls = py::type::of(obj);
  const std::string module = py::str(cls.attr("__module__"));
  return module.rfind("torch", 0) == 0 && py::hasattr(obj, "data_ptr") && py::hasattr(obj, "is_contiguous");
}

// A torch tensor in place through its data pointer (no copy, any dtype): host memory for a CPU
// tensor, device memory for a CUDA tensor. Sparse and other non-strided layouts, devices other
// than the CPU and CUDA, and non-contiguous tensors are refused with what to do instead.
Buffer TorchTensor(py::handle obj, const std::string& what) {
  const std::string layout = py::str(obj.attr("layout"));
  if (layout != "torch.strided") {
    Invalid(what + ": a torch tensor with layout " + layout + "; only dense (torch.strided) tensors are accepted "
            "(use .to_dense())");
  }
  const std::string device = py::str(obj.attr("device"));
  const std::string type = py::str(obj.attr("device").attr("type"));
  if (type != "cpu" && type != "cuda") {
    Invalid(what + ": a torch tensor on " + device + "; only CPU tensors (host memory) and CUDA tensors "
            "(device memory) are accepted (move it with .cpu() or .cuda())");
  }
  if (!obj.attr("is_contiguous")().cast<bool>()) {
    Invalid(what + ": the torch tensor is not contiguous (use .contiguous() and register that tensor)");
  }
  Buffer out;
  out.format = py::str(obj.attr("dtype"));
  if (type == "cuda") {
    if (!elastic::mpi::NcclCompiled()) {
      Invalid(what + ": a CUDA tensor, but this build of elastic_mpi has no CUDA (it was built without NCCL): "
              "pass a CPU tensor (tensor.cpu()) or use a build with CUDA and NCCL");
    }
    out.space = MemorySpace::kDevice;
    out.device = obj.attr("device").attr("index").cast<int>();
  }
  out.data = reinterpret_cast<void*>(obj.attr("data_ptr")().cast<std::uintptr_t>());
  out.count = obj.attr("numel")().cast<std::size_t>();
  out.bytes = out.count * obj.attr("element_size")().cast<std::size_t>();
  out.elem = out.format == "torch.float32" ? Elem::kFloat32
             : out.format == "torch.float64" ? Elem::kFloat64
             : out.format == "torch.uint64"  ? Elem::kUint64
                                             : Elem::kOther;
  out.owner = py::reinterpret_borrow<py::object>(obj);
  return out;
}

}  // namespace

void SyncDevice(const Buffer& b) {
  if (b.space != MemorySpace::kDevice) return;
  py::module_::import("torch").attr("cuda").attr("synchronize")(b.device);
}

void CheckDevice(const Buffer& b, CollectiveBackend& backend, const std::string& what) {
  if (b.space == MemorySpace::kDevice && backend.device() >= 0 && backend.device() != b.device) {
    Invalid(what + ": the tensor is on cuda:" + std::to_string(b.device) + " but this rank's " +
            std::string(backend.name()) + " backend runs on cuda:" + std::to_string(backend.device()) +
            " (session.device)");
  }
}

// what names the argument in messages.
Buffer GetBuffer(py::handle obj, const std::string& what) {
  if (IsTorchTensor(obj)) return TorchTensor(obj, what);
  Buffer out;
  py::object view = py::reinterpret_borrow<py::object>(obj);
  py::object owner = view;
  if (!PyObject_CheckBuffer(view.ptr())) {
    Invalid(what + ": expected a NumPy array, a CPU torch tensor or another writable buffer, got " +
            std::string(py::str(py::type::of(obj).attr("__name__"))));
  }
  py::buffer_info info;
  try {
    info = py::reinterpret_borrow<py::buffer>(view).request(true);
  } catch (py::error_already_set& e) {
    Invalid(what + ": the buffer is not writable (" + std::string(e.what()) + ")");
  }
  // C-contiguous: strides of a row-major array of this shape.
  py::ssize_t expected = info.itemsize;
  for (py::ssize_t d = info.ndim - 1; d >= 0; --d) {
    const auto i = static_cast<std::size_t>(d);
    if (info.shape[i] > 1 && info.strides[i] != expected) {
      Invalid(what + ": the array is not C-contiguous (use numpy.ascontiguousarray and register that array)");
    }
    expected *= info.shape[i];
  }
  out.data = info.ptr;
  out.count = static_cast<std::size_t>(info.size);
  out.bytes = out.count * static_cast<std::size_t>(info.itemsize);
  out.format = info.format;
  // The struct-module format without a native byte-order/alignment prefix.
  std::string f = info.format;
  if (!f.empty() && (f[0] == '@' || f[0] == '=' || (f[0] == '<' && std::endian::native == std::endian::little))) {
    f.erase(0, 1);
  }
  if (f == "f" && info.itemsize == 4) {
    out.elem = Elem::kFloat32;
  } else if (f == "d" && info.itemsize == 8) {
    out.elem = Elem::kFloat64;
  } else if ((f == "Q" || f == "L") && info.itemsize == 8) {
    out.elem = Elem::kUint64;
  }
  out.owner = owner;
  return out;
}

}  // namespace elastic::mpi::python
