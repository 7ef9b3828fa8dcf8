// Checks of CUDA runtime and cuBLAS return codes.
//
// Every CUDA call's status is checked and turned into an mpc::Error naming
// the call and the place, so a failing device (out of memory, a kernel built
// for another architecture, a lost driver) is one line and exit 1 in the
// tools instead of wrong numbers later. Kernel launches are checked with
// checkLaunch() right after the <<<>>>; faults inside a kernel surface at the
// next synchronising call, which is checked too.
#pragma once

#include "support/diagnostics.h"

#include <cuda_runtime_api.h>

#include <string>

namespace mpc {
namespace cuda {

[[noreturn]] inline void throwCudaError(const std::string &what,
                                        const std::string &status,
                                        const char *file, int line) {
  throw Error("CUDA error: " + what + " failed: " + status + " (" + file + ":" +
              std::to_string(line) + ")");
}

inline void checkCuda(cudaError_t status, const char *what, const char *file,
                      int line) {
  if (status != cudaSuccess)
    throwCudaError(what,
                   std::string(cudaGetErrorName(status)) + ": " +
                       cudaGetErrorString(status),
                   file, line);
}

/// Checks the launch of the kernel just started (bad configuration, no
/// kernel image for this GPU).
inline void checkLaunch(const char *kernel, const char *file, int line) {
  checkCuda(cudaGetLastError(), kernel, file, line);
}

} // namespace cuda
} // namespace mpc

#define MPC_CUDA_CHECK(expr)                                                   \
  ::mpc::cuda::checkCuda((expr), #expr, __FILE__, __LINE__)
#define MPC_CUDA_CHECK_LAUNCH(kernel)                                          \
  ::mpc::cuda::checkLaunch(kernel, __FILE__, __LINE__)
