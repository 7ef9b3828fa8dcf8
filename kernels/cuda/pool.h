// Host entry points of the CUDA pooling kernels (kernels/cuda/pool.cu):
// MaxPool (with Indices), AveragePool, GlobalAveragePool, mpc.MaxPoolGrad
// and mpc.AveragePoolGrad over 1 to 3 spatial dims.
//
// These are mpc's own kernels, not cuDNN's: the CPU kernels
// (kernels/cpu/conv_pool.cpp) define which element a max window picks (the
// first maximum in window order, a NaN wins: PyTorch's rule), MaxPool's Indices
// output, ceil_mode windows past the end pad and dilations, none of which
// cuDNN's pooling offers, and in which order sums are added. The device
// walks every window in the CPU's order with fp32 sums (pool_window.h), so
// every output here is the CPU backend's bits, gradients included.
#pragma once

#include "ir/types.h"
#include "kernels/cuda/pool_window.h"

#include <cuda_runtime_api.h>

#include <cstdint>

namespace mpc {
namespace cuda {

/// y (x's dtype) = the max of each window; indices (int64, may be nullptr)
/// = the flat index of the element taken, or -1 for a window over padding.
void launchMaxPool(DType t, const void *x, void *y, int64_t *indices,
                   const PoolWindow &w, cudaStream_t stream);

/// dx (dY's dtype) = each dY routed to the element its window's max took;
/// `argmax` is scratch of planes * outCount int64.
void launchMaxPoolGrad(DType dyType, const void *dy, DType xType, const void *x,
                       void *dx, int64_t *argmax, const PoolWindow &w,
                       cudaStream_t stream);

/// y (x's dtype) = each window's mean over its divisor.
void launchAveragePool(DType t, const void *x, void *y, const PoolWindow &w,
                       cudaStream_t stream);

/// dx (dY's dtype) = each dY over its window's divisor, added into every
/// element the window reads.
void launchAveragePoolGrad(DType t, const void *dy, void *dx,
                           const PoolWindow &w, cudaStream_t stream);

/// y = the mean of each of `planes` planes of `size` elements.
void launchGlobalAveragePool(DType t, const void *x, void *y, int64_t planes,
                             int64_t size, cudaStream_t stream);

} // namespace cuda
} // namespace mpc
