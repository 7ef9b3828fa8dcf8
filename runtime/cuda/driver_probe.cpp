// The CUDA driver probe (see the header): cuInit and cuDeviceGetCount
// through dlsym, so that mpc-run needs neither the toolkit's headers nor a
// link against the driver, which a machine without a GPU does not have.
#include "runtime/cuda/driver_probe.h"

#include <cstdlib>
#include <dlfcn.h>

namespace mpc {

namespace {

// The driver API's CUresult values used here (cuda.h), and its signatures
// reduced to plain ints.
constexpr int kCudaSuccess = 0;
constexpr int kCudaErrorNoDevice = 100;
using CuInit = int (*)(unsigned flags);
using CuDeviceGetCount = int (*)(int *count);
using CuGetErrorText = int (*)(int error, const char **text);

/// "CUDA_ERROR_NAME: description" of a driver error, or its number.
std::string errorText(void *driver, int error) {
  auto name = reinterpret_cast<CuGetErrorText>(dlsym(driver, "cuGetErrorName"));
  auto text =
      reinterpret_cast<CuGetErrorText>(dlsym(driver, "cuGetErrorString"));
  const char *n = nullptr, *t = nullptr;
  if (name)
    name(error, &n);
  if (text)
    text(error, &t);
  std::string out = n ? n : "CUresult " + std::to_string(error);
  if (t)
    out += std::string(": ") + t;
  return out;
}

} // namespace

std::string cudaDriverProblem() {
  const char *env = std::getenv("MPC_CUDA_DRIVER");
  std::string library = env && *env ? env : "libcuda.so.1";
  // Never closed: the CUDA runtime uses this library next, and on a machine
  // without a GPU it is a few kilobytes of mapped file at most.
  void *driver = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!driver) {
    const char *err = dlerror();
    return "no CUDA driver found (" + std::string(err ? err : library) + ")";
  }
  auto init = reinterpret_cast<CuInit>(dlsym(driver, "cuInit"));
  auto count =
      reinterpret_cast<CuDeviceGetCount>(dlsym(driver, "cuDeviceGetCount"));
  if (!init || !count)
    return "no CUDA driver found (" + library +
           " has no cuInit or cuDeviceGetCount)";
  int e = init(0);
  if (e == kCudaErrorNoDevice)
    return "no CUDA device found (" + errorText(driver, e) + ")";
  if (e != kCudaSuccess)
    return "the CUDA driver does not start (cuInit: " + errorText(driver, e) +
           ")";
  int devices = 0;
  e = count(&devices);
  if (e != kCudaSuccess)
    return "the CUDA driver cannot count devices (" + errorText(driver, e) +
           ")";
  if (devices == 0)
    return "no CUDA device found";
  return "";
}

} // namespace mpc
