// The shared row math of kernels/common/ against the CPU kernels, on the
// CPU, bit for bit.
//
// The CPU kernels call softmax_math.h, layer_norm_math.h, gelu_math.h,
// dropout_rng.h and clip_grad_norm_math.h; the CUDA kernels call the same
// functions. Here the functions are applied row by row in the CPU's order
// and must give exactly the CPU kernel's bytes, so a change to either side
// that alters the arithmetic fails on any machine. The host-side plans of
// the CUDA kernels (GatherGrad's per-row position lists, the Transpose and
// reduction geometries) are walked here as the device threads walk them
// and must also give the CPU's bytes: that is what makes those kernels
// exact on the GPU.
#include "ir/mpc_ops.h"
#include "kernels/common/chunked_sum.h"
#include "kernels/common/clip_grad_norm_math.h"
#include "kernels/common/dropout_rng.h"
#include "kernels/common/gelu_math.h"
#include "kernels/common/lane_sum.h"
#include "kernels/common/layer_norm_math.h"
#include "kernels/common/softmax_math.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/node_geometry.h"
#include "kernels/cpu/softmax_support.h"
#include "kernels/cpu/vector_math.h"
#include "kernels/cuda/broadcast_geometry.h"
#include "kernels/cuda/gather.h"
#include "kernels/cuda/resident.h"
#include "op_cases.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

using namespace mpc;
using namespace mpc::cuda;
using namespace mpc::backend_ops;

namespace {

/// Runs one node on the CPU backend.
std::vector<Tensor> runCpu(const std::string &op,
                           const std::vector<const Tensor *> &in,
                           const Builder::Attrs &attrs, size_t outputs = 1,
                           const std::string &domain = "",
                           const std::string &name = "node") {
  Graph g;
  std::vector<Value *> values;
  for (size_t i = 0; i < in.size(); ++i)
    values.push_back(in[i] ? g.addInput("in" + std::to_string(i), in[i]->dtype,
                                        toDims(in[i]->dims))
                           : nullptr);
  Node *node = g.createNode(op, values, outputs, name, domain);
  for (const auto &kv : attrs)
    node->setAttr(kv.first, kv.second);
  std::vector<Tensor> out;
  runCpuNode(*node, in, out);
  return out;
}

void expectSameBytes(const Tensor &got, const Tensor &want,
                     const std::string &what) {
  ASSERT_EQ(got.dtype, want.dtype) << what;
  ASSERT_EQ(got.dims, want.dims) << what;
  ASSERT_EQ(got.bytes.size(), want.bytes.size()) << what;
  size_t size = dtypeSize(want.dtype);
  for (int64_t k = 0; k < want.numel(); ++k)
    if (std::memcmp(got.bytes.data() + k * size, want.bytes.data() + k * size,
                    size) != 0) {
      ADD_FAILURE() << what << ": element " << k << " is " << got.getAsDouble(k)
                    << ", the cpu kernel's " << want.getAsDouble(k);
      return;
    }
}

Tensor floatsLike(DType t, std::vector<int64_t> dims,
                  const std::vector<float> &v) {
  Tensor f = Tensor::fromFloats(dims, v);
  return t == DType::F32 ? f : f.castTo(t);
}

std::vector<float> asFloats(const Tensor &t) {
  std::vector<float> v(size_t(t.numel()));
  for (size_t k = 0; k < v.size(); ++k)
    v[k] = float(t.getAsDouble(int64_t(k)));
  return v;
}

const DType kStorage[] = {DType::F32, DType::F16, DType::BF16};

TEST(SharedRowMath, SoftmaxIsTheCpuKernel) {
  std::mt19937 rng(21);
  for (DType t : kStorage)
    for (bool log : {false, true}) {
      Tensor x = randomTensor(rng, t, {9, 57}, -6, 6);
      Tensor want = runCpu(log ? "LogSoftmax" : "Softmax", {&x}, {})[0];
      std::vector<float> v = asFloats(x), y(v.size());
      for (int64_t r = 0; r < 9; ++r) {
        const float *row = v.data() + r * 57;
        if (log) {
          SoftmaxRowStats<float> st =
              softmaxRowStats<float>(57, [&](int64_t j) { return row[j]; });
          for (int64_t j = 0; j < 57; ++j)
            y[size_t(r * 57 + j)] =
                logSoftmaxValue(row[j], st.max, logOf(st.sum));
          continue;
        }
        // The CPU's fp32 softmax takes its exponentials a row at a time
        // with the vector exp (vector_math.h), not expOf, and sums them in
        // its fixed lane order (softmax_support.h rowSum), not in element
        // order: the shared row terms and division, its own exp and sum.
        float terms[57];
        std::copy(row, row + 57, terms);
        softmaxRowTerms(int64_t(57), terms,
                        [](float *t, int64_t n) { cpu::expInPlace(t, n); });
        const float sum = cpu::rowSum(57, terms);
        for (int64_t j = 0; j < 57; ++j)
          y[size_t(r * 57 + j)] = softmaxFromTerm(terms[j], sum);
      }
      expectSameBytes(floatsLike(t, x.dims, y), want,
                      std::string(log ? "LogSoftmax " : "Softmax ") +
                          dtypeName(t));
    }
}

TEST(SharedRowMath, SoftmaxGradIsTheCpuKernel) {
  std::mt19937 rng(22);
  for (bool log : {false, true}) {
    Tensor dy = randomTensor(rng, DType::F16, {5, 33});
    Tensor y = randomTensor(rng, DType::F32, {5, 33}, 0, 0.2f);
    Tensor want = runCpu(log ? "LogSoftmaxGrad" : "SoftmaxGrad", {&dy, &y}, {},
                         1, kMpcDomain)[0];
    std::vector<float> g = asFloats(dy), v = asFloats(y), dx(g.size());
    for (int64_t r = 0; r < 5; ++r) {
      // The row's sum in lane_sum.h's lanes, as the forward's.
      float sum = laneSum<float>(33, [&](int64_t j) {
        size_t k = size_t(r * 33 + j);
        return log ? softmaxGradTerm<true>(g[k], v[k])
                   : softmaxGradTerm<false>(g[k], v[k]);
      });
      for (int64_t j = 0; j < 33; ++j) {
        size_t k = size_t(r * 33 + j);
        dx[k] = log ? softmaxGradValue<true>(g[k], v[k], sum)
                    : softmaxGradValue<false>(g[k], v[k], sum);
      }
    }
    expectSameBytes(floatsLike(DType::F16, dy.dims, dx), want,
                    log ? "LogSoftmaxGrad" : "SoftmaxGrad");
  }
}

TEST(SharedRowMath, LayerNormIsTheCpuKernel) {
  std::mt19937 rng(23);
  for (DType t : kStorage) {
    // A large mean: the two-pass variance must not cancel.
    Tensor x = randomTensor(rng, t, {6, 48}, 95, 105);
    Tensor scale = randomTensor(rng, t, {48}, 0.5f, 1.5f);
    Tensor bias = randomTensor(rng, t, {48}, -1, 1);
    std::vector<Tensor> want =
        runCpu("LayerNormalization", {&x, &scale, &bias},
               {{"epsilon", Attribute::ofFloat(1e-5f)}}, 3);
    std::vector<float> v = asFloats(x), sc = asFloats(scale),
                       bi = asFloats(bias), y(v.size()), mean(6), inv(6);
    for (int64_t r = 0; r < 6; ++r) {
      const float *row = v.data() + r * 48;
      LayerNormRowStats<float> st = layerNormRowStats<float>(
          48, double(1e-5f), [&](int64_t j) { return row[j]; });
      for (int64_t j = 0; j < 48; ++j)
        y[size_t(r * 48 + j)] = layerNormValue(row[j], st.mean, st.invStd,
                                               sc[size_t(j)], bi[size_t(j)]);
      mean[size_t(r)] = st.mean;
      inv[size_t(r)] = st.invStd;
    }
    std::string what = std::string("LayerNormalization ") + dtypeName(t);
    expectSameBytes(floatsLike(t, x.dims, y), want[0], what + " Y");
    expectSameBytes(Tensor::fromFloats({6, 1}, mean), want[1], what + " mean");
    expectSameBytes(Tensor::fromFloats({6, 1}, inv), want[2], what + " inv");
  }
}

// dScale/dBias summed per column over the rows in row order in chunks of
// kSumChunk rows, as the CUDA kernels do (a thread per column and chunk,
// then the chunk sums in order), are the CPU kernel's bits; dX from the
// shared formula with lane_sum.h's row sums is too. 600 rows are ten chunks.
TEST(SharedRowMath, LayerNormGradIsTheCpuKernel) {
  std::mt19937 rng(24);
  for (DType t : kStorage)
    for (int64_t rows : {int64_t(7), int64_t(600)}) {
      const int64_t n = 40;
      Tensor dy = randomTensor(rng, t, {rows, n});
      Tensor x = randomTensor(rng, t, {rows, n}, -2, 2);
      Tensor scale = randomTensor(rng, t, {n}, 0.5f, 1.5f);
      Tensor mean = randomTensor(rng, DType::F32, {rows, 1}, -0.1f, 0.1f);
      Tensor inv = randomTensor(rng, DType::F32, {rows, 1}, 0.8f, 1.2f);
      std::vector<Tensor> want =
          runCpu("LayerNormalizationGrad", {&dy, &x, &scale, &mean, &inv}, {},
                 3, kMpcDomain);
      std::vector<float> g = asFloats(dy), xv = asFloats(x),
                         sc = asFloats(scale), m = asFloats(mean),
                         is = asFloats(inv);
      std::vector<float> dx(g.size()), ds(static_cast<size_t>(n)),
          db(static_cast<size_t>(n));
      for (int64_t r = 0; r < rows; ++r) {
        auto at = [&](int64_t j) { return size_t(r * n + j); };
        float sumG = laneSum<float>(
            n, [&](int64_t j) { return g[at(j)] * sc[size_t(j)]; });
        float sumGX = laneSum<float>(n, [&](int64_t j) {
          return g[at(j)] * sc[size_t(j)] *
                 layerNormXhat(xv[at(j)], m[size_t(r)], is[size_t(r)]);
        });
        for (int64_t j = 0; j < n; ++j) {
          size_t k = size_t(r * n + j);
          float xhat = layerNormXhat(xv[k], m[size_t(r)], is[size_t(r)]);
          dx[k] = layerNormGradInput(is[size_t(r)], g[k] * sc[size_t(j)],
                                     sumG / float(n), xhat, sumGX / float(n));
        }
      }
      for (int64_t j = 0; j < n; ++j)
        for (int64_t c = 0; c < sumChunks(rows); ++c) {
          float partS = 0, partB = 0;
          for (int64_t r = c * kSumChunk;
               r < std::min(rows, (c + 1) * kSumChunk); ++r) {
            size_t k = size_t(r * n + j);
            partS += g[k] * layerNormXhat(xv[k], m[size_t(r)], is[size_t(r)]);
            partB += g[k];
          }
          ds[size_t(j)] += partS;
          db[size_t(j)] += partB;
        }
      std::string what = std::string("LayerNormalizationGrad ") + dtypeName(t) +
                         " " + std::to_string(rows) + " rows";
      expectSameBytes(floatsLike(t, dy.dims, dx), want[0], what + " dX");
      expectSameBytes(floatsLike(t, {n}, ds), want[1], what + " dScale");
      expectSameBytes(floatsLike(t, {n}, db), want[2], what + " dBias");
    }
}

TEST(SharedRowMath, GeluAndItsGradientsAreTheCpuKernels) {
  std::mt19937 rng(25);
  for (DType t : kStorage)
    for (bool tanhForm : {false, true}) {
      Builder::Attrs a = {
          {"approximate", Attribute::ofString(tanhForm ? "tanh" : "none")}};
      Tensor x = randomTensor(rng, t, {1000}, -6, 6);
      Tensor dy = randomTensor(rng, t, {1000});
      std::vector<float> v = asFloats(x), g = asFloats(dy), y(1000), dx(1000),
                         de(1000);
      // The erf form's erf and exp come from the CPU's vector math
      // (kernels/cpu/vector_math.h; the GPU's from CUDA), the rest is the
      // shared expressions.
      std::vector<float> e(1000), p(1000);
      for (size_t k = 0; k < 1000; ++k) {
        e[k] = geluErfArgument(v[k]);
        p[k] = geluExpArgument(v[k]);
      }
      cpu::erfInPlace(e.data(), 1000);
      cpu::expInPlace(p.data(), 1000);
      for (size_t k = 0; k < 1000; ++k) {
        y[k] = tanhForm ? geluForward(v[k], true) : geluFromErf(v[k], e[k]);
        dx[k] = g[k] * (tanhForm ? geluDerivative(v[k], true)
                                 : geluDerivativeFromErfExp(v[k], e[k], p[k]));
        de[k] = erfGradValue(g[k], v[k]);
      }
      std::string what = std::string(dtypeName(t)) + (tanhForm ? " tanh" : "");
      expectSameBytes(floatsLike(t, {1000}, y), runCpu("Gelu", {&x}, a)[0],
                      "Gelu " + what);
      expectSameBytes(floatsLike(t, {1000}, dx),
                      runCpu("GeluGrad", {&dy, &x}, a, 1, kMpcDomain)[0],
                      "GeluGrad " + what);
      expectSameBytes(floatsLike(t, {1000}, de),
                      runCpu("ErfGrad", {&dy, &x}, {}, 1, kMpcDomain)[0],
                      "ErfGrad " + what);
    }
}

// The integer threshold is the old double comparison exactly, for every
// 24-bit draw near the threshold of many ratios.
TEST(SharedRowMath, DropoutThresholdIsTheDoubleComparison) {
  std::mt19937 rng(26);
  std::uniform_real_distribution<double> d(0, 1);
  std::vector<double> ratios = {0, 1, 0.5, 0.1, 0.3, 1.0 / 3, 0.9999999};
  for (int k = 0; k < 2000; ++k)
    ratios.push_back(d(rng));
  for (double ratio : ratios) {
    uint32_t thr = dropoutThreshold(ratio);
    double threshold = ratio * double(1 << 24);
    for (int64_t u = int64_t(thr) - 2; u <= int64_t(thr) + 2; ++u)
      if (u >= 0 && u < (1 << 24)) {
        ASSERT_EQ(uint32_t(u) >= thr, double(u) >= threshold)
            << "ratio " << ratio << " draw " << u;
      }
  }
}

TEST(SharedRowMath, DropoutMaskIsTheCpuKernels) {
  std::mt19937 rng(27);
  for (double ratio : {0.1, 0.5, 0.9}) {
    Tensor x = randomTensor(rng, DType::F16, {3001});
    Tensor r = f32Scalar(float(ratio)), on = boolScalar(true);
    std::vector<Tensor> want =
        runCpu("Dropout", {&x, &r, &on}, {{"seed", Attribute::ofInt(7)}}, 2, "",
               "drop");
    uint64_t base = 0 ^ dropoutKey("drop", true, 7); // runCpuNode's seed is 0
    uint32_t thr = dropoutThreshold(float(ratio));
    float scale = dropoutScale(float(ratio));
    std::vector<float> v = asFloats(x), y(v.size());
    Tensor mask(DType::Bool, {3001});
    int64_t kept = 0;
    for (int64_t i = 0; i < 3001; ++i) {
      bool keep = dropoutKeep(base, i, thr);
      mask.data<uint8_t>()[i] = keep;
      y[size_t(i)] = keep ? v[size_t(i)] * scale : 0.0f;
      kept += keep;
    }
    expectSameBytes(floatsLike(DType::F16, {3001}, y), want[0], "Dropout Y");
    expectSameBytes(mask, want[1], "Dropout mask");
    EXPECT_NEAR(double(kept) / 3001, 1 - ratio, 0.05) << ratio;
  }
}

TEST(SharedRowMath, ClipGradNormIsTheCpuKernel) {
  std::mt19937 rng(28);
  for (float maxNorm : {0.5f, 1e6f}) {
    Tensor a = randomTensor(rng, DType::F32, {300});
    Tensor b = randomTensor(rng, DType::BF16, {5, 7});
    std::vector<Tensor> want =
        runCpu("ClipGradNorm", {&a, &b},
               {{"max_norm", Attribute::ofFloat(maxNorm)}}, 3, kMpcDomain);
    float sumOfNormSquares = 0;
    for (const Tensor *t : {&a, &b}) {
      float sq = 0;
      for (float v : asFloats(*t))
        sq += v * v;
      clipAddTensorNorm(sumOfNormSquares, sq);
    }
    float total = sqrtOf(sumOfNormSquares);
    float coef = clipGradNormCoefficient(total, maxNorm);
    std::vector<float> av = asFloats(a), bv = asFloats(b);
    for (float &v : av)
      v *= coef;
    for (float &v : bv)
      v *= coef;
    expectSameBytes(Tensor::fromFloats({}, {total}), want[2], "total norm");
    expectSameBytes(Tensor::fromFloats({300}, av), want[0], "clipped a");
    expectSameBytes(floatsLike(DType::BF16, {5, 7}, bv), want[1], "clipped b");
  }
  EXPECT_TRUE(std::isnan(clipGradNormCoefficient(NAN, 1.0f)));
  EXPECT_EQ(clipGradNormCoefficient(0.0f, 1.0f), 1.0f);
}

// gatherRowLists + the per-element walk of gatherGradKernel give the CPU
// kernel's bits (repeated indices added in index order).
TEST(SharedRowMath, GatherGradPositionListsAreTheCpuOrder) {
  std::mt19937 rng(29);
  std::uniform_int_distribution<int64_t> d(-9, 8);
  std::vector<int64_t> idx(60);
  for (int64_t &v : idx)
    v = d(rng);
  for (DType t : kStorage) {
    Tensor dy = randomTensor(rng, t, {2, 60, 3});
    Tensor ind = Tensor::fromInt64s({60}, idx);
    Tensor data = randomTensor(rng, t, {2, 9, 3});
    Tensor want = runCpu("GatherGrad", {&dy, &ind, &data},
                         {{"axis", Attribute::ofInt(1)}}, 1, kMpcDomain)[0];
    std::vector<int64_t> rows(idx);
    for (int64_t &r : rows)
      r = r < 0 ? r + 9 : r;
    GatherRowLists l = gatherRowLists(rows, 9);
    ASSERT_EQ(l.start.back(), 60);
    std::vector<float> g = asFloats(dy), out(2 * 9 * 3);
    for (int64_t k = 0; k < 2 * 9 * 3; ++k) {
      int64_t i = k % 3, r = (k / 3) % 9, o = k / 27;
      float acc = 0;
      for (int64_t p = l.start[size_t(r)]; p < l.start[size_t(r) + 1]; ++p)
        acc += g[size_t((o * 60 + l.positions[size_t(p)]) * 3 + i)];
      out[size_t(k)] = acc;
    }
    expectSameBytes(floatsLike(t, data.dims, out), want,
                    std::string("GatherGrad ") + dtypeName(t));
  }
}

// GatherElements on the device: the resident step's per-position walk
// (GatherElementsWalk, as gatherElementsOffsetsKernel runs it) names the
// data offsets the CPU kernel reads, and GatherGrad's row lists over those
// offsets, summed as gatherGradKernel sums them, give the CPU's
// GatherElementsGrad bits.
TEST(SharedRowMath, GatherElementsOffsetsAndScatterAddAreTheCpuKernel) {
  std::mt19937 rng(31);
  struct Shape {
    std::vector<int64_t> data, idx;
    int64_t axis;
  };
  for (const Shape &sh :
       {Shape{{5, 4}, {30, 4}, 0}, Shape{{3, 6, 4}, {2, 20, 3}, 1},
        Shape{{2, 3, 8}, {2, 3, 17}, -1}})
    for (DType t : kStorage) {
      int64_t r = int64_t(sh.data.size());
      int64_t len = sh.data[size_t(sh.axis < 0 ? sh.axis + r : sh.axis)];
      std::uniform_int_distribution<int64_t> d(-len, len - 1);
      std::vector<int64_t> iv(size_t(elementCount(sh.idx)));
      for (int64_t &v : iv)
        v = d(rng);
      Tensor ind = Tensor::fromInt64s(sh.idx, iv);
      Tensor data = randomTensor(rng, t, sh.data);
      Tensor dy = randomTensor(rng, t, sh.idx);
      Builder::Attrs attrs = {{"axis", Attribute::ofInt(sh.axis)}};
      std::string what = "axis " + std::to_string(sh.axis) + " " + dtypeName(t);

      Graph g;
      Node *node = g.createNode("GatherElements", {}, 1, "ge");
      node->setAttr("axis", Attribute::ofInt(sh.axis));
      cpu::GatherElementsShape s =
          cpu::gatherElementsShape(*node, sh.data, ind);
      std::vector<int64_t> want = cpu::gatherElementsOffsets(*node, s, ind);
      GatherElementsWalk w =
          makeGatherElementsWalk(sh.idx, s.walkStrides, s.len, s.axisStride);
      ASSERT_EQ(w.walk.count, int64_t(iv.size())) << what;
      for (size_t k = 0; k < iv.size(); ++k)
        ASSERT_EQ(w.offset(int64_t(k), iv[k]), want[k]) << what << " " << k;

      Tensor gathered = runCpu("GatherElements", {&data, &ind}, attrs)[0];
      std::vector<float> dv = asFloats(data), gv(iv.size());
      for (size_t k = 0; k < iv.size(); ++k)
        gv[k] = dv[size_t(want[k])];
      expectSameBytes(floatsLike(t, sh.idx, gv), gathered,
                      "GatherElements " + what);

      Tensor grad = runCpu("GatherElementsGrad", {&dy, &ind, &data}, attrs, 1,
                           kMpcDomain)[0];
      GatherRowLists l = gatherRowLists(want, data.numel());
      std::vector<float> yv = asFloats(dy), out(size_t(data.numel()));
      for (size_t e = 0; e < out.size(); ++e) {
        float acc = 0;
        for (int64_t p = l.start[e]; p < l.start[e + 1]; ++p)
          acc += yv[size_t(l.positions[size_t(p)])];
        out[e] = acc;
      }
      expectSameBytes(floatsLike(t, sh.data, out), grad,
                      "GatherElementsGrad " + what);
    }
}

TEST(SharedRowMath, TransposeGeometryIsTheCpuKernel) {
  std::mt19937 rng(30);
  Tensor x = randomTensor(rng, DType::F32, {2, 3, 4, 5});
  for (std::vector<int64_t> perm : {std::vector<int64_t>{0, 2, 1, 3},
                                    {0, 2, 3, 1},
                                    {3, 2, 1, 0},
                                    {1, 0, 3, 2}}) {
    Tensor want =
        runCpu("Transpose", {&x}, {{"perm", Attribute::ofInts(perm)}})[0];
    BroadcastGeometry<1> g = makeTransposeGeometry(x.dims, perm);
    ASSERT_EQ(g.count, x.numel());
    Tensor y(DType::F32, want.dims);
    for (int64_t i = 0; i < g.count; ++i) {
      int64_t off[1];
      g.offsets(i, off);
      y.data<float>()[i] = x.data<float>()[off[0]];
    }
    expectSameBytes(y, want, "Transpose");
  }
}

// reduceKernel's walk: per output, the reduced elements in row-major order.
TEST(SharedRowMath, ReductionOrderIsTheCpuKernels) {
  std::mt19937 rng(31);
  Tensor x = randomTensor(rng, DType::F16, {4, 5, 6}, -3, 3);
  struct Case {
    std::vector<int64_t> axes, kept;
  };
  for (const Case &c : {Case{{1}, {4, 1, 6}}, Case{{0, 2}, {1, 5, 1}},
                        Case{{0, 1, 2}, {1, 1, 1}}})
    for (const char *op : {"ReduceSum", "ReduceMean", "ReduceMax"}) {
      Tensor axes = Tensor::fromInt64s({int64_t(c.axes.size())}, c.axes);
      Tensor want = runCpu(op, {&x, &axes}, {})[0];
      SumToShapeGeometry g = makeSumToShapeGeometry(x.dims, c.kept);
      std::vector<float> v = asFloats(x), out(size_t(g.outCount));
      for (int64_t o = 0; o < g.outCount; ++o) {
        float acc = std::string(op) == "ReduceMax" ? -INFINITY : 0.0f;
        for (int64_t r = 0; r < g.reducedCount; ++r) {
          float e = v[size_t(g.base(o) + g.reduced(r))];
          acc = std::string(op) == "ReduceMax" ? (e > acc ? e : acc) : acc + e;
        }
        out[size_t(o)] =
            std::string(op) == "ReduceMean" ? acc / float(g.reducedCount) : acc;
      }
      expectSameBytes(floatsLike(DType::F16, c.kept, out), want, op);
    }
}

} // namespace
