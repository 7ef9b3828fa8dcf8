// The order in which both backends add the terms of a long sum: a bias
// gradient (mpc.SumToShape, SumToShapeAs) or LayerNormalizationGrad's
// dScale/dBias, each a column sum down thousands of rows.
//
// The terms, in the order of their row-major index, are taken in chunks of
// kSumChunk: each chunk is summed from zero in order, then the chunk sums
// are added from zero in order. The CPU kernels walk the chunks one after
// another; the GPU sums every chunk of every column at once and the chunk
// sums in a second pass, so the two give the same bits while the GPU has
// thousands of threads at work instead of one per column. A sum of at most
// kSumChunk terms is the plain sum in order (0 + s == s), as before chunks.
#pragma once

#include "ir/host_device.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace mpc {

/// Terms per chunk: enough threads for the GPU (an 8192-row bias gradient
/// becomes 128 chunks per column, 98,304 threads for a 768-wide layer: 256
/// rows a chunk left LayerNormalizationGrad's 768 columns at 213 us on an
/// H200), few enough for a short serial walk.
constexpr int64_t kSumChunk = 64;

/// Chunks of a sum of `terms` terms (at least 1).
MPC_HD int64_t sumChunks(int64_t terms) {
  return terms <= kSumChunk ? 1 : (terms + kSumChunk - 1) / kSumChunk;
}

/// Bytes of fp32 chunk sums the GPU keeps for `sums` sums of `terms` terms
/// each: none when a sum is one chunk (the kernel then writes it directly).
inline size_t chunkSumBytes(int64_t terms, int64_t sums) {
  int64_t chunks = sumChunks(terms);
  return chunks > 1 ? size_t(chunks * sums) * sizeof(float) : 0;
}

/// The CPU closing a chunk: each sum's chunk sum joins its total (in
/// order, chunk after chunk) and the chunk starts again from zero.
template <typename C> void addChunkSums(C *totals, C *chunk, size_t n) {
  for (size_t j = 0; j < n; ++j) {
    totals[j] += chunk[j];
    chunk[j] = C(0);
  }
}
template <typename C>
void addChunkSums(std::vector<C> &totals, std::vector<C> &chunk) {
  addChunkSums(totals.data(), chunk.data(), totals.size());
}

} // namespace mpc
