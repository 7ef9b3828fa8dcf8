// A long sum by one block, in a fixed order that does not depend on how
// the threads are scheduled: the rule of kernels/common/chunked_sum.h.
//
// The terms are taken in chunks of kSumChunk in index order; the block's
// threads sum chunks side by side, each from zero in order, and thread 0
// adds the chunk sums from zero in chunk order (blockDim.x chunk sums a
// round, staged in shared memory). Every run gives the same bits, and a sum
// of at most kSumChunk terms is the plain sum in index order, the CPU
// kernels' order, bit for bit. Longer sums differ from a plain index-order
// sum by rounding only (relative error within terms x 2^-24 of the sum of
// magnitudes; about 1e-7 on a loss averaged over thousands of positions).
// It replaces one thread walking all the terms: the chunks run in
// parallel, and thread 0 walks terms/kSumChunk chunk sums.
#pragma once

#include "kernels/common/chunked_sum.h"

#include <cstdint>

namespace mpc {
namespace cuda {

/// Threads of a block running blockChunkedSum (its shared staging size).
constexpr unsigned kOrderedSumBlock = 256;

/// sum_{i < n} term(i) by the rule above, called by every thread of a block
/// of kOrderedSumBlock threads (a barrier inside); thread 0 gets the sum,
/// the other threads 0. `staged` is kOrderedSumBlock floats of shared
/// memory, free for reuse after the call.
template <typename Term>
__device__ float blockChunkedSum(int64_t n, Term term, float *staged) {
  int64_t chunks = sumChunks(n);
  float total = 0.0f;
  for (int64_t round = 0; round < chunks; round += kOrderedSumBlock) {
    int64_t chunk = round + threadIdx.x;
    if (chunk < chunks) {
      int64_t begin = chunk * kSumChunk;
      int64_t end = begin + kSumChunk < n ? begin + kSumChunk : n;
      float s = 0.0f;
      for (int64_t i = begin; i < end; ++i)
        s += term(i);
      staged[threadIdx.x] = s;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      int64_t inRound = chunks - round < int64_t(kOrderedSumBlock)
                            ? chunks - round
                            : int64_t(kOrderedSumBlock);
      for (int64_t c = 0; c < inRound; ++c)
        total += staged[c];
    }
    __syncthreads(); // staged is written again next round
  }
  return threadIdx.x == 0 ? total : 0.0f;
}

} // namespace cuda
} // namespace mpc
