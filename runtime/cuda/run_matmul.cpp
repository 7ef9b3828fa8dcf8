// CUDA runners of Gemm and MatMul on cuBLAS (mpc.FusedMatMul, run_fused.cpp,
// runs runMatMul too).
//
//
// fp16/bf16 operands multiply on the Tensor Cores with fp32 accumulation
// (CUBLAS_COMPUTE_32F, reduced-precision split-K reductions disallowed on
// the handle) and round once to the output dtype, which is what the CPU
// backend emulates; fp32 stays fp32 (the handle's default math mode uses no
// TF32). A Gemm whose C is a bias row with beta 1 (a Linear layer) adds
// it in cuBLASLt's epilogue (gemm_bias_epilogue.h); any other C is
// broadcast into the output first and folded in by cuBLAS's beta, in fp32
// like the CPU's. Batched MatMul with uniformly
// strided batches is one cublasGemmStridedBatchedEx call; other broadcasts
// loop over the batches.
#include "ir/mpc_ops.h"
#include "kernels/cpu/cpu_util.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/elementwise.h"
#include "runtime/cuda/cuda_ops.h"
#include "runtime/cuda/gemm_bias_epilogue.h"
#include "runtime/cuda/gemm_plan.h"
#include "runtime/cuda/node_staging.h"
#include "runtime/cuda/shared_runners.h"

#include <climits>

namespace mpc {
namespace cuda {
namespace {

using cpu::fail;

int cublasInt(const Node &node, int64_t v) {
  if (v > int64_t(INT_MAX))
    fail(node, "matrix dimension ", v, " is too large for cuBLAS");
  return int(v);
}

/// C := alpha op(A) op(B) + beta C for the planned problem. k == 0 is done
/// here: cuBLAS does not define it.
void runGemmProblem(NodeStaging &s, DType t, const GemmProblem &p, float alpha,
                    float beta, const void *a, const void *b, void *c) {
  const Node &node = s.node();
  if (p.m == 0 || p.n == 0 || p.batch == 0)
    return;
  if (p.k == 0) {
    int64_t count = p.m * p.n * p.batch;
    if (beta == 0.0f)
      MPC_CUDA_CHECK(
          cudaMemsetAsync(c, 0, size_t(count) * dtypeSize(t), s.stream()));
    else
      launchScale(t, c, count, beta, s.stream());
    return;
  }
  ColumnMajorGemm g = toColumnMajor(p);
  cudaDataType_t type = cublasDataType(t);
  cublasOperation_t opFirst = g.transFirst ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opSecond = g.transSecond ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (g.batch == 1) {
    checkCublas(cublasGemmEx(s.cublas(), opFirst, opSecond,
                             cublasInt(node, g.m), cublasInt(node, g.n),
                             cublasInt(node, g.k), &alpha, b, type,
                             cublasInt(node, g.ldFirst), a, type,
                             cublasInt(node, g.ldSecond), &beta, c, type,
                             cublasInt(node, g.ldc), CUBLAS_COMPUTE_32F,
                             CUBLAS_GEMM_DEFAULT),
                "cublasGemmEx");
    return;
  }
  checkCublas(cublasGemmStridedBatchedEx(
                  s.cublas(), opFirst, opSecond, cublasInt(node, g.m),
                  cublasInt(node, g.n), cublasInt(node, g.k), &alpha, b, type,
                  cublasInt(node, g.ldFirst), g.strideFirst, a, type,
                  cublasInt(node, g.ldSecond), g.strideSecond, &beta, c, type,
                  cublasInt(node, g.ldc), g.strideC, cublasInt(node, g.batch),
                  CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
              "cublasGemmStridedBatchedEx");
}

void runGemm(NodeStaging &s) {
  const Node &node = s.node();
  const Tensor &a = s.in(0, "A"), &b = s.in(1, "B");
  const Tensor *c = s.optionalIn(2);
  if (a.dims.size() != 2 || b.dims.size() != 2)
    fail(node, "A and B must be 2-D, got ", cpu::shapeString(a.dims), " and ",
         cpu::shapeString(b.dims));
  if (a.dtype != b.dtype || (c && c->dtype != a.dtype))
    fail(node, "operands have different element types");
  requireDeviceFloat(node, a, "A");
  GemmProblem p;
  p.transA = node.attrInt("transA", 0) != 0;
  p.transB = node.attrInt("transB", 0) != 0;
  p.m = p.transA ? a.dims[1] : a.dims[0];
  p.k = p.transA ? a.dims[0] : a.dims[1];
  int64_t kb = p.transB ? b.dims[1] : b.dims[0];
  p.n = p.transB ? b.dims[0] : b.dims[1];
  if (p.k != kb)
    fail(node, "inner dimensions differ: A ", cpu::shapeString(a.dims),
         (p.transA ? " (transposed)" : ""), ", B ", cpu::shapeString(b.dims),
         (p.transB ? " (transposed)" : ""));
  std::vector<int64_t> dims = {p.m, p.n};
  if (c) {
    if (c->dims.size() > 2)
      fail(node, "C must have rank <= 2, got ", cpu::shapeString(c->dims));
    for (size_t i = 0; i < c->dims.size(); ++i) {
      int64_t want = dims[2 - c->dims.size() + i];
      if (c->dims[i] != 1 && c->dims[i] != want)
        fail(node, "C of shape ", cpu::shapeString(c->dims),
             " does not broadcast to ", cpu::shapeString(dims));
    }
  }
  float alpha = node.attrFloat("alpha", 1.0f);
  float beta = c ? node.attrFloat("beta", 1.0f) : 0.0f;
  void *y = s.out(0, a.dtype, dims);
  if (c && isEpilogueBias(c->dims, beta, p.n) && p.m > 0 && p.n > 0 &&
      p.k > 0 &&
      runGemmBiasEpilogue(s, a.dtype, p, alpha, s.device(0), s.device(1),
                          s.device(2), y))
    return;
  if (c && beta != 0.0f) {
    const std::vector<int64_t> shapes[1] = {c->dims};
    launchBroadcastCopy(dtypeSize(a.dtype), s.device(2), y,
                        makeBroadcastGeometry<1>(dims, shapes), s.stream());
  } else {
    beta = 0.0f;
  }
  runGemmProblem(s, a.dtype, p, alpha, beta, s.device(0), s.device(1), y);
}

} // namespace

/// MatMul, and mpc.FusedMatMul (transA/transB: the operand's last two axes
/// swapped, passed to cuBLAS as an op flag instead of a transposed copy).
void runMatMul(NodeStaging &s) {
  const Node &node = s.node();
  const Tensor &a = s.in(0, "A"), &b = s.in(1, "B");
  if (a.dtype != b.dtype)
    fail(node, "operands have different element types (", dtypeName(a.dtype),
         " and ", dtypeName(b.dtype), ")");
  requireDeviceFloat(node, a, "A");
  bool fused = node.domain() == kMpcDomain;
  if (fused && (a.dims.size() < 2 || b.dims.size() < 2))
    fail(node, "operands must have rank >= 2, got ", cpu::shapeString(a.dims),
         " and ", cpu::shapeString(b.dims));
  MatMulPlan plan =
      planMatMul(node, a.dims, b.dims, fused && node.attrInt("transA", 0) != 0,
                 fused && node.attrInt("transB", 0) != 0);
  void *y = s.out(0, a.dtype, plan.outDims);
  const void *da = s.device(0), *db = s.device(1);
  GemmProblem p;
  p.transA = plan.transA;
  p.transB = plan.transB;
  p.m = plan.m;
  p.n = plan.n;
  p.k = plan.k;
  p.strideC = p.m * p.n;
  if (plan.uniform) {
    p.batch = int64_t(plan.offsetA.size());
    p.strideA = plan.strideA;
    p.strideB = plan.strideB;
    runGemmProblem(s, a.dtype, p, 1.0f, 0.0f, da, db, y);
    return;
  }
  size_t size = dtypeSize(a.dtype);
  for (size_t i = 0; i < plan.offsetA.size(); ++i)
    runGemmProblem(s, a.dtype, p, 1.0f, 0.0f,
                   static_cast<const char *>(da) + plan.offsetA[i] * size,
                   static_cast<const char *>(db) + plan.offsetB[i] * size,
                   static_cast<char *>(y) + int64_t(i) * p.strideC * size);
}

std::string checkGemm(const Node &node) {
  return requireDeviceFloat(node, {0, 1, 2});
}

std::vector<CudaOpEntry> matmulOps() {
  return {
      {"", "Gemm", runGemm, checkGemm},
      {"", "MatMul", runMatMul, checkGemm},
  };
}

} // namespace cuda
} // namespace mpc
