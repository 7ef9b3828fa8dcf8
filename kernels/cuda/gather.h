// Host entry points of the CUDA Gather kernels (kernels/cuda/gather.cu):
// Gather along one axis and its gradient mpc.GatherGrad, the embedding
// gradient (a deterministic scatter-add).
//
// data is seen as [outer, len, inner] around the axis; the indices arrive
// validated and made non-negative (int64, one per gathered position). The
// gradient takes, per row of data, the gathered positions that read it, in
// increasing order (a counting sort of the indices, GatherRowLists, built
// where the indices are), so each output element adds its contributions in
// the order the CPU backend adds them: the same bits, and no atomics.
// ScatterElements walks the same lists per data element.
#pragma once

#include "ir/types.h"
#include "kernels/common/scatter_math.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

namespace mpc {
namespace cuda {

struct GatherShape {
  int64_t outer = 1, len = 1, inner = 1; ///< data around the axis
  int64_t numIndices = 0;
};

/// y[(o, j, i)] := data[(o, rows[j], i)] for elements of `elementSize`
/// bytes (1, 2, 4 or 8): an exact copy, any dtype.
void launchGather(size_t elementSize, const void *data, const int64_t *rows,
                  void *y, const GatherShape &shape, cudaStream_t stream);

/// For each data row r, the positions j with rows[j] == r in increasing
/// order: positions[start[r] .. start[r + 1]).
struct GatherRowLists {
  std::vector<int64_t> start;     ///< len + 1 entries
  std::vector<int64_t> positions; ///< numIndices entries
};
/// Counting sort of `rows` (each in [0, len)); stable, so positions of one
/// row stay in increasing order.
GatherRowLists gatherRowLists(const std::vector<int64_t> &rows, int64_t len);

/// dData[(o, r, i)] := sum over the positions j of row r, in order, of
/// dY[(o, j, i)], in fp32; 0 for rows no index names. start/positions are
/// device copies of a GatherRowLists. dY and dData of dtype t.
void launchGatherGrad(DType t, const void *dy, const int64_t *start,
                      const int64_t *positions, void *dData,
                      const GatherShape &shape, cudaStream_t stream);

/// ScatterElements and ScatterND over data seen as [len, inner] rows:
/// out[(e, i)] := data[(e, i)] with, for each update row p that names row e
/// (positions[start[e] .. start[e + 1]), increasing), updates[(p, i)]
/// applied in that order. With None the last one wins (raw bytes, any
/// dtype); the reductions compute in fp32 for fp32/fp16/bf16 (rounded to t
/// after each update, as the CPU kernels store each one) and exactly for
/// int32/int64. One thread per data element, so the CPU's index order is
/// kept and no atomics are needed.
void launchScatterRows(ScatterReduction r, DType t, const void *data,
                       const void *updates, const int64_t *start,
                       const int64_t *positions, void *out, int64_t len,
                       int64_t inner, cudaStream_t stream);

} // namespace cuda
} // namespace mpc
