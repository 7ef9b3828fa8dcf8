// Where mpc-run finds the plugins it loads on use (the CUDA backend,
// runtime/cuda/plugin_loader.h; the MPI world, runtime/world/
// launched_world.h), and itself (the ranks mpc-run --nproc-per-node starts,
// tools/mpc-run/local_launcher.h).
#pragma once

#include <string>

namespace mpc {

/// This executable's path (through /proc/self/exe), or "" when it cannot be
/// read.
std::string executablePath();

/// $envVar when it is set and not empty; else `file` beside this executable
/// (found through /proc/self/exe, so a build folder or an unpacked bundle
/// can move); else `file` alone, for the loader's search path as a last try.
std::string pluginPath(const char *envVar, const char *file);

} // namespace mpc
