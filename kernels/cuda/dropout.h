// Host entry points of the CUDA Dropout kernels (kernels/cuda/dropout.cu),
// training mode: the mask is drawn on the device from the shared
// counter-based generator of kernels/common/dropout_rng.h, so it is the
// CPU backend's mask bit for bit. (Inference mode and ratio 0 are copies,
// done by the runner.)
#pragma once

#include "ir/types.h"

#include <cuda_runtime_api.h>

#include <cstdint>

namespace mpc {
namespace cuda {

/// keep(i) = dropoutKeep(base, i, threshold); y := keep ? x * scale : 0;
/// mask (bool bytes, may be nullptr) := keep. x and y of dtype t. With
/// `seedOnDevice` the kernel uses base ^ *seedOnDevice: the device-resident
/// step keeps the step's seed in device memory, so a recorded step (a CUDA
/// graph) draws a new mask each time it is replayed.
void launchDropout(DType t, const void *x, void *y, uint8_t *mask, int64_t n,
                   uint64_t base, uint32_t threshold, float scale,
                   cudaStream_t stream, const uint64_t *seedOnDevice = nullptr);

/// dx := mask ? dy * scale : 0; dy and dx of dtype t.
void launchDropoutGrad(DType t, const void *dy, const uint8_t *mask, void *dx,
                       int64_t n, float scale, cudaStream_t stream);

} // namespace cuda
} // namespace mpc
