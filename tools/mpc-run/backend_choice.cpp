// mpc-run's choice of backend (tools/mpc-run/backend_choice.h).
#include "tools/mpc-run/backend_choice.h"

#include "support/diagnostics.h"

#include <cstdio>
#include <cstdlib>

namespace mpc {

std::string resolveDevice(std::string device) {
  if (device.empty()) {
    const char *env = std::getenv("MPC_DEVICE");
    device = env && *env ? env : "auto";
    if (device != "cpu" && device != "cuda" && device != "auto")
      throw Error("MPC_DEVICE: expected cpu, cuda or auto, got '" + device +
                  "'");
  }
  return device;
}

std::unique_ptr<Backend> makeBackend(const std::string &device,
                                     const CudaBackendOptions &options) {
  if (device == "cpu")
    return createCpuBackend();
  CudaBackendAttempt cuda = loadCudaBackend(options);
  if (cuda.backend)
    return std::move(cuda.backend);
  if (device == "cuda")
    throw Error("--device=cuda: " + cuda.whyNot + " (use --device=cpu)");
  // auto: the CPU, silently where there is no usable GPU; a GPU whose
  // plugin is missing or broken is an installation problem to point out.
  if (cuda.pluginProblem)
    std::fprintf(stderr,
                 "mpc-run: note: --device=auto: %s; running on the cpu\n",
                 cuda.whyNot.c_str());
  return createCpuBackend();
}

} // namespace mpc
