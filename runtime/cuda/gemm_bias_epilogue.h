// Gemm with its bias row added in cuBLASLt's epilogue.
//
// A Linear layer's Gemm (C a row of n elements, beta 1; isEpilogueBias in
// gemm_plan.h) needs no broadcast copy of the bias into the output and no
// second pass over it: cublasLtMatmul with CUBLASLT_EPILOGUE_BIAS adds the
// vector to alpha op(A) op(B) in fp32 and rounds once to the output dtype.
#pragma once

#include "ir/types.h"
#include "runtime/cuda/gemm_plan.h"

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

} // namespace cuda
} // namespace mpc
