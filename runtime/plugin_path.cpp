// This executable's and a plugin's path (plugin_path.h).
#include "runtime/plugin_path.h"

#include <cstdlib>
#include <unistd.h>

namespace mpc {

std::string executablePath() {
  std::string exe(4096, '\0');
  ssize_t n = readlink("/proc/self/exe", exe.data(), exe.size());
  if (n <= 0 || size_t(n) >= exe.size())
    return "";
  exe.resize(size_t(n));
  return exe;
}

std::string pluginPath(const char *envVar, const char *file) {
  if (const char *env = std::getenv(envVar); env && *env)
    return env;
  std::string exe = executablePath();
  if (exe.empty())
    return file;
  return exe.substr(0, exe.rfind('/') + 1) + file;
}

} // namespace mpc
