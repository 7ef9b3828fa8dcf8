// The CPU's one pool of threads (kernels/cpu/parallel.h) and the kernels
// that use it, and the CPU op profile's table (runtime/cpu/op_profile.h).
//
// parallelFor must cover every index exactly once and split big loops; the
// elementwise kernels it runs (Gelu, GeluGrad, the half Casts) compute each
// element alone, so their contract is the same bits on one thread and on
// several, and the same bits as the scalar formula they vectorise.
#include "ir/graph.h"
#include "ir/mpc_ops.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/parallel.h"
#include "runtime/cpu/op_profile.h"

#include <gtest/gtest.h>

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

Tensor runOne(const std::string &op, const std::vector<const Tensor *> &inputs,
              const std::vector<std::pair<std::string, Attribute>> &attrs,
              int threads) {
  ThreadScope scope(threads);
  Graph g;
  std::vector<Value *> vals;
  for (size_t i = 0; i < inputs.size(); ++i)
    vals.push_back(g.addInput("in" + std::to_string(i), inputs[i]->dtype,
                              toDims(inputs[i]->dims)));
  Node *n =
      g.createNode(op, vals, 1, "node", op == "GeluGrad" ? kMpcDomain : "");
  for (const auto &kv : attrs)
    n->setAttr(kv.first, kv.second);
  std::vector<Tensor> outs;
  runCpuNode(*n, inputs, outs);
  return outs[0];
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
