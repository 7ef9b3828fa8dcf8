// Host entry points of the kernels the device-resident step needs where the
// staged backend read values on the host (kernels/cuda/resident.cu).
//
// In a device-resident step (runtime/cuda/node_staging.h) a runner never
// reads a tensor's value on the host, so what the staged runners computed
// there from indices and labels is computed here on the device: Gather's
// indices checked and made non-negative, GatherGrad's per-row position
// lists (a stable radix sort by row, so positions of a row stay in
// increasing order and the gradient adds them in the CPU backend's order),
// GatherElements' indices resolved to data offsets (which its gradient
// sorts the same way), and the loss's per-position labels and weights. Bad data
// cannot throw from a kernel: it sets the step's error word (first writer wins)
// to the node's code, and the backend reports that node after the step's
// synchronisation.
#pragma once

#include "ir/types.h"
#include "kernels/cuda/broadcast_geometry.h"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <vector>

namespace mpc {
namespace cuda {

/// rows[j] := idx[j] (+ len where negative); an index outside [-len, len)
/// sets *error := code (if still 0) and reads row 0 instead.
void launchNormalizeIndices(const void *idx, bool idx64, int64_t n, int64_t len,
                            int64_t *rows, int32_t *error, int32_t code,
                            cudaStream_t stream);

/// GatherElements' index positions over data (cpu::GatherElementsShape, as
/// a kernel argument): position i names data offset walk.offsets(i) +
/// index * axisStride, the index made non-negative.
struct GatherElementsWalk {
  BroadcastGeometry<1> walk; ///< over the indices' dims, data's strides
  int64_t len = 0, axisStride = 0;

  MPC_HD int64_t offset(int64_t i, int64_t index) const {
    int64_t off[1];
    walk.offsets(i, off);
    return off[0] + (index < 0 ? index + len : index) * axisStride;
  }
};

/// The walk for indices of dims `idx` (rank <= kMaxKernelRank, else
/// std::length_error) with data strides `walkStrides` (0 on the axis).
inline GatherElementsWalk
makeGatherElementsWalk(const std::vector<int64_t> &idx,
                       const std::vector<int64_t> &walkStrides, int64_t len,
                       int64_t axisStride) {
  if (idx.size() > size_t(kMaxKernelRank))
    throw std::length_error("rank above the cuda kernels' limit");
  GatherElementsWalk w;
  w.walk.rank = int(idx.size());
  w.walk.simple = false;
  w.walk.count = 1;
  for (size_t d = 0; d < idx.size(); ++d) {
    w.walk.dims[d] = idx[d];
    w.walk.strides[0][d] = walkStrides[d];
    w.walk.count *= idx[d];
  }
  w.len = len;
  w.axisStride = axisStride;
  return w;
}

/// offsets[i] := w.offset(i, idx[i]) for the walk's count positions; an
/// index outside [-len, len) sets *error := code and names offset 0.
void launchGatherElementsOffsets(const void *idx, bool idx64,
                                 const GatherElementsWalk &w, int64_t *offsets,
                                 int32_t *error, int32_t code,
                                 cudaStream_t stream);

/// Device scratch bytes launchGatherRowLists needs for n rows in [0, len).
size_t gatherRowListsScratch(int64_t n, int64_t len);
/// start (len + 1) and positions (n): for each row r, the j with rows[j] ==
/// r in increasing order at positions[start[r] .. start[r + 1]) (the host's
/// gatherRowLists, on the device).
void launchGatherRowLists(const int64_t *rows, int64_t n, int64_t len,
                          int64_t *start, int64_t *positions, void *scratch,
                          size_t scratchBytes, cudaStream_t stream);

/// Per position p: labelsOut[p] := -1 where labels[p] == ignoreIndex (with
/// hasIgnore), else labels[p], whose weight weightsOut[p] := float(classW
/// [label]) (1 without class weights; 0 where ignored). A label outside
/// [0, c) that is not ignored sets *error := code.
void launchLossLabels(const void *labels, bool labels64, int64_t positions,
                      int64_t c, bool hasIgnore, int64_t ignoreIndex,
                      const void *classWeights, DType weightType,
                      int64_t *labelsOut, float *weightsOut, int32_t *error,
                      int32_t code, cudaStream_t stream);

} // namespace cuda
} // namespace mpc
