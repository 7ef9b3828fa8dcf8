// The CUDA backend's host-side index planning, on the CPU.
//
// The cuBLAS calls that Gemm/MatMul plan (gemm_plan.h) are executed by a
// plain column-major reference with cuBLAS's argument semantics, and the
// broadcast and SumToShape geometries the kernels use are walked on the
// host; each result is compared with the CPU backend's kernel. What the GPU
// adds on top (cuBLAS itself, the kernels' arithmetic) is backend-ops'.
#include "ir/mpc_ops.h"
#include "kernels/common/chunked_sum.h"
#include "kernels/cpu/cpu_util.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cuda/broadcast_geometry.h"
#include "op_cases.h"
#include "runtime/cuda/gemm_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

using namespace mpc;
using namespace mpc::cuda;
using namespace mpc::backend_ops;

namespace {

/// cublasGemmStridedBatchedEx's semantics on fp32 host arrays.
void referenceColumnMajorGemm(const ColumnMajorGemm &g, float alpha,
                              const float *first, const float *second,
                              float beta, float *c) {
  for (int64_t b = 0; b < g.batch; ++b) {
    const float *f = first + b * g.strideFirst;
    const float *s = second + b * g.strideSecond;
    float *cb = c + b * g.strideC;
    for (int64_t j = 0; j < g.n; ++j)
      for (int64_t i = 0; i < g.m; ++i) {
        double sum = 0;
        for (int64_t l = 0; l < g.k; ++l) {
          float x = g.transFirst ? f[l + i * g.ldFirst] : f[i + l * g.ldFirst];
          float y =
              g.transSecond ? s[j + l * g.ldSecond] : s[l + j * g.ldSecond];
          sum += double(x) * double(y);
        }
        float &out = cb[i + j * g.ldc];
        out = float(alpha * sum + (beta == 0 ? 0.0 : double(beta) * out));
      }
  }
}

std::unique_ptr<Graph> oneNode(const std::string &op,
                               const std::vector<const Tensor *> &in,
                               const Builder::Attrs &attrs, Node *&node,
                               const std::string &domain = "") {
  auto g = std::make_unique<Graph>();
  std::vector<Value *> values;
  for (size_t i = 0; i < in.size(); ++i)
    values.push_back(g->addInput("in" + std::to_string(i), in[i]->dtype,
                                 toDims(in[i]->dims)));
  node = g->createNode(op, values, 1, "node", domain);
  for (const auto &kv : attrs)
    node->setAttr(kv.first, kv.second);
  return g;
}

void expectClose(const Tensor &got, const Tensor &want,
                 const std::string &what) {
  ASSERT_EQ(got.dims, want.dims) << what;
  for (int64_t k = 0; k < want.numel(); ++k)
    EXPECT_NEAR(got.getAsDouble(k), want.getAsDouble(k),
                1e-5 * std::max(1.0, std::fabs(want.getAsDouble(k))))
        << what << " element " << k;
}

TEST(CudaGemmPlan, GemmMatchesTheCpuBackend) {
  std::mt19937 rng(1);
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      for (int bias = 0; bias < 3; ++bias) {
        int64_t m = 7, n = 5, k = 11;
        Tensor a = randomTensor(rng, DType::F32,
                                ta ? std::vector<int64_t>{k, m}
                                   : std::vector<int64_t>{m, k});
        Tensor b = randomTensor(rng, DType::F32,
                                tb ? std::vector<int64_t>{n, k}
                                   : std::vector<int64_t>{k, n});
        std::vector<int64_t> cDims = bias == 0   ? std::vector<int64_t>{n}
                                     : bias == 1 ? std::vector<int64_t>{m, 1}
                                                 : std::vector<int64_t>{m, n};
        Tensor c = randomTensor(rng, DType::F32, cDims);
        float alpha = 0.75f, beta = -1.5f;
        Node *node = nullptr;
        auto g = oneNode("Gemm", {&a, &b, &c},
                         {{"transA", Attribute::ofInt(ta)},
                          {"transB", Attribute::ofInt(tb)},
                          {"alpha", Attribute::ofFloat(alpha)},
                          {"beta", Attribute::ofFloat(beta)}},
                         node);
        std::vector<Tensor> want;
        runCpuNode(*node, {&a, &b, &c}, want);
        // What runGemm does: C broadcast into the output, then the call.
        Tensor y(DType::F32, {m, n});
        const std::vector<int64_t> shapes[1] = {cDims};
        BroadcastGeometry<1> bg = makeBroadcastGeometry<1>({m, n}, shapes);
        for (int64_t i = 0; i < bg.count; ++i) {
          int64_t off[1];
          bg.offsets(i, off);
          y.data<float>()[i] = c.data<float>()[off[0]];
        }
        GemmProblem p;
        p.transA = ta;
        p.transB = tb;
        p.m = m;
        p.n = n;
        p.k = k;
        referenceColumnMajorGemm(toColumnMajor(p), alpha, b.data<float>(),
                                 a.data<float>(), beta, y.data<float>());
        expectClose(y, want[0],
                    "Gemm transA=" + std::to_string(ta) + " transB=" +
                        std::to_string(tb) + " bias " + std::to_string(bias));
      }
}

// A bias row C ([n] or [1, n], beta 1) goes to cuBLASLt's bias epilogue:
// the column-major product with beta 0, then the vector added along D's
// rows. That equals the CPU's Gemm for every transpose and alpha.
TEST(CudaGemmPlan, BiasEpilogueMatchesTheCpuBackend) {
  std::mt19937 rng(3);
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      for (bool rowMatrix : {false, true}) {
        int64_t m = 6, n = 9, k = 4;
        Tensor a = randomTensor(rng, DType::F32,
                                ta ? std::vector<int64_t>{k, m}
                                   : std::vector<int64_t>{m, k});
        Tensor b = randomTensor(rng, DType::F32,
                                tb ? std::vector<int64_t>{n, k}
                                   : std::vector<int64_t>{k, n});
        std::vector<int64_t> cDims =
            rowMatrix ? std::vector<int64_t>{1, n} : std::vector<int64_t>{n};
        ASSERT_TRUE(isEpilogueBias(cDims, 1.0f, n));
        Tensor c = randomTensor(rng, DType::F32, cDims);
        float alpha = -0.625f;
        Node *node = nullptr;
        auto g = oneNode("Gemm", {&a, &b, &c},
                         {{"transA", Attribute::ofInt(ta)},
                          {"transB", Attribute::ofInt(tb)},
                          {"alpha", Attribute::ofFloat(alpha)}},
                         node);
        std::vector<Tensor> want;
        runCpuNode(*node, {&a, &b, &c}, want);
        GemmProblem p;
        p.transA = ta;
        p.transB = tb;
        p.m = m;
        p.n = n;
        p.k = k;
        ColumnMajorGemm cm = toColumnMajor(p);
        Tensor y(DType::F32, {m, n});
        referenceColumnMajorGemm(cm, alpha, b.data<float>(), a.data<float>(),
                                 0.0f, y.data<float>());
        ASSERT_EQ(cm.m, n); // the bias runs along the column-major rows
        for (int64_t j = 0; j < cm.n; ++j)
          for (int64_t i = 0; i < cm.m; ++i)
            y.data<float>()[i + j * cm.ldc] += c.data<float>()[i];
        expectClose(y, want[0],
                    "Gemm bias epilogue transA=" + std::to_string(ta) +
                        " transB=" + std::to_string(tb));
      }
}

// What the epilogue cannot add: a scaled C, a column, a full matrix, a
// scalar broadcast over several columns.
TEST(CudaGemmPlan, OnlyABiasRowWithBetaOneIsAnEpilogue) {
  EXPECT_TRUE(isEpilogueBias({9}, 1.0f, 9));
  EXPECT_TRUE(isEpilogueBias({1, 9}, 1.0f, 9));
  EXPECT_TRUE(isEpilogueBias({1}, 1.0f, 1));
  EXPECT_FALSE(isEpilogueBias({9}, 0.5f, 9));
  EXPECT_FALSE(isEpilogueBias({9}, 0.0f, 9));
  EXPECT_FALSE(isEpilogueBias({6, 1}, 1.0f, 9));
  EXPECT_FALSE(isEpilogueBias({6, 9}, 1.0f, 9));
  EXPECT_FALSE(isEpilogueBias({1}, 1.0f, 9));
  EXPECT_FALSE(isEpilogueBias({}, 1.0f, 9));
  EXPECT_FALSE(isEpilogueBias({1, 1, 9}, 1.0f, 9));
}

TEST(CudaGemmPlan, MatMulMatchesTheCpuBackend) {
  std::mt19937 rng(2);
  struct Shapes {
    std::vector<int64_t> a, b;
    bool uniform;
  };
  for (const Shapes &s :
       {Shapes{{5, 7}, {7, 3}, true}, Shapes{{4, 5, 7}, {4, 7, 3}, true},
        Shapes{{4, 5, 7}, {7, 3}, true}, Shapes{{5, 7}, {2, 7, 3}, true},
        Shapes{{2, 1, 5, 7}, {3, 7, 4}, false},
        Shapes{{2, 3, 5, 7}, {2, 1, 7, 4}, false}, Shapes{{7}, {7, 3}, true},
        Shapes{{4, 5, 7}, {7}, true}, Shapes{{7}, {7}, true}}) {
    Tensor a = randomTensor(rng, DType::F32, s.a);
    Tensor b = randomTensor(rng, DType::F32, s.b);
    Node *node = nullptr;
    auto g = oneNode("MatMul", {&a, &b}, {}, node);
    std::vector<Tensor> want;
    runCpuNode(*node, {&a, &b}, want);
    MatMulPlan plan = planMatMul(*node, a.dims, b.dims);
    EXPECT_EQ(plan.outDims, want[0].dims);
    EXPECT_EQ(plan.uniform, s.uniform) << dimsToString(s.a);
    Tensor y(DType::F32, plan.outDims);
    GemmProblem p;
    p.m = plan.m;
    p.n = plan.n;
    p.k = plan.k;
    p.strideC = p.m * p.n;
    if (plan.uniform) {
      p.batch = int64_t(plan.offsetA.size());
      p.strideA = plan.strideA;
      p.strideB = plan.strideB;
      referenceColumnMajorGemm(toColumnMajor(p), 1, b.data<float>(),
                               a.data<float>(), 0, y.data<float>());
    } else {
      for (size_t i = 0; i < plan.offsetA.size(); ++i)
        referenceColumnMajorGemm(toColumnMajor(p), 1,
                                 b.data<float>() + plan.offsetB[i],
                                 a.data<float>() + plan.offsetA[i], 0,
                                 y.data<float>() + int64_t(i) * p.strideC);
    }
    expectClose(y, want[0],
                "MatMul " + dimsToString(s.a) + " x " + dimsToString(s.b));
  }
}

TEST(CudaGemmPlan, LeadingDimensionsNeverZero) {
  GemmProblem p;
  p.m = 5;
  p.n = 0;
  p.k = 0;
  ColumnMajorGemm g = toColumnMajor(p);
  EXPECT_GE(g.ldFirst, 1);
  EXPECT_GE(g.ldSecond, 1);
  EXPECT_GE(g.ldc, 1);
}

TEST(CudaGeometry, BroadcastOffsetsMatchTheCpuWalk) {
  struct Shapes {
    std::vector<int64_t> out, a, b;
  };
  for (const Shapes &s :
       {Shapes{{4, 3, 5}, {4, 1, 5}, {3, 1}}, Shapes{{6, 9}, {6, 9}, {9}},
        Shapes{{5, 6}, {5, 6}, {}},
        Shapes{{2, 3, 4, 5}, {2, 1, 4, 1}, {3, 1, 5}}, Shapes{{7}, {1}, {7}}}) {
    const std::vector<int64_t> shapes[2] = {s.a, s.b};
    BroadcastGeometry<2> g = makeBroadcastGeometry<2>(s.out, shapes);
    std::vector<std::pair<int64_t, int64_t>> want;
    cpu::forEachBroadcast(s.out, shapes, [&](int64_t, const int64_t *o) {
      want.emplace_back(o[0], o[1]);
    });
    ASSERT_EQ(g.count, int64_t(want.size()));
    for (int64_t i = 0; i < g.count; ++i) {
      int64_t off[2];
      g.offsets(i, off);
      EXPECT_EQ(off[0], want[size_t(i)].first)
          << dimsToString(s.out) << " " << i;
      EXPECT_EQ(off[1], want[size_t(i)].second)
          << dimsToString(s.out) << " " << i;
    }
  }
}

// foldAxes keeps every offset of a broadcast or transposed walk, with fewer
// axes where neighbours fold; the 32-bit walk gives the same offsets.
TEST(CudaGeometry, FoldedAxesWalkTheSameOffsets) {
  struct Case {
    std::vector<int64_t> out, a, b;
    int foldedRank;
  };
  for (const Case &c : {Case{{16, 512, 64}, {16, 512, 64}, {64}, 2},
                        Case{{4, 1, 5, 6}, {4, 1, 5, 6}, {4, 1, 1, 6}, 3},
                        Case{{3, 4, 5}, {3, 1, 5}, {1, 4, 5}, 3},
                        Case{{2, 3, 4}, {2, 3, 4}, {2, 3, 1}, 2},
                        Case{{6, 7}, {1, 7}, {6, 1}, 2}}) {
    const std::vector<int64_t> shapes[2] = {c.a, c.b};
    BroadcastGeometry<2> g = makeBroadcastGeometry<2>(c.out, shapes);
    BroadcastGeometry<2> f = foldAxes(g);
    EXPECT_EQ(f.rank, c.foldedRank) << dimsToString(c.out);
    ASSERT_TRUE(f.fits32());
    for (int64_t i = 0; i < g.count; ++i) {
      int64_t want[2], got[2];
      int32_t got32[2];
      g.offsets(i, want);
      f.offsets(i, got);
      f.offsetsIn<int32_t>(int32_t(i), got32);
      for (int k = 0; k < 2; ++k) {
        ASSERT_EQ(got[k], want[k]) << dimsToString(c.out) << " " << i;
        ASSERT_EQ(int64_t(got32[k]), want[k])
            << dimsToString(c.out) << " " << i;
      }
    }
  }
  // The attention heads' split, [B, T, H, dh] -> [B, H, T, dh].
  BroadcastGeometry<1> t = makeTransposeGeometry({2, 5, 3, 4}, {0, 2, 1, 3});
  BroadcastGeometry<1> ft = foldAxes(t);
  for (int64_t i = 0; i < t.count; ++i) {
    int64_t want[1], got[1];
    t.offsets(i, want);
    ft.offsets(i, got);
    ASSERT_EQ(got[0], want[0]) << i;
  }
  // Past 2^31 the 32-bit walk is refused.
  const std::vector<int64_t> big[1] = {{int64_t(1) << 20, 1}};
  EXPECT_FALSE(
      makeBroadcastGeometry<1>({int64_t(1) << 20, 4096}, big).fits32());
}

// A transpose that keeps the innermost axis copies whole 16-byte units: the
// unit walk reads, for each unit, the offset of its first element.
TEST(CudaGeometry, TransposeCopiesWholeUnits) {
  BroadcastGeometry<1> t =
      foldAxes(makeTransposeGeometry({2, 5, 3, 16}, {0, 2, 1, 3}));
  ASSERT_EQ(copyUnitElements(t, 2, 0, 32), 8); // fp16: 8 to 16 bytes
  ASSERT_EQ(copyUnitElements(t, 4, 0, 32), 4); // fp32: 4
  EXPECT_EQ(copyUnitElements(t, 2, 2, 32), 1); // a misaligned source
  EXPECT_EQ(copyUnitElements(t, 2, 8, 8), 4);  // 8-byte aligned: 8 bytes
  BroadcastGeometry<1> u = inUnits(t, 8);
  ASSERT_EQ(u.count * 8, t.count);
  for (int64_t i = 0; i < u.count; ++i) {
    int64_t unit[1], first[1];
    u.offsets(i, unit);
    t.offsets(i * 8, first);
    ASSERT_EQ(unit[0] * 8, first[0]) << i;
  }
  // Swapping the last two axes reads the innermost axis with a stride.
  BroadcastGeometry<1> swap = foldAxes(makeTransposeGeometry({4, 8}, {1, 0}));
  EXPECT_EQ(copyUnitElements(swap, 2, 0, 0), 1);
  // A row repeated down the rows copies whole rows' units; a column
  // repeated across them (innermost stride 0) does not.
  const std::vector<int64_t> row[1] = {{1, 8}}, column[1] = {{4, 1}};
  BroadcastGeometry<1> rows = foldAxes(makeBroadcastGeometry<1>({4, 8}, row));
  ASSERT_EQ(copyUnitElements(rows, 2, 0, 0), 8);
  BroadcastGeometry<1> rowUnits = inUnits(rows, 8);
  for (int64_t i = 0; i < rowUnits.count; ++i) {
    int64_t unit[1];
    rowUnits.offsets(i, unit);
    EXPECT_EQ(unit[0], 0) << i;
  }
  EXPECT_EQ(copyUnitElements(foldAxes(makeBroadcastGeometry<1>({4, 8}, column)),
                             2, 0, 0),
            1);
}

// Bias adds, after folding, are [rows, n] with a row operand; other
// broadcasts take the general loop.
TEST(CudaGeometry, RowBroadcastIsABiasAdd) {
  auto folded = [](std::vector<int64_t> out, std::vector<int64_t> a,
                   std::vector<int64_t> b) {
    const std::vector<int64_t> shapes[2] = {a, b};
    return foldAxes(makeBroadcastGeometry<2>(out, shapes));
  };
  bool row[2];
  EXPECT_TRUE(
      isRowBroadcast(folded({16, 512, 768}, {16, 512, 768}, {768}), row));
  EXPECT_FALSE(row[0]);
  EXPECT_TRUE(row[1]);
  EXPECT_TRUE(isRowBroadcast(folded({4, 8}, {1, 8}, {4, 8}), row));
  EXPECT_TRUE(row[0]);
  EXPECT_FALSE(row[1]);
  // A column [4, 1], an outer product, a middle-axis broadcast: no.
  EXPECT_FALSE(isRowBroadcast(folded({4, 8}, {4, 8}, {4, 1}), row));
  EXPECT_FALSE(isRowBroadcast(folded({4, 8}, {1, 8}, {4, 1}), row));
  EXPECT_FALSE(isRowBroadcast(folded({2, 3, 4}, {2, 3, 4}, {3, 1}), row));
  // Same shapes are the contiguous zip's (simple), not a row broadcast.
  EXPECT_FALSE(isRowBroadcast(folded({4, 8}, {4, 8}, {4, 8}), row));
}

// The CUDA kernels' walk of a SumToShape geometry (reduce.cu): per output,
// chunks of kSumChunk terms each from zero in order (a stride walk where the
// reduced axes fold into one), then the chunk sums from zero in order. It
// must be the CPU kernel's sum, bit for bit, including sums of several
// chunks, whose bits differ from one plain in-order sum.
TEST(CudaGeometry, SumToShapeAddsInTheCpuOrder) {
  std::mt19937 rng(3);
  struct Shapes {
    std::vector<int64_t> from, to;
  };
  int64_t differFromPlainSum = 0;
  for (const Shapes &s :
       {Shapes{{64, 20}, {20}}, Shapes{{8, 5, 6}, {5, 1}},
        Shapes{{3, 4, 5}, {}}, Shapes{{4, 3}, {4, 3}},
        Shapes{{2, 3, 4, 5}, {3, 1, 1}}, Shapes{{2, 1, 4}, {1, 4}},
        Shapes{{600, 20}, {20}}, Shapes{{4, 300, 6}, {6}},
        Shapes{{300, 3, 5}, {3, 1}}, Shapes{{2, 1, 700}, {}}}) {
    Tensor dy = randomTensor(rng, DType::F32, s.from);
    Tensor x = randomTensor(rng, DType::F32, s.to);
    Node *node = nullptr;
    auto g = oneNode("SumToShape", {&dy, &x}, {}, node, kMpcDomain);
    std::vector<Tensor> want;
    runCpuNode(*node, {&dy, &x}, want);
    SumToShapeGeometry geo = makeSumToShapeGeometry(s.from, s.to);
    ASSERT_EQ(geo.outCount, want[0].numel());
    const float *p = dy.data<float>();
    for (int64_t o = 0; o < geo.outCount; ++o) {
      float acc = 0, plain = 0;
      for (int64_t c = 0; c < sumChunks(geo.reducedCount); ++c) {
        float part = 0;
        int64_t last = std::min(geo.reducedCount, (c + 1) * kSumChunk);
        for (int64_t r = c * kSumChunk; r < last; ++r) {
          int64_t at = geo.reducedRank == 1
                           ? geo.base(o) + r * geo.reducedStrides[0]
                           : geo.base(o) + geo.reduced(r);
          part += p[at];
          plain += p[at];
        }
        acc += part;
      }
      // Same terms in the same order: the same float, bit for bit.
      EXPECT_EQ(acc, want[0].data<float>()[o])
          << dimsToString(s.from) << " -> " << dimsToString(s.to) << " " << o;
      differFromPlainSum += acc != plain;
    }
  }
  EXPECT_GT(differFromPlainSum, 0) << "no sum here tells the chunked order "
                                      "from one plain in-order sum";
}

// Axes of one kind next to each other fold into one (size-1 axes drop out):
// a bias gradient reduces one axis of batch * seq rows with one stride.
TEST(CudaGeometry, SumToShapeFoldsNeighbouringAxes) {
  SumToShapeGeometry bias = makeSumToShapeGeometry({16, 512, 3072}, {3072});
  EXPECT_EQ(bias.reducedRank, 1);
  EXPECT_EQ(bias.reducedDims[0], 16 * 512);
  EXPECT_EQ(bias.reducedStrides[0], 3072);
  EXPECT_EQ(bias.keptRank, 1);
  EXPECT_EQ(bias.outCount, 3072);
  SumToShapeGeometry split = makeSumToShapeGeometry({300, 3, 1, 5}, {3, 1, 1});
  EXPECT_EQ(split.reducedRank, 2); // 300 and 5, a kept axis between
  EXPECT_EQ(split.keptRank, 1);
  EXPECT_EQ(split.reducedCount, 1500);
}

} // namespace
