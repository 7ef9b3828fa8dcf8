// How row-major Gemm, MatMul and mpc.FusedMatMul map onto column-major
// cuBLAS calls.
//
// Pure host arithmetic with no CUDA types, so the CPU tests check it
// (tests/backend-ops/gemm_plan_test.cpp runs the planned calls through a
// plain column-major reference and compares with the CPU backend).
//
// A row-major matrix X[r, c] is, read column-major, X^T with leading
// dimension c. So the row-major C = op(A) op(B) is computed as the
// column-major C^T = op(B)^T op(A)^T: cuBLAS's first operand is B, its
// second is A, and m and n swap.
#pragma once

#include "ir/graph.h"

#include <cstdint>
#include <vector>

namespace mpc {
namespace cuda {

/// Row-major C[m, n] = alpha op(A) op(B) + beta C, repeated over `batch`
/// matrices at element strides strideA/B/C (0: the same matrix each time).
struct GemmProblem {
  bool transA = false, transB = false;
  int64_t m = 0, n = 0, k = 0;
  int64_t batch = 1, strideA = 0, strideB = 0, strideC = 0;
};

/// The column-major call (cublasGemmStridedBatchedEx's arguments) that
/// computes a GemmProblem; "first" is the problem's B, "second" its A.
struct ColumnMajorGemm {
  bool transFirst = false, transSecond = false;
  int64_t m = 0, n = 0, k = 0; ///< of the column-major product
  int64_t ldFirst = 1, ldSecond = 1, ldc = 1;
  int64_t strideFirst = 0, strideSecond = 0, strideC = 0;
  int64_t batch = 1;
};

ColumnMajorGemm toColumnMajor(const GemmProblem &p);

/// Whether Gemm's C operand (dims `c`, scaled by `beta`) is a bias vector
/// cuBLASLt can add in its epilogue: beta == 1 and C one row of n elements
/// ([n] or [1, n]), broadcast down the m rows. In the column-major call
/// that row is a vector along D's rows, which is what CUBLASLT_EPILOGUE_BIAS
/// adds (to alpha op(A) op(B), in fp32 before the one rounding, as the CPU
/// backend does). Other C shapes or betas go through a broadcast copy and
/// cuBLAS's beta.
bool isEpilogueBias(const std::vector<int64_t> &c, float beta, int64_t n);

/// A MatMul's output shape and its products (numpy semantics: 1-D operands
/// are promoted and the added dim dropped; batch dims broadcast). With
/// transA/transB (mpc.FusedMatMul) an operand of rank >= 2 enters the
/// product with its last two axes swapped; its matrices keep their size, so
/// only m, n, k and the flags change.
struct MatMulPlan {
  std::vector<int64_t> outDims;
  bool transA = false, transB = false;
  int64_t m = 0, n = 0, k = 0;
  /// Element offsets of each product's A and B matrices; product i writes
  /// C at i * m * n.
  std::vector<int64_t> offsetA, offsetB;
  /// True when offsets are i * strideA and i * strideB (one batched call).
  bool uniform = true;
  int64_t strideA = 0, strideB = 0;
};

/// Throws mpc::Error naming the node on shapes that do not multiply (the
/// CPU backend's messages).
MatMulPlan planMatMul(const Node &node, const std::vector<int64_t> &a,
                      const std::vector<int64_t> &b, bool transA = false,
                      bool transB = false);

} // namespace cuda
} // namespace mpc
