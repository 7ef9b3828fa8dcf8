// A cheap answer to "is there a CUDA device here?": asks the driver
// (libcuda.so.1) directly, without the CUDA runtime, cuBLAS or cuDNN, so that
// mpc-run can decide to load the CUDA backend plugin, or not, in a few
// milliseconds.
#pragma once

#include <string>

namespace mpc {

/// Why the CUDA driver offers no device ("no CUDA driver found (...)", "no
/// CUDA device found (...)", ...), or "" when it sees at least one (which
/// the backend may still refuse: too old a GPU, a runtime newer than the
/// driver). Opens libcuda.so.1, or the library $MPC_CUDA_DRIVER names (for
/// tests), and keeps it open: the CUDA runtime opens the same one next.
std::string cudaDriverProblem();

} // namespace mpc
