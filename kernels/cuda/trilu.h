// Host entry point of the CUDA Trilu kernel (kernels/cuda/trilu.cu).
//
// Keeps the elements of each row that kernels/common/trilu_math.h keeps
// and writes 0 elsewhere, for elements of 1, 2, 4 or 8 bytes (every dtype:
// all-zero bytes are 0 in each), so the CPU and the GPU agree bit for bit.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace mpc {
namespace cuda {

/// y = Trilu(x) over `matrices` matrices of [rows, cols] elements of
/// `elementSize` bytes (1, 2, 4 or 8). y may be x.
void launchTrilu(size_t elementSize, const void *x, void *y, int64_t matrices,
                 int64_t rows, int64_t cols, int64_t k, bool upper,
                 cudaStream_t stream);

} // namespace cuda
} // namespace mpc
