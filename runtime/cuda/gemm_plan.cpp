// Gemm/MatMul planning: the column-major mapping and MatMul's (and
// mpc.FusedMatMul's) batches.
#include "runtime/cuda/gemm_plan.h"

#include "kernels/cpu/cpu_util.h"

namespace mpc {
namespace cuda {

ColumnMajorGemm toColumnMajor(const GemmProblem &p) {
  ColumnMajorGemm c;
  c.transFirst = p.transB;
  c.transSecond = p.transA;
  c.m = p.n;
  c.n = p.m;
  c.k = p.k;
  // Leading dimensions are the row lengths of the row-major operands, never
  // below 1 (cuBLAS rejects 0 even when a dimension is empty).
  c.ldFirst = std::max<int64_t>(1, p.transB ? p.k : p.n);
  c.ldSecond = std::max<int64_t>(1, p.transA ? p.m : p.k);
  c.ldc = std::max<int64_t>(1, p.n);
  c.strideFirst = p.strideB;
  c.strideSecond = p.strideA;
  c.strideC = p.strideC;
  c.batch = p.batch;
  return c;
}

bool isEpilogueBias(const std::vector<int64_t> &c, float beta, int64_t n) {
  if (beta != 1.0f || c.empty() || c.size() > 2 || c.back() != n)
    return false;
  return c.size() == 1 || c[0] == 1;
}

MatMulPlan planMatMul(const Node &node, const std::vector<int64_t> &a,
                      const std::vector<int64_t> &b, bool transA, bool transB) {
  using cpu::fail;
  using cpu::shapeString;
  if (a.empty() || b.empty())
    fail(node, "operands must have rank >= 1");
  if ((transA && a.size() < 2) || (transB && b.size() < 2))
    fail(node, "a transposed operand must have rank >= 2, got ", shapeString(a),
         " and ", shapeString(b));
  std::vector<int64_t> da = a, db = b;
  bool vecA = da.size() == 1, vecB = db.size() == 1;
  if (vecA)
    da.insert(da.begin(), 1);
  if (vecB)
    db.push_back(1);
  MatMulPlan p;
  p.transA = transA;
  p.transB = transB;
  size_t ra = da.size(), rb = db.size();
  p.m = da[transA ? ra - 1 : ra - 2];
  p.k = da[transA ? ra - 2 : ra - 1];
  int64_t kb = db[transB ? rb - 1 : rb - 2];
  p.n = db[transB ? rb - 2 : rb - 1];
  if (p.k != kb)
    fail(node, "inner dimensions differ: ", shapeString(a),
         (transA ? " (transposed)" : ""), " x ", shapeString(b),
         (transB ? " (transposed)" : ""));
  std::vector<int64_t> batchA(da.begin(), da.end() - 2);
  std::vector<int64_t> batchB(db.begin(), db.end() - 2);
  std::vector<int64_t> batch = cpu::broadcastShapes(node, batchA, batchB);
  p.outDims = batch;
  if (!vecA)
    p.outDims.push_back(p.m);
  if (!vecB)
    p.outDims.push_back(p.n);
  int64_t numBatch = cpu::checkedCount(node, batch);
  std::vector<int64_t> sa = cpu::broadcastStrides(batchA, batch);
  std::vector<int64_t> sb = cpu::broadcastStrides(batchB, batch);
  const std::vector<int64_t> strides[2] = {sa, sb};
  cpu::StridedWalker<2> w(batch, strides);
  for (int64_t i = 0; i < numBatch; ++i, w.next()) {
    p.offsetA.push_back(w.offset(0) * p.m * p.k);
    p.offsetB.push_back(w.offset(1) * p.k * p.n);
  }
  if (numBatch > 1) {
    p.strideA = p.offsetA[1] - p.offsetA[0];
    p.strideB = p.offsetB[1] - p.offsetB[0];
  }
  for (int64_t i = 0; i < numBatch; ++i)
    p.uniform = p.uniform && p.offsetA[size_t(i)] == i * p.strideA &&
                p.offsetB[size_t(i)] == i * p.strideB;
  return p;
}

} // namespace cuda
} // namespace mpc
