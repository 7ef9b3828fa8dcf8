// CPU kernels of mpc.LogSigmoid and mpc.LogSigmoidGrad (fuse-log-sigmoid's
// op and its gradient), kept beside the other kernel families'
// declarations in cpu_util.h but in their own header so that adding them
// recompiles only the backend's table.
#pragma once

#include "kernels/cpu/cpu_util.h"

#include <vector>

namespace mpc {
namespace cpu {

/// mpc.LogSigmoid and mpc.LogSigmoidGrad.
std::vector<KernelEntry> logSigmoidKernels();

} // namespace cpu
} // namespace mpc
