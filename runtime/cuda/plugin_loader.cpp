// The CUDA backend plugin's loader (see the header). Compiled into mpc-run
// only; MPC_CUDA_PLUGIN_FILE, the plugin's file name, is defined in CUDA
// builds.
#include "runtime/cuda/plugin_loader.h"

#ifdef MPC_CUDA_PLUGIN_FILE
#include "runtime/cuda/driver_probe.h"
#include "runtime/cuda/plugin_abi.h"
#include "runtime/plugin_path.h"

#include <cstdlib>
#include <dlfcn.h>
#endif

namespace mpc {

#ifdef MPC_CUDA_PLUGIN_FILE

namespace {

/// The loaded plugin's table; null until the first successful load.
const CudaPluginApi *gPlugin = nullptr;

/// dlerror()'s text without the file name it usually starts with (the
/// messages below name the file once).
std::string loadError(const std::string &path) {
  const char *err = dlerror();
  std::string text = err ? err : "unknown error";
  if (text.rfind(path + ": ", 0) == 0)
    text.erase(0, path.size() + 2);
  return text;
}

/// The plugin's table, loading the plugin on first use; null with `whyNot`.
const CudaPluginApi *plugin(const std::string &pluginFile,
                            std::string &whyNot) {
  if (gPlugin)
    return gPlugin;
  const char *env = std::getenv("MPC_CUDA_PLUGIN");
  std::string path = (env && *env) || pluginFile.empty()
                         ? pluginPath("MPC_CUDA_PLUGIN", MPC_CUDA_PLUGIN_FILE)
                         : pluginFile;
  // RTLD_NOW: a plugin whose libmpc references this executable cannot
  // satisfy fails here, with the symbol's name, not in the middle of a step.
  void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    whyNot =
        "cannot load the CUDA backend plugin " + path + ": " + loadError(path);
    return nullptr;
  }
  auto entry = reinterpret_cast<MpcCudaPluginApiFn>(
      dlsym(handle, MPC_CUDA_PLUGIN_SYMBOL));
  const CudaPluginApi *api = entry ? entry() : nullptr;
  if (!api) {
    whyNot = path + " is not an mpc CUDA backend plugin (no " +
             MPC_CUDA_PLUGIN_SYMBOL + ")";
    dlclose(handle);
    return nullptr;
  }
  if (api->abiVersion != kCudaPluginAbiVersion ||
      api->optionsSize != sizeof(CudaBackendOptions) ||
      api->statsSize != sizeof(CudaMemoryStats)) {
    whyNot = path +
             " is a CUDA backend plugin of another build (plugin "
             "interface version " +
             std::to_string(api->abiVersion) + ", mpc-run expects " +
             std::to_string(kCudaPluginAbiVersion) +
             "); use the plugin built with this mpc-run";
    dlclose(handle);
    return nullptr;
  }
  gPlugin = api;
  return gPlugin;
}

} // namespace

CudaBackendAttempt loadCudaBackend(const CudaBackendOptions &options,
                                   const std::string &pluginFile) {
  CudaBackendAttempt attempt;
  // No device, no plugin: the probe costs milliseconds, the plugin's
  // libraries ~100 ms and ~200 MB of mappings.
  attempt.whyNot = cudaDriverProblem();
  if (!attempt.whyNot.empty())
    return attempt;
  const CudaPluginApi *api = plugin(pluginFile, attempt.whyNot);
  if (!api) {
    attempt.pluginProblem = true;
    return attempt;
  }
  attempt.backend.reset(api->create(attempt.whyNot, options));
  return attempt;
}

CudaMemoryStats loadedCudaMemoryStats(const Backend &backend) {
  return gPlugin ? gPlugin->memoryStats(backend) : CudaMemoryStats{};
}

#else // no CUDA in this build: the stub answers

CudaBackendAttempt loadCudaBackend(const CudaBackendOptions &options,
                                   const std::string &) {
  CudaBackendAttempt attempt;
  attempt.backend = createCudaBackend(attempt.whyNot, options);
  return attempt;
}

CudaMemoryStats loadedCudaMemoryStats(const Backend &backend) {
  return cudaMemoryStats(backend);
}

#endif

} // namespace mpc
