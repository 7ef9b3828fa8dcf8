// device="cuda" for the Python module: the CUDA backend's plugin, loaded as
// mpc-run loads it (runtime/cuda/plugin_loader.h), found beside the module
// (a pip install) or in the build tree's bin/ beside build/python/.
#pragma once

#include "runtime/backend.h"

#include <memory>
#include <string>

namespace mpc {

/// The CUDA backend on device `ordinal`. Throws Error with the loader's
/// reason (no CUDA in this build, no driver, no device, no loadable plugin).
std::unique_ptr<Backend> createModuleCudaBackend(int ordinal);

} // namespace mpc
