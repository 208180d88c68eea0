// Exceptions: one class per error kind, all subclasses of elastic_mpi.Error (itself a
// RuntimeError); the kinds that have a natural built-in counterpart also derive from it.
#include "binding.h"

namespace elastic::mpi::python {

namespace {

struct ExceptionClasses {
  py::object base;
  std::vector<std::pair<ErrorKind, py::object>> kinds;
};
ExceptionClasses* g_exceptions = nullptr;  // owned by the module (never freed: lives until exit)

}  // namespace

void BindErrors(py::module_& m) {
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

}  // namespace elastic::mpi::python
