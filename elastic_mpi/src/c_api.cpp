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
  return Guard([&]() -> elastic::Status {
    if (session == nullptr || name == nullptr || (data == nullptr && bytes > 0)) return NullHandle();
    session->session->RegisterBytes(name, data, bytes);
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
  return Guard([&]() -> elastic::Status {
    if (session == nullptr || (data == nullptr && count > 0)) return NullHandle();
    return session->session->backend().AllreduceSum(data, count);
  });
}

int elastic_session_allreduce_float(elastic_session* session, float* data, size_t count) {
  return Guard([&]() -> elastic::Status {
    if (session == nullptr || (data == nullptr && count > 0)) return NullHandle();
    return session->session->backend().AllreduceSum(data, count);
  });
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
