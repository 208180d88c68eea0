// The C API: thin wrappers that catch every exception at the boundary.
#include "elastic_mpi/elastic_mpi.h"

#include <string>

#include "elastic_mpi/session.h"

struct elastic_session {
  std::unique_ptr<elastic::mpi::Session> session;
};

namespace {

thread_local std::string g_last_error;

int Code(const elastic::Status& s) {
  if (s.ok()) return ELASTIC_OK;
  g_last_error = s.ToString();
  switch (s.kind()) {
    case elastic::ErrorKind::kInvalidArgument: return ELASTIC_EINVAL;
    case elastic::ErrorKind::kConfig: return ELASTIC_ECONFIG;
    case elastic::ErrorKind::kUnavailable: return ELASTIC_EUNAVAILABLE;
    case elastic::ErrorKind::kPermission: return ELASTIC_EPERM;
    case elastic::ErrorKind::kNotFound: return ELASTIC_ENOTFOUND;
    case elastic::ErrorKind::kTimeout: return ELASTIC_ETIMEOUT;
    case elastic::ErrorKind::kProtocol: return ELASTIC_EPROTOCOL;
    case elastic::ErrorKind::kInternal: return ELASTIC_EINTERNAL;
  }
  return ELASTIC_EINTERNAL;
}

// Runs f, turning exceptions into error codes.
template <typename F>
int Guard(F&& f) noexcept {
  try {
    return Code(f());
  } catch (const elastic::Error& e) {
    return Code(elastic::Status(e.kind(), e.what()));
  } catch (const std::exception& e) {
    return Code(elastic::Status(elastic::ErrorKind::kInternal, e.what()));
  } catch (...) {
    return Code(elastic::Status(elastic::ErrorKind::kInternal, "unknown exception"));
  }
}

elastic::Status NullHandle() { return {elastic::ErrorKind::kInvalidArgument, "null session or argument"}; }

// The memory space of data named by an ELASTIC_MEMORY_* value.
elastic::Result<elastic::mpi::MemorySpace> SpaceOf(const void* data, int memory) {
  switch (memory) {
    case ELASTIC_MEMORY_HOST: return elastic::mpi::MemorySpace::kHost;
    case ELASTIC_MEMORY_DEVICE: return elastic::mpi::MemorySpace::kDevice;
    case ELASTIC_MEMORY_ANY: return elastic::mpi::QueryMemorySpace(data);
    default: break;
  }
  return elastic::Status(elastic::ErrorKind::kInvalidArgument,
                         "memory must be ELASTIC_MEMORY_HOST, _DEVICE or _ANY, got " + std::to_string(memory));
}

// Collective on the session's backend, for data in memory space `memory`.
template <typename T>
int Allreduce(elastic_session* session, T* data, size_t count, int memory) {
  return Guard([&]() -> elastic::Status {
    if (session == nullptr || (data == nullptr && count > 0)) return NullHandle();
    auto space = SpaceOf(data, memory);
    if (!space.ok()) return space.status();
    return session->session->backend().AllreduceSum(data, count, space.value());
  });
}

}  // namespace

extern "C" {

const char* elastic_last_error(void) { return g_last_error.c_str(); }

int elastic_session_create(uint64_t global_batch, elastic_session** out) {
  return Guard([&]() -> elastic::Status {
    if (out == nullptr) return NullHandle();
    auto options = elastic::mpi::SessionOptions::FromEnvironment();
    if (!options.ok()) return options.status();
    options.value().global_batch = global_batch;
    auto session = elastic::mpi::Session::Create(options.value());
    if (!session.ok()) return session.status();
    *out = new elastic_session{std::move(session).value()};
    return {};
  });
}

void elastic_session_destroy(elastic_session* session) { delete session; }

int elastic_session_register(elastic_session* session, const char* name, void* data, size_t bytes) {
  return elastic_session_register_in(session, name, data, bytes, ELASTIC_MEMORY_HOST);
}

int elastic_session_register_in(elastic_session* session, const char* name, void* data, size_t bytes, int memory) {
  return Guard([&]() -> elastic::Status {
    if (session == nullptr || name == nullptr || (data == nullptr && bytes > 0)) return NullHandle();
    auto space = SpaceOf(data, memory);
    if (!space.ok()) return space.status();
    session->session->RegisterBytes(name, data, bytes, space.value());
    return {};
  });
}

int elastic_session_begin(elastic_session* session) {
  return Guard([&]() -> elastic::Status {
    if (session == nullptr) return NullHandle();
    return session->session->Begin();
  });
}

int elastic_session_rescale_point(elastic_session* session, int* changed, int* left) {
  return Guard([&]() -> elastic::Status {
    if (session == nullptr) return NullHandle();
    auto r = session->session->RescalePoint();
    if (!r.ok()) return r.status();
    if (changed != nullptr) *changed = r.value() ? 1 : 0;
    if (left != nullptr) *left = session->session->left() ? 1 : 0;
    return {};
  });
}

int elastic_session_rank(const elastic_session* s) { return s ? s->session->rank() : -1; }
int elastic_session_size(const elastic_session* s) { return s ? s->session->size() : 0; }
uint64_t elastic_session_global_batch(const elastic_session* s) { return s ? s->session->global_batch() : 0; }
uint64_t elastic_session_local_batch(const elastic_session* s) { return s ? s->session->local_batch() : 0; }
double elastic_session_lr_factor(const elastic_session* s) {
  try {
    return s ? s->session->lr_factor() : 1.0;
  } catch (...) {
    return 1.0;
  }
}

int elastic_session_allreduce_double(elastic_session* session, double* data, size_t count) {
  return Allreduce(session, data, count, ELASTIC_MEMORY_HOST);
}
int elastic_session_allreduce_float(elastic_session* session, float* data, size_t count) {
  return Allreduce(session, data, count, ELASTIC_MEMORY_HOST);
}
int elastic_session_allreduce_double_in(elastic_session* session, double* data, size_t count, int memory) {
  return Allreduce(session, data, count, memory);
}
int elastic_session_allreduce_float_in(elastic_session* session, float* data, size_t count, int memory) {
  return Allreduce(session, data, count, memory);
}

int elastic_session_broadcast(elastic_session* session, void* data, size_t bytes, int root, int memory) {
  return Guard([&]() -> elastic::Status {
    if (session == nullptr || (data == nullptr && bytes > 0)) return NullHandle();
    if (root < 0 || root >= session->session->size()) {
      return {elastic::ErrorKind::kInvalidArgument, "broadcast root " + std::to_string(root) + " outside the world"};
    }
    auto space = SpaceOf(data, memory);
    if (!space.ok()) return space.status();
    return session->session->backend().Broadcast(data, bytes, root, space.value());
  });
}

const char* elastic_session_backend_name(const elastic_session* s) {
  try {
    // name() views a string literal of the backend: it outlives the call.
    return s != nullptr ? s->session->backend().name().data() : "";
  } catch (...) {
    return "";  // before elastic_session_begin
  }
}

int elastic_session_memory_space(const elastic_session* s) {
  try {
    if (s != nullptr && s->session->backend().memory_space() == elastic::mpi::MemorySpace::kDevice) {
      return ELASTIC_MEMORY_DEVICE;
    }
  } catch (...) {
  }
  return ELASTIC_MEMORY_HOST;
}

int elastic_session_observe_gradients(elastic_session* session, const double* local_mean,
                                      uint64_t local_count, const double* global_mean, size_t count) {
  return Guard([&]() -> elastic::Status {
    if (session == nullptr || ((local_mean == nullptr || global_mean == nullptr) && count > 0)) return NullHandle();
    return session->session->ObserveGradients(std::span<const double>(local_mean, count), local_count,
                                              std::span<const double>(global_mean, count));
  });
}

double elastic_session_grad_sqr(const elastic_session* s) { return s ? s->session->gradient_noise().grad_sqr() : 0; }
double elastic_session_grad_var(const elastic_session* s) { return s ? s->session->gradient_noise().grad_var() : 0; }

int elastic_session_report_step(elastic_session* session, double step_time_s, uint64_t samples) {
  return Guard([&]() -> elastic::Status {
    if (session == nullptr) return NullHandle();
    session->session->ReportStep(step_time_s, samples);
    return {};
  });
}

}  // extern "C"
