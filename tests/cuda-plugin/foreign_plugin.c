/* A CUDA backend plugin of another build: it exports mpc-run's entry point
 * (runtime/cuda/plugin_abi.h) with an interface version no build has, which
 * mpc-run must refuse before it calls anything in the table. */
#include <stddef.h>
#include <stdint.h>

struct ForeignApi {
  uint32_t abiVersion, optionsSize, statsSize;
  void *create, *memoryStats;
};

static const struct ForeignApi kApi = {0xFFFFFFFFu, 0, 0, NULL, NULL};

const struct ForeignApi *mpc_cuda_plugin_api(void) { return &kApi; }
