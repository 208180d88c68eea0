// The Session class: its life cycle (MPI owned by the module, closing at exit), registration,
// begin, rescale points and accessors. Its collectives, metrics and checkpoints are bound by
// bind_collectives.cpp, bind_metrics.cpp and bind_checkpoints.cpp.
//
// MPI: the module initialises MPI itself (MPI_THREAD_FUNNELED) when the first session is created
// and finalises it at interpreter exit after closing the sessions still open, so several
// sessions may exist in one process and closing one never finalises MPI under another.
#include <dlfcn.h>
#include <mpi.h>

#include <optional>
#include <set>

#include "binding.h"

namespace elastic::mpi::python {

namespace {

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

std::set<PySession*>* g_live = nullptr;  // sessions not closed yet (closed at exit)

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
  if (opts.global_batch == 0 && opts.local_batch == 0 && !opts.defer_batch) {
    Invalid("global_batch must be > 0 (the program's initial global batch), or local_batch (its initial per-rank "
            "batch: the global batch is then local_batch x the initial world size), or defer_batch=True and "
            "set_initial_local_batch(n) before the first rescale point");
  }
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

}  // namespace

PySession::PySession(std::unique_ptr<Session> s) : session(std::move(s)) { g_live->insert(this); }
PySession::~PySession() {
  g_live->erase(this);
  Close();
}
void PySession::Close() {
  if (!session) return;
  py::gil_scoped_release release;  // frees communicators (collective-free, but MPI calls)
  session.reset();
}

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

PySessionClass BindSession(py::module_& m) {
  g_live = new std::set<PySession*>();
  PySessionClass cls(m, "Session",
                     "One per training process: the elastic world, state hand-over, rescale points, batch "
                     "and learning-rate factor, collectives on host buffers, metrics, checkpoints.");
  cls.def(py::init(&MakeSession), py::arg("global_batch") = py::none(), py::arg("options") = py::none(),
           "Session(global_batch=None, options=None, **overrides): options default to "
           "SessionOptions.from_environment(); keyword overrides set SessionOptions attributes (local_batch=N "
           "instead of global_batch: N x the initial world size). Initialises MPI.")
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
            // duplicate / after begin: InvalidArgumentError
            session.RegisterBytes(name, b.data, b.bytes, b.space);
            s.keep.append(b.owner);
            s.names.push_back(name);
            if (b.space == MemorySpace::kDevice) s.device_state.push_back(b);
          },
          py::arg("name"), py::arg("array"),
          "Registers state handed to newcomers (before begin()): a C-contiguous writable NumPy array, "
          "CPU torch tensor or CUDA torch tensor (handed over through a host copy), any dtype; its memory is "
          "used in place and kept alive by the session. The NCCL backend runs on the device of the first "
          "CUDA tensor registered.")
      .def_property_readonly("registered", [](const PySession& s) { return s.names; })
      .def("begin",
           [](PySession& s) {
             Session& session = s.get();
             Status st;
             s.SyncState();
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
            s.SyncState();
            {
              py::gil_scoped_release release;
              r = session.RescalePoint();
            }
            return Unwrap(std::move(r));
          },
          "Collective, at every step boundary: applies a pending change; True when the world or the batch "
          "changed. Then check should_stop.")
      .def(
          "set_initial_local_batch",
          [](PySession& s, std::uint64_t local_batch) { Check(s.get().SetInitialLocalBatch(local_batch)); },
          py::arg("local_batch"),
          "The initial batch of a session created with defer_batch=True and no batch: the global batch becomes "
          "local_batch x the world size. On every rank of the base job with the same value, before the first "
          "rescale_point(); a session that has its batch (a newcomer has the running world's) keeps it.")
      .def_property_readonly("left", [](PySession& s) { return s.get().left(); })
      .def_property_readonly("should_stop", [](PySession& s) { return s.get().should_stop(); })
      .def_property_readonly("newcomer", [](PySession& s) { return s.get().newcomer(); })
      .def_property_readonly("relaunched", [](PySession& s) { return s.get().relaunched(); },
                             "True in a world elastic-launch started again after a relaunch (docs/runtime.md, "
                             "\"Relaunch\"): it went on from the registered state of the world before it")
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
      .def_property_readonly(
          "memory_space",
          [](PySession& s) { return std::string(MemorySpaceName(s.Ready("memory_space").backend().memory_space())); },
          "Where the backend's buffers are fast: 'device' (NCCL: CUDA tensors) or 'host' (MPI).")
      .def_property_readonly(
          "device", [](PySession& s) { return s.Ready("device").backend().device(); },
          "The CUDA device of this rank's NCCL backend (CUDA tensors given to collectives must be on it); -1 "
          "under MPI.")
      .def_property_readonly("options", [](PySession& s) { return s.get().options(); });
  return cls;
}

void BindMpi(py::module_& m) {
  m.def("mpi_initialized", []() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    return initialized != 0;
  });
  m.def("nccl_compiled", &elastic::mpi::NcclCompiled);
  m.def("cuda_device_count", &elastic::mpi::CudaDeviceCount,
        "CUDA devices visible to this process (0 without CUDA in the build, without a driver or a GPU).");
}

}  // namespace elastic::mpi::python
