// Buffers: the caller's memory, without copies (NumPy arrays, CPU torch tensors through their
// NumPy view, any other object with the buffer protocol), checked C-contiguous and writable.
#include <bit>

#include "binding.h"

namespace elastic::mpi::python {

namespace {

bool IsTorchTensor(py::handle obj) {
  py::object cls = py::type::of(obj);
  const std::string module = py::str(cls.attr("__module__"));
  return module.rfind("torch", 0) == 0 && py::hasattr(obj, "numpy") && py::hasattr(obj, "is_contiguous");
}

}  // namespace

// what names the argument in messages.
Buffer GetBuffer(py::handle obj, const std::string& what) {
  Buffer out;
  py::object view = py::reinterpret_borrow<py::object>(obj);
  py::object owner = view;
  if (IsTorchTensor(obj)) {
    const std::string device = py::str(obj.attr("device"));
    if (device != "cpu") {
      Invalid(what + ": a torch tensor on " + device + "; only CPU tensors (host memory) are accepted");
    }
    if (!obj.attr("is_contiguous")().cast<bool>()) {
      Invalid(what + ": the torch tensor is not contiguous (use .contiguous() and register that tensor)");
    }
    // detach() and numpy() share the tensor's storage: no copy.
    try {
      view = obj.attr("detach")().attr("numpy")();
    } catch (py::error_already_set& e) {
      Invalid(what + ": cannot view the torch tensor as a NumPy array: " + std::string(e.what()));
    }
    owner = py::make_tuple(obj, view);
  }
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
