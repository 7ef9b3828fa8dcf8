// mpc.FusedMatMul's CPU kernel against MatMul of materialised Transposes:
// fold-transpose (passes/fold_transpose.cpp) may only change where the
// transposition happens. fp16/bf16 (emulated: widened to fp32, fp32
// accumulation, one rounding) transpose while widening and must give
// MatMul's bits exactly. fp32/fp64 hand the flags to BLAS, whose kernel for
// a transposed layout may sum in another order (OpenBLAS's small-matrix
// kernels do, e.g. at K = 600): equal to a few ulps of the sum, and the test
// says how many elements differ at all. Shapes cover plain, batched,
// shared-B (MatMul stacks the batches into one product there), broadcast
// batches and a K past OpenBLAS's blocking.
#include "ir/graph.h"
#include "ir/mpc_ops.h"
#include "kernels/cpu/kernel_table.h"
#include "support/diagnostics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iostream>
#include <random>
#include <string>
#include <vector>

using namespace mpc;

namespace {

Tensor randomTensor(DType t, const std::vector<int64_t> &dims, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> v(size_t(elementCount(dims)));
  for (float &x : v)
    x = d(rng);
  return Tensor::fromFloats(dims, v).castTo(t);
}

/// Runs one node of `op` on the inputs and returns its output.
Tensor runOne(const std::string &domain, const std::string &op,
              const std::vector<const Tensor *> &inputs,
              const std::vector<std::pair<std::string, Attribute>> &attrs) {
  Graph g;
  std::vector<Value *> vals;
  for (size_t i = 0; i < inputs.size(); ++i)
    vals.push_back(g.addInput("in" + std::to_string(i), inputs[i]->dtype,
                              toDims(inputs[i]->dims)));
  Node *n = g.createNode(op, vals, 1, "node", domain);
  for (const auto &kv : attrs)
    n->setAttr(kv.first, kv.second);
  std::vector<Tensor> outs;
  runCpuNode(*n, inputs, outs);
  return outs[0];
}

/// The operand with its last two axes swapped, by the Transpose kernel.
Tensor swapLastTwo(const Tensor &t) {
  std::vector<int64_t> perm;
  int64_t r = int64_t(t.dims.size());
  for (int64_t i = 0; i + 2 < r; ++i)
    perm.push_back(i);
  perm.push_back(r - 1);
  perm.push_back(r - 2);
  return runOne("", "Transpose", {&t}, {{"perm", Attribute::ofInts(perm)}});
}

struct Shapes {
  const char *name;
  std::vector<int64_t> a, b; ///< of op(A) and op(B), the logical operands
};

std::vector<int64_t> swapped(std::vector<int64_t> d) {
  std::swap(d[d.size() - 1], d[d.size() - 2]);
  return d;
}

TEST(FusedMatMul, EqualsMatMulOfTransposes) {
  const std::vector<Shapes> shapes = {
      {"2d", {5, 7}, {7, 3}},
      {"batched", {4, 5, 7}, {4, 7, 3}},
      {"shared_b", {4, 5, 7}, {7, 3}},
      {"shared_a", {5, 7}, {2, 7, 3}},
      {"broadcast", {2, 1, 5, 7}, {3, 7, 4}},
      {"long_k", {2, 33, 600}, {600, 17}},
      {"wide", {64, 128}, {128, 96}},
  };
  unsigned seed = 1;
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::F64})
    for (const Shapes &s : shapes)
      for (int ta = 0; ta < 2; ++ta)
        for (int tb = 0; tb < 2; ++tb) {
          SCOPED_TRACE(std::string(dtypeName(t)) + " " + s.name + " transA=" +
                       std::to_string(ta) + " transB=" + std::to_string(tb));
          // Stored operands: op(A) = A, or A holds op(A)'s transpose.
          Tensor a = randomTensor(t, ta ? swapped(s.a) : s.a, seed++);
          Tensor b = randomTensor(t, tb ? swapped(s.b) : s.b, seed++);
          Tensor opA = ta ? swapLastTwo(a) : a;
          Tensor opB = tb ? swapLastTwo(b) : b;
          Tensor want = runOne("", "MatMul", {&opA, &opB}, {});
          Tensor got = runOne(kMpcDomain, "FusedMatMul", {&a, &b},
                              {{"transA", Attribute::ofInt(ta)},
                               {"transB", Attribute::ofInt(tb)}});
          ASSERT_EQ(got.dtype, want.dtype);
          ASSERT_EQ(got.dims, want.dims);
          ASSERT_EQ(got.byteSize(), want.byteSize());
          if (t == DType::F16 || t == DType::BF16) {
            EXPECT_EQ(std::memcmp(got.bytes.data(), want.bytes.data(),
                                  got.byteSize()),
                      0);
            continue;
          }
          // Each element sums K products of magnitude <= 1: another order
          // moves it by at most about K ulps of K.
          int64_t k = s.a.back();
          double eps = t == DType::F32 ? 0x1p-23 : 0x1p-52;
          double bound = double(k) * double(k) * eps;
          int64_t differing = 0;
          for (int64_t i = 0; i < want.numel(); ++i) {
            double g = got.getAsDouble(i), w = want.getAsDouble(i);
            differing += g != w;
            EXPECT_LE(std::fabs(g - w), bound) << "element " << i;
          }
          if (differing)
            std::cout << "[ note     ] " << dtypeName(t) << " " << s.name
                      << " transA=" << ta << " transB=" << tb << ": "
                      << differing << " of " << want.numel()
                      << " elements differ from MatMul's in the last bits "
                         "(BLAS's summation order)\n";
        }
}

TEST(FusedMatMul, RefusesBadOperands) {
  Tensor v = randomTensor(DType::F32, {7}, 1);
  Tensor m = randomTensor(DType::F32, {7, 3}, 2);
  Tensor wrongK = randomTensor(DType::F32, {5, 3}, 3);
  auto errorOf = [](const std::vector<const Tensor *> &in, int64_t ta,
                    int64_t tb) -> std::string {
    try {
      runOne(
          kMpcDomain, "FusedMatMul", in,
          {{"transA", Attribute::ofInt(ta)}, {"transB", Attribute::ofInt(tb)}});
    } catch (const Error &e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(errorOf({&v, &m}, 0, 0).find("rank >= 2"), std::string::npos);
  // m^T is [3, 7]; [3, 7] x [5, 3] does not multiply.
  EXPECT_NE(errorOf({&m, &wrongK}, 1, 0).find("inner dimensions differ"),
            std::string::npos);
  EXPECT_NE(errorOf({&m, &m}, 2, 0).find("must be 0 or 1"), std::string::npos);
  EXPECT_EQ(errorOf({&m, &m}, 1, 0), ""); // [3,7] x [7,3]
}

} // namespace
