// Gemm with its bias row added in cuBLASLt's epilogue.
//
// A Linear layer's Gemm (C a row of n elements, beta 1; isEpilogueBias in
// gemm_plan.h) needs no broadcast copy of the bias into the output and no
// second pass over it: cublasLtMatmul with CUBLASLT_EPILOGUE_BIAS adds the
// vector to alpha op(A) op(B) in fp32 and rounds once to the output dtype.
#pragma once

#include "ir/types.h"
#include "runtime/cuda/gemm_plan.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace mpc {
namespace cuda {

class NodeStaging;

/// y[m, n] = alpha op(a) op(b) + bias[n] for a single (batch 1) problem with
/// k > 0, all of dtype t on s's stream. Returns false, having launched
/// nothing, when cuBLASLt offers no algorithm for the problem (odd
/// alignments, say); the caller then takes the cuBLAS path.
bool runGemmBiasEpilogue(NodeStaging &s, DType t, const GemmProblem &p,
                         float alpha, const void *a, const void *b,
                         const void *bias, void *y);

/// How often runGemmBiasEpilogue ran the epilogue (hits) and found no
/// algorithm (fallbacks: the caller's broadcast copy and cuBLAS, a pass
/// more over the output), counted over the process, with the first
/// fallback's problem: MPC_CUDA_PROFILE reports them, so a fallback that
/// hides the bias folding's gain is seen.
struct EpilogueCounts {
  uint64_t hits = 0, fallbacks = 0;
  std::string firstFallback; ///< "fp16 m 8192 n 768 k 768, alignment ..."
};
EpilogueCounts epilogueCounts();

/// The counts of `later` minus those of `earlier` (firstFallback: later's).
EpilogueCounts epilogueDelta(const EpilogueCounts &later,
                             const EpilogueCounts &earlier);

/// The profile's line for the counts `total` summed over `steps` timed
/// steps: "cuBLASLt bias epilogue per step: H hits, F fallbacks ..."; empty
/// when no Gemm tried the epilogue.
std::string epilogueReport(const EpilogueCounts &total, size_t steps);

} // namespace cuda
} // namespace mpc
