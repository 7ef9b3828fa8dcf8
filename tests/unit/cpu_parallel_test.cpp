// The CPU's one pool of threads (kernels/cpu/parallel.h) and the kernels
// that use it, and the CPU op profile's table (runtime/cpu/op_profile.h).
//
// parallelFor must cover every index exactly once and split big loops. The
// kernels it runs compute each element (Gelu, GeluGrad, the half Casts,
// Dropout, Transpose, the optimizers' updates) or each row (the softmax
// family, LayerNormalization), channel (batch norm) or plane (pooling)
// alone, or sum LayerNormalizationGrad's dScale/dBias in fixed chunks
// joined in order: their contract is the same bits on one thread and on
// several (and the element kernels' bits are the scalar formula's).
#include "ir/graph.h"
#include "ir/mpc_ops.h"
#include "kernels/cpu/cpu_util.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/parallel.h"
#include "runtime/cpu/op_profile.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <random>
#include <string>
#include <vector>

using namespace mpc;

namespace {

/// Sets the pool's size while it lives, then puts the old one back.
class ThreadScope {
public:
  explicit ThreadScope(int n) : old_(cpu::threadCount()) {
    cpu::setThreadCount(n);
  }
  ~ThreadScope() { cpu::setThreadCount(old_); }

private:
  int old_;
};

Tensor randomTensor(DType t, const std::vector<int64_t> &dims, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-6, 6);
  std::vector<float> v(size_t(elementCount(dims)));
  for (float &x : v)
    x = d(rng);
  return Tensor::fromFloats(dims, v).castTo(t);
}

using Attrs = std::vector<std::pair<std::string, Attribute>>;

/// Every output of one node run on `threads` threads.
std::vector<Tensor> runAll(const std::string &domain, const std::string &op,
                           const std::vector<const Tensor *> &inputs,
                           const Attrs &attrs, size_t outputs, int threads) {
  ThreadScope scope(threads);
  Graph g;
  std::vector<Value *> vals;
  for (size_t i = 0; i < inputs.size(); ++i) // nullptr: an omitted input
    vals.push_back(inputs[i]
                       ? g.addInput("in" + std::to_string(i), inputs[i]->dtype,
                                    toDims(inputs[i]->dims))
                       : nullptr);
  Node *n = g.createNode(op, vals, outputs, "node", domain);
  for (const auto &kv : attrs)
    n->setAttr(kv.first, kv.second);
  std::vector<Tensor> outs;
  runCpuNode(*n, inputs, outs);
  return outs;
}

Tensor runOne(const std::string &op, const std::vector<const Tensor *> &inputs,
              const Attrs &attrs, int threads) {
  return runAll(op == "GeluGrad" ? kMpcDomain : "", op, inputs, attrs, 1,
                threads)[0];
}

/// Runs on 1 and 2 threads and expects every output's bytes equal.
void expectSameBitsOnOneAndTwo(const std::string &domain, const std::string &op,
                               const std::vector<const Tensor *> &inputs,
                               const Attrs &attrs, size_t outputs,
                               const std::string &what) {
  std::vector<Tensor> a = runAll(domain, op, inputs, attrs, outputs, 1);
  std::vector<Tensor> b = runAll(domain, op, inputs, attrs, outputs, 2);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].dims, b[i].dims) << what << " output " << i;
    EXPECT_TRUE(a[i].bytes == b[i].bytes) << what << " output " << i;
  }
}

Attribute intAttr(int64_t v) {
  Attribute a;
  a.kind = Attribute::Kind::Int;
  a.i = v;
  return a;
}

Attribute intsAttr(std::vector<int64_t> v) {
  Attribute a;
  a.kind = Attribute::Kind::Ints;
  a.ints = std::move(v);
  return a;
}

} // namespace

TEST(CpuParallel, RangesCoverEveryIndexOnceAndSplitBigLoops) {
  ThreadScope scope(2);
  for (int64_t n : {0, 1, 7, 63, 64, 65, 1000, 100003}) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    std::mutex m;
    int ranges = 0;
    cpu::parallelFor(n, 32, [&](int64_t b, int64_t e) {
      ASSERT_LT(b, e);
      for (int64_t i = b; i < e; ++i)
        hits[size_t(i)]++;
      std::lock_guard<std::mutex> lock(m);
      ++ranges;
    });
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(hits[size_t(i)].load(), 1) << "n " << n << " index " << i;
    // Under 2 x grain: one range on the caller; from it: one per thread.
    EXPECT_EQ(ranges, n == 0 ? 0 : n < 64 ? 1 : 2) << "n " << n;
  }
}

TEST(CpuParallel, ThreadCountIsWhatWasSet) {
  {
    ThreadScope scope(3);
    EXPECT_EQ(cpu::threadCount(), 3);
  }
  ThreadScope scope(1);
  int ranges = 0;
  cpu::parallelFor(1 << 20, 1, [&](int64_t, int64_t) { ++ranges; });
  EXPECT_EQ(ranges, 1); // one thread: the loop runs once, in the caller
}

TEST(CpuParallel, GeluAndItsGradientSameBitsOnOneAndTwoThreads) {
  // Odd sizes over several blocks (512) and the parallel threshold.
  for (DType t : {DType::F32, DType::BF16, DType::F16})
    for (int64_t n : {int64_t(1), int64_t(511), int64_t(16 * 1024 + 3),
                      int64_t(3 * 65536 + 7)}) {
      Tensor x = randomTensor(t, {n}, 1), g = randomTensor(t, {n}, 2);
      Tensor y1 = runOne("Gelu", {&x}, {}, 1), y2 = runOne("Gelu", {&x}, {}, 2);
      ASSERT_EQ(y1.bytes, y2.bytes) << dtypeName(t) << " n " << n;
      Tensor d1 = runOne("GeluGrad", {&g, &x}, {}, 1),
             d2 = runOne("GeluGrad", {&g, &x}, {}, 2);
      ASSERT_EQ(d1.bytes, d2.bytes) << dtypeName(t) << " n " << n;
      // And the erf form's value itself (within fp32 rounding of erf).
      std::vector<float> xv = x.castTo(DType::F32).toFloats(),
                         yv = y2.castTo(DType::F32).toFloats();
      double tol = t == DType::F32 ? 1e-6 : t == DType::BF16 ? 1e-2 : 2e-3;
      for (size_t i = 0; i < xv.size(); i += 97) {
        double want = 0.5 * xv[i] * (1 + std::erf(xv[i] / std::sqrt(2.0)));
        ASSERT_NEAR(yv[i], want, tol * (1 + std::fabs(want))) << i;
      }
    }
}

TEST(CpuParallel, HalfCastsSameBitsOnOneAndTwoThreads) {
  Attribute toF32, toF16, toBf16;
  toF32.kind = toF16.kind = toBf16.kind = Attribute::Kind::Int;
  toF32.i = 1;
  toF16.i = 10;
  toBf16.i = 16;
  for (int64_t n : {int64_t(5), int64_t(16384 * 2 + 1), int64_t(1 << 20)}) {
    Tensor x = randomTensor(DType::F32, {n}, 3);
    for (const Attribute &to : {toF16, toBf16}) {
      Tensor h1 = runOne("Cast", {&x}, {{"to", to}}, 1),
             h2 = runOne("Cast", {&x}, {{"to", to}}, 2);
      ASSERT_EQ(h1.bytes, h2.bytes) << "n " << n;
      // Round to nearest even, as Tensor::castTo (the reference) does.
      ASSERT_EQ(h2.bytes, x.castTo(h2.dtype).bytes) << "n " << n;
      Tensor w1 = runOne("Cast", {&h2}, {{"to", toF32}}, 1),
             w2 = runOne("Cast", {&h2}, {{"to", toF32}}, 2);
      ASSERT_EQ(w1.bytes, w2.bytes) << "n " << n;
      ASSERT_EQ(w2.bytes, h2.castTo(DType::F32).bytes) << "n " << n;
    }
  }
}

TEST(CpuOpProfile, TableHasTheOpsTimesAndBytesFirstCallLeftOut) {
  cpu::OpProfile p;
  // Node "a" (MatMul) 4 calls, "b" (Add) 4 calls, "c" (MatMul) 4 calls; the
  // first call of each is not timed (it would make primitives).
  for (int step = 0; step < 4; ++step) {
    p.add("a", "MatMul", step == 0 ? 1000.0 : 3.0, 1 << 20);
    p.add("b", "Add", step == 0 ? 1000.0 : 1.0, 2 << 20);
    p.add("c", "MatMul", step == 0 ? 1000.0 : 2.0, 1 << 20);
  }
  EXPECT_EQ(p.steps(), 3u);
  char *buf = nullptr;
  size_t len = 0;
  std::FILE *f = open_memstream(&buf, &len);
  p.print(f);
  std::fclose(f);
  std::string out(buf, len);
  std::free(buf);
  EXPECT_NE(out.find("cpu profile: 3 steps after the first; per step 6.000 ms "
                     "inside 3 nodes"),
            std::string::npos)
      << out;
  // MatMul first: 2 nodes, 5 ms of 6 per step, 2 MiB per step.
  EXPECT_NE(out.find("cpu profile: MatMul                                2 "
                     "       5.000   83.3%          2.0"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("cpu profile: Add                                   1 "
                     "       1.000   16.7%          2.0"),
            std::string::npos)
      << out;
  EXPECT_LT(out.find("MatMul"), out.find("Add")) << out;
  EXPECT_NE(out.find("cpu profile: the 3 slowest nodes"), std::string::npos);
}

TEST(CpuOpProfile, NothingTimedPrintsNothing) {
  cpu::OpProfile p;
  p.add("a", "MatMul", 5.0, 10); // a first call only
  char *buf = nullptr;
  size_t len = 0;
  std::FILE *f = open_memstream(&buf, &len);
  p.print(f);
  std::fclose(f);
  EXPECT_EQ(len, 0u);
  std::free(buf);
}

TEST(CpuParallel, RowKernelsSameBitsOnOneAndTwoThreads) {
  // Rows of 1, 7, 128 and 768 elements; row counts around the grain and
  // LayerNormalizationGrad's 64-row chunks (1, 63, 64, 65, 1000 rows).
  for (DType t : {DType::F32, DType::BF16})
    for (std::vector<int64_t> dims : {std::vector<int64_t>{1000, 7},
                                      {65, 768},
                                      {64, 128},
                                      {3, 63, 128},
                                      {1, 768},
                                      {4096, 1},
                                      {8, 12, 128, 128}}) {
      std::string what =
          std::string(dtypeName(t)) + " " + cpu::shapeString(dims);
      std::vector<int64_t> norm = {dims.back()};
      Tensor x = randomTensor(t, dims, 4), dy = randomTensor(t, dims, 5);
      Tensor scale = randomTensor(t, norm, 6), bias = randomTensor(t, norm, 7);
      expectSameBitsOnOneAndTwo("", "Softmax", {&x}, {}, 1, what + " softmax");
      expectSameBitsOnOneAndTwo("", "Softmax", {&x}, {{"axis", intAttr(1)}}, 1,
                                what + " softmax axis 1");
      Tensor y = runAll("", "Softmax", {&x}, {}, 1, 1)[0];
      expectSameBitsOnOneAndTwo(kMpcDomain, "SoftmaxGrad", {&dy, &y}, {}, 1,
                                what + " softmax grad");
      std::vector<Tensor> ln =
          runAll("", "LayerNormalization", {&x, &scale, &bias}, {}, 3, 1);
      expectSameBitsOnOneAndTwo("", "LayerNormalization", {&x, &scale, &bias},
                                {}, 3, what + " layernorm");
      expectSameBitsOnOneAndTwo(kMpcDomain, "LayerNormalizationGrad",
                                {&dy, &x, &scale, &ln[1], &ln[2]}, {}, 3,
                                what + " layernorm grad");
      std::vector<int64_t> perm(dims.size());
      for (size_t i = 0; i < perm.size(); ++i)
        perm[i] = int64_t(perm.size() - 1 - i);
      expectSameBitsOnOneAndTwo("", "Transpose", {&x},
                                {{"perm", intsAttr(perm)}}, 1,
                                what + " transpose");
      if (dims.size() == 4)
        expectSameBitsOnOneAndTwo("", "Transpose", {&x},
                                  {{"perm", intsAttr({0, 2, 1, 3})}}, 1,
                                  what + " transpose 0213");
    }
}

TEST(CpuParallel, LayerNormGradMatchesTheSerialChunkedSums) {
  // dScale's column sums, by hand in the documented order: 64-row chunks
  // summed from zero, chunk sums added in order (kernels/common/
  // chunked_sum.h); the parallel kernel must give exactly these bits.
  std::vector<int64_t> dims = {200, 16};
  Tensor x = randomTensor(DType::F32, dims, 8),
         dy = randomTensor(DType::F32, dims, 9);
  Tensor scale = randomTensor(DType::F32, {16}, 10),
         bias = randomTensor(DType::F32, {16}, 11);
  std::vector<Tensor> ln =
      runAll("", "LayerNormalization", {&x, &scale, &bias}, {}, 3, 2);
  std::vector<Tensor> grad =
      runAll(kMpcDomain, "LayerNormalizationGrad",
             {&dy, &x, &scale, &ln[1], &ln[2]}, {}, 3, 2);
  std::vector<float> xv = x.toFloats(), gv = dy.toFloats(),
                     mv = ln[1].toFloats(), iv = ln[2].toFloats();
  std::vector<float> ds = grad[1].toFloats(), db = grad[2].toFloats();
  for (int64_t j = 0; j < 16; ++j) {
    float totalS = 0, totalB = 0;
    for (int64_t c = 0; c * 64 < 200; ++c) {
      float partS = 0, partB = 0;
      for (int64_t o = c * 64; o < std::min<int64_t>(200, (c + 1) * 64); ++o) {
        float g = gv[size_t(o * 16 + j)];
        float xhat = (xv[size_t(o * 16 + j)] - mv[size_t(o)]) * iv[size_t(o)];
        partS += g * xhat;
        partB += g;
      }
      totalS += partS;
      totalB += partB;
    }
    EXPECT_EQ(db[size_t(j)], totalB) << j;
    EXPECT_NEAR(ds[size_t(j)], totalS, 1e-5 * (1 + std::fabs(totalS))) << j;
  }
}

TEST(CpuParallel, DropoutSameBitsOnOneAndTwoThreads) {
  Tensor x = randomTensor(DType::F32, {3, 70001}, 12);
  Tensor ratio = Tensor::fromFloats({}, {0.25f});
  Tensor training(DType::Bool, {});
  training.bytes[0] = 1;
  expectSameBitsOnOneAndTwo("", "Dropout", {&x, &ratio, &training}, {}, 2,
                            "dropout");
  std::vector<Tensor> fwd =
      runAll("", "Dropout", {&x, &ratio, &training}, {}, 2, 2);
  expectSameBitsOnOneAndTwo(kMpcDomain, "DropoutGrad",
                            {&x, &fwd[1], &ratio, &training}, {}, 1,
                            "dropout grad");
  // Kept elements are X / 0.75, the others 0; a quarter or so dropped.
  std::vector<float> xv = x.toFloats(), yv = fwd[0].toFloats();
  int64_t dropped = 0;
  for (size_t i = 0; i < xv.size(); ++i) {
    bool keep = fwd[1].bytes[i] != 0;
    dropped += !keep;
    ASSERT_EQ(yv[i], keep ? xv[i] * float(1.0 / 0.75) : 0.f) << i;
  }
  EXPECT_NEAR(double(dropped) / double(xv.size()), 0.25, 0.01);
}

TEST(CpuParallel, SoftmaxCrossEntropySameBitsOnOneAndTwoThreads) {
  // [N, C] and [N, C, D] scores, mean and none, an ignored label.
  for (std::vector<int64_t> dims :
       {std::vector<int64_t>{1024, 1000}, {64, 10, 7}, {3, 5}}) {
    Tensor x = randomTensor(DType::F32, dims, 13);
    std::vector<int64_t> ld = {dims[0]};
    if (dims.size() == 3)
      ld.push_back(dims[2]);
    Tensor labels(DType::I64, ld);
    for (int64_t i = 0; i < labels.numel(); ++i)
      labels.data<int64_t>()[i] = i % 3 == 0 ? -100 : (i * 7) % dims[1];
    for (const char *reduction : {"mean", "none"}) {
      Attrs attrs = {{"reduction", Attribute::ofString(reduction)},
                     {"ignore_index", intAttr(-100)}};
      std::string what = cpu::shapeString(dims) + " " + reduction;
      expectSameBitsOnOneAndTwo("", "SoftmaxCrossEntropyLoss", {&x, &labels},
                                attrs, 2, what);
      std::vector<Tensor> fwd =
          runAll("", "SoftmaxCrossEntropyLoss", {&x, &labels}, attrs, 2, 2);
      Tensor dl = std::string(reduction) == "none"
                      ? randomTensor(DType::F32, ld, 14)
                      : Tensor::fromFloats({}, {1.5f});
      expectSameBitsOnOneAndTwo(kMpcDomain, "SoftmaxCrossEntropyLossGrad",
                                {&dl, &fwd[1], &labels}, attrs, 1,
                                what + " grad");
    }
  }
}

TEST(CpuParallel, BatchNormSameBitsOnOneAndTwoThreads) {
  // Channels in parallel for the statistics and dScale/dBias, planes for
  // Y and dX: ResNet-like maps, a 1x1 map, rows of 7 (not a multiple of
  // the sums' eight lanes), and fp64.
  for (DType t : {DType::F32, DType::BF16, DType::F64})
    for (std::vector<int64_t> dims : {std::vector<int64_t>{32, 64, 32, 32},
                                      {32, 512, 2, 2},
                                      {8, 3, 1, 1},
                                      {5, 9, 7},
                                      {2, 200}}) {
      std::string what =
          std::string(dtypeName(t)) + " " + cpu::shapeString(dims);
      std::vector<int64_t> ch = {dims[1]};
      Tensor x = randomTensor(t, dims, 21), dy = randomTensor(t, dims, 22);
      Tensor scale = randomTensor(t, ch, 23), bias = randomTensor(t, ch, 24);
      Tensor mean = randomTensor(t, ch, 25);
      Tensor posVar =
          Tensor::fromFloats(ch, std::vector<float>(size_t(dims[1]), 0.5f))
              .castTo(t);
      Attrs train = {{"training_mode", intAttr(1)}};
      expectSameBitsOnOneAndTwo("", "BatchNormalization",
                                {&x, &scale, &bias, &mean, &posVar}, train, 3,
                                what + " forward");
      expectSameBitsOnOneAndTwo(kMpcDomain, "BatchNormalizationGrad",
                                {&dy, &x, &scale}, {}, 3,
                                what + " grad, batch statistics");
      expectSameBitsOnOneAndTwo(kMpcDomain, "BatchNormalizationGrad",
                                {&dy, &x, &scale, &mean, &posVar}, {}, 3,
                                what + " grad, given statistics");
    }
}

TEST(CpuParallel, BatchNormStatisticsAreTheEightLaneDoubleSums) {
  // The documented order (kernels/cpu/normalization.cpp): term i of each
  // row of a channel in lane i % 8, in double, the lanes joined pairwise;
  // momentum 0 makes the running mean the batch mean. Each row holds 2^53
  // at i = 0 and -2^53 at i = 8 (one lane), c + 1 elsewhere: in the lanes
  // the small terms survive, summed in element order they are lost.
  const std::vector<int64_t> dims = {3, 4, 13};
  std::vector<float> values(39 * 4);
  for (size_t k = 0; k < values.size(); ++k) {
    const int64_t i = int64_t(k % 13), c = int64_t(k / 13 % 4);
    values[k] = i == 0 ? 0x1p53f : i == 8 ? -0x1p53f : float(c + 1);
  }
  Tensor x = Tensor::fromFloats(dims, values);
  Tensor scale = randomTensor(DType::F32, {4}, 32),
         bias = randomTensor(DType::F32, {4}, 33);
  Tensor zero = Tensor::fromFloats({4}, std::vector<float>(4, 0.f));
  Tensor one = Tensor::fromFloats({4}, std::vector<float>(4, 1.f));
  std::vector<Tensor> out = runAll(
      "", "BatchNormalization", {&x, &scale, &bias, &zero, &one},
      {{"training_mode", intAttr(1)}, {"momentum", Attribute::ofFloat(0.f)}}, 3,
      2);
  std::vector<float> xv = x.toFloats(), got = out[1].toFloats();
  for (int64_t c = 0; c < 4; ++c) {
    double lane[8] = {};
    for (int64_t n = 0; n < 3; ++n)
      for (int64_t i = 0; i < 13; ++i)
        lane[i % 8] += double(xv[size_t((n * 4 + c) * 13 + i)]);
    double sum = ((lane[0] + lane[1]) + (lane[2] + lane[3])) +
                 ((lane[4] + lane[5]) + (lane[6] + lane[7]));
    EXPECT_EQ(got[size_t(c)], float(sum / 39.0)) << "channel " << c;
  }
}

TEST(CpuParallel, PoolingSameBitsOnOneAndTwoThreads) {
  Tensor x = randomTensor(DType::F32, {32, 64, 32, 32}, 41);
  Attrs pool = {{"kernel_shape", intsAttr({3, 3})},
                {"strides", intsAttr({2, 2})},
                {"pads", intsAttr({1, 1, 1, 1})}};
  expectSameBitsOnOneAndTwo("", "MaxPool", {&x}, pool, 1, "max pool");
  Tensor y = runAll("", "MaxPool", {&x}, pool, 1, 1)[0];
  Tensor dy = randomTensor(DType::F32, y.dims, 42);
  expectSameBitsOnOneAndTwo(kMpcDomain, "MaxPoolGrad", {&dy, &x}, pool, 1,
                            "max pool grad");
  expectSameBitsOnOneAndTwo("", "AveragePool", {&x}, pool, 1, "average pool");
  Tensor shape(DType::I64, {4});
  for (int64_t i = 0; i < 4; ++i)
    shape.data<int64_t>()[i] = x.dims[size_t(i)];
  expectSameBitsOnOneAndTwo(kMpcDomain, "AveragePoolGrad", {&dy, &shape}, pool,
                            1, "average pool grad");
}

TEST(CpuParallel, OptimizerUpdatesSameBitsOnOneAndTwoThreads) {
  const int64_t n = 100003; // past the grain, not a multiple of it
  Tensor found(DType::Bool, {});
  found.bytes[0] = 0;
  Tensor step(DType::I64, {});
  step.data<int64_t>()[0] = 3;
  Tensor p = randomTensor(DType::F32, {n}, 51),
         g = randomTensor(DType::F32, {n}, 52);
  Tensor m = randomTensor(DType::F32, {n}, 53);
  Tensor v = Tensor::fromFloats({n}, std::vector<float>(size_t(n), 0.25f));
  Attrs adam = {{"lr", Attribute::ofFloat(1e-3f)},
                {"weight_decay", Attribute::ofFloat(0.01f)},
                {"decoupled", intAttr(1)}};
  expectSameBitsOnOneAndTwo(kMpcDomain, "Adam", {&found, &step, &p, &g, &m, &v},
                            adam, 3, "adamw");
  Tensor mb = m.castTo(DType::BF16), vb = v.castTo(DType::BF16);
  expectSameBitsOnOneAndTwo(kMpcDomain, "Adam",
                            {&found, &step, &p, &g, &mb, &vb}, adam, 3,
                            "adamw, bf16 moments");
  Attrs sgd = {{"lr", Attribute::ofFloat(0.1f)},
               {"momentum", Attribute::ofFloat(0.9f)}};
  expectSameBitsOnOneAndTwo(kMpcDomain, "SGD", {&found, &step, &p, &g, &m}, sgd,
                            2, "sgd momentum");
  expectSameBitsOnOneAndTwo(kMpcDomain, "SGD", {&found, &step, &p, &g},
                            {{"lr", Attribute::ofFloat(0.1f)}}, 1, "sgd");
}

// fold-widening-casts' mpc.AddTo: the bits of Cast(Add(Cast(A), Cast(B)),
// to) and of its Cast down, for every mix of fp32/fp16/bf16 inputs and
// outputs, on one and two threads; lengths around the 1024-element block.
TEST(CpuParallel, AddToIsTheAddAndItsCasts) {
  const std::vector<DType> types = {DType::F32, DType::F16, DType::BF16};
  for (int64_t n : {int64_t(1), int64_t(1023), int64_t(1025), int64_t(40003)})
    for (DType ta : types)
      for (DType tb : types)
        for (DType to : types)
          for (DType low : {DType::Undefined, DType::F16, DType::BF16}) {
            std::string what =
                std::string(dtypeName(ta)) + "+" + dtypeName(tb) + "->" +
                dtypeName(to) +
                (low != DType::Undefined ? std::string(" low ") + dtypeName(low)
                                         : "") +
                " n=" + std::to_string(n);
            Tensor a = randomTensor(DType::F32, {n}, 101).castTo(ta);
            Tensor b = randomTensor(DType::F32, {n}, 102).castTo(tb);
            Tensor a32 = a.castTo(DType::F32), b32 = b.castTo(DType::F32);
            Tensor want = runAll("", "Add", {&a32, &b32}, {}, 1, 1)[0];
            Tensor c = want.castTo(to);
            Attrs attrs = {{"to", intAttr(toOnnxDataType(to))}};
            if (low != DType::Undefined)
              attrs.push_back({"low", intAttr(toOnnxDataType(low))});
            for (int threads : {1, 2}) {
              std::vector<Tensor> out =
                  runAll(kMpcDomain, "AddTo", {&a, &b}, attrs,
                         low != DType::Undefined ? 2 : 1, threads);
              EXPECT_EQ(out[0].dtype, to) << what;
              EXPECT_TRUE(out[0].bytes == c.bytes)
                  << what << " threads " << threads;
              if (low != DType::Undefined) {
                EXPECT_TRUE(out[1].bytes == c.castTo(low).bytes)
                    << what << " low, threads " << threads;
              }
            }
          }
  // Operands of two shapes (mpc.AddTo does not broadcast) are one line.
  Tensor a = randomTensor(DType::F32, {4, 3}, 103),
         b = randomTensor(DType::F32, {3}, 104);
  try {
    runAll(kMpcDomain, "AddTo", {&a, &b},
           {{"to", intAttr(toOnnxDataType(DType::F32))}}, 1, 1);
    ADD_FAILURE() << "AddTo broadcast";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("must have the same shape"),
              std::string::npos)
        << e.what();
  }
}

// weight-copies: SGD and Adam write the 16-bit working copy of the new
// master beside it (`low`): the Cast of p' bit for bit, on any thread count,
// a skipped step's the Cast of p; the other outputs as without the copy.
TEST(CpuParallel, UpdatesWriteTheCastOfTheNewMaster) {
  Tensor step(DType::I64, {});
  step.data<int64_t>()[0] = 4;
  for (bool skipped : {false, true})
    for (DType low : {DType::F16, DType::BF16})
      for (int64_t n : {int64_t(1), int64_t(1025), int64_t(100003)}) {
        std::string what = std::string(dtypeName(low)) +
                           " n=" + std::to_string(n) +
                           (skipped ? " skipped" : "");
        Tensor found(DType::Bool, {});
        found.bytes[0] = skipped ? 1 : 0;
        Tensor p = randomTensor(DType::F32, {n}, 91);
        Tensor g = randomTensor(DType::F16, {n}, 92);
        Tensor m = randomTensor(DType::F32, {n}, 93);
        Tensor v = Tensor::fromFloats({n}, std::vector<float>(size_t(n), 0.5f));
        Attrs adam = {{"lr", Attribute::ofFloat(1e-2f)},
                      {"weight_decay", Attribute::ofFloat(0.01f)},
                      {"decoupled", intAttr(1)}};
        Attrs sgd = {{"lr", Attribute::ofFloat(0.1f)},
                     {"momentum", Attribute::ofFloat(0.9f)}};
        std::vector<Tensor> plainAdam = runAll(
            kMpcDomain, "Adam", {&found, &step, &p, &g, &m, &v}, adam, 3, 1);
        std::vector<Tensor> plainSgd =
            runAll(kMpcDomain, "SGD", {&found, &step, &p, &g, &m}, sgd, 2, 1);
        adam.push_back({"low", intAttr(toOnnxDataType(low))});
        sgd.push_back({"low", intAttr(toOnnxDataType(low))});
        for (int threads : {1, 2}) {
          std::vector<Tensor> out =
              runAll(kMpcDomain, "Adam", {&found, &step, &p, &g, &m, &v}, adam,
                     4, threads);
          for (size_t i = 0; i < 3; ++i)
            EXPECT_TRUE(out[i].bytes == plainAdam[i].bytes)
                << "adamw " << what << " output " << i;
          EXPECT_EQ(out[3].dtype, low);
          EXPECT_TRUE(out[3].bytes == out[0].castTo(low).bytes)
              << "adamw " << what << " threads " << threads;
          out = runAll(kMpcDomain, "SGD", {&found, &step, &p, &g, &m}, sgd, 3,
                       threads);
          for (size_t i = 0; i < 2; ++i)
            EXPECT_TRUE(out[i].bytes == plainSgd[i].bytes)
                << "sgd " << what << " output " << i;
          EXPECT_TRUE(out[2].bytes == out[0].castTo(low).bytes)
              << "sgd " << what << " threads " << threads;
          if (skipped) {
            EXPECT_TRUE(out[2].bytes == p.castTo(low).bytes) << "sgd " << what;
          }
        }
      }
  // A copy of another type is refused with one line.
  Tensor found(DType::Bool, {});
  found.bytes[0] = 0;
  Tensor p = randomTensor(DType::F32, {4}, 95),
         g = randomTensor(DType::F32, {4}, 96),
         m = randomTensor(DType::F32, {4}, 97), v = p.castTo(DType::F32);
  try {
    runAll(kMpcDomain, "Adam", {&found, &step, &p, &g, &m, &v},
           {{"low", intAttr(toOnnxDataType(DType::F32))}}, 4, 1);
    ADD_FAILURE() << "an fp32 working copy was accepted";
  } catch (const Error &e) {
    EXPECT_NE(
        std::string(e.what()).find("attribute 'low' must be fp16 or bf16"),
        std::string::npos)
        << e.what();
  }
}

// fold-unscale hands SGD and Adam the loss-scaled gradient and the scale
// (grad_scale) in place of UnscaleGradients' fp32 output: the update is bit
// for bit the one of the unscaled gradient, on any thread count, for fp32,
// fp16 and bf16 gradients, a scale that is not a power of two (its inverse
// rounded), 1 (no multiply) and around the widening block (1024); a skipped
// step copies. An lr input keeps its place before the scale.
TEST(CpuParallel, UpdatesUnscaleTheirGradientAsUnscaleGradients) {
  Tensor step(DType::I64, {});
  step.data<int64_t>()[0] = 3;
  Tensor lr(DType::F64, {});
  lr.data<double>()[0] = 0.003;
  Attrs adam = {{"lr", Attribute::ofFloat(1e-2f)},
                {"weight_decay", Attribute::ofFloat(0.01f)},
                {"decoupled", intAttr(1)}};
  Attrs sgd = {{"lr", Attribute::ofFloat(0.1f)},
               {"momentum", Attribute::ofFloat(0.9f)}};
  for (bool skipped : {false, true})
    for (DType t : {DType::F32, DType::F16, DType::BF16})
      for (float scale : {65536.0f, 3000.0f, 1.0f})
        for (int64_t n : {int64_t(1), int64_t(1025), int64_t(100003)}) {
          std::string what =
              std::string(dtypeName(t)) + " scale=" + std::to_string(scale) +
              " n=" + std::to_string(n) + (skipped ? " skipped" : "");
          Tensor found(DType::Bool, {});
          found.bytes[0] = skipped ? 1 : 0;
          Tensor s = Tensor::fromFloats({}, {scale});
          Tensor p = randomTensor(DType::F32, {n}, 71);
          // Gradients as a loss scale leaves them: large enough that the
          // multiply rounds.
          Tensor scaled = randomTensor(DType::F32, {n}, 72);
          for (int64_t k = 0; k < n; ++k)
            scaled.data<float>()[k] *= 3000.0f;
          Tensor g = scaled.castTo(t);
          std::vector<Tensor> unscaled =
              runAll(kMpcDomain, "UnscaleGradients", {&s, &g}, {}, 2, 1);
          const Tensor &gu = unscaled[1];
          Tensor m = randomTensor(DType::F32, {n}, 73);
          Tensor v =
              Tensor::fromFloats({n}, std::vector<float>(size_t(n), 0.5f));
          for (int threads : {1, 2}) {
            std::string at = what + " threads " + std::to_string(threads);
            std::vector<Tensor> folded = runAll(
                kMpcDomain, "Adam",
                {&found, &step, &p, &g, &m, &v, nullptr, &s}, adam, 3, threads);
            std::vector<Tensor> plain =
                runAll(kMpcDomain, "Adam", {&found, &step, &p, &gu, &m, &v},
                       adam, 3, 1);
            for (size_t i = 0; i < 3; ++i)
              EXPECT_TRUE(folded[i].bytes == plain[i].bytes)
                  << "adamw " << at << " output " << i;
            folded = runAll(kMpcDomain, "Adam",
                            {&found, &step, &p, &g, &m, &v, &lr, &s}, adam, 3,
                            threads);
            plain = runAll(kMpcDomain, "Adam",
                           {&found, &step, &p, &gu, &m, &v, &lr}, adam, 3, 1);
            for (size_t i = 0; i < 3; ++i)
              EXPECT_TRUE(folded[i].bytes == plain[i].bytes)
                  << "adamw lr input " << at << " output " << i;
            folded = runAll(kMpcDomain, "SGD",
                            {&found, &step, &p, &g, &m, nullptr, &s}, sgd, 2,
                            threads);
            plain = runAll(kMpcDomain, "SGD", {&found, &step, &p, &gu, &m}, sgd,
                           2, 1);
            for (size_t i = 0; i < 2; ++i)
              EXPECT_TRUE(folded[i].bytes == plain[i].bytes)
                  << "sgd momentum " << at << " output " << i;
            if (!skipped && scale != 1.0f) // the scale made a difference
              EXPECT_FALSE(runAll(kMpcDomain, "SGD",
                                  {&found, &step, &p, &g, &m}, sgd, 2, 1)[0]
                               .bytes == folded[0].bytes)
                  << "sgd " << at;
          }
        }
  // A scale of another type is refused with one line naming it.
  Tensor found(DType::Bool, {});
  found.bytes[0] = 0;
  Tensor p = randomTensor(DType::F32, {4}, 75), g = p, m = p, v = p;
  Tensor s64(DType::F64, {});
  s64.data<double>()[0] = 2.0;
  try {
    runAll(kMpcDomain, "Adam", {&found, &step, &p, &g, &m, &v, nullptr, &s64},
           {}, 3, 1);
    ADD_FAILURE() << "an fp64 grad_scale was accepted";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("grad_scale must be an fp32 scalar"),
              std::string::npos)
        << e.what();
  }
}

// fold-widening-casts hands SGD and Adam the fp16/bf16 gradient in place of
// its fp32 Cast: each block is widened as it is read, so the update is
// bit for bit the one of the Cast's output, on any thread count. Lengths
// around the widening block (1024) and the grain; a skipped step copies.
TEST(CpuParallel, OptimizersReadHalfGradientsAsTheirCast) {
  Tensor step(DType::I64, {});
  step.data<int64_t>()[0] = 2;
  Attrs adam = {{"lr", Attribute::ofFloat(1e-2f)},
                {"weight_decay", Attribute::ofFloat(0.01f)},
                {"decoupled", intAttr(1)}};
  Attrs sgd = {{"lr", Attribute::ofFloat(0.1f)},
               {"momentum", Attribute::ofFloat(0.9f)},
               {"nesterov", intAttr(1)}};
  for (bool skipped : {false, true})
    for (DType t : {DType::BF16, DType::F16})
      for (int64_t n :
           {int64_t(1), int64_t(1023), int64_t(1025), int64_t(100003)}) {
        std::string what = std::string(dtypeName(t)) +
                           " n=" + std::to_string(n) +
                           (skipped ? " skipped" : "");
        Tensor found(DType::Bool, {});
        found.bytes[0] = skipped ? 1 : 0;
        Tensor p = randomTensor(DType::F32, {n}, 81);
        Tensor g16 = randomTensor(t, {n}, 82);
        Tensor g32 = g16.castTo(DType::F32); // the Cast the fold removes
        Tensor m = randomTensor(DType::F32, {n}, 83);
        Tensor v = randomTensor(DType::F32, {n}, 84).castTo(DType::BF16);
        Tensor vf =
            Tensor::fromFloats({n}, std::vector<float>(size_t(n), 0.5f));
        for (int threads : {1, 2}) {
          std::vector<Tensor> folded =
              runAll(kMpcDomain, "Adam", {&found, &step, &p, &g16, &m, &vf},
                     adam, 3, threads);
          std::vector<Tensor> cast =
              runAll(kMpcDomain, "Adam", {&found, &step, &p, &g32, &m, &vf},
                     adam, 3, 1);
          for (size_t i = 0; i < 3; ++i)
            EXPECT_TRUE(folded[i].bytes == cast[i].bytes)
                << "adamw " << what << " threads " << threads << " output "
                << i;
          Tensor mb = m.castTo(DType::BF16);
          folded = runAll(kMpcDomain, "Adam",
                          {&found, &step, &p, &g16, &mb, &v}, adam, 3, threads);
          cast = runAll(kMpcDomain, "Adam", {&found, &step, &p, &g32, &mb, &v},
                        adam, 3, 1);
          for (size_t i = 0; i < 3; ++i)
            EXPECT_TRUE(folded[i].bytes == cast[i].bytes)
                << "adamw bf16 moments " << what << " threads " << threads
                << " output " << i;
          folded = runAll(kMpcDomain, "SGD", {&found, &step, &p, &g16, &m}, sgd,
                          2, threads);
          cast = runAll(kMpcDomain, "SGD", {&found, &step, &p, &g32, &m}, sgd,
                        2, 1);
          for (size_t i = 0; i < 2; ++i)
            EXPECT_TRUE(folded[i].bytes == cast[i].bytes)
                << "sgd nesterov " << what << " threads " << threads
                << " output " << i;
          folded = runAll(kMpcDomain, "SGD", {&found, &step, &p, &g16},
                          {{"lr", Attribute::ofFloat(0.1f)}}, 1, threads);
          cast = runAll(kMpcDomain, "SGD", {&found, &step, &p, &g32},
                        {{"lr", Attribute::ofFloat(0.1f)}}, 1, 1);
          EXPECT_TRUE(folded[0].bytes == cast[0].bytes)
              << "sgd " << what << " threads " << threads;
          if (!skipped) // the update moved the parameter
            EXPECT_FALSE(folded[0].bytes == p.bytes) << "sgd " << what;
        }
      }
  // Any other gradient type is refused with one line naming it.
  Tensor found(DType::Bool, {});
  found.bytes[0] = 0;
  Tensor p = randomTensor(DType::F32, {4}, 85);
  Tensor g64 = randomTensor(DType::F64, {4}, 86);
  try {
    runAll(kMpcDomain, "SGD", {&found, &step, &p, &g64},
           {{"lr", Attribute::ofFloat(0.1f)}}, 1, 1);
    ADD_FAILURE() << "an fp64 gradient was taken";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find(
                  "gradient must be fp32, fp16 or bf16, got fp64"),
              std::string::npos)
        << e.what();
  }
}

TEST(CpuParallel, NormGradientsReadHalfDYAsItsCast) {
  // fold-widening-casts hands LayerNormalizationGrad and RMSNormalizationGrad
  // the fp16/bf16 dY itself instead of its fp32 Cast: the results (in X's
  // dtype) are the Cast's bits, on one and two threads, over rows around the
  // sums' 64-row chunks and widths around the vector lanes.
  for (DType t : {DType::F16, DType::BF16})
    for (std::vector<int64_t> dims :
         {std::vector<int64_t>{1, 7}, {65, 33}, {4, 50, 96}, {300, 768}}) {
      std::string what =
          std::string(dtypeName(t)) + " " + cpu::shapeString(dims);
      int64_t n = dims.back();
      Tensor x = randomTensor(DType::F32, dims, 91);
      Tensor dy16 = randomTensor(t, dims, 92);
      Tensor dy32 = dy16.castTo(DType::F32); // the Cast the fold removes
      Tensor scale = randomTensor(DType::F32, {n}, 93),
             bias = randomTensor(DType::F32, {n}, 94);
      std::vector<Tensor> ln =
          runAll("", "LayerNormalization", {&x, &scale, &bias}, {}, 3, 1);
      Attrs rms = {{"epsilon", Attribute::ofFloat(1e-6f)}};
      for (int threads : {1, 2}) {
        std::vector<Tensor> folded =
            runAll(kMpcDomain, "LayerNormalizationGrad",
                   {&dy16, &x, &scale, &ln[1], &ln[2]}, {}, 3, threads);
        std::vector<Tensor> cast =
            runAll(kMpcDomain, "LayerNormalizationGrad",
                   {&dy32, &x, &scale, &ln[1], &ln[2]}, {}, 3, 1);
        for (size_t i = 0; i < 3; ++i) {
          EXPECT_EQ(folded[i].dtype, DType::F32) << what << " output " << i;
          EXPECT_TRUE(folded[i].bytes == cast[i].bytes)
              << "layer norm " << what << " threads " << threads << " output "
              << i;
        }
        folded = runAll(kMpcDomain, "RMSNormalizationGrad", {&dy16, &x, &scale},
                        rms, 2, threads);
        cast = runAll(kMpcDomain, "RMSNormalizationGrad", {&dy32, &x, &scale},
                      rms, 2, 1);
        for (size_t i = 0; i < 2; ++i)
          EXPECT_TRUE(folded[i].bytes == cast[i].bytes)
              << "rms norm " << what << " threads " << threads << " output "
              << i;
      }
    }
  // A dY wider than X is refused with one line naming both types.
  Tensor x = randomTensor(DType::F16, {2, 4}, 95);
  Tensor dy = randomTensor(DType::F32, {2, 4}, 96);
  Tensor scale = randomTensor(DType::F16, {4}, 97);
  try {
    runAll(kMpcDomain, "RMSNormalizationGrad", {&dy, &x, &scale}, {}, 2, 1);
    ADD_FAILURE() << "an fp32 dY with an fp16 X was taken";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find(
                  "dY must be X's dtype fp16 or a narrower float, got fp32"),
              std::string::npos)
        << e.what();
  }
}

TEST(CpuParallel, NormalizationToIsTheNormAndItsCasts) {
  // mpc.LayerNormalizationTo (fold-widening-casts) against the nodes it
  // replaces: LayerNormalization, then Cast(Y, to) and Cast(Y as stored,
  // low), bit for bit, on one and two threads; fp32 X (rows narrowed as
  // they are made) and fp16 X (cast after).
  Attrs ln = {{"axis", intAttr(-1)}, {"epsilon", Attribute::ofFloat(1e-5f)}};
  auto cast = [](const Tensor &t, DType to) {
    Attrs a = {{"to", intAttr(toOnnxDataType(to))}};
    return runAll("", "Cast", {&t}, a, 1, 1)[0];
  };
  for (DType xt : {DType::F32, DType::F16})
    for (std::vector<int64_t> dims :
         {std::vector<int64_t>{1, 7}, {65, 33}, {4, 50, 768}})
      for (auto [to, low] : {std::pair(DType::F16, DType::Undefined),
                             std::pair(DType::BF16, DType::Undefined),
                             std::pair(DType::F32, DType::F16),
                             std::pair(DType::F32, DType::BF16),
                             std::pair(DType::F16, DType::BF16)}) {
        int64_t n = dims.back();
        Tensor x = randomTensor(xt, dims, 101);
        Tensor scale = randomTensor(xt, {n}, 102),
               bias = randomTensor(xt, {n}, 103);
        std::vector<Tensor> ref =
            runAll("", "LayerNormalization", {&x, &scale, &bias}, ln, 3, 1);
        Tensor y = cast(ref[0], to);
        Attrs a = ln;
        a.push_back({"to", intAttr(toOnnxDataType(to))});
        size_t outs = 3;
        if (low != DType::Undefined) {
          a.push_back({"low", intAttr(toOnnxDataType(low))});
          outs = 4;
        }
        std::string what = std::string(dtypeName(xt)) + " " +
                           cpu::shapeString(dims) + " to " + dtypeName(to) +
                           " low " + dtypeName(low);
        for (int threads : {1, 2}) {
          std::vector<Tensor> got =
              runAll(kMpcDomain, "LayerNormalizationTo", {&x, &scale, &bias}, a,
                     outs, threads);
          EXPECT_EQ(got[0].dtype, to) << what;
          EXPECT_TRUE(got[0].bytes == y.bytes) << what << " Y, " << threads;
          EXPECT_TRUE(got[1].bytes == ref[1].bytes) << what << " mean";
          EXPECT_TRUE(got[2].bytes == ref[2].bytes) << what << " inv_std";
          if (outs == 4)
            EXPECT_TRUE(got[3].bytes == cast(y, low).bytes)
                << what << " Ylow, " << threads;
          // mpc.RMSNormalizationTo against mpc.RMSNormalization and its
          // Casts (Ylow is output 1).
          Attrs ra = a;
          std::vector<Tensor> rms =
              runAll(kMpcDomain, "RMSNormalization", {&x, &scale}, ln, 1, 1);
          Tensor ry = cast(rms[0], to);
          std::vector<Tensor> rgot =
              runAll(kMpcDomain, "RMSNormalizationTo", {&x, &scale}, ra,
                     outs == 4 ? 2 : 1, threads);
          EXPECT_TRUE(rgot[0].bytes == ry.bytes) << "rms " << what << " Y";
          if (outs == 4)
            EXPECT_TRUE(rgot[1].bytes == cast(ry, low).bytes)
                << "rms " << what << " Ylow, " << threads;
        }
      }
}

TEST(CpuParallel, BiasGradientSameBitsOnOneAndTwoThreads) {
  // SumToShape down the columns of [rows, inner]: columns in parallel;
  // rows past the sums' chunk, widths around the grain, half and fp32 dY.
  for (DType t : {DType::F32, DType::BF16, DType::F16})
    for (std::vector<int64_t> dims : {std::vector<int64_t>{1024, 768},
                                      {8, 128, 3072},
                                      {5000, 7},
                                      {3, 40000}}) {
      std::string what =
          std::string(dtypeName(t)) + " " + cpu::shapeString(dims);
      Tensor dy = randomTensor(t, dims, 61);
      Tensor x = randomTensor(DType::F32, {dims.back()}, 62);
      Tensor xt = x.castTo(t);
      expectSameBitsOnOneAndTwo(kMpcDomain, "SumToShape", {&dy, &xt}, {}, 1,
                                what + " sum to shape");
      expectSameBitsOnOneAndTwo(kMpcDomain, "SumToShapeAs", {&dy, &x}, {}, 1,
                                what + " sum to shape as fp32");
    }
}

TEST(CpuParallel, BiasGradientIsTheChunkedColumnSum) {
  // Each column: rows in chunks of 64 (kernels/common/chunked_sum.h, the
  // GPU's order), each chunk summed in order and added to the total.
  const int64_t rows = 1000, inner = 300;
  Tensor dy = randomTensor(DType::F32, {rows, inner}, 71);
  Tensor x = randomTensor(DType::F32, {inner}, 72);
  std::vector<float> v = dy.toFloats();
  std::vector<float> got =
      runAll(kMpcDomain, "SumToShape", {&dy, &x}, {}, 1, 2)[0].toFloats();
  for (int64_t j = 0; j < inner; ++j) {
    float total = 0;
    for (int64_t c = 0; c < rows; c += 64) {
      float part = 0;
      for (int64_t r = c; r < std::min(rows, c + 64); ++r)
        part += v[size_t(r * inner + j)];
      total += part;
    }
    ASSERT_EQ(got[size_t(j)], total) << "column " << j;
  }
}
