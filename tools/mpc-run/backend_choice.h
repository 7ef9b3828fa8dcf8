// mpc-run's choice of backend: --device (or $MPC_DEVICE) to a Backend.
#pragma once

#include "runtime/backend.h"
#include "runtime/cuda/plugin_loader.h"

#include <memory>
#include <string>

namespace mpc {

/// The device asked for: --device, else $MPC_DEVICE, else auto.
std::string resolveDevice(std::string device);

/// The backend the device names; auto is cuda when this build has the CUDA
/// backend and a usable GPU is there (what a user of a GPU machine
/// expects), else cpu; cuda that cannot be had is an error saying why (no
/// CUDA in this build, no driver, no device, no loadable plugin). cpu never
/// loads the CUDA backend's plugin (runtime/cuda/plugin_loader.h).
std::unique_ptr<Backend> makeBackend(const std::string &device,
                                     const CudaBackendOptions &options = {});

} // namespace mpc
