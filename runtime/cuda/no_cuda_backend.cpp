// The CUDA backend's entry points in a build without CUDA (no nvcc found,
// or MPC_ENABLE_CUDA=OFF): there is no backend, and every answer says why.
#include "runtime/cuda/cuda_backend.h"

namespace mpc {

namespace {
const char *kNoCuda = "this build has no CUDA backend (configured without "
                      "nvcc or with MPC_ENABLE_CUDA=OFF)";
}

std::unique_ptr<Backend> createCudaBackend(std::string &whyNot,
                                           const CudaBackendOptions &) {
  whyNot = kNoCuda;
  return nullptr;
}

bool cudaBackendSupports(const Node &, std::string &why) {
  why = kNoCuda;
  return false;
}

std::vector<std::string> cudaDeviceOps() { return {}; }
std::vector<std::string> cudaHostOps() { return {}; }

CudaMemoryStats cudaMemoryStats(const Backend &) { return {}; }

} // namespace mpc
