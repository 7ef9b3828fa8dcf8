// device="cuda" for the Python module (python/cuda_device.h).
#include "python/cuda_device.h"

#include "runtime/cuda/plugin_loader.h"
#include "support/diagnostics.h"

#include <dlfcn.h>
#include <filesystem>

namespace mpc {
namespace {

/// This module's file, through the dynamic loader ("" when it cannot say).
std::string moduleFile() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void *>(&moduleFile), &info) && info.dli_fname)
    return info.dli_fname;
  return "";
}

/// The plugin beside the module (pip install) or in bin/ beside the build
/// tree's python/; "" for the loader's own search.
std::string pluginBesideModule(const std::string &module) {
  if (module.empty())
    return "";
  namespace fs = std::filesystem;
  fs::path dir = fs::path(module).parent_path();
  const char *file = "libmpc_cuda_backend.so";
  for (const fs::path &candidate :
       {dir / file, dir.parent_path() / "bin" / file}) {
    std::error_code ec;
    if (fs::is_regular_file(candidate, ec))
      return candidate.string();
  }
  return "";
}

} // namespace

std::unique_ptr<Backend> createModuleCudaBackend(int ordinal) {
  std::string module = moduleFile();
  // Python loads extension modules with RTLD_LOCAL; the plugin resolves
  // libmpc's symbols (which this module carries) in the global scope, so
  // the module joins it first. RTLD_NOLOAD: only the loaded module, never
  // a second copy; the handle is kept for the life of the process.
  if (!module.empty())
    dlopen(module.c_str(), RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL);
  CudaBackendOptions options;
  options.device = ordinal;
  CudaBackendAttempt attempt =
      loadCudaBackend(options, pluginBesideModule(module));
  if (!attempt.backend)
    throw Error("device 'cuda" +
                (ordinal ? ":" + std::to_string(ordinal) : std::string()) +
                "': " + attempt.whyNot + " (use device='cpu')");
  return std::move(attempt.backend);
}

} // namespace mpc
