/* A stand-in for the CUDA driver (libcuda.so.1) that mpc-run's driver probe
 * loads when $MPC_CUDA_DRIVER names it (runtime/cuda/driver_probe.h): it
 * reports one device, or what $MPC_FAKE_CUDA_INIT (cuInit's result) and
 * $MPC_FAKE_CUDA_DEVICES (the device count) say, so that the tests of the
 * CUDA backend plugin's loading run on machines without a GPU. It is also
 * the tests' shared library that is not a plugin. */
#include <stdlib.h>

static int envInt(const char *name, int fallback) {
  const char *v = getenv(name);
  return v && *v ? atoi(v) : fallback;
}

int cuInit(unsigned flags) {
  (void)flags;
  return envInt("MPC_FAKE_CUDA_INIT", 0);
}

int cuDeviceGetCount(int *count) {
  *count = envInt("MPC_FAKE_CUDA_DEVICES", 1);
  return 0;
}

/* Names only the error the tests use; others are unknown, as to a driver
 * older than the error. */
int cuGetErrorName(int error, const char **name) {
  if (error != 100)
    return 1; /* CUDA_ERROR_INVALID_VALUE */
  *name = "CUDA_ERROR_NO_DEVICE";
  return 0;
}

int cuGetErrorString(int error, const char **text) {
  if (error != 100)
    return 1;
  *text = "no CUDA-capable device is detected";
  return 0;
}
