// GPU tests of the runtime's memory spaces (label gpu; run_gpu_test.sh skips them without a GPU):
//
//   elastic-gpu-test gpus   prints the number of visible CUDA devices
//   elastic-gpu-test capi   the C API: NCCL allreduce and broadcast on device memory, a host
//                           buffer's allreduce while the backend is NCCL (through MPI)
//   elastic-gpu-test cxx    the C++ API: the same, device state registered and handed over, and
//                           every rescale point of ELASTIC_SCHEDULE checked with NCCL
//
// Every rank checks its results; exit 0 when all are right. Failures name the call.
#include <cuda_runtime_api.h>
#include <mpi.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "elastic_mpi/elastic_mpi.h"
#include "elastic_mpi/session.h"

namespace {

namespace em = elastic::mpi;

int Fail(const std::string& what) {
  std::fprintf(stderr, "elastic-gpu-test: FAIL: %s\n", what.c_str());
  std::fflush(stderr);
  return 1;
}

// A device buffer of n T, each value v.
template <typename T>
T* DeviceFilled(std::size_t n, T v) {
  void* raw = nullptr;
  if (cudaMalloc(&raw, n * sizeof(T)) != cudaSuccess) return nullptr;
  T* p = static_cast<T*>(raw);
  std::vector<T> host(n, v);
  cudaMemcpy(p, host.data(), n * sizeof(T), cudaMemcpyHostToDevice);
  return p;
}

// True when every value of the device buffer is v.
template <typename T>
bool DeviceAll(const T* p, std::size_t n, T v) {
  std::vector<T> host(n);
  if (cudaMemcpy(host.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost) != cudaSuccess) return false;
  for (T x : host) {
    if (x != v) return false;
  }
  return true;
}

constexpr std::size_t kCount = 1 << 20;

int CApi() {
  elastic_session* s = nullptr;
  if (elastic_session_create(8, &s) != ELASTIC_OK) return Fail(std::string("create: ") + elastic_last_error());
  if (elastic_session_begin(s) != ELASTIC_OK) return Fail(std::string("begin: ") + elastic_last_error());
  const int rank = elastic_session_rank(s);
  const int size = elastic_session_size(s);
  if (std::strcmp(elastic_session_backend_name(s), "nccl") != 0) {
    return Fail(std::string("backend is ") + elastic_session_backend_name(s) + " on a GPU node");
  }
  if (elastic_session_memory_space(s) != ELASTIC_MEMORY_DEVICE) return Fail("memory space is not device");
  const float sum = static_cast<float>(size * (size + 1) / 2);
  float* f = DeviceFilled<float>(kCount, static_cast<float>(rank + 1));
  if (f == nullptr) return Fail("cudaMalloc");
  if (elastic_session_allreduce_float_in(s, f, kCount, ELASTIC_MEMORY_DEVICE) != ELASTIC_OK) {
    return Fail(std::string("device allreduce: ") + elastic_last_error());
  }
  if (!DeviceAll<float>(f, kCount, sum)) return Fail("device allreduce (C API) gave a wrong sum");
  double* d = DeviceFilled<double>(kCount, 1.0);
  if (elastic_session_allreduce_double_in(s, d, kCount, ELASTIC_MEMORY_ANY) != ELASTIC_OK) {
    return Fail(std::string("device allreduce (ELASTIC_MEMORY_ANY): ") + elastic_last_error());
  }
  if (!DeviceAll<double>(d, kCount, size)) return Fail("device allreduce (ANY) gave a wrong sum");
  // Host memory while the backend is NCCL: through MPI (NCCL would fault on it).
  std::vector<double> host(kCount, 2.0);
  if (elastic_session_allreduce_double(s, host.data(), kCount) != ELASTIC_OK) {
    return Fail(std::string("host allreduce under NCCL: ") + elastic_last_error());
  }
  if (host.front() != 2.0 * size || host.back() != 2.0 * size) return Fail("host allreduce gave a wrong sum");
  float* b = DeviceFilled<float>(kCount, static_cast<float>(rank == 0 ? 7 : 0));
  if (elastic_session_broadcast(s, b, kCount * sizeof(float), 0, ELASTIC_MEMORY_DEVICE) != ELASTIC_OK) {
    return Fail(std::string("device broadcast: ") + elastic_last_error());
  }
  if (!DeviceAll<float>(b, kCount, 7.0F)) return Fail("device broadcast gave wrong bytes");
  cudaFree(f);
  cudaFree(d);
  cudaFree(b);
  if (rank == 0) std::printf("capi ok: %d ranks, backend nccl\n", size);
  elastic_session_destroy(s);
  return 0;
}

int Cxx() {
  auto options = em::SessionOptions::FromEnvironment();
  if (!options.ok()) return Fail(options.status().ToString());
  options.value().global_batch = 8;
  auto created = em::Session::Create(options.value());
  if (!created.ok()) return Fail("create: " + created.status().ToString());
  auto& session = *created.value();
  // State in device memory, handed to newcomers: rank 0's value is 42 at every step. The NCCL
  // backend runs on the device of the registered state: this test starts one rank (device 0) and
  // grows by one spawned rank, which inherits the parent's numbering and so takes device 1.
  cudaSetDevice(session.newcomer() ? 1 : 0);
  double* state = DeviceFilled<double>(1024, session.newcomer() ? 0.0 : 42.0);
  session.RegisterDoubles("device_state", state, 1024, em::MemorySpace::kDevice);
  if (auto s = session.Begin(); !s.ok()) return Fail("begin: " + s.ToString());
  if (!DeviceAll<double>(state, 1024, 42.0)) return Fail("device state not handed over");
  int changes = 0;
  while (true) {
    auto changed = session.RescalePoint();
    if (!changed.ok()) return Fail("rescale point: " + changed.status().ToString());
    if (session.left()) return 0;
    if (session.step() > 40) break;  // the same on every rank (newcomers receive the step)
    changes += changed.value() ? 1 : 0;
    auto& backend = session.backend();
    if (backend.name() != "nccl") return Fail("backend is " + std::string(backend.name()) + " on a GPU node");
    const int size = session.size();
    float* f = DeviceFilled<float>(kCount, 1.0F);
    if (auto s = backend.AllreduceSum(f, kCount, em::MemorySpace::kDevice); !s.ok()) {
      return Fail("device allreduce: " + s.ToString());
    }
    if (!DeviceAll<float>(f, kCount, static_cast<float>(size))) return Fail("device allreduce gave a wrong sum");
    cudaFree(f);
    std::vector<float> host(1000, 1.0F);
    if (auto s = backend.AllreduceSum(host.data(), host.size(), em::MemorySpace::kHost); !s.ok()) {
      return Fail("host allreduce under NCCL: " + s.ToString());
    }
    if (host[0] != static_cast<float>(size)) return Fail("host allreduce gave a wrong sum");
    if (auto s = backend.Broadcast(state, 1024 * sizeof(double), 0, em::MemorySpace::kDevice); !s.ok()) {
      return Fail("device broadcast: " + s.ToString());
    }
  }
  if (session.rank() == 0) std::printf("cxx ok: %d rescales, backend nccl, world %d\n", changes, session.size());
  cudaFree(state);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "gpus") {
    std::printf("%d\n", em::CudaDeviceCount());
    return 0;
  }
  if (mode == "capi") return CApi();
  if (mode == "cxx") return Cxx();
  std::fprintf(stderr, "usage: elastic-gpu-test gpus|capi|cxx\n");
  return 2;
}
