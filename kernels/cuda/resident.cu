// Device-side index and label preparation for the device-resident step
// (resident.h): no value leaves the device, bad data sets the error word.
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_io.cuh"
#include "kernels/cuda/resident.h"

#include <cub/device/device_radix_sort.cuh>

namespace mpc {
namespace cuda {
namespace {

__device__ inline int64_t loadIndex(const void *p, bool is64, int64_t i) {
  return is64 ? static_cast<const int64_t *>(p)[i]
              : int64_t(static_cast<const int32_t *>(p)[i]);
}

__device__ inline void flagError(int32_t *error, int32_t code) {
  if (error)
    atomicCAS(error, 0, code);
}

__global__ void normalizeIndicesKernel(const void *idx, bool idx64, int64_t n,
                                       int64_t len, int64_t *rows,
                                       int32_t *error, int32_t code) {
  for (int64_t j = globalIndex(); j < n; j += globalStride()) {
    int64_t v = loadIndex(idx, idx64, j);
    if (v < -len || v >= len) {
      flagError(error, code);
      v = 0; // stays inside the data; the step is reported as failed
    }
    rows[j] = v < 0 ? v + len : v;
  }
}

__global__ void gatherElementsOffsetsKernel(const void *idx, bool idx64,
                                            GatherElementsWalk w,
                                            int64_t *offsets, int32_t *error,
                                            int32_t code) {
  for (int64_t i = globalIndex(); i < w.walk.count; i += globalStride()) {
    int64_t v = loadIndex(idx, idx64, i);
    if (v < -w.len || v >= w.len) {
      flagError(error, code);
      v = 0; // stays inside the data; the step is reported as failed
    }
    offsets[i] = w.offset(i, v);
  }
}

__global__ void iotaKernel(int64_t *v, int64_t n) {
  for (int64_t j = globalIndex(); j < n; j += globalStride())
    v[j] = j;
}

/// start[r] := how many sorted rows are below r, for r in [0, len]. Thread
/// i owns the rows in (sorted[i-1], sorted[i]] (sorted[-1] = -1, sorted[n]
/// = len), so every start is written once, with no atomics.
__global__ void rowStartsKernel(const int64_t *sorted, int64_t n, int64_t len,
                                int64_t *start) {
  for (int64_t i = globalIndex(); i <= n; i += globalStride()) {
    int64_t lo = i == 0 ? 0 : sorted[i - 1] + 1;
    int64_t hi = i == n ? len : sorted[i];
    for (int64_t r = lo; r <= hi; ++r)
      start[r] = i;
  }
}

__global__ void lossLabelsKernel(const void *labels, bool labels64,
                                 int64_t positions, int64_t c, bool hasIgnore,
                                 int64_t ignoreIndex, const void *classWeights,
                                 DType weightType, int64_t *labelsOut,
                                 float *weightsOut, int32_t *error,
                                 int32_t code) {
  for (int64_t p = globalIndex(); p < positions; p += globalStride()) {
    int64_t t = loadIndex(labels, labels64, p);
    if (hasIgnore && t == ignoreIndex) {
      labelsOut[p] = -1;
      weightsOut[p] = 0.0f;
      continue;
    }
    if (t < 0 || t >= c) {
      flagError(error, code);
      labelsOut[p] = -1;
      weightsOut[p] = 0.0f;
      continue;
    }
    labelsOut[p] = t;
    weightsOut[p] = classWeights ? loadAs(weightType, classWeights, t) : 1.0f;
  }
}

/// Bits that hold every row index below len (radix sort passes).
int rowBits(int64_t len) {
  int bits = 1;
  while (bits < 63 && (int64_t(1) << bits) < len)
    ++bits;
  return bits;
}

/// cub's temporary bytes for the sort launchGatherRowLists runs (the same
/// item count and bit range: the size may depend on both).
size_t sortTempBytes(int64_t n, int64_t len) {
  size_t bytes = 0;
  MPC_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
      nullptr, bytes, static_cast<const int64_t *>(nullptr),
      static_cast<int64_t *>(nullptr), static_cast<const int64_t *>(nullptr),
      static_cast<int64_t *>(nullptr), int(n), 0, rowBits(len)));
  return bytes;
}

size_t align256(size_t b) { return (b + 255) / 256 * 256; }

} // namespace

void launchNormalizeIndices(const void *idx, bool idx64, int64_t n, int64_t len,
                            int64_t *rows, int32_t *error, int32_t code,
                            cudaStream_t s) {
  if (n == 0)
    return;
  normalizeIndicesKernel<<<gridFor(n), kBlock, 0, s>>>(idx, idx64, n, len, rows,
                                                       error, code);
  MPC_CUDA_CHECK_LAUNCH("normalizeIndicesKernel");
}

void launchGatherElementsOffsets(const void *idx, bool idx64,
                                 const GatherElementsWalk &w, int64_t *offsets,
                                 int32_t *error, int32_t code, cudaStream_t s) {
  if (w.walk.count == 0)
    return;
  gatherElementsOffsetsKernel<<<gridFor(w.walk.count), kBlock, 0, s>>>(
      idx, idx64, w, offsets, error, code);
  MPC_CUDA_CHECK_LAUNCH("gatherElementsOffsetsKernel");
}

size_t gatherRowListsScratch(int64_t n, int64_t len) {
  if (n == 0)
    return 0;
  if (n > INT32_MAX)
    throw Error("GatherGrad: more than 2^31 indices on the cuda backend");
  // Sorted keys, the identity values, then cub's own temporary storage.
  return 2 * align256(size_t(n) * sizeof(int64_t)) + sortTempBytes(n, len);
}

void launchGatherRowLists(const int64_t *rows, int64_t n, int64_t len,
                          int64_t *start, int64_t *positions, void *scratch,
                          size_t scratchBytes, cudaStream_t s) {
  if (n == 0) {
    MPC_CUDA_CHECK(
        cudaMemsetAsync(start, 0, size_t(len + 1) * sizeof(int64_t), s));
    return;
  }
  if (n > INT32_MAX)
    throw Error("GatherGrad: more than 2^31 indices on the cuda backend");
  auto *base = static_cast<uint8_t *>(scratch);
  auto *sortedRows = reinterpret_cast<int64_t *>(base);
  auto *iota = reinterpret_cast<int64_t *>(base + align256(size_t(n) * 8));
  void *temp = base + 2 * align256(size_t(n) * 8);
  size_t tempBytes = scratchBytes - 2 * align256(size_t(n) * 8);
  iotaKernel<<<gridFor(n), kBlock, 0, s>>>(iota, n);
  MPC_CUDA_CHECK_LAUNCH("iotaKernel");
  // LSD radix sort is stable: the positions of one row keep their order.
  MPC_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp, tempBytes, rows,
                                                 sortedRows, iota, positions,
                                                 int(n), 0, rowBits(len), s));
  rowStartsKernel<<<gridFor(n + 1), kBlock, 0, s>>>(sortedRows, n, len, start);
  MPC_CUDA_CHECK_LAUNCH("rowStartsKernel");
}

void launchLossLabels(const void *labels, bool labels64, int64_t positions,
                      int64_t c, bool hasIgnore, int64_t ignoreIndex,
                      const void *classWeights, DType weightType,
                      int64_t *labelsOut, float *weightsOut, int32_t *error,
                      int32_t code, cudaStream_t s) {
  if (positions == 0)
    return;
  lossLabelsKernel<<<gridFor(positions), kBlock, 0, s>>>(
      labels, labels64, positions, c, hasIgnore, ignoreIndex, classWeights,
      weightType, labelsOut, weightsOut, error, code);
  MPC_CUDA_CHECK_LAUNCH("lossLabelsKernel");
}

} // namespace cuda
} // namespace mpc
