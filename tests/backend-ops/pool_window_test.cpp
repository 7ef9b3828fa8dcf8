// The CUDA pooling kernels' per-element walk (kernels/cuda/pool_window.h)
// against the CPU pooling kernels, on the CPU, bit for bit.
//
// Every output (and, for the gradients, every input element) is computed
// here exactly as one device thread computes it: the window positions in
// the same order, the same fp32 sums, the same picks. Windows that overlap
// (so a gradient element gathers several contributions), ceil_mode windows
// past the end pad, dilations, asymmetric pads, count_include_pad, 1-D and
// 3-D pools, ties and NaNs in max windows, and MaxPool's Indices in both
// storage orders must all give the CPU kernel's bytes: what makes the
// device pooling exact, checked without a GPU.
#include "ir/mpc_ops.h"
#include "kernels/cpu/conv_util.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cuda/pool_window.h"
#include "op_cases.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

using namespace mpc;
using namespace mpc::cuda;
using namespace mpc::backend_ops;

namespace {

Attribute ints(std::vector<int64_t> v) { return Attribute::ofInts(v); }
Attribute one(int64_t v) { return Attribute::ofInt(v); }

struct PoolCase {
  const char *name;
  std::vector<int64_t> x;
  Builder::Attrs attrs;
};

const std::vector<PoolCase> &poolCases() {
  static const std::vector<PoolCase> cases = {
      {"cnn_2x2",
       {2, 3, 8, 8},
       {{"kernel_shape", ints({2, 2})}, {"strides", ints({2, 2})}}},
      {"overlap_3x3_s2_p1",
       {2, 2, 9, 7},
       {{"kernel_shape", ints({3, 3})},
        {"strides", ints({2, 2})},
        {"pads", ints({1, 1, 1, 1})}}},
      {"ceil_dilated",
       {1, 2, 10, 9},
       {{"kernel_shape", ints({3, 2})},
        {"strides", ints({2, 3})},
        {"dilations", ints({2, 1})},
        {"ceil_mode", one(1)}}},
      {"asymmetric_pads_include_pad",
       {2, 1, 6, 5},
       {{"kernel_shape", ints({3, 3})},
        {"pads", ints({0, 1, 2, 1})},
        {"count_include_pad", one(1)}}},
      {"same_upper",
       {1, 3, 7, 6},
       {{"kernel_shape", ints({2, 3})},
        {"auto_pad", Attribute::ofString("SAME_UPPER")}}},
      {"pool_1d",
       {3, 2, 11},
       {{"kernel_shape", ints({3})},
        {"strides", ints({1})},
        {"pads", ints({1, 1})}}},
      {"pool_3d",
       {1, 2, 4, 5, 6},
       {{"kernel_shape", ints({2, 2, 3})},
        {"strides", ints({1, 2, 2})},
        {"pads", ints({0, 1, 1, 1, 0, 1})}}},
  };
  return cases;
}

std::vector<Tensor> runCpu(const std::string &op,
                           const std::vector<const Tensor *> &in,
                           const Builder::Attrs &attrs, size_t outputs = 1,
                           const std::string &domain = "") {
  Graph g;
  std::vector<Value *> values;
  for (size_t i = 0; i < in.size(); ++i)
    values.push_back(g.addInput("in" + std::to_string(i), in[i]->dtype,
                                toDims(in[i]->dims)));
  Node *node = g.createNode(op, values, outputs, "pool", domain);
  for (const auto &kv : attrs)
    node->setAttr(kv.first, kv.second);
  std::vector<Tensor> out;
  runCpuNode(*node, in, out);
  return out;
}

/// The window the runner builds for a case (runtime/cuda/run_conv_pool.cpp).
PoolWindow windowOf(const PoolCase &c) {
  Graph g;
  Node *node = g.createNode("MaxPool", {}, 1, "pool");
  for (const auto &kv : c.attrs)
    node->setAttr(kv.first, kv.second);
  WindowAttrs a = readWindowAttrs(*node, WindowKind::Pool, c.x.size() - 2);
  WindowGeometry geo = resolveWindow(*node, a, cpu::spatialDims(c.x));
  PoolWindow w = makePoolWindow(geo, c.x[0] * c.x[1]);
  w.countIncludePad = node->attrInt("count_include_pad", 0) != 0;
  return w;
}

std::vector<int64_t> outDims(const PoolCase &c, const PoolWindow &w) {
  std::vector<int64_t> d = {c.x[0], c.x[1]};
  for (int k = kMaxPoolRank - w.rank; k < kMaxPoolRank; ++k)
    d.push_back(w.out[k]);
  return d;
}

/// Values on a coarse grid (ties in max windows) with a NaN and a -inf.
Tensor gridInput(std::mt19937 &rng, DType t, const std::vector<int64_t> &d) {
  Tensor x = randomTensor(rng, DType::F32, d, -2, 2);
  for (int64_t k = 0; k < x.numel(); ++k)
    x.data<float>()[k] = std::round(x.data<float>()[k] * 2) / 2;
  x.data<float>()[3] = NAN;
  x.data<float>()[x.numel() / 2] = -INFINITY;
  return t == DType::F32 ? x : x.castTo(t);
}

Tensor rounded(DType t, const std::vector<int64_t> &dims,
               const std::vector<float> &v) {
  Tensor f = Tensor::fromFloats(dims, v);
  return t == DType::F32 ? f : f.castTo(t);
}

void expectSameBytes(const Tensor &got, const Tensor &want,
                     const std::string &what) {
  ASSERT_EQ(got.dtype, want.dtype) << what;
  ASSERT_EQ(got.dims, want.dims) << what;
  size_t size = dtypeSize(want.dtype);
  for (int64_t k = 0; k < want.numel(); ++k)
    if (std::memcmp(got.bytes.data() + k * size, want.bytes.data() + k * size,
                    size) != 0) {
      ADD_FAILURE() << what << ": element " << k << " is " << got.getAsDouble(k)
                    << ", the cpu kernel's " << want.getAsDouble(k);
      return;
    }
}

std::vector<float> asFloats(const Tensor &t) {
  std::vector<float> v(size_t(t.numel()));
  for (size_t k = 0; k < v.size(); ++k)
    v[k] = float(t.getAsDouble(int64_t(k)));
  return v;
}

TEST(PoolWindowWalk, MaxPoolAndIndicesAreTheCpuKernel) {
  std::mt19937 rng(31);
  for (const PoolCase &c : poolCases())
    for (DType t : {DType::F32, DType::F16})
      for (int64_t order : {0, 1}) {
        std::string what = std::string(c.name) + " " + dtypeName(t) +
                           " storage_order " + std::to_string(order);
        Tensor x = gridInput(rng, t, c.x);
        Builder::Attrs attrs = c.attrs;
        attrs.push_back({"storage_order", one(order)});
        std::vector<Tensor> want = runCpu("MaxPool", {&x}, attrs, 2);
        PoolWindow w = windowOf(c);
        w.storageOrder = int(order);
        std::vector<float> xv = asFloats(x), y;
        std::vector<int64_t> idx;
        for (int64_t i = 0; i < w.planes * w.outCount; ++i) {
          int64_t plane = i / w.outCount, base = plane * w.inCount;
          auto load = [&](int64_t j) { return xv[size_t(base + j)]; };
          int64_t pick = poolArgmax(w, load, i % w.outCount);
          y.push_back(pick >= 0 ? load(pick) : -INFINITY);
          idx.push_back(poolIndicesValue(w, plane, pick));
        }
        std::vector<int64_t> dims = outDims(c, w);
        expectSameBytes(rounded(t, dims, y), want[0], what + " Y");
        expectSameBytes(Tensor::fromInt64s(dims, idx), want[1],
                        what + " Indices");
      }
}

TEST(PoolWindowWalk, MaxPoolGradIsTheCpuKernel) {
  std::mt19937 rng(32);
  for (const PoolCase &c : poolCases())
    for (DType t : {DType::F32, DType::F16}) {
      std::string what = std::string(c.name) + " " + dtypeName(t);
      PoolWindow w = windowOf(c);
      Tensor x = gridInput(rng, t, c.x);
      Tensor dy = randomTensor(rng, t, outDims(c, w));
      Tensor want = runCpu("MaxPoolGrad", {&dy, &x}, c.attrs, 1, kMpcDomain)[0];
      std::vector<float> xv = asFloats(x), dyv = asFloats(dy), dx;
      std::vector<int64_t> argmax;
      for (int64_t i = 0; i < w.planes * w.outCount; ++i) {
        int64_t base = i / w.outCount * w.inCount;
        auto load = [&](int64_t j) { return xv[size_t(base + j)]; };
        argmax.push_back(poolArgmax(w, load, i % w.outCount));
      }
      for (int64_t i = 0; i < w.planes * w.inCount; ++i) {
        int64_t outBase = i / w.inCount * w.outCount;
        auto pick = [&](int64_t p) { return argmax[size_t(outBase + p)]; };
        auto loadDy = [&](int64_t p) { return dyv[size_t(outBase + p)]; };
        dx.push_back(maxPoolGradValue(w, pick, loadDy, i % w.inCount));
      }
      expectSameBytes(rounded(t, c.x, dx), want, what);
    }
}

TEST(PoolWindowWalk, AveragePoolAndItsGradientAreTheCpuKernel) {
  std::mt19937 rng(33);
  for (const PoolCase &c : poolCases())
    for (DType t : {DType::F32, DType::F16}) {
      std::string what = std::string(c.name) + " " + dtypeName(t);
      PoolWindow w = windowOf(c);
      Tensor x = randomTensor(rng, t, c.x, -2, 2);
      Tensor want = runCpu("AveragePool", {&x}, c.attrs)[0];
      std::vector<float> xv = asFloats(x), y;
      for (int64_t i = 0; i < w.planes * w.outCount; ++i) {
        int64_t base = i / w.outCount * w.inCount;
        auto load = [&](int64_t j) { return xv[size_t(base + j)]; };
        y.push_back(averagePoolValue(w, load, i % w.outCount));
      }
      expectSameBytes(rounded(t, outDims(c, w), y), want, what + " forward");

      Tensor dy = randomTensor(rng, t, outDims(c, w));
      Tensor shape =
          Tensor::fromInt64s({int64_t(c.x.size())}, std::vector<int64_t>(c.x));
      Tensor wantDx =
          runCpu("AveragePoolGrad", {&dy, &shape}, c.attrs, 1, kMpcDomain)[0];
      std::vector<float> dyv = asFloats(dy), dx;
      for (int64_t i = 0; i < w.planes * w.inCount; ++i) {
        int64_t outBase = i / w.inCount * w.outCount;
        auto loadDy = [&](int64_t p) { return dyv[size_t(outBase + p)]; };
        dx.push_back(averagePoolGradValue(w, loadDy, i % w.inCount));
      }
      expectSameBytes(rounded(t, c.x, dx), wantDx, what + " gradient");
    }
}

} // namespace
