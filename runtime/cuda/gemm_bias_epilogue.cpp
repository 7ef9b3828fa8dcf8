// Gemm with its bias row in cuBLASLt's epilogue (CUBLASLT_EPILOGUE_BIAS).
//
// The call is the column-major one of gemm_plan.h (first operand B, second
// A); the bias, a row of the row-major output, runs along the rows of the
// column-major D, which is the vector the epilogue adds. The numerics are
// those of the cuBLAS path: CUBLAS_COMPUTE_32F, fp32 scale, and split-K
// partial sums kept in fp32 (the reduction-scheme preference allows only
// the compute-type scheme, like CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_
// REDUCTION does for cuBLAS, and rules out the in-place scheme, whose
// atomics would make results run-to-run different). The workspace is the
// device's fixed cuBLAS one, so a captured CUDA graph holds its address
// and nothing is allocated inside a step.
#include "runtime/cuda/gemm_bias_epilogue.h"

#include "runtime/cuda/cuda_device.h"
#include "runtime/cuda/node_staging.h"

#include <cublasLt.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <type_traits>

namespace mpc {
namespace cuda {
namespace {

/// The largest power of two (at most 256, cuBLASLt's default demand) that
/// divides the address: what an operand can promise the heuristic.
uint32_t alignmentOf(const void *p) {
  uintptr_t v = reinterpret_cast<uintptr_t>(p);
  uint32_t a = 256;
  while (a > 1 && v % a != 0)
    a /= 2;
  return a;
}

struct DescDeleter {
  void operator()(cublasLtMatmulDescOpaque_t *d) const {
    cublasLtMatmulDescDestroy(d);
  }
  void operator()(cublasLtMatrixLayoutOpaque_t *l) const {
    cublasLtMatrixLayoutDestroy(l);
  }
  void operator()(cublasLtMatmulPreferenceOpaque_t *p) const {
    cublasLtMatmulPreferenceDestroy(p);
  }
};
using MatmulDesc = std::unique_ptr<cublasLtMatmulDescOpaque_t, DescDeleter>;
using Layout = std::unique_ptr<cublasLtMatrixLayoutOpaque_t, DescDeleter>;
using Preference =
    std::unique_ptr<cublasLtMatmulPreferenceOpaque_t, DescDeleter>;

template <typename T>
void setAttr(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr,
             const T &v) {
  checkCublas(cublasLtMatmulDescSetAttribute(d, attr, &v, sizeof(v)),
              "cublasLtMatmulDescSetAttribute");
}

template <typename T>
void setPref(cublasLtMatmulPreference_t p,
             cublasLtMatmulPreferenceAttributes_t attr, const T &v) {
  checkCublas(cublasLtMatmulPreferenceSetAttribute(p, attr, &v, sizeof(v)),
              "cublasLtMatmulPreferenceSetAttribute");
}

/// A column-major rows x cols matrix with leading dimension ld.
Layout layout(cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld) {
  cublasLtMatrixLayout_t l = nullptr;
  checkCublas(
      cublasLtMatrixLayoutCreate(&l, type, uint64_t(rows), uint64_t(cols), ld),
      "cublasLtMatrixLayoutCreate");
  return Layout(l);
}

std::atomic<uint64_t> hitCount{0}, fallbackCount{0};
std::mutex firstFallbackMutex;
std::string firstFallbackProblem; ///< guarded by firstFallbackMutex

void countFallback(DType t, const ColumnMajorGemm &g, uint32_t alignFirst,
                   uint32_t alignSecond, uint32_t alignBias, uint32_t alignD) {
  if (fallbackCount.fetch_add(1) != 0)
    return;
  char buf[160];
  std::snprintf(buf, sizeof buf,
                "%s m %lld n %lld k %lld, alignment %u/%u/%u/%u bytes",
                dtypeName(t), (long long)g.m, (long long)g.n, (long long)g.k,
                alignFirst, alignSecond, alignBias, alignD);
  std::lock_guard<std::mutex> lock(firstFallbackMutex);
  firstFallbackProblem = buf;
}

} // namespace

EpilogueCounts epilogueCounts() {
  EpilogueCounts c;
  c.hits = hitCount.load();
  c.fallbacks = fallbackCount.load();
  std::lock_guard<std::mutex> lock(firstFallbackMutex);
  c.firstFallback = firstFallbackProblem;
  return c;
}

EpilogueCounts epilogueDelta(const EpilogueCounts &later,
                             const EpilogueCounts &earlier) {
  EpilogueCounts d = later;
  d.hits -= earlier.hits;
  d.fallbacks -= earlier.fallbacks;
  return d;
}

std::string epilogueReport(const EpilogueCounts &total, size_t steps) {
  if (steps == 0 || total.hits + total.fallbacks == 0)
    return "";
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "cuBLASLt bias epilogue per step: %.1f hits, %.1f fallbacks "
                "(cuBLAS + a bias pass)%s%s",
                double(total.hits) / double(steps),
                double(total.fallbacks) / double(steps),
                total.fallbacks ? "; first fallback: " : "",
                total.fallbacks ? total.firstFallback.c_str() : "");
  return buf;
}

bool runGemmBiasEpilogue(NodeStaging &s, DType t, const GemmProblem &p,
                         float alpha, const void *a, const void *b,
                         const void *bias, void *y) {
  CudaDevice &dev = s.cudaDevice();
  ColumnMajorGemm g = toColumnMajor(p);
  cudaDataType_t type = cublasDataType(t);
  uint32_t alignFirst = alignmentOf(b), alignSecond = alignmentOf(a);
  uint32_t alignBias = alignmentOf(bias), alignD = alignmentOf(y);

  cublasLtMatmulDesc_t rawDesc = nullptr;
  checkCublas(
      cublasLtMatmulDescCreate(&rawDesc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
      "cublasLtMatmulDescCreate");
  MatmulDesc desc(rawDesc);
  setAttr(rawDesc, CUBLASLT_MATMUL_DESC_TRANSA,
          int32_t(g.transFirst ? CUBLAS_OP_T : CUBLAS_OP_N));
  setAttr(rawDesc, CUBLASLT_MATMUL_DESC_TRANSB,
          int32_t(g.transSecond ? CUBLAS_OP_T : CUBLAS_OP_N));
  setAttr(rawDesc, CUBLASLT_MATMUL_DESC_EPILOGUE,
          uint32_t(CUBLASLT_EPILOGUE_BIAS));
  setAttr(rawDesc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
  setAttr(rawDesc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, int32_t(type));

  // Stored shapes: op(first) is m x k, op(second) k x n, D m x n.
  Layout first = g.transFirst ? layout(type, g.k, g.m, g.ldFirst)
                              : layout(type, g.m, g.k, g.ldFirst);
  Layout second = g.transSecond ? layout(type, g.n, g.k, g.ldSecond)
                                : layout(type, g.k, g.n, g.ldSecond);
  Layout out = layout(type, g.m, g.n, g.ldc);

  std::vector<int64_t> key = {
      int64_t(t),  g.transFirst, g.transSecond, g.m,   g.n,
      g.k,         g.ldFirst,    g.ldSecond,    g.ldc, alignFirst,
      alignSecond, alignBias,    alignD};
  auto found = dev.ltChoices.find(key);
  if (found == dev.ltChoices.end()) {
    cublasLtMatmulPreference_t rawPref = nullptr;
    checkCublas(cublasLtMatmulPreferenceCreate(&rawPref),
                "cublasLtMatmulPreferenceCreate");
    Preference pref(rawPref);
    setPref(rawPref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
            uint64_t(CudaDevice::kCublasWorkspace));
    setPref(rawPref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
            uint32_t(CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE));
    setPref(rawPref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, alignFirst);
    setPref(rawPref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, alignSecond);
    setPref(rawPref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, alignD);
    setPref(rawPref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, alignD);
    cublasLtMatmulHeuristicResult_t result{};
    int count = 0;
    cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(
        dev.cublasLt, rawDesc, first.get(), second.get(), out.get(), out.get(),
        rawPref, 1, &result, &count);
    CudaDevice::LtChoice choice;
    choice.found = st == CUBLAS_STATUS_SUCCESS && count > 0 &&
                   result.state == CUBLAS_STATUS_SUCCESS &&
                   result.workspaceSize <= CudaDevice::kCublasWorkspace;
    if (choice.found)
      choice.algo = result.algo;
    found = dev.ltChoices.emplace(key, choice).first;
  }
  if (!found->second.found) {
    countFallback(t, g, alignFirst, alignSecond, alignBias, alignD);
    return false;
  }
  const float beta = 0.0f;
  checkCublas(cublasLtMatmul(dev.cublasLt, rawDesc, &alpha, b, first.get(), a,
                             second.get(), &beta, y, out.get(), y, out.get(),
                             &found->second.algo, dev.cublasWorkspace,
                             CudaDevice::kCublasWorkspace, s.stream()),
              "cublasLtMatmul");
  hitCount.fetch_add(1);
  return true;
}

} // namespace cuda
} // namespace mpc
