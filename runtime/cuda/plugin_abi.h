// The interface between mpc-run and the CUDA backend plugin
// (libmpc_cuda_backend.so): one exported C symbol returning a table of the
// backend's entry points, with the version of this interface.
//
// mpc-run loads the plugin only when a run asks for the CUDA backend
// (runtime/cuda/plugin_loader.h); the plugin resolves its libmpc references
// against mpc-run, so the two must come from one build. The version and the
// sizes below catch a plugin from another build of another layout; they
// cannot catch every difference, so keep mpc-run and its plugin together
// (they are built together and tools/gpu-check.sh bundles both).
#pragma once

#include "runtime/cuda/cuda_backend.h"

#include <cstdint>

namespace mpc {

/// Bump on any change to CudaPluginApi, CudaBackendOptions, CudaMemoryStats
/// or the Backend interface.
constexpr uint32_t kCudaPluginAbiVersion = 2;

/// The plugin's entry points (runtime/cuda/cuda_backend.h).
struct CudaPluginApi {
  uint32_t abiVersion;  ///< kCudaPluginAbiVersion of the plugin's build
  uint32_t optionsSize; ///< sizeof(CudaBackendOptions) there
  uint32_t statsSize;   ///< sizeof(CudaMemoryStats) there
  /// createCudaBackend(); the caller owns the result (deleted through
  /// Backend's virtual destructor, whose code is in the plugin).
  Backend *(*create)(std::string &whyNot, const CudaBackendOptions &options);
  /// cudaMemoryStats().
  CudaMemoryStats (*memoryStats)(const Backend &backend);
};

} // namespace mpc

/// The name of the one symbol the plugin exports for mpc-run.
#define MPC_CUDA_PLUGIN_SYMBOL "mpc_cuda_plugin_api"

extern "C" {
/// The plugin's table; never null.
using MpcCudaPluginApiFn = const mpc::CudaPluginApi *(*)();
}
