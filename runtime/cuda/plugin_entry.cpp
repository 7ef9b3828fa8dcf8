// The CUDA backend plugin's entry point (libmpc_cuda_backend.so): the table
// of runtime/cuda/plugin_abi.h over the backend's functions. Built only into
// the plugin, not into the static mpc_cuda that the tests link.
#include "runtime/cuda/plugin_abi.h"

namespace {

mpc::Backend *createBackend(std::string &whyNot,
                            const mpc::CudaBackendOptions &options) {
  return mpc::createCudaBackend(whyNot, options).release();
}

const mpc::CudaPluginApi kApi = {
    mpc::kCudaPluginAbiVersion,
    uint32_t(sizeof(mpc::CudaBackendOptions)),
    uint32_t(sizeof(mpc::CudaMemoryStats)),
    &createBackend,
    &mpc::cudaMemoryStats,
};

} // namespace

extern "C" __attribute__((visibility("default"))) const mpc::CudaPluginApi *
mpc_cuda_plugin_api() {
  return &kApi;
}
