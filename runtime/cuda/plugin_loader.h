// mpc-run's way to the CUDA backend: in a CUDA build, the plugin
// libmpc_cuda_backend.so loaded on first use (after a cheap probe of the
// driver, runtime/cuda/driver_probe.h), so that runs that never touch the
// GPU never load the CUDA runtime, cuBLAS or cuDNN; in a build without
// CUDA, the stub of runtime/cuda/no_cuda_backend.cpp.
#pragma once

#include "runtime/cuda/cuda_backend.h"

#include <memory>
#include <string>

namespace mpc {

/// The outcome of asking for the CUDA backend.
struct CudaBackendAttempt {
  /// The backend, or nullptr with `whyNot` saying why in one line.
  std::unique_ptr<Backend> backend;
  std::string whyNot;
  /// The driver sees a device but the plugin could not be loaded (a missing
  /// or broken file): an installation problem worth a note even where the
  /// CPU is an acceptable answer.
  bool pluginProblem = false;
};

/// The CUDA backend: probes the driver, then loads the plugin (once per
/// process, never unloaded: the backends' code lives there) and creates the
/// backend. The plugin is the file $MPC_CUDA_PLUGIN names, else
/// `pluginFile` when given (the Python module's, found beside the module),
/// else libmpc_cuda_backend.so beside the executable. The plugin resolves
/// libmpc's symbols against the process: an executable exports them
/// (mpc-run), a module loaded locally must first be made global.
CudaBackendAttempt loadCudaBackend(const CudaBackendOptions &options,
                                   const std::string &pluginFile = "");

/// cudaMemoryStats() of a backend loadCudaBackend() made (all zero for any
/// other backend).
CudaMemoryStats loadedCudaMemoryStats(const Backend &backend);

} // namespace mpc
