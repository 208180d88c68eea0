// The Python module `elastic_mpi`: the runtime's C++ API (session, sharding, learning-rate rules,
// gradient noise, metrics) for Python training scripts. docs/user-guide.md ("Python and PyTorch")
// is its manual; tests/python its tests.
//
// Memory: state and collectives work on the caller's memory, never on copies. Any object with
// the buffer protocol (NumPy arrays, bytearray, memoryview) that is C-contiguous and writable is
// accepted, and CPU torch tensors through tensor.detach().numpy() (which shares the tensor's
// storage). The module keeps a reference to every registered object for the session's lifetime.
//
// MPI: the module initialises MPI itself (MPI_THREAD_FUNNELED) when the first session is created
// and finalises it at interpreter exit after closing the sessions still open, so several
// sessions may exist in one process and closing one never finalises MPI under another.
//
// Errors: elastic::Error and failed Status values become exceptions of the module
// (elastic_mpi.Error and one subclass per error kind) carrying the runtime's message.
#include <dlfcn.h>
#include <mpi.h>
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "elastic/common/error.h"
#include "elastic_mpi/backend.h"
#include "elastic_mpi/metrics.h"
#include "elastic_mpi/scaling.h"
#include "elastic_mpi/session.h"
#include "elastic_mpi/sharding.h"

namespace py = pybind11;

namespace {

using elastic::Error;
using elastic::ErrorKind;
using elastic::Status;
using elastic::mpi::EpochSharder;
using elastic::mpi::GradientNoise;
using elastic::mpi::LrRule;
using elastic::mpi::Session;
using elastic::mpi::SessionOptions;

[[noreturn]] void Invalid(const std::string& message) { throw Error(ErrorKind::kInvalidArgument, message); }

void Check(const Status& status) {
  if (!status.ok()) throw Error(status.kind(), status.message());
}

template <typename T>
T Unwrap(elastic::Result<T> result) {
  Check(result.status());
  return std::move(result).value();
}

// ---------------------------------------------------------------------------------------------
// Exceptions: one class per error kind, all subclasses of elastic_mpi.Error (itself a
// RuntimeError); the kinds that have a natural built-in counterpart also derive from it.

struct ExceptionClasses {
  py::object base;
  std::vector<std::pair<ErrorKind, py::object>> kinds;
};
ExceptionClasses* g_exceptions = nullptr;  // owned by the module (never freed: lives until exit)

void RegisterExceptions(py::module_& m) {
  g_exceptions = new ExceptionClasses();
  py::object builtins = py::module_::import("builtins");
  py::object type = builtins.attr("type");
  auto make = [&](const char* name, py::tuple bases, const char* kind, const char* doc) {
    py::dict ns;
    ns["__module__"] = "elastic_mpi";
    ns["__doc__"] = doc;
    ns["kind"] = kind;
    py::object cls = type(name, bases, ns);
    m.attr(name) = cls;
    return cls;
  };
  g_exceptions->base = make("Error", py::make_tuple(builtins.attr("RuntimeError")), "",
                            "Base class of the runtime's errors; `kind` names the error kind.");
  py::object base = g_exceptions->base;
  struct Spec {
    ErrorKind kind;
    const char* name;
    const char* builtin;  // extra built-in base or nullptr
    const char* doc;
  };
  const Spec specs[] = {
      {ErrorKind::kInvalidArgument, "InvalidArgumentError", "ValueError", "The caller's input is wrong."},
      {ErrorKind::kConfig, "ConfigError", nullptr, "A malformed ELASTIC_* variable or option."},
      {ErrorKind::kUnavailable, "UnavailableError", nullptr, "MPI or a peer failed."},
      {ErrorKind::kPermission, "PermissionDeniedError", "PermissionError", "A join was refused (bad token)."},
      {ErrorKind::kNotFound, "NotFoundError", "LookupError", "The named object does not exist."},
      {ErrorKind::kTimeout, "TimeoutError", "TimeoutError", "An operation did not finish in time."},
      {ErrorKind::kProtocol, "ProtocolError", nullptr, "A peer sent a malformed message."},
      {ErrorKind::kInternal, "InternalError", nullptr, "A broken invariant of the runtime (a bug)."},
  };
  for (const Spec& s : specs) {
    py::tuple bases = s.builtin ? py::make_tuple(base, builtins.attr(s.builtin)) : py::make_tuple(base);
    const std::string kind(elastic::ErrorKindName(s.kind));
    g_exceptions->kinds.emplace_back(s.kind, make(s.name, bases, kind.c_str(), s.doc));
  }
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      for (const auto& [kind, cls] : g_exceptions->kinds) {
        if (kind == e.kind()) {
          PyErr_SetString(cls.ptr(), e.what());
          return;
        }
      }
      PyErr_SetString(g_exceptions->base.ptr(), e.what());
    }
  });
}

// ---------------------------------------------------------------------------------------------
// Buffers: the caller's memory, without copies.

enum class Elem { kFloat32, kFloat64, kUint64, kOther };

struct Buffer {
  void* data = nullptr;
  std::size_t bytes = 0;
  std::size_t count = 0;  // elements
  Elem elem = Elem::kOther;
  std::string format;
  py::object owner;  // keeps the memory alive (the array, or the tensor and its NumPy view)
};

bool IsTorchTensor(py::handle obj) {
  py::object cls = py::type::of(obj);
  const std::string module = py::str(cls.attr("__module__"));
  return module.rfind("torch", 0) == 0 && py::hasattr(obj, "numpy") && py::hasattr(obj, "is_contiguous");
}

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

// ---------------------------------------------------------------------------------------------
// MPI owned by the module.

bool g_module_owns_mpi = false;

// Open MPI loads its components with dlopen and they expect libmpi's symbols to be global; a
// Python extension is loaded with RTLD_LOCAL, so promote the already loaded libmpi to global.
void PromoteLibmpi() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&MPI_Init_thread), &info) != 0 && info.dli_fname != nullptr) {
    dlopen(info.dli_fname, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
  }
}

void EnsureMpi() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) throw Error(ErrorKind::kUnavailable, "MPI was finalized in this process: no new session");
  PromoteLibmpi();
  int provided = 0;
  const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
  if (rc != MPI_SUCCESS) throw Error(ErrorKind::kUnavailable, "MPI_Init_thread failed");
  g_module_owns_mpi = true;
}

// ---------------------------------------------------------------------------------------------
// Metrics sink calling Python.

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

// ---------------------------------------------------------------------------------------------
// The session wrapper.

struct PySession;
std::set<PySession*>* g_live = nullptr;  // sessions not closed yet (closed at exit)

struct PySession {
  std::unique_ptr<Session> session;
  py::list keep;  // registered objects
  bool begun = false;
  std::vector<std::string> names;

  explicit PySession(std::unique_ptr<Session> s) : session(std::move(s)) { g_live->insert(this); }
  ~PySession() {
    g_live->erase(this);
    Close();
  }
  Session& get() {
    if (!session) Invalid("the session is closed");
    return *session;
  }
  void Close() {
    if (!session) return;
    py::gil_scoped_release release;  // frees communicators (collective-free, but MPI calls)
    session.reset();
  }
  // Collective calls need a begun session whose rank is still part of the world.
  Session& Ready(const char* what) {
    Session& s = get();
    if (!begun) Invalid(std::string(what) + " before begin()");
    if (s.left()) Invalid(std::string(what) + ": this rank's group left the world");
    return s;
  }
};

void CloseAllAtExit() {
  if (g_live != nullptr) {
    std::vector<PySession*> live(g_live->begin(), g_live->end());
    for (PySession* s : live) s->Close();
  }
  if (g_module_owns_mpi) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) {
      py::gil_scoped_release release;
      MPI_Finalize();
    }
  }
}

std::string ScheduleText(const std::vector<elastic::mpi::ScheduleEntry>& schedule) {
  std::ostringstream out;
  for (std::size_t i = 0; i < schedule.size(); ++i) {
    if (i > 0) out << "->";
    out << schedule[i].world_size;
    if (schedule[i].global_batch != 0) out << ':' << schedule[i].global_batch;
  }
  return out.str();
}

py::object OptionalU64(const std::optional<std::uint64_t>& v) {
  return v ? py::cast(*v) : py::none();
}

std::unique_ptr<PySession> MakeSession(std::optional<std::uint64_t> global_batch, py::object options,
                                       const py::kwargs& overrides) {
  SessionOptions opts = options.is_none() ? Unwrap(SessionOptions::FromEnvironment()) : options.cast<SessionOptions>();
  py::object holder = py::cast(opts);  // set the overrides through the properties (they validate)
  if (global_batch) holder.attr("global_batch") = *global_batch;
  for (auto item : overrides) {
    const std::string key = py::str(item.first);
    if (key.empty() || key[0] == '_' || !py::hasattr(holder, key.c_str())) {
      Invalid("unknown session option '" + key + "' (see elastic_mpi.SessionOptions)");
    }
    holder.attr(key.c_str()) = item.second;
  }
  opts = holder.cast<SessionOptions>();
  if (opts.global_batch == 0) Invalid("global_batch must be > 0 (the program's initial global batch)");
  EnsureMpi();
  std::unique_ptr<Session> session;
  {
    py::gil_scoped_release release;
    auto created = Session::Create(std::move(opts), nullptr, nullptr);
    if (!created.ok()) {
      py::gil_scoped_acquire gil;
      Check(created.status());
    }
    session = std::move(created).value();
  }
  return std::make_unique<PySession>(std::move(session));
}

py::dict RescaleDict(const elastic::mpi::RescaleInfo& r) {
  py::dict d;
  d["what"] = r.what;
  d["ok"] = r.ok;
  d["error"] = r.error;
  d["group"] = r.group;
  d["old_size"] = r.old_size;
  d["new_size"] = r.new_size;
  d["old_batch"] = r.old_batch;
  d["new_batch"] = r.new_batch;
  d["pause_s"] = r.pause_s;
  d["phases"] = r.phases;
  return d;
}

LrRule RuleFrom(py::handle rule) {
  if (py::isinstance<py::str>(rule)) return Unwrap(elastic::mpi::ParseLrRule(rule.cast<std::string>()));
  return rule.cast<LrRule>();
}

}  // namespace

PYBIND11_MODULE(elastic_mpi, m) {
  m.doc() =
      "Elastic data-parallel training on the elastic_mpi runtime: sessions that grow and shrink at "
      "step boundaries, state hand-over without copies, exactly-once sharding, learning-rate rules.";
  g_live = new std::set<PySession*>();
  RegisterExceptions(m);

  py::enum_<LrRule>(m, "LrRule", "Learning-rate rule for a changing global batch.")
      .value("none", LrRule::kNone)
      .value("linear", LrRule::kLinear)
      .value("sqrt", LrRule::kSqrt)
      .value("adascale", LrRule::kAdaScale);

  m.def("parse_lr_rule", [](const std::string& name) { return Unwrap(elastic::mpi::ParseLrRule(name)); },
        py::arg("name"), "LrRule from 'none', 'linear', 'sqrt' or 'adascale'.");
  m.def(
      "parse_schedule",
      [](const std::string& text) {
        std::vector<std::pair<int, std::uint64_t>> out;
        for (const auto& e : Unwrap(elastic::mpi::ParseSchedule(text))) out.emplace_back(e.world_size, e.global_batch);
        return out;
      },
      py::arg("text"), "[(world_size, global_batch or 0)] of a schedule such as '2->4:128->2'.");

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

  // --- sharding
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

  // --- options
  py::class_<SessionOptions>(m, "SessionOptions",
                             "Options of a session (docs/runtime.md); from_environment() reads ELASTIC_*.")
      .def(py::init<>())
      .def_static("from_environment", []() { return Unwrap(SessionOptions::FromEnvironment()); })
      .def_readwrite("standalone", &SessionOptions::standalone)
      .def_readwrite("rigid", &SessionOptions::rigid)
      .def_readwrite("job_id", &SessionOptions::job_id)
      .def_readwrite("group_id", &SessionOptions::group_id)
      .def_readwrite("join", &SessionOptions::join)
      .def_readwrite("join_token", &SessionOptions::join_token)
      .def_readwrite("command_dir", &SessionOptions::command_dir)
      .def_readwrite("controller", &SessionOptions::controller)
      .def_readwrite("metrics_interval_s", &SessionOptions::metrics_interval_s)
      .def_readwrite("global_batch", &SessionOptions::global_batch)
      .def_readwrite("base_global_batch", &SessionOptions::base_global_batch)
      .def_property(
          "batch_min", [](const SessionOptions& o) { return OptionalU64(o.batch_min); },
          [](SessionOptions& o, std::optional<std::uint64_t> v) { o.batch_min = v; })
      .def_property(
          "batch_max", [](const SessionOptions& o) { return OptionalU64(o.batch_max); },
          [](SessionOptions& o, std::optional<std::uint64_t> v) { o.batch_max = v; })
      .def_property(
          "lr_rule", [](const SessionOptions& o) { return std::string(elastic::mpi::LrRuleName(o.lr_rule)); },
          [](SessionOptions& o, py::handle rule) { o.lr_rule = RuleFrom(rule); })
      .def_property(
          "grad_noise_smoothing", [](const SessionOptions& o) { return o.grad_noise_smoothing; },
          [](SessionOptions& o, double v) {
            if (!(v >= 0 && v < 1)) Invalid("grad_noise_smoothing must be in [0, 1)");
            o.grad_noise_smoothing = v;
          })
      .def_property(
          "schedule", [](const SessionOptions& o) { return ScheduleText(o.schedule); },
          [](SessionOptions& o, const std::string& text) { o.schedule = Unwrap(elastic::mpi::ParseSchedule(text)); },
          "Standalone schedule as text, e.g. '2->4->2' or '2:64->4:128'.")
      .def_property(
          "schedule_every", [](const SessionOptions& o) { return o.schedule_every; },
          [](SessionOptions& o, std::uint64_t v) {
            if (v == 0) Invalid("schedule_every must be > 0");
            o.schedule_every = v;
          })
      .def_readwrite("spawn_timeout_s", &SessionOptions::spawn_timeout_s)
      .def_readwrite("connect_timeout_s", &SessionOptions::connect_timeout_s)
      .def_readwrite("respawn_delay_s", &SessionOptions::respawn_delay_s)
      .def_readwrite("poll_interval_s", &SessionOptions::poll_interval_s)
      .def_property(
          "backend", [](const SessionOptions& o) { return std::string(elastic::mpi::BackendKindName(o.backend)); },
          [](SessionOptions& o, const std::string& name) { o.backend = Unwrap(elastic::mpi::ParseBackendKind(name)); })
      .def_readwrite("bind", &SessionOptions::bind)
      .def_readwrite("metrics_file", &SessionOptions::metrics_file)
      .def_readwrite("checkpoint_dir", &SessionOptions::checkpoint_dir)
      .def_property(
          "total_samples", [](const SessionOptions& o) { return o.total_samples; },
          [](SessionOptions& o, double v) {
            if (!(v >= 0) || v > 1e18) Invalid("total_samples must be a number of samples >= 0");
            o.total_samples = v;
          },
          "samples the job trains in all (0: unknown); sent to elasticd for its remaining-time objective")
      .def_readwrite("handle_sigterm", &SessionOptions::handle_sigterm)
      .def_readwrite("spawn_command", &SessionOptions::spawn_command,
                     "argv that MPI_Comm_spawn starts; empty: this interpreter with its own arguments.");

  // --- session
  py::class_<PySession>(m, "Session",
                        "One per training process: the elastic world, state hand-over, rescale points, batch "
                        "and learning-rate factor, collectives on host buffers, metrics, checkpoints.")
      .def(py::init(&MakeSession), py::arg("global_batch") = py::none(), py::arg("options") = py::none(),
           "Session(global_batch=None, options=None, **overrides): options default to "
           "SessionOptions.from_environment(); keyword overrides set SessionOptions attributes. Initialises MPI.")
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](PySession& s, py::args) { s.Close(); })
      .def("close", &PySession::Close, "Frees the session (MPI is finalised at interpreter exit).")
      .def_property_readonly("closed", [](const PySession& s) { return !s.session; })
      .def(
          "register",
          [](PySession& s, const std::string& name, py::handle array) {
            Session& session = s.get();
            if (name.empty()) Invalid("register: the name is empty");
            Buffer b = GetBuffer(array, "register('" + name + "')");
            session.RegisterBytes(name, b.data, b.bytes);  // duplicate / after begin: InvalidArgumentError
            s.keep.append(b.owner);
            s.names.push_back(name);
          },
          py::arg("name"), py::arg("array"),
          "Registers state handed to newcomers (before begin()): a C-contiguous writable NumPy array or "
          "CPU torch tensor, any dtype; its memory is used in place and kept alive by the session.")
      .def_property_readonly("registered", [](const PySession& s) { return s.names; })
      .def("begin",
           [](PySession& s) {
             Session& session = s.get();
             Status st;
             {
               py::gil_scoped_release release;
               st = session.Begin();
             }
             Check(st);
             s.begun = true;
           })
      .def(
          "rescale_point",
          [](PySession& s) {
            Session& session = s.get();
            if (!s.begun) Invalid("rescale_point() before begin()");
            if (session.left()) Invalid("rescale_point(): this rank's group left the world");
            elastic::Result<bool> r = Status(ErrorKind::kInternal, "unset");
            {
              py::gil_scoped_release release;
              r = session.RescalePoint();
            }
            return Unwrap(std::move(r));
          },
          "Collective, at every step boundary: applies a pending change; True when the world or the batch "
          "changed. Then check should_stop.")
      .def_property_readonly("left", [](PySession& s) { return s.get().left(); })
      .def_property_readonly("should_stop", [](PySession& s) { return s.get().should_stop(); })
      .def_property_readonly("newcomer", [](PySession& s) { return s.get().newcomer(); })
      .def_property_readonly("rank", [](PySession& s) { return s.get().rank(); })
      .def_property_readonly("size", [](PySession& s) { return s.get().size(); })
      .def_property_readonly("world_size", [](PySession& s) { return s.get().size(); })
      .def_property_readonly("group_id", [](PySession& s) { return s.get().group_id(); })
      .def_property_readonly("step", [](PySession& s) { return s.get().step(); })
      .def_property_readonly("global_batch", [](PySession& s) { return s.get().global_batch(); })
      .def_property_readonly("local_batch", [](PySession& s) { return s.get().local_batch(); })
      .def_property_readonly("lr_factor", [](PySession& s) { return s.get().lr_factor(); })
      .def_property_readonly("lr_rule",
                             [](PySession& s) { return std::string(elastic::mpi::LrRuleName(s.get().options().lr_rule)); })
      .def_property_readonly("grad_sqr", [](PySession& s) { return s.get().gradient_noise().grad_sqr(); })
      .def_property_readonly("grad_var", [](PySession& s) { return s.get().gradient_noise().grad_var(); })
      .def_property_readonly("noise_scale", [](PySession& s) { return s.get().gradient_noise().noise_scale(); })
      .def_property_readonly("last_rescale", [](PySession& s) { return RescaleDict(s.get().last_rescale()); })
      .def_property_readonly("backend_name",
                             [](PySession& s) { return std::string(s.Ready("backend_name").backend().name()); })
      .def_property_readonly("options", [](PySession& s) { return s.get().options(); })
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
          "the world's mean gradient.")
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
          "Rank 0 calls on_step(dict) after each reported step and on_rescale(what, world_size, pause_s).")
      .def(
          "write_checkpoint",
          [](PySession& s, const std::string& path) {
            Session& session = s.Ready("write_checkpoint");
            Status st;
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
            {
              py::gil_scoped_release release;
              st = session.ReadCheckpoint(path);
            }
            Check(st);
          },
          py::arg("path"), "Reads path into the registered buffers (names and sizes must match).");

  m.def("mpi_initialized", []() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    return initialized != 0;
  });
  m.def("nccl_compiled", &elastic::mpi::NcclCompiled);
  py::module_::import("atexit").attr("register")(py::cpp_function(&CloseAllAtExit));
}
