// Tests of the CPU reference kernels, op by op, against hand-computed values.
//
// Each case builds a one-node graph and runs it through runCpuNode (the path
// fold-constants takes) or the Executor (the path mpc-run takes). Floating
// results are compared with loops written here in double; fp16/bf16 results
// must equal the fp32 result rounded once (roundToHalf), which is the GPU's
// numerics contract; bad input must raise mpc::Error naming the node.
#include "ir/builder.h"
#include "ir/half.h"
#include "ir/mpc_ops.h"
#include "kernels/common/loss_scale_math.h"
#include "kernels/common/optimizer_math.h"
#include "kernels/cpu/kernel_table.h"
#include "runtime/executor.h"
#include "support/diagnostics.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

using namespace mpc;

namespace {

using Attrs = Builder::Attrs;

// --- tensor helpers ----------------------------------------------------------

Tensor F(std::vector<int64_t> dims, std::vector<float> v) {
  return Tensor::fromFloats(dims, v);
}
Tensor I(std::vector<int64_t> dims, std::vector<int64_t> v) {
  return Tensor::fromInt64s(dims, v);
}
Tensor D(std::vector<int64_t> dims, std::vector<double> v) {
  Tensor t(DType::F64, dims);
  std::copy(v.begin(), v.end(), t.data<double>());
  return t;
}
Tensor I32(std::vector<int64_t> dims, std::vector<int32_t> v) {
  Tensor t(DType::I32, dims);
  std::copy(v.begin(), v.end(), t.data<int32_t>());
  return t;
}
Tensor B(std::vector<int64_t> dims, std::vector<bool> v) {
  Tensor t(DType::Bool, dims);
  for (size_t i = 0; i < v.size(); ++i)
    t.data<uint8_t>()[i] = v[i];
  return t;
}
/// fp16/bf16 tensor holding the given values (which the tests pick exact).
Tensor H(std::vector<int64_t> dims, std::vector<float> v,
         DType t = DType::F16) {
  return F(dims, v).castTo(t);
}

std::vector<double> values(const Tensor &t) {
  std::vector<double> v(size_t(t.numel()));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = t.getAsDouble(int64_t(i));
  return v;
}

/// Uniform values in [lo, hi), deterministic per seed.
std::vector<float> randomFloats(size_t n, unsigned seed, float lo = -1,
                                float hi = 1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float &x : v)
    x = d(rng);
  return v;
}
/// Multiples of 1/4 in [-2, 2]: products and short sums are exact in fp16.
std::vector<float> quarterFloats(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(-8, 8);
  std::vector<float> v(n);
  for (float &x : v)
    x = d(rng) / 4.0f;
  return v;
}

void expectNear(const Tensor &t, const std::vector<double> &want, double tol,
                const std::string &what = "") {
  ASSERT_EQ(size_t(t.numel()), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(t.getAsDouble(int64_t(i)), want[i],
                tol * std::max(1.0, std::fabs(want[i])))
        << what << " element " << i;
}

// --- running one node --------------------------------------------------------

/// Runs a one-node graph; nullptr inputs are omitted optional inputs.
std::vector<Tensor> runNode(const std::string &op,
                            const std::vector<const Tensor *> &inputs,
                            const Attrs &attrs = {}, size_t numOutputs = 1,
                            const std::string &domain = "") {
  Graph g;
  std::vector<Value *> vals;
  for (size_t i = 0; i < inputs.size(); ++i)
    vals.push_back(inputs[i]
                       ? g.addInput("in" + std::to_string(i), inputs[i]->dtype,
                                    toDims(inputs[i]->dims))
                       : nullptr);
  Node *n = g.createNode(op, vals, numOutputs, "test_node", domain);
  for (const auto &kv : attrs)
    n->setAttr(kv.first, kv.second);
  std::vector<Tensor> outs;
  runCpuNode(*n, inputs, outs);
  return outs;
}

/// Single-output convenience over tensors held by value.
Tensor run1(const std::string &op, const std::vector<Tensor> &inputs,
            const Attrs &attrs = {}, const std::string &domain = "") {
  std::vector<const Tensor *> ptrs;
  for (const Tensor &t : inputs)
    ptrs.push_back(&t);
  return runNode(op, ptrs, attrs, 1, domain)[0];
}

Tensor runMpc(const std::string &op, const std::vector<Tensor> &inputs,
              const Attrs &attrs = {}) {
  return run1(op, inputs, attrs, kMpcDomain);
}

/// The message of the mpc::Error that running the node throws ("" if none).
std::string errorOf(const std::string &op, const std::vector<Tensor> &inputs,
                    const Attrs &attrs = {}, const std::string &domain = "") {
  try {
    run1(op, inputs, attrs, domain);
  } catch (const Error &e) {
    return e.what();
  }
  return "";
}

Attribute ints(std::vector<int64_t> v) { return Attribute::ofInts(v); }
Attribute i64(int64_t v) { return Attribute::ofInt(v); }
Attribute f32(float v) { return Attribute::ofFloat(v); }
Attribute str(std::string v) { return Attribute::ofString(v); }

} // namespace

// --- the table and the backend -----------------------------------------------

TEST(CpuBackend, TableHasEveryOp) {
  std::vector<std::string> ops = cpuKernelOps();
  for (const char *op : {"Add",
                         "Sub",
                         "Mul",
                         "Div",
                         "Neg",
                         "Relu",
                         "Identity",
                         "Cast",
                         "Abs",
                         "Sqrt",
                         "Exp",
                         "Log",
                         "Pow",
                         "Tanh",
                         "Sigmoid",
                         "Erf",
                         "Equal",
                         "Greater",
                         "Less",
                         "Not",
                         "Where",
                         "Gemm",
                         "MatMul",
                         "Reshape",
                         "Flatten",
                         "Transpose",
                         "Shape",
                         "Unsqueeze",
                         "Squeeze",
                         "Concat",
                         "Gather",
                         "Slice",
                         "Expand",
                         "ConstantOfShape",
                         "Constant",
                         "Softmax",
                         "LogSoftmax",
                         "SoftmaxCrossEntropyLoss",
                         "NegativeLogLikelihoodLoss",
                         "ReduceMean",
                         "ReduceSum",
                         "ReduceMax",
                         "mpc.ReluGrad",
                         "mpc.SoftmaxGrad",
                         "mpc.SoftmaxGradAs",
                         "mpc.SoftmaxGradDiv",
                         "mpc.SoftmaxTo",
                         "mpc.DivSoftmaxTo",
                         "mpc.LogSoftmaxGrad",
                         "mpc.SoftmaxCrossEntropyLossGrad",
                         "mpc.NegativeLogLikelihoodLossGrad",
                         "mpc.SumToShape",
                         "mpc.ReduceGrad",
                         "mpc.UnscaleGradients",
                         "mpc.UpdateLossScale",
                         "mpc.ClipGradNorm",
                         "mpc.SGD",
                         "mpc.Adam",
                         "mpc.IncrementStep"})
    EXPECT_TRUE(std::count(ops.begin(), ops.end(), op)) << op;
  EXPECT_TRUE(std::is_sorted(ops.begin(), ops.end()));
  EXPECT_NE(findCpuKernel("ai.onnx", "Add"), nullptr);
  EXPECT_EQ(findCpuKernel("mpc", "Add"), nullptr);
  EXPECT_EQ(findCpuKernel("", "ReluGrad"), nullptr);
}

TEST(CpuBackend, UnknownOpIsAnError) {
  Graph g;
  Value *x = g.addInput("x", DType::F32, {2});
  Node *n = g.createNode("Frobnicate", {x}, 1, "frob");
  auto backend = createCpuBackend();
  std::string why;
  EXPECT_FALSE(backend->supports(*n, why));
  EXPECT_NE(why.find("Frobnicate"), std::string::npos) << why;
  Tensor t = F({2}, {1, 2});
  std::vector<Tensor> outs;
  try {
    runCpuNode(*n, {&t}, outs);
    FAIL() << "no error";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("'frob'"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("Frobnicate"), std::string::npos);
  }
}

TEST(CpuBackend, RunsAGraphThroughTheExecutor) {
  // y = Relu(x @ W^T + b), the first layer of the MLP seed model.
  Graph g;
  Builder b(g);
  Value *x = g.addInput("x", DType::F32, {2, 3});
  Value *w = b.constant(F({2, 3}, {1, -1, 2, 0.5, 0.5, -3}), "w");
  Value *bias = b.constant(F({2}, {0.25, -1}), "b");
  Value *h = b.op("Gemm", {x, w, bias}, {{"transB", i64(1)}});
  g.addOutput(b.op("Relu", {h}));
  auto backend = createCpuBackend();
  Executor ex(g, *backend);
  ex.setInput("x", F({2, 3}, {1, 2, 3, -1, 0, 1}));
  ex.run();
  // Row 0: [1-2+6+0.25, 0.5+1-9-1] = [5.25, -8.5] -> [5.25, 0].
  // Row 1: [-1+0+2+0.25, -0.5+0-3-1] = [1.25, -4.5] -> [1.25, 0].
  expectNear(ex.output(0), {5.25, 0, 1.25, 0}, 0);
}

TEST(CpuBackend, MalformedInputTensorIsAnError) {
  Tensor bad = F({2, 2}, {1, 2, 3, 4});
  bad.bytes.resize(4); // claims 4 elements, holds 1
  EXPECT_NE(errorOf("Relu", {bad}).find("malformed"), std::string::npos);
}

// --- elementwise -------------------------------------------------------------

TEST(CpuElementwise, AddBroadcasting) {
  Tensor a = F({2, 3}, {1, 2, 3, 4, 5, 6});
  expectNear(run1("Add", {a, F({3}, {10, 20, 30})}), {11, 22, 33, 14, 25, 36},
             0);
  expectNear(run1("Add", {F({2, 1}, {1, 2}), F({1, 3}, {10, 20, 30})}),
             {11, 21, 31, 12, 22, 32}, 0);
  Tensor s = run1("Add", {a, F({}, {0.5})});
  EXPECT_EQ(s.dims, (std::vector<int64_t>{2, 3}));
  expectNear(s, {1.5, 2.5, 3.5, 4.5, 5.5, 6.5}, 0);
  // [2,1,3] + [4,1]: both sides broadcast.
  Tensor c = run1(
      "Add", {F({2, 1, 3}, {0, 1, 2, 3, 4, 5}), F({4, 1}, {0, 10, 20, 30})});
  EXPECT_EQ(c.dims, (std::vector<int64_t>{2, 4, 3}));
  EXPECT_EQ(c.getAsDouble(3 * 3 + 2), 32);      // [0,3,2]
  EXPECT_EQ(c.getAsDouble(12 + 1 * 3 + 0), 13); // [1,1,0]
  EXPECT_NE(errorOf("Add", {a, F({2}, {1, 2})}).find("do not broadcast"),
            std::string::npos);
  EXPECT_NE(errorOf("Add", {a, I({3}, {1, 2, 3})}).find("different element"),
            std::string::npos);
}

TEST(CpuElementwise, ArithmeticInt64AndDivision) {
  Tensor a = I({4}, {7, -7, 9, 1}), b = I({4}, {2, 2, -4, 3});
  EXPECT_EQ(values(run1("Mul", {a, b})),
            (std::vector<double>{14, -14, -36, 3}));
  EXPECT_EQ(values(run1("Sub", {a, b})), (std::vector<double>{5, -9, 13, -2}));
  // Integer division truncates toward zero.
  EXPECT_EQ(values(run1("Div", {a, b})), (std::vector<double>{3, -3, -2, 0}));
  EXPECT_NE(errorOf("Div", {a, I({}, {0})}).find("division by zero"),
            std::string::npos);
  expectNear(run1("Div", {F({2}, {1, -3}), F({2}, {4, 2})}), {0.25, -1.5}, 0);
  Tensor inf = run1("Div", {F({1}, {1}), F({1}, {0})});
  EXPECT_TRUE(std::isinf(inf.getAsDouble(0)));
}

TEST(CpuElementwise, Fp16ResultsAreRoundedFp32Results) {
  std::vector<float> av = randomFloats(64, 1, -4, 4), bv = randomFloats(64, 2);
  for (DType t : {DType::F16, DType::BF16}) {
    Tensor a = F({8, 8}, av).castTo(t),
           b = F({8}, {bv.begin(), bv.begin() + 8}).castTo(t);
    auto rnd = [&](float v) {
      return t == DType::F16 ? roundToHalf(v) : roundToBf16(v);
    };
    auto ld = [&](const Tensor &x, int64_t i) {
      return float(x.getAsDouble(i));
    };
    Tensor add = run1("Add", {a, b}), mul = run1("Mul", {a, b}),
           div = run1("Div", {a, b}), ex = run1("Exp", {b}),
           sg = run1("Sigmoid", {a}), th = run1("Tanh", {a});
    ASSERT_EQ(add.dtype, t);
    for (int64_t i = 0; i < 64; ++i) {
      float x = ld(a, i), y = ld(b, i % 8);
      EXPECT_EQ(ld(add, i), rnd(x + y)) << i;
      EXPECT_EQ(ld(mul, i), rnd(x * y)) << i;
      EXPECT_EQ(ld(div, i), rnd(x / y)) << i;
      EXPECT_EQ(ld(sg, i), rnd(1.0f / (1.0f + std::exp(-x)))) << i;
      EXPECT_EQ(ld(th, i), rnd(std::tanh(x))) << i;
    }
    for (int64_t i = 0; i < 8; ++i)
      EXPECT_EQ(ld(ex, i), rnd(std::exp(ld(b, i))));
  }
}

TEST(CpuElementwise, UnaryMath) {
  Tensor x = F({5}, {-2, -0.5, 0, 0.5, 3});
  expectNear(run1("Neg", {x}), {2, 0.5, 0, -0.5, -3}, 0);
  expectNear(run1("Abs", {x}), {2, 0.5, 0, 0.5, 3}, 0);
  expectNear(run1("Relu", {x}), {0, 0, 0, 0.5, 3}, 0);
  Tensor pos = D({3}, {0.25, 1, 9});
  expectNear(run1("Sqrt", {pos}), {0.5, 1, 3}, 0);
  expectNear(run1("Log", {pos}), {std::log(0.25), 0, std::log(9.0)}, 1e-15);
  Tensor xd = D({3}, {-1.5, 0.2, 2});
  expectNear(run1("Exp", {xd}), {std::exp(-1.5), std::exp(0.2), std::exp(2.0)},
             1e-15);
  expectNear(run1("Erf", {xd}), {std::erf(-1.5), std::erf(0.2), std::erf(2.0)},
             1e-15);
  expectNear(run1("Tanh", {xd}),
             {std::tanh(-1.5), std::tanh(0.2), std::tanh(2.0)}, 1e-15);
  expectNear(run1("Sigmoid", {xd}),
             {1 / (1 + std::exp(1.5)), 1 / (1 + std::exp(-0.2)),
              1 / (1 + std::exp(-2.0))},
             1e-15);
  EXPECT_EQ(run1("Sqrt", {xd}).dtype, DType::F64);
  // IsNaN, and IsInf by sign.
  Tensor odd = F({4}, {NAN, INFINITY, -INFINITY, 1.5f});
  EXPECT_EQ(values(run1("IsNaN", {odd})), (std::vector<double>{1, 0, 0, 0}));
  EXPECT_EQ(values(run1("IsInf", {odd})), (std::vector<double>{0, 1, 1, 0}));
  // Round is half to even (ONNX); Floor and Ceil keep -0.
  Tensor steps = F({7}, {-2.5f, -1.5f, -0.5f, 0.5f, 1.5f, 2.5f, 2.7f});
  expectNear(run1("Round", {steps}), {-2, -2, -0, 0, 2, 2, 3}, 0);
  expectNear(run1("Floor", {steps}), {-3, -2, -1, 0, 1, 2, 2}, 0);
  expectNear(run1("Ceil", {steps}), {-2, -1, -0, 1, 2, 3, 3}, 0);
  // Relu keeps NaN (as PyTorch does); integer Relu/Neg/Abs work exactly.
  EXPECT_TRUE(std::isnan(run1("Relu", {F({1}, {NAN})}).getAsDouble(0)));
  EXPECT_EQ(values(run1("Abs", {I({2}, {-5, 4})})),
            (std::vector<double>{5, 4}));
  EXPECT_NE(errorOf("Exp", {I({1}, {1})}).find("unsupported element type"),
            std::string::npos);
}

TEST(CpuElementwise, Pow) {
  Tensor x = F({3}, {1.5f, -2, 3});
  // Scalar exponent 2 is x * x exactly (PyTorch's special case).
  Tensor sq = run1("Pow", {x, F({}, {2})});
  expectNear(sq, {2.25, 4, 9}, 0);
  expectNear(run1("Pow", {x, I({}, {3})}), {3.375, -8, 27}, 0);
  expectNear(run1("Pow", {F({2}, {4, 9}), F({}, {0.5})}), {2, 3}, 0);
  expectNear(run1("Pow", {D({3}, {2, 3, 4}), D({3}, {0.5, -1, 1.5})}),
             {std::sqrt(2.0), 1 / 3.0, 8}, 1e-15);
  expectNear(run1("Pow", {I({3}, {2, -3, 5}), I({3}, {10, 3, 0})}),
             {1024, -27, 1}, 0);
  Tensor h = run1("Pow", {H({2}, {3, 0.1f}), F({}, {1.7f})});
  EXPECT_EQ(h.dtype, DType::F16);
  EXPECT_EQ(float(h.getAsDouble(1)),
            roundToHalf(std::pow(roundToHalf(0.1f), 1.7f)));
}

TEST(CpuElementwise, ComparisonsNotWhere) {
  Tensor a = F({2, 2}, {1, 2, 3, 4});
  Tensor gt = run1("Greater", {a, F({2}, {2, 2})});
  EXPECT_EQ(gt.dtype, DType::Bool);
  EXPECT_EQ(values(gt), (std::vector<double>{0, 0, 1, 1}));
  EXPECT_EQ(values(run1("Less", {a, F({}, {3})})),
            (std::vector<double>{1, 1, 0, 0}));
  EXPECT_EQ(values(run1("Equal", {I({3}, {1, 5, -2}), I({3}, {1, 4, -2})})),
            (std::vector<double>{1, 0, 1}));
  EXPECT_EQ(
      values(run1("Equal", {B({2}, {true, false}), B({2}, {true, true})})),
      (std::vector<double>{1, 0}));
  EXPECT_EQ(values(run1("Not", {B({2}, {true, false})})),
            (std::vector<double>{0, 1}));
  Tensor w = run1("Where", {B({2, 1}, {true, false}), a, F({}, {-1})});
  EXPECT_EQ(values(w), (std::vector<double>{1, 2, -1, -1}));
  Tensor wi = run1(
      "Where", {B({3}, {false, true, false}), I({3}, {1, 2, 3}), I({1}, {9})});
  EXPECT_EQ(values(wi), (std::vector<double>{9, 2, 9}));
  EXPECT_NE(errorOf("Where", {a, a, a}).find("condition must be bool"),
            std::string::npos);
}

TEST(CpuElementwise, CastFp32ToFp16TiesToEven) {
  float tieDown = 1.0f + std::ldexp(1.0f, -11);   // 0x3c00 | 0x3c01 -> 0x3c00
  float tieUp = 1.0f + 3 * std::ldexp(1.0f, -11); // 0x3c01 | 0x3c02 -> 0x3c02
  float sub = std::ldexp(1.0f, -25) * 3;          // subnormal tie -> 0x0002
  Tensor x = F({6}, {tieDown, tieUp, sub, 65504, 65520, -65520});
  Tensor h = run1("Cast", {x}, {{"to", i64(10)}});
  ASSERT_EQ(h.dtype, DType::F16);
  const uint16_t *p = h.data<uint16_t>();
  EXPECT_EQ(p[0], 0x3c00);
  EXPECT_EQ(p[1], 0x3c02);
  EXPECT_EQ(p[2], 0x0002);
  EXPECT_EQ(p[3], 0x7bff);
  EXPECT_EQ(p[4], 0x7c00);
  EXPECT_EQ(p[5], 0xfc00);
  Tensor b = run1(
      "Cast",
      {F({2}, {1.0f + std::ldexp(1.0f, -8), 1.0f + 3 * std::ldexp(1.0f, -8)})},
      {{"to", i64(16)}});
  EXPECT_EQ(b.data<uint16_t>()[0], 0x3f80);
  EXPECT_EQ(b.data<uint16_t>()[1], 0x3f82);
  // fp16 -> fp32 is exact.
  EXPECT_EQ(float(run1("Cast", {h}, {{"to", i64(1)}}).getAsDouble(1)),
            1.0f + 2 * std::ldexp(1.0f, -10));
}

TEST(CpuElementwise, CastOtherPairs) {
  // float -> int truncates toward zero; NaN -> 0 and out of range saturates.
  Tensor x = F({6}, {2.7f, -2.7f, -0.5f, NAN, 1e30f, -1e30f});
  EXPECT_EQ(
      values(run1("Cast", {x}, {{"to", i64(7)}})),
      (std::vector<double>{2, -2, 0, 0, double(INT64_MAX), double(INT64_MIN)}));
  EXPECT_EQ(values(run1("Cast", {x}, {{"to", i64(6)}})),
            (std::vector<double>{2, -2, 0, 0, 2147483647.0, -2147483648.0}));
  EXPECT_EQ(values(run1("Cast", {x}, {{"to", i64(9)}})),
            (std::vector<double>{1, 1, 1, 1, 1, 1}));
  EXPECT_EQ(values(run1("Cast", {F({2}, {0, -0.0f})}, {{"to", i64(9)}})),
            (std::vector<double>{0, 0}));
  // int64 -> fp32 / fp64 / bool / int32 (wraps).
  Tensor i = I({3}, {-3, 16777217, int64_t(1) << 33});
  EXPECT_EQ(values(run1("Cast", {i}, {{"to", i64(1)}})),
            (std::vector<double>{-3, 16777216, 8589934592.0}));
  EXPECT_EQ(values(run1("Cast", {i}, {{"to", i64(11)}})),
            (std::vector<double>{-3, 16777217, 8589934592.0}));
  EXPECT_EQ(values(run1("Cast", {i}, {{"to", i64(6)}})),
            (std::vector<double>{-3, 16777217, 0}));
  EXPECT_EQ(values(run1("Cast", {B({2}, {true, false})}, {{"to", i64(1)}})),
            (std::vector<double>{1, 0}));
  // fp64 -> fp16 rounds once: this value is just above a half tie, but
  // rounding through fp32 first would land exactly on the tie (and go down).
  double justAbove = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);
  Tensor h = run1("Cast", {D({1}, {justAbove})}, {{"to", i64(10)}});
  EXPECT_EQ(h.data<uint16_t>()[0], 0x3c01);
  Tensor bf =
      run1("Cast", {D({1}, {1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40)})},
           {{"to", i64(16)}});
  EXPECT_EQ(bf.data<uint16_t>()[0], 0x3f81);
  EXPECT_NE(errorOf("Cast", {x}, {{"to", i64(8)}}).find("unsupported target"),
            std::string::npos);
}

// --- Gemm / MatMul -----------------------------------------------------------

namespace {

/// Naive Gemm in double: Y = alpha * op(A) op(B) + beta * C.
std::vector<double> naiveGemm(const Tensor &a, const Tensor &b, const Tensor *c,
                              bool ta, bool tb, double alpha, double beta) {
  int64_t m = ta ? a.dims[1] : a.dims[0], k = ta ? a.dims[0] : a.dims[1];
  int64_t n = tb ? b.dims[0] : b.dims[1];
  std::vector<double> y(size_t(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < k; ++p)
        acc += a.getAsDouble(ta ? p * m + i : i * k + p) *
               b.getAsDouble(tb ? j * k + p : p * n + j);
      double cv = 0;
      if (c) {
        // Unidirectional broadcast of C (rank <= 2) to [m, n].
        std::vector<int64_t> cd = c->dims;
        while (cd.size() < 2)
          cd.insert(cd.begin(), 1);
        int64_t ci = (cd[0] == 1 ? 0 : i) * cd[1] + (cd[1] == 1 ? 0 : j);
        cv = c->getAsDouble(ci);
      }
      y[size_t(i * n + j)] = alpha * acc + beta * cv;
    }
  return y;
}

} // namespace

TEST(CpuGemm, EveryAttributeCombination) {
  const int64_t m = 3, k = 4, n = 5;
  std::vector<std::vector<int64_t>> cShapes = {{},     {n},    {1, n},
                                               {m, 1}, {m, n}, {1}};
  unsigned seed = 0;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      for (int withC = 0; withC <= int(cShapes.size()); ++withC)
        for (auto [alpha, beta] :
             {std::pair<float, float>{1, 1}, {0.5f, 2}, {-1.5f, 0}}) {
          Tensor a =
              F(ta ? std::vector<int64_t>{k, m} : std::vector<int64_t>{m, k},
                randomFloats(size_t(m * k), ++seed));
          Tensor b =
              F(tb ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n},
                randomFloats(size_t(k * n), ++seed));
          std::optional<Tensor> c;
          if (withC < int(cShapes.size())) {
            std::vector<int64_t> cd = cShapes[size_t(withC)];
            c = F(cd, randomFloats(size_t(elementCount(cd)), ++seed));
          }
          Attrs attrs = {{"alpha", f32(alpha)},
                         {"beta", f32(beta)},
                         {"transA", i64(ta)},
                         {"transB", i64(tb)}};
          std::vector<const Tensor *> in = {&a, &b};
          if (c)
            in.push_back(&*c);
          Tensor y = runNode("Gemm", in, attrs)[0];
          ASSERT_EQ(y.dims, (std::vector<int64_t>{m, n}));
          expectNear(
              y,
              naiveGemm(a, b, c ? &*c : nullptr, ta, tb, alpha, c ? beta : 0),
              1e-5,
              "transA=" + std::to_string(ta) + " transB=" + std::to_string(tb) +
                  " C=" + std::to_string(withC));
        }
}

TEST(CpuGemm, HalfPrecisionAccumulatesInFp32AndRoundsOnce) {
  // Quarter-valued operands: every product and partial sum is exact in fp32,
  // so the fp16/bf16 result must be exactly the rounded exact result.
  const int64_t m = 4, k = 64, n = 3;
  std::vector<float> av = quarterFloats(size_t(m * k), 7),
                     bv = quarterFloats(size_t(k * n), 8),
                     cv = quarterFloats(size_t(n), 9);
  for (DType t : {DType::F16, DType::BF16, DType::F64}) {
    Tensor a = H({m, k}, av, t), b = H({k, n}, bv, t), c = H({n}, cv, t);
    Tensor y = run1("Gemm", {a, b, c}, {{"alpha", f32(0.75f)}});
    ASSERT_EQ(y.dtype, t);
    std::vector<double> want = naiveGemm(a, b, &c, false, false, 0.75, 1);
    for (size_t i = 0; i < want.size(); ++i) {
      float w = float(want[i]);
      double expect = t == DType::F16    ? roundToHalf(w)
                      : t == DType::BF16 ? roundToBf16(w)
                                         : want[i];
      EXPECT_EQ(y.getAsDouble(int64_t(i)), expect) << dtypeName(t) << " " << i;
    }
  }
  // Sums beyond fp16's integer range: 3000 * 1 * 1 would stall at 2048 with
  // fp16 accumulation; fp32 accumulation gets 3000 and rounds it to 3000.
  Tensor ones = H({1, 3000}, std::vector<float>(3000, 1.0f));
  Tensor col = H({3000, 1}, std::vector<float>(3000, 1.0f));
  EXPECT_EQ(run1("MatMul", {ones, col}).getAsDouble(0), 3000);
}

TEST(CpuGemm, Errors) {
  Tensor a = F({2, 3}, randomFloats(6, 1)), b = F({2, 3}, randomFloats(6, 2));
  std::string e = errorOf("Gemm", {a, b});
  EXPECT_NE(e.find("'test_node'"), std::string::npos) << e;
  EXPECT_NE(e.find("inner dimensions"), std::string::npos) << e;
  EXPECT_NE(errorOf("Gemm", {a, b, F({3, 3}, randomFloats(9, 3))},
                    {{"transB", i64(1)}})
                .find("does not broadcast"),
            std::string::npos);
  EXPECT_EQ(errorOf("Gemm", {a, b}, {{"transB", i64(1)}}), "");
}

TEST(CpuMatMul, BatchedBroadcastAndVectors) {
  auto naive = [](const Tensor &a, const Tensor &b, int64_t batchA,
                  int64_t batchB, int64_t m, int64_t k, int64_t n) {
    int64_t batch = std::max(batchA, batchB);
    std::vector<double> y(size_t(batch * m * n));
    for (int64_t s = 0; s < batch; ++s)
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double acc = 0;
          for (int64_t p = 0; p < k; ++p)
            acc += a.getAsDouble((batchA == 1 ? 0 : s) * m * k + i * k + p) *
                   b.getAsDouble((batchB == 1 ? 0 : s) * k * n + p * n + j);
          y[size_t((s * m + i) * n + j)] = acc;
        }
    return y;
  };
  Tensor a = F({2, 3, 4}, randomFloats(24, 1)),
         w = F({4, 5}, randomFloats(20, 2));
  Tensor y = run1("MatMul", {a, w});
  EXPECT_EQ(y.dims, (std::vector<int64_t>{2, 3, 5}));
  expectNear(y, naive(a, w, 2, 1, 3, 4, 5), 1e-5);
  Tensor b3 = F({2, 4, 2}, randomFloats(16, 3));
  Tensor y2 = run1("MatMul", {a, b3});
  expectNear(y2, naive(a, b3, 2, 2, 3, 4, 2), 1e-5);
  // [1,3,4] x [2,4,2]: A's batch broadcasts.
  Tensor a1 = F({1, 3, 4}, randomFloats(12, 4));
  Tensor y3 = run1("MatMul", {a1, b3});
  EXPECT_EQ(y3.dims, (std::vector<int64_t>{2, 3, 2}));
  expectNear(y3, naive(a1, b3, 1, 2, 3, 4, 2), 1e-5);
  // [2,1,3,4] x [3,4,2] -> [2,3,3,2].
  Tensor a4 = D({2, 1, 3, 4}, std::vector<double>(24, 0.5));
  Tensor b4 = D({3, 4, 2}, std::vector<double>(24, 2.0));
  Tensor y4 = run1("MatMul", {a4, b4});
  EXPECT_EQ(y4.dims, (std::vector<int64_t>{2, 3, 3, 2}));
  EXPECT_EQ(y4.dtype, DType::F64);
  for (double v : values(y4))
    EXPECT_EQ(v, 4.0);
  // 1-D operands: [4] x [4,5] -> [5]; [2,3,4] x [4] -> [2,3]; [4] x [4] -> [].
  Tensor v = F({4}, {1, 2, 3, 4});
  Tensor vw = run1("MatMul", {v, w});
  EXPECT_EQ(vw.dims, (std::vector<int64_t>{5}));
  expectNear(vw, naive(F({1, 4}, {1, 2, 3, 4}), w, 1, 1, 1, 4, 5), 1e-5);
  Tensor av = run1("MatMul", {a, v});
  EXPECT_EQ(av.dims, (std::vector<int64_t>{2, 3}));
  expectNear(av, naive(a, F({4, 1}, {1, 2, 3, 4}), 2, 1, 3, 4, 1), 1e-5);
  Tensor dot = run1("MatMul", {v, v});
  EXPECT_TRUE(dot.dims.empty());
  EXPECT_EQ(dot.getAsDouble(0), 30);
  EXPECT_NE(errorOf("MatMul", {a, F({3, 2}, randomFloats(6, 5))})
                .find("inner dimensions"),
            std::string::npos);
  EXPECT_NE(errorOf("MatMul", {F({2, 3, 4}, randomFloats(24, 1)),
                               F({3, 4, 2}, randomFloats(24, 1))})
                .find("do not broadcast"),
            std::string::npos);
}

// --- shape ops ---------------------------------------------------------------

TEST(CpuShape, ReshapeZeroAndMinusOne) {
  Tensor x = F({2, 3, 4}, std::vector<float>(24, 1));
  EXPECT_EQ(run1("Reshape", {x, I({2}, {0, -1})}).dims,
            (std::vector<int64_t>{2, 12}));
  EXPECT_EQ(run1("Reshape", {x, I({3}, {-1, 0, 2})}).dims,
            (std::vector<int64_t>{4, 3, 2}));
  EXPECT_EQ(run1("Reshape", {x, I({1}, {-1})}).dims,
            (std::vector<int64_t>{24}));
  Tensor empty(DType::F32, {0, 3});
  EXPECT_EQ(
      run1("Reshape", {empty, I({2}, {3, 0})}, {{"allowzero", i64(1)}}).dims,
      (std::vector<int64_t>{3, 0}));
  EXPECT_EQ(run1("Reshape", {empty, I({2}, {0, 3})}).dims,
            (std::vector<int64_t>{0, 3}));
  std::string e = errorOf("Reshape", {x, I({2}, {5, -1})});
  EXPECT_NE(e.find("cannot reshape"), std::string::npos) << e;
  EXPECT_NE(errorOf("Reshape", {x, I({2}, {-1, -1})}).find("more than one -1"),
            std::string::npos);
  EXPECT_NE(errorOf("Reshape", {x, I({2}, {7, 7})}).find("cannot reshape"),
            std::string::npos);
  EXPECT_NE(errorOf("Reshape", {x, I({4}, {0, 0, 0, 0})}).find("rank"),
            std::string::npos);
  Tensor data = F({2, 2}, {1, 2, 3, 4});
  EXPECT_EQ(values(run1("Reshape", {data, I({1}, {4})})),
            (std::vector<double>{1, 2, 3, 4}));
}

TEST(CpuShape, FlattenTransposeShape) {
  Tensor x = F({2, 3, 4}, std::vector<float>(24, 0));
  EXPECT_EQ(run1("Flatten", {x}).dims, (std::vector<int64_t>{2, 12}));
  EXPECT_EQ(run1("Flatten", {x}, {{"axis", i64(0)}}).dims,
            (std::vector<int64_t>{1, 24}));
  EXPECT_EQ(run1("Flatten", {x}, {{"axis", i64(-1)}}).dims,
            (std::vector<int64_t>{6, 4}));
  Tensor m = F({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor t = run1("Transpose", {m});
  EXPECT_EQ(t.dims, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(values(t), (std::vector<double>{1, 4, 2, 5, 3, 6}));
  std::vector<float> seq(24);
  for (int i = 0; i < 24; ++i)
    seq[size_t(i)] = float(i);
  Tensor t3 =
      run1("Transpose", {F({2, 3, 4}, seq)}, {{"perm", ints({1, 2, 0})}});
  EXPECT_EQ(t3.dims, (std::vector<int64_t>{3, 4, 2}));
  // y[i,j,k] = x[k,i,j]: y[1,2,1] = x[1,1,2] = 12 + 4 + 2.
  EXPECT_EQ(t3.getAsDouble((1 * 4 + 2) * 2 + 1), 18);
  EXPECT_NE(
      errorOf("Transpose", {m}, {{"perm", ints({0, 0})}}).find("duplicate"),
      std::string::npos);
  Tensor s = run1("Shape", {x});
  EXPECT_EQ(s.dtype, DType::I64);
  EXPECT_EQ(values(s), (std::vector<double>{2, 3, 4}));
  EXPECT_EQ(values(run1("Shape", {x}, {{"start", i64(1)}})),
            (std::vector<double>{3, 4}));
  EXPECT_EQ(values(run1("Shape", {x}, {{"start", i64(-2)}, {"end", i64(-1)}})),
            (std::vector<double>{3}));
  EXPECT_EQ(run1("Shape", {x}, {{"start", i64(5)}}).numel(), 0);
}

TEST(CpuShape, UnsqueezeSqueeze) {
  Tensor x = F({3, 4}, std::vector<float>(12, 0));
  EXPECT_EQ(run1("Unsqueeze", {x, I({2}, {0, -1})}).dims,
            (std::vector<int64_t>{1, 3, 4, 1}));
  // Opset < 13: axes attribute.
  EXPECT_EQ(run1("Unsqueeze", {x}, {{"axes", ints({1})}}).dims,
            (std::vector<int64_t>{3, 1, 4}));
  Tensor y = F({1, 3, 1, 4}, std::vector<float>(12, 0));
  EXPECT_EQ(run1("Squeeze", {y}).dims, (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(run1("Squeeze", {y, I({1}, {-2})}).dims,
            (std::vector<int64_t>{1, 3, 4}));
  EXPECT_EQ(run1("Squeeze", {y}, {{"axes", ints({0})}}).dims,
            (std::vector<int64_t>{3, 1, 4}));
  EXPECT_NE(errorOf("Squeeze", {y, I({1}, {1})}).find("cannot squeeze"),
            std::string::npos);
  EXPECT_NE(errorOf("Unsqueeze", {x, I({1}, {5})}).find("out of range"),
            std::string::npos);
}

TEST(CpuShape, ConcatGather) {
  Tensor a = F({2, 2}, {1, 2, 3, 4}), b = F({2, 1}, {9, 8});
  Tensor c = run1("Concat", {a, b}, {{"axis", i64(-1)}});
  EXPECT_EQ(c.dims, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(values(c), (std::vector<double>{1, 2, 9, 3, 4, 8}));
  Tensor c0 =
      run1("Concat", {I({1}, {4}), I({2}, {-1, 7}), Tensor(DType::I64, {0})},
           {{"axis", i64(0)}});
  EXPECT_EQ(values(c0), (std::vector<double>{4, -1, 7}));
  EXPECT_NE(
      errorOf("Concat", {a, b}, {{"axis", i64(0)}}).find("does not match"),
      std::string::npos);
  Tensor x = F({3, 2}, {1, 2, 3, 4, 5, 6});
  Tensor g = run1("Gather", {x, I({2}, {2, -3})});
  EXPECT_EQ(g.dims, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(values(g), (std::vector<double>{5, 6, 1, 2}));
  Tensor g1 = run1("Gather", {x, I32({}, {1})}, {{"axis", i64(1)}});
  EXPECT_EQ(g1.dims, (std::vector<int64_t>{3}));
  EXPECT_EQ(values(g1), (std::vector<double>{2, 4, 6}));
  // Shape arithmetic: Gather a scalar from a Shape.
  Tensor dim = run1("Gather", {I({3}, {64, 10, 7}), I({}, {0})});
  EXPECT_TRUE(dim.dims.empty());
  EXPECT_EQ(dim.getAsDouble(0), 64);
  std::string e = errorOf("Gather", {x, I({1}, {3})});
  EXPECT_NE(e.find("index 3 is out of range"), std::string::npos) << e;
}

TEST(CpuShape, Slice) {
  std::vector<float> seq(20);
  for (int i = 0; i < 20; ++i)
    seq[size_t(i)] = float(i);
  Tensor x = F({4, 5}, seq);
  Tensor s = run1("Slice", {x, I({2}, {1, 1}), I({2}, {3, 4})});
  EXPECT_EQ(s.dims, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(values(s), (std::vector<double>{6, 7, 8, 11, 12, 13}));
  // axes and negative steps: rows reversed, every second column.
  Tensor r = run1("Slice", {x, I({2}, {-1, 0}), I({2}, {INT64_MIN, 5}),
                            I({2}, {0, 1}), I({2}, {-1, 2})});
  EXPECT_EQ(r.dims, (std::vector<int64_t>{4, 3}));
  EXPECT_EQ(values(r),
            (std::vector<double>{15, 17, 19, 10, 12, 14, 5, 7, 9, 0, 2, 4}));
  // Ends past the dim clamp; empty results are fine.
  EXPECT_EQ(
      run1("Slice", {x, I({1}, {2}), I({1}, {INT64_MAX}), I({1}, {1})}).dims,
      (std::vector<int64_t>{4, 3}));
  EXPECT_EQ(run1("Slice", {x, I({1}, {3}), I({1}, {1}), I({1}, {0})}).numel(),
            0);
  // Steps longer than the axis take one element, without overflow.
  Tensor big = run1("Slice", {x, I({1}, {0}), I({1}, {INT64_MAX}), I({1}, {1}),
                              I({1}, {INT64_MAX})});
  EXPECT_EQ(values(big), (std::vector<double>{0, 5, 10, 15}));
  Tensor bigNeg = run1("Slice", {x, I({1}, {-1}), I({1}, {INT64_MIN}),
                                 I({1}, {1}), I({1}, {INT64_MIN})});
  EXPECT_EQ(values(bigNeg), (std::vector<double>{4, 9, 14, 19}));
  // Opset-1 attributes.
  EXPECT_EQ(values(run1("Slice", {F({4}, {1, 2, 3, 4})},
                        {{"starts", ints({1})}, {"ends", ints({-1})}})),
            (std::vector<double>{2, 3}));
  EXPECT_NE(
      errorOf("Slice", {x, I({1}, {0}), I({1}, {2}), I({1}, {0}), I({1}, {0})})
          .find("step"),
      std::string::npos);
}

TEST(CpuShape, ExpandConstants) {
  Tensor e = run1("Expand", {F({3, 1}, {1, 2, 3}), I({3}, {2, 1, 2})});
  EXPECT_EQ(e.dims, (std::vector<int64_t>{2, 3, 2}));
  EXPECT_EQ(values(e),
            (std::vector<double>{1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3}));
  Tensor z = run1("ConstantOfShape", {I({2}, {2, 3})});
  EXPECT_EQ(z.dtype, DType::F32);
  EXPECT_EQ(values(z), std::vector<double>(6, 0));
  Tensor seven = run1("ConstantOfShape", {I({1}, {2})},
                      {{"value", Attribute::ofTensor(I({1}, {7}))}});
  EXPECT_EQ(seven.dtype, DType::I64);
  EXPECT_EQ(values(seven), (std::vector<double>{7, 7}));
  EXPECT_NE(errorOf("ConstantOfShape", {I({1}, {-2})}).find("negative"),
            std::string::npos);
  // Absurd shapes are errors, not allocations.
  EXPECT_NE(errorOf("ConstantOfShape", {I({2}, {1 << 30, 1 << 30})})
                .find("too large"),
            std::string::npos);
  EXPECT_NE(errorOf("ConstantOfShape", {I({3}, {INT64_MAX, 4, 4})})
                .find("invalid output shape"),
            std::string::npos);
  EXPECT_NE(errorOf("Expand", {F({1}, {1}), I({2}, {INT64_MAX, 2})}), "");
  Tensor c =
      run1("Constant", {}, {{"value", Attribute::ofTensor(F({2}, {1, 2}))}});
  EXPECT_EQ(values(c), (std::vector<double>{1, 2}));
  EXPECT_EQ(run1("Constant", {}, {{"value_float", f32(2.5f)}}).getAsDouble(0),
            2.5);
  EXPECT_EQ(values(run1("Constant", {}, {{"value_ints", ints({3, -1})}})),
            (std::vector<double>{3, -1}));
  EXPECT_EQ(run1("Constant", {}, {{"value_int", i64(4)}}).dtype, DType::I64);
  EXPECT_EQ(
      run1("Constant", {}, {{"value_floats", Attribute::ofFloats({1, 2, 3})}})
          .dims,
      (std::vector<int64_t>{3}));
  EXPECT_NE(errorOf("Constant", {}).find("exactly one"), std::string::npos);
  Tensor id = run1("Identity", {I({2}, {5, 6})});
  EXPECT_EQ(values(id), (std::vector<double>{5, 6}));
}

// --- softmax -----------------------------------------------------------------

TEST(CpuSoftmax, SoftmaxAndLogSoftmax) {
  std::vector<float> v = randomFloats(24, 11, -3, 3);
  v[0] = 1000; // max subtraction keeps this finite
  Tensor x = F({2, 3, 4}, v);
  for (int64_t axis : {-1, 1, 0}) {
    int64_t ax = axis < 0 ? axis + 3 : axis;
    Tensor s = run1("Softmax", {x}, {{"axis", i64(axis)}});
    Tensor l = run1("LogSoftmax", {x}, {{"axis", i64(axis)}});
    std::vector<int64_t> dims = x.dims;
    std::vector<int64_t> strides = {12, 4, 1};
    std::vector<double> ws(24), wl(24);
    for (int64_t i = 0; i < 24; ++i) {
      int64_t pos = (i / strides[size_t(ax)]) % dims[size_t(ax)];
      int64_t base = i - pos * strides[size_t(ax)];
      double mx = -INFINITY, sum = 0;
      for (int64_t j = 0; j < dims[size_t(ax)]; ++j)
        mx = std::max(mx, double(v[size_t(base + j * strides[size_t(ax)])]));
      for (int64_t j = 0; j < dims[size_t(ax)]; ++j)
        sum += std::exp(v[size_t(base + j * strides[size_t(ax)])] - mx);
      ws[size_t(i)] = std::exp(v[size_t(i)] - mx) / sum;
      wl[size_t(i)] = v[size_t(i)] - mx - std::log(sum);
    }
    expectNear(s, ws, 1e-6, "softmax axis " + std::to_string(axis));
    expectNear(l, wl, 1e-5, "log_softmax axis " + std::to_string(axis));
  }
  // The default axis is -1 (opset 13).
  EXPECT_EQ(values(run1("Softmax", {x})),
            values(run1("Softmax", {x}, {{"axis", i64(2)}})));
  // fp16 in, fp16 out, computed in fp32.
  Tensor h = run1("Softmax", {H({1, 3}, {1, 2, 3})});
  EXPECT_EQ(h.dtype, DType::F16);
  double e1 = std::exp(-2.0), e2 = std::exp(-1.0);
  EXPECT_EQ(float(h.getAsDouble(2)), roundToHalf(float(1 / (1 + e1 + e2))));
  EXPECT_NE(errorOf("Softmax", {x}, {{"axis", i64(3)}}).find("out of range"),
            std::string::npos);
}

// --- losses ------------------------------------------------------------------

namespace {

/// log_softmax over axis 1 of [N, C, D] scores, in double.
std::vector<double> logSoftmaxRef(const std::vector<float> &x, int64_t n,
                                  int64_t c, int64_t d) {
  std::vector<double> lp(x.size());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < d; ++k) {
      double mx = -INFINITY, sum = 0;
      for (int64_t j = 0; j < c; ++j)
        mx = std::max(mx, double(x[size_t((i * c + j) * d + k)]));
      for (int64_t j = 0; j < c; ++j)
        sum += std::exp(x[size_t((i * c + j) * d + k)] - mx);
      for (int64_t j = 0; j < c; ++j)
        lp[size_t((i * c + j) * d + k)] =
            x[size_t((i * c + j) * d + k)] - mx - std::log(sum);
    }
  return lp;
}

} // namespace

TEST(CpuLoss, SoftmaxCrossEntropyReductionsIgnoreIndexWeights) {
  const int64_t n = 4, c = 3;
  std::vector<float> xv = randomFloats(size_t(n * c), 21, -2, 2);
  Tensor x = F({n, c}, xv);
  Tensor labels = I({n}, {2, 0, -100, 1});
  Tensor w = F({c}, {0.5, 2, 1.5});
  std::vector<double> lp = logSoftmaxRef(xv, n, c, 1);
  for (bool weighted : {false, true}) {
    std::vector<double> per(static_cast<size_t>(n));
    double sum = 0, wsum = 0;
    for (int64_t i = 0; i < n; ++i) {
      int64_t t = labels.data<int64_t>()[i];
      if (t == -100)
        continue;
      double wt = weighted ? w.getAsDouble(t) : 1;
      per[size_t(i)] = -lp[size_t(i * c + t)] * wt;
      sum += per[size_t(i)];
      wsum += wt;
    }
    for (std::string red : {"none", "sum", "mean"}) {
      Attrs attrs = {{"reduction", str(red)}, {"ignore_index", i64(-100)}};
      std::vector<const Tensor *> in = {&x, &labels};
      if (weighted)
        in.push_back(&w);
      std::vector<Tensor> outs =
          runNode("SoftmaxCrossEntropyLoss", in, attrs, 2);
      std::string what = red + (weighted ? " weighted" : "");
      if (red == "none") {
        EXPECT_EQ(outs[0].dims, (std::vector<int64_t>{n}));
        expectNear(outs[0], per, 1e-6, what);
      } else {
        EXPECT_TRUE(outs[0].dims.empty());
        expectNear(outs[0], {red == "sum" ? sum : sum / wsum}, 1e-6, what);
      }
      expectNear(outs[1], lp, 1e-6, what + " log_prob");
    }
  }
}

TEST(CpuLoss, SoftmaxCrossEntropySpatialAndInt32Labels) {
  const int64_t n = 2, c = 3, d = 4;
  std::vector<float> xv = randomFloats(size_t(n * c * d), 5, -1, 1);
  Tensor x = F({n, c, d}, xv);
  Tensor labels = I32({n, d}, {0, 1, 2, 1, 2, 2, 0, 1});
  std::vector<double> lp = logSoftmaxRef(xv, n, c, d);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < d; ++k)
      sum -= lp[size_t((i * c + labels.data<int32_t>()[i * d + k]) * d + k)];
  Tensor loss = run1("SoftmaxCrossEntropyLoss", {x, labels});
  expectNear(loss, {sum / (n * d)}, 1e-6);
  // fp64 scores give an fp64 loss computed in double.
  std::vector<double> xd(xv.begin(), xv.end());
  Tensor l64 = run1("SoftmaxCrossEntropyLoss", {D({n, c, d}, xd), labels},
                    {{"reduction", str("sum")}});
  EXPECT_EQ(l64.dtype, DType::F64);
  EXPECT_NEAR(l64.getAsDouble(0), sum, 1e-12);
}

TEST(CpuLoss, LabelOutOfRangeIsAnErrorNamingIt) {
  Tensor x = F({2, 3}, randomFloats(6, 1));
  std::string e = errorOf("SoftmaxCrossEntropyLoss", {x, I({2}, {1, 3})});
  EXPECT_NE(e.find("'test_node'"), std::string::npos) << e;
  EXPECT_NE(e.find("SoftmaxCrossEntropyLoss"), std::string::npos) << e;
  EXPECT_NE(e.find("label 3"), std::string::npos) << e;
  EXPECT_NE(errorOf("NegativeLogLikelihoodLoss", {x, I({2}, {-1, 0})})
                .find("label -1"),
            std::string::npos);
  // -100 is fine only when it is the ignore_index.
  EXPECT_NE(errorOf("SoftmaxCrossEntropyLoss", {x, I({2}, {-100, 0})}), "");
  EXPECT_EQ(errorOf("SoftmaxCrossEntropyLoss", {x, I({2}, {-100, 0})},
                    {{"ignore_index", i64(-100)}}),
            "");
  EXPECT_NE(errorOf("SoftmaxCrossEntropyLoss", {x, I({3}, {0, 0, 0})})
                .find("do not match"),
            std::string::npos);
  EXPECT_NE(errorOf("SoftmaxCrossEntropyLoss", {x, I({2}, {0, 0})},
                    {{"reduction", str("avg")}})
                .find("unknown reduction"),
            std::string::npos);
}

TEST(CpuLoss, NegativeLogLikelihood) {
  Tensor x = F({3, 2}, {-0.5f, -1, -2, -0.25f, -3, -4});
  Tensor t = I({3}, {1, 0, 1});
  Tensor w = F({2}, {2, 0.5});
  expectNear(run1("NegativeLogLikelihoodLoss", {x, t}), {(1 + 2 + 4) / 3.0},
             1e-7);
  expectNear(run1("NegativeLogLikelihoodLoss", {x, t, w}),
             {(0.5 * 1 + 2 * 2 + 0.5 * 4) / 3.0}, 1e-7);
  expectNear(run1("NegativeLogLikelihoodLoss", {x, t},
                  {{"reduction", str("none")}, {"ignore_index", i64(0)}}),
             {1, 0, 4}, 0);
  expectNear(
      run1("NegativeLogLikelihoodLoss", {x, t}, {{"ignore_index", i64(0)}}),
      {2.5}, 0);
}

// --- reductions --------------------------------------------------------------

TEST(CpuReduce, AxesKeepdimsNegativeAxes) {
  std::vector<float> seq(24);
  for (int i = 0; i < 24; ++i)
    seq[size_t(i)] = float(i);
  Tensor x = F({2, 3, 4}, seq);
  // ReduceSum-13: axes input.
  Tensor s = run1("ReduceSum", {x, I({1}, {-1})}, {{"keepdims", i64(0)}});
  EXPECT_EQ(s.dims, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(values(s), (std::vector<double>{6, 22, 38, 54, 70, 86}));
  Tensor k = run1("ReduceSum", {x, I({2}, {0, 2})});
  EXPECT_EQ(k.dims, (std::vector<int64_t>{1, 3, 1}));
  EXPECT_EQ(values(k), (std::vector<double>{6 + 54, 22 + 70, 38 + 86}));
  // All axes by default; noop_with_empty_axes keeps the input.
  Tensor all = run1("ReduceSum", {x}, {{"keepdims", i64(0)}});
  EXPECT_TRUE(all.dims.empty());
  EXPECT_EQ(all.getAsDouble(0), 276);
  EXPECT_EQ(values(run1("ReduceSum", {x}, {{"noop_with_empty_axes", i64(1)}})),
            values(x));
  // ReduceMean / ReduceMax with the attribute (opset < 18).
  Tensor m =
      run1("ReduceMean", {x}, {{"axes", ints({1})}, {"keepdims", i64(0)}});
  EXPECT_EQ(m.dims, (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(values(m), (std::vector<double>{4, 5, 6, 7, 16, 17, 18, 19}));
  Tensor mx = run1("ReduceMax", {x}, {{"axes", ints({-3, -1})}});
  EXPECT_EQ(mx.dims, (std::vector<int64_t>{1, 3, 1}));
  EXPECT_EQ(values(mx), (std::vector<double>{15, 19, 23}));
  // ReduceMean-18: axes as input.
  EXPECT_EQ(
      values(run1("ReduceMean", {x, I({1}, {0})}, {{"keepdims", i64(0)}})),
      values(run1("ReduceMean", {x},
                  {{"axes", ints({0})}, {"keepdims", i64(0)}})));
  EXPECT_TRUE(
      std::isnan(run1("ReduceMax", {F({3}, {1, NAN, 2})}).getAsDouble(0)));
  EXPECT_NE(errorOf("ReduceSum", {x, I({1}, {3})}).find("out of range"),
            std::string::npos);
  EXPECT_NE(errorOf("ReduceSum", {x, I({2}, {1, -2})}).find("twice"),
            std::string::npos);
}

TEST(CpuReduce, HalfAccumulatesInFp32) {
  // 4096 ones: an fp16 accumulator would stop at 2048.
  Tensor ones = H({4096}, std::vector<float>(4096, 1.0f));
  Tensor s = run1("ReduceSum", {ones});
  EXPECT_EQ(s.dtype, DType::F16);
  EXPECT_EQ(s.getAsDouble(0), 4096);
  std::vector<float> v = randomFloats(100, 3);
  Tensor h = H({100}, v);
  float acc = 0;
  for (int64_t i = 0; i < 100; ++i)
    acc += float(h.getAsDouble(i));
  EXPECT_EQ(float(run1("ReduceSum", {h}).getAsDouble(0)), roundToHalf(acc));
  EXPECT_EQ(float(run1("ReduceMean", {h}).getAsDouble(0)),
            roundToHalf(acc / 100.0f));
}

// --- mpc backward ops --------------------------------------------------------

TEST(CpuMpcGrad, ReluGradAndSoftmaxGrads) {
  Tensor dy = F({4}, {1, 2, 3, 4}), y = F({4}, {0, 0.5, -1, 2});
  expectNear(runMpc("ReluGrad", {dy, y}), {0, 2, 0, 4}, 0);
  // Softmax: dX = Y * (dY - sum(dY * Y)).
  Tensor sy = run1("Softmax", {F({2, 3}, {0.1f, 0.2f, 0.3f, 1, -1, 0})});
  Tensor g = F({2, 3}, {1, -1, 0.5, 0.3f, 0.2f, -0.7f});
  Tensor sdx = runMpc("SoftmaxGrad", {g, sy}, {{"axis", i64(-1)}});
  std::vector<double> want(6);
  for (int r = 0; r < 2; ++r) {
    double dot = 0;
    for (int j = 0; j < 3; ++j)
      dot += g.getAsDouble(r * 3 + j) * sy.getAsDouble(r * 3 + j);
    for (int j = 0; j < 3; ++j)
      want[size_t(r * 3 + j)] =
          sy.getAsDouble(r * 3 + j) * (g.getAsDouble(r * 3 + j) - dot);
  }
  expectNear(sdx, want, 1e-6);
  // LogSoftmax: dX = dY - exp(Y) * sum(dY), here over axis 0.
  Tensor ly = run1("LogSoftmax", {F({2, 3}, {0.1f, 0.2f, 0.3f, 1, -1, 0})},
                   {{"axis", i64(0)}});
  Tensor ldx = runMpc("LogSoftmaxGrad", {g, ly}, {{"axis", i64(0)}});
  for (int col = 0; col < 3; ++col) {
    double sum = g.getAsDouble(col) + g.getAsDouble(3 + col);
    for (int r = 0; r < 2; ++r)
      want[size_t(r * 3 + col)] = g.getAsDouble(r * 3 + col) -
                                  std::exp(ly.getAsDouble(r * 3 + col)) * sum;
  }
  expectNear(ldx, want, 1e-6);
  EXPECT_NE(errorOf("ReluGrad", {dy, F({3}, {1, 2, 3})}, {}, kMpcDomain)
                .find("does not match"),
            std::string::npos);
}

// autocast lets SoftmaxGrad and LogSoftmaxGrad read a low-precision Y as it
// is stored (no fp32 copy): the kernels widen it exactly, so the result must
// be bit for bit the one with Y cast up to fp32 first.
TEST(CpuMpcGrad, SoftmaxGradsReadAHalfYAsTheirFp32Copy) {
  std::vector<float> logits(4 * 37), grad(4 * 37);
  for (size_t i = 0; i < logits.size(); ++i) {
    logits[i] = float(std::sin(0.7 * double(i))) * 3.0f;
    grad[i] = float(std::cos(1.3 * double(i))) * 1e-3f;
  }
  Tensor g = F({4, 37}, grad);
  for (DType half : {DType::F16, DType::BF16})
    for (const char *op : {"SoftmaxGrad", "LogSoftmaxGrad"}) {
      const char *fwd =
          std::string(op) == "SoftmaxGrad" ? "Softmax" : "LogSoftmax";
      Tensor y = run1(fwd, {F({4, 37}, logits).castTo(half)});
      Tensor direct = runMpc(op, {g, y}, {{"axis", i64(-1)}});
      Tensor widened =
          runMpc(op, {g, y.castTo(DType::F32)}, {{"axis", i64(-1)}});
      ASSERT_EQ(direct.dtype, DType::F32) << op;
      EXPECT_EQ(direct.bytes.size(), widened.bytes.size());
      EXPECT_EQ(std::memcmp(direct.bytes.data(), widened.bytes.data(),
                            direct.bytes.size()),
                0)
          << op << " with a " << dtypeName(half) << " Y";
    }
}

// SumToShape adds each output's terms in dY's row-major order, whether the
// kernel walks the broadcast or (X being dY's trailing dims, a bias
// gradient) runs down the rows: the same bits as a plain sequential sum.
TEST(CpuMpcGrad, SumToShapeAddsInRowMajorOrder) {
  std::vector<float> grad(6 * 5 * 7);
  for (size_t i = 0; i < grad.size(); ++i)
    grad[i] = float(std::sin(0.61 * double(i))) * 1000.0f + 1e-3f * float(i);
  for (DType t : {DType::F32, DType::F16, DType::BF16})
    for (std::vector<int64_t> to : {std::vector<int64_t>{7},
                                    {1, 7},
                                    {5, 7},
                                    {1, 1, 7},
                                    {6, 5, 7},
                                    {5, 1},
                                    {6, 1, 7},
                                    {}}) {
      Tensor dy = F({6, 5, 7}, grad).castTo(t);
      std::vector<float> v = dy.castTo(DType::F32).toFloats();
      // Sequential float sums in row-major order of dY.
      std::vector<int64_t> full = {6, 5, 7};
      std::vector<int64_t> x(full.size(), 1);
      std::copy(to.begin(), to.end(), x.end() - std::ptrdiff_t(to.size()));
      std::vector<float> want(size_t(elementCount(to)), 0.0f);
      for (int64_t a = 0; a < 6; ++a)
        for (int64_t b = 0; b < 5; ++b)
          for (int64_t c = 0; c < 7; ++c) {
            int64_t o =
                ((x[0] == 1 ? 0 : a) * x[1] + (x[1] == 1 ? 0 : b)) * x[2] +
                (x[2] == 1 ? 0 : c);
            want[size_t(o)] += v[size_t((a * 5 + b) * 7 + c)];
          }
      Tensor xt = F(to, std::vector<float>(want.size(), 1.0f)).castTo(t);
      Tensor got = runMpc("SumToShape", {dy, xt});
      Tensor expected = F(to, want).castTo(t);
      ASSERT_EQ(got.bytes.size(), expected.bytes.size());
      EXPECT_EQ(std::memcmp(got.bytes.data(), expected.bytes.data(),
                            got.bytes.size()),
                0)
          << dtypeName(t) << " to " << dimsToString(to);
    }
}

// fold-widening-casts turns SumToShape(Cast(dY16 -> fp32), b) into
// SumToShapeAs(dY16, b): the same bits, without the fp32 copy of dY.
TEST(CpuMpcGrad, SumToShapeAsIsTheSumOfTheWidenedGradient) {
  std::vector<float> grad(6 * 5 * 7);
  for (size_t i = 0; i < grad.size(); ++i)
    grad[i] = float(std::sin(0.37 * double(i))) * 300.0f;
  Tensor dy32 = F({6, 5, 7}, grad);
  for (DType half : {DType::F16, DType::BF16})
    for (std::vector<int64_t> to :
         {std::vector<int64_t>{7}, {5, 1}, {1, 5, 7}, {}}) {
      Tensor dy = dy32.castTo(half);
      Tensor x = F(to, std::vector<float>(size_t(elementCount(to)), 1.0f));
      Tensor folded = runMpc("SumToShapeAs", {dy, x});
      Tensor widened = runMpc("SumToShape", {dy.castTo(DType::F32), x});
      ASSERT_EQ(folded.dtype, DType::F32);
      EXPECT_EQ(folded.dims, to);
      ASSERT_EQ(folded.bytes.size(), widened.bytes.size());
      EXPECT_EQ(std::memcmp(folded.bytes.data(), widened.bytes.data(),
                            folded.bytes.size()),
                0)
          << dtypeName(half) << " to " << dimsToString(to);
    }
  // X narrower than dY: the widening would round.
  EXPECT_NE(
      errorOf("SumToShapeAs",
              {dy32, F({7}, std::vector<float>(7, 1.0f)).castTo(DType::F16)},
              {}, kMpcDomain)
          .find("at least as wide as dY"),
      std::string::npos);
}

/// Whether two tensors hold the same dtype, dims and bytes.
::testing::AssertionResult sameBits(const Tensor &a, const Tensor &b) {
  if (a.dtype != b.dtype || a.dims != b.dims ||
      a.bytes.size() != b.bytes.size())
    return ::testing::AssertionFailure()
           << dtypeName(a.dtype) << dimsToString(a.dims) << " against "
           << dtypeName(b.dtype) << dimsToString(b.dims);
  if (std::memcmp(a.bytes.data(), b.bytes.data(), a.bytes.size()) != 0)
    return ::testing::AssertionFailure() << "the bytes differ";
  return ::testing::AssertionSuccess();
}

// fold-widening-casts turns autocast's softmax island Softmax(Cast(s16 ->
// fp32)) into SoftmaxTo(s16), and its gradient SoftmaxGrad(Cast(dY16 ->
// fp32), Y) into SoftmaxGradAs(dY16, Y): the same bits without the copies,
// along the last axis (the attention's) and an inner one.
TEST(CpuMpcGrad, SoftmaxToAndSoftmaxGradAsAreTheOpsOfTheWidenedInput) {
  std::vector<float> scores(4 * 6 * 33), grads(scores.size());
  for (size_t i = 0; i < scores.size(); ++i) {
    scores[i] = float(std::sin(0.37 * double(i))) * 9.0f;
    grads[i] = float(std::cos(0.11 * double(i))) * 0.3f;
  }
  Tensor s32 = F({4, 6, 33}, scores), g32 = F({4, 6, 33}, grads);
  for (DType half : {DType::F16, DType::BF16})
    for (int64_t axis : {-1, 1}) {
      SCOPED_TRACE(std::string(dtypeName(half)) + " axis " +
                   std::to_string(axis));
      Tensor s = s32.castTo(half), g = g32.castTo(half);
      Tensor y = run1("Softmax", {s.castTo(DType::F32)}, {{"axis", i64(axis)}});
      EXPECT_TRUE(sameBits(
          runMpc("SoftmaxTo", {s}, {{"axis", i64(axis)}, {"to", i64(1)}}), y));
      EXPECT_TRUE(
          sameBits(runMpc("SoftmaxGradAs", {g, y}, {{"axis", i64(axis)}}),
                   runMpc("SoftmaxGrad", {g.castTo(DType::F32), y},
                          {{"axis", i64(axis)}})));
    }
  // SoftmaxGradDiv: the widened gradient divided by one element of Y's dtype
  // and cast, node by node: to fp16 and bf16 (the attention's backward), to
  // Y's fp32 (no Cast), and with a narrower fp16 Y (rounded there first).
  Tensor y = run1("Softmax", {s32}, {{"axis", i64(-1)}});
  Tensor g16 = g32.castTo(DType::F16);
  Tensor d = F({}, {8.0f}), d3 = F({1, 1, 1}, {3.0f});
  for (DType to : {DType::F16, DType::BF16, DType::F32})
    for (const Tensor *dd : {&d, &d3}) {
      SCOPED_TRACE(std::string("to ") + dtypeName(to));
      Tensor nodes =
          run1("Div", {runMpc("SoftmaxGradAs", {g16, y}), *dd}).castTo(to);
      EXPECT_TRUE(sameBits(runMpc("SoftmaxGradDiv", {g16, y, *dd},
                                  {{"to", i64(toOnnxDataType(to))}}),
                           nodes));
    }
  Tensor y16 = y.castTo(DType::F16);
  EXPECT_TRUE(sameBits(
      runMpc("SoftmaxGradDiv", {g16, y16, d3.castTo(DType::F16)},
             {{"to", i64(1)}}),
      run1("Div", {runMpc("SoftmaxGrad", {g16, y16}), d3.castTo(DType::F16)})
          .castTo(DType::F32)));
  EXPECT_NE(errorOf("SoftmaxGradDiv", {g16, y, F({2}, {1, 2})},
                    {{"to", i64(1)}}, kMpcDomain)
                .find("D must be one fp32"),
            std::string::npos);
  // DivSoftmaxTo: the scores divided by one element in their own dtype
  // (rounded there), widened and softmaxed, node by node.
  for (DType half : {DType::F16, DType::BF16, DType::F32}) {
    SCOPED_TRACE(std::string("DivSoftmaxTo ") + dtypeName(half));
    Tensor s = s32.castTo(half), dd = F({1}, {3.0f}).castTo(half);
    EXPECT_TRUE(sameBits(
        runMpc("DivSoftmaxTo", {s, dd}, {{"axis", i64(-1)}, {"to", i64(1)}}),
        run1("Softmax", {run1("Div", {s, dd}).castTo(DType::F32)},
             {{"axis", i64(-1)}})));
  }
  // Their optional Ylow is Y cast down, bit for bit the Cast's.
  for (DType low : {DType::F16, DType::BF16}) {
    SCOPED_TRACE(std::string("Ylow ") + dtypeName(low));
    Tensor s = s32.castTo(DType::F16), dd = F({}, {8.0f}).castTo(DType::F16);
    Attrs attrs = {
        {"axis", i64(-1)}, {"to", i64(1)}, {"low", i64(toOnnxDataType(low))}};
    std::vector<Tensor> two =
        runNode("DivSoftmaxTo", {&s, &dd}, attrs, 2, kMpcDomain);
    ASSERT_EQ(two.size(), 2u);
    EXPECT_TRUE(sameBits(two[0], runMpc("DivSoftmaxTo", {s, dd}, attrs)));
    EXPECT_TRUE(sameBits(two[1], two[0].castTo(low)));
    std::vector<Tensor> plain =
        runNode("SoftmaxTo", {&s}, attrs, 2, kMpcDomain);
    EXPECT_TRUE(sameBits(plain[1], plain[0].castTo(low)));
  }
  EXPECT_NE(errorOf("DivSoftmaxTo", {s32, F({2}, {1, 2})}, {{"to", i64(1)}},
                    kMpcDomain)
                .find("D must be one fp32"),
            std::string::npos);
  // fp32 -> fp64 computes in fp64, as the Cast then Softmax does.
  EXPECT_TRUE(
      sameBits(runMpc("SoftmaxTo", {s32}, {{"axis", i64(-1)}, {"to", i64(11)}}),
               run1("Softmax", {s32.castTo(DType::F64)}, {{"axis", i64(-1)}})));
  // A narrower 'to' (or Y) would round the input.
  EXPECT_NE(errorOf("SoftmaxTo", {s32}, {{"to", i64(10)}}, kMpcDomain)
                .find("at least as wide as X"),
            std::string::npos);
  EXPECT_NE(
      errorOf("SoftmaxGradAs", {g32, s32.castTo(DType::F16)}, {}, kMpcDomain)
          .find("at least as wide as dY"),
      std::string::npos);
}

TEST(CpuMpcGrad, LossGradsMatchFiniteDifferencesInFp64) {
  const int64_t n = 3, c = 4;
  std::vector<float> xf = randomFloats(size_t(n * c), 31, -2, 2);
  std::vector<double> xv(xf.begin(), xf.end());
  Tensor labels = I({n}, {3, -1, 0});
  Tensor w = D({c}, {0.5, 1, 2, 1.5});
  for (std::string red : {"mean", "sum"})
    for (bool weighted : {false, true}) {
      Attrs attrs = {{"reduction", str(red)}, {"ignore_index", i64(-1)}};
      auto lossAt = [&](const std::vector<double> &x) {
        Tensor xt = D({n, c}, x);
        std::vector<const Tensor *> in = {&xt, &labels};
        if (weighted)
          in.push_back(&w);
        return runNode("SoftmaxCrossEntropyLoss", in, attrs, 2);
      };
      std::vector<Tensor> fwd = lossAt(xv);
      Tensor dl = D({}, {1.5});
      std::vector<const Tensor *> gin = {&dl, &fwd[1], &labels};
      if (weighted)
        gin.push_back(&w);
      Tensor dx =
          runNode("SoftmaxCrossEntropyLossGrad", gin, attrs, 1, kMpcDomain)[0];
      ASSERT_EQ(dx.dims, (std::vector<int64_t>{n, c}));
      for (int64_t i = 0; i < n * c; ++i) {
        std::vector<double> plus = xv, minus = xv;
        plus[size_t(i)] += 1e-6;
        minus[size_t(i)] -= 1e-6;
        double fd =
            1.5 *
            (lossAt(plus)[0].getAsDouble(0) - lossAt(minus)[0].getAsDouble(0)) /
            2e-6;
        EXPECT_NEAR(dx.getAsDouble(i), fd, 1e-7)
            << red << (weighted ? " weighted" : "") << " element " << i;
      }
      // NLL on the log-probabilities: its gradient w.r.t. X.
      std::vector<const Tensor *> nin = {&fwd[1], &labels};
      if (weighted)
        nin.push_back(&w);
      std::vector<const Tensor *> ngin = {&dl, &fwd[1], &labels};
      if (weighted)
        ngin.push_back(&w);
      Tensor ndx = runNode("NegativeLogLikelihoodLossGrad", ngin, attrs, 1,
                           kMpcDomain)[0];
      for (int64_t i = 0; i < n * c; ++i) {
        std::vector<double> lp = values(fwd[1]);
        lp[size_t(i)] += 1e-6;
        Tensor lpt = D({n, c}, lp);
        nin[0] = &lpt;
        double up =
            runNode("NegativeLogLikelihoodLoss", nin, attrs)[0].getAsDouble(0);
        lp[size_t(i)] -= 2e-6;
        lpt = D({n, c}, lp);
        double down =
            runNode("NegativeLogLikelihoodLoss", nin, attrs)[0].getAsDouble(0);
        EXPECT_NEAR(ndx.getAsDouble(i), 1.5 * (up - down) / 2e-6, 1e-7);
      }
    }
  // reduction none: dL has the per-sample shape.
  Attrs none = {{"reduction", str("none")}};
  Tensor lab = I({2}, {1, 0}), scores = D({2, 2}, {0.3, -0.2, 1, 2});
  std::vector<Tensor> fwd =
      runNode("SoftmaxCrossEntropyLoss", {&scores, &lab}, none, 2);
  Tensor dl = D({2}, {2, -1});
  Tensor dx = runNode("SoftmaxCrossEntropyLossGrad", {&dl, &fwd[1], &lab}, none,
                      1, kMpcDomain)[0];
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 2; ++j) {
      double p = std::exp(fwd[1].getAsDouble(i * 2 + j));
      double hot = lab.data<int64_t>()[i] == j ? 1 : 0;
      EXPECT_NEAR(dx.getAsDouble(i * 2 + j), (p - hot) * dl.getAsDouble(i),
                  1e-15);
    }
}

TEST(CpuMpcGrad, SumToShapeAndReduceGrad) {
  std::vector<float> seq(24);
  for (int i = 0; i < 24; ++i)
    seq[size_t(i)] = float(i);
  Tensor dy = F({2, 3, 4}, seq);
  Tensor b = runMpc("SumToShape", {dy, F({4}, {0, 0, 0, 0})});
  EXPECT_EQ(b.dims, (std::vector<int64_t>{4}));
  EXPECT_EQ(values(b), (std::vector<double>{60, 66, 72, 78}));
  Tensor b2 = runMpc("SumToShape", {dy, F({2, 1, 4}, std::vector<float>(8))});
  EXPECT_EQ(b2.dims, (std::vector<int64_t>{2, 1, 4}));
  EXPECT_EQ(b2.getAsDouble(0), 0 + 4 + 8);
  Tensor same = runMpc("SumToShape", {dy, dy});
  EXPECT_EQ(values(same), values(dy));
  // fp16 dY: fp32 accumulation, one rounding.
  Tensor h = runMpc("SumToShape",
                    {H({4096, 1}, std::vector<float>(4096, 1)), F({1}, {0})});
  EXPECT_EQ(h.dtype, DType::F16);
  EXPECT_EQ(h.getAsDouble(0), 4096);
  EXPECT_NE(errorOf("SumToShape", {dy, F({3}, {0, 0, 0})}, {}, kMpcDomain), "");

  Tensor x = F({2, 3}, std::vector<float>(6));
  // ReduceMean over axis 1 without keepdims: dY [2] spreads, divided by 3.
  Tensor g =
      runMpc("ReduceGrad", {F({2}, {3, 6}), x},
             {{"axes", ints({-1})}, {"keepdims", i64(0)}, {"mean", i64(1)}});
  EXPECT_EQ(values(g), (std::vector<double>{1, 1, 1, 2, 2, 2}));
  // ReduceSum-13 style: axes as input 2, keepdims.
  Tensor g2 = runMpc("ReduceGrad", {F({1, 3}, {1, 2, 3}), x, I({1}, {0})});
  EXPECT_EQ(values(g2), (std::vector<double>{1, 2, 3, 1, 2, 3}));
  // All axes.
  Tensor g3 = runMpc("ReduceGrad", {F({}, {12}), x},
                     {{"keepdims", i64(0)}, {"mean", i64(1)}});
  EXPECT_EQ(values(g3), std::vector<double>(6, 2));
  EXPECT_NE(errorOf("ReduceGrad", {F({3}, {1, 2, 3}), x},
                    {{"axes", ints({1})}, {"keepdims", i64(0)}}, kMpcDomain)
                .find("not the reduction"),
            std::string::npos);
}

// --- mpc training ops --------------------------------------------------------

TEST(CpuMpcTrain, UnscaleGradients) {
  Tensor scale = F({}, {1024});
  Tensor g1 = F({3}, {1024, -2048, 512}), g2 = H({2}, {4096, 1});
  std::vector<Tensor> out =
      runNode("UnscaleGradients", {&scale, &g1, &g2}, {}, 3, kMpcDomain);
  EXPECT_EQ(out[0].dtype, DType::Bool);
  EXPECT_EQ(out[0].getAsDouble(0), 0);
  expectNear(out[1], {1, -2, 0.5}, 0);
  EXPECT_EQ(out[2].dtype, DType::F32); // unscaled gradients are fp32
  expectNear(out[2], {4, 1.0 / 1024}, 0);
  Tensor bad = H({2}, {1, 70000}); // overflows fp16 to inf
  out = runNode("UnscaleGradients", {&scale, &g1, &bad}, {}, 3, kMpcDomain);
  EXPECT_EQ(out[0].getAsDouble(0), 1);
  Tensor nan = F({1}, {NAN});
  out = runNode("UnscaleGradients", {&scale, &nan}, {}, 2, kMpcDomain);
  EXPECT_EQ(out[0].getAsDouble(0), 1);
}

TEST(CpuMpcTrain, UpdateLossScale) {
  Attrs attrs = {{"growth_factor", f32(2)},
                 {"backoff_factor", f32(0.5)},
                 {"growth_interval", i64(2)}};
  Tensor scale = F({}, {65536}), tracker = I({}, {0});
  auto step = [&](bool inf) {
    Tensor fi = B({}, {inf});
    std::vector<Tensor> out = runNode(
        "UpdateLossScale", {&scale, &tracker, &fi}, attrs, 2, kMpcDomain);
    scale = out[0];
    tracker = out[1];
  };
  step(false);
  EXPECT_EQ(scale.getAsDouble(0), 65536);
  EXPECT_EQ(tracker.getAsDouble(0), 1);
  step(false);
  EXPECT_EQ(scale.getAsDouble(0), 131072);
  EXPECT_EQ(tracker.getAsDouble(0), 0);
  step(false);
  step(true);
  EXPECT_EQ(scale.getAsDouble(0), 65536);
  EXPECT_EQ(tracker.getAsDouble(0), 0);
  EXPECT_EQ(tracker.dtype, DType::I64);
}

TEST(CpuMpcTrain, ClipGradNorm) {
  Tensor g1 = F({2}, {3, 0}), g2 = F({1, 1}, {4});
  std::vector<Tensor> out = runNode("ClipGradNorm", {&g1, &g2},
                                    {{"max_norm", f32(1)}}, 3, kMpcDomain);
  EXPECT_FLOAT_EQ(float(out[2].getAsDouble(0)), 5.0f);
  float coef = 1.0f * (1.0f / (5.0f + float(1e-6)));
  EXPECT_EQ(float(out[0].getAsDouble(0)), 3.0f * coef);
  EXPECT_EQ(float(out[1].getAsDouble(0)), 4.0f * coef);
  EXPECT_EQ(out[1].dims, (std::vector<int64_t>{1, 1}));
  // Below max_norm: the coefficient clamps to 1 and gradients are unchanged.
  out = runNode("ClipGradNorm", {&g1, &g2}, {{"max_norm", f32(10)}}, 3,
                kMpcDomain);
  EXPECT_EQ(values(out[0]), values(g1));
}

TEST(CpuMpcTrain, SgdAndAdamMatchSharedMathAndSkipOnInf) {
  std::vector<float> pv = randomFloats(6, 41), gv = randomFloats(6, 42),
                     bv = randomFloats(6, 43), vv = randomFloats(6, 44, 0, 1);
  Tensor p = F({2, 3}, pv), g = F({2, 3}, gv), buf = F({2, 3}, bv),
         v = F({2, 3}, vv), step = I({}, {3});
  Tensor clean = B({}, {false}), inf = B({}, {true});
  Attrs sgd = {{"lr", f32(0.05f)},
               {"momentum", f32(0.9f)},
               {"dampening", f32(0.1f)},
               {"weight_decay", f32(1e-4f)},
               {"nesterov", i64(1)}};
  std::vector<Tensor> out =
      runNode("SGD", {&clean, &step, &p, &g, &buf}, sgd, 2, kMpcDomain);
  SgdScalars ss = sgdScalars(0.05f, 0.9f, 0.1f, 1e-4f, true, 3);
  for (int64_t i = 0; i < 6; ++i) {
    float pe = pv[size_t(i)], be = bv[size_t(i)];
    sgdUpdate(pe, gv[size_t(i)], be, ss);
    EXPECT_EQ(out[0].data<float>()[i], pe);
    EXPECT_EQ(out[1].data<float>()[i], be);
  }
  // found_inf: outputs are byte copies of the inputs.
  out = runNode("SGD", {&inf, &step, &p, &g, &buf}, sgd, 2, kMpcDomain);
  EXPECT_EQ(out[0].bytes, p.bytes);
  EXPECT_EQ(out[1].bytes, buf.bytes);
  // No momentum, no buffer, found_inf omitted.
  out = runNode("SGD", {nullptr, &step, &p, &g}, {{"lr", f32(0.5f)}}, 1,
                kMpcDomain);
  EXPECT_EQ(out[0].data<float>()[0], pv[0] + float(-double(0.5f)) * gv[0]);

  Attrs adam = {{"lr", f32(1e-3f)},           {"beta1", f32(0.9f)},
                {"beta2", f32(0.999f)},       {"epsilon", f32(1e-8f)},
                {"weight_decay", f32(0.01f)}, {"decoupled", i64(1)}};
  out = runNode("Adam", {&clean, &step, &p, &g, &buf, &v}, adam, 3, kMpcDomain);
  AdamScalars as = adamScalars(1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, true, 3);
  for (int64_t i = 0; i < 6; ++i) {
    float pe = pv[size_t(i)], me = bv[size_t(i)], ve = vv[size_t(i)];
    adamUpdate(pe, gv[size_t(i)], me, ve, as);
    EXPECT_EQ(out[0].data<float>()[i], pe);
    EXPECT_EQ(out[1].data<float>()[i], me);
    EXPECT_EQ(out[2].data<float>()[i], ve);
  }
  out = runNode("Adam", {&inf, &step, &p, &g, &buf, &v}, adam, 3, kMpcDomain);
  EXPECT_EQ(out[0].bytes, p.bytes);
  EXPECT_EQ(out[1].bytes, buf.bytes);
  EXPECT_EQ(out[2].bytes, v.bytes);
  // Non-fp32 master weights are rejected.
  Tensor ph = H({2, 3}, pv);
  EXPECT_NE(errorOf("Adam", {clean, step, ph, g, buf, v}, adam, kMpcDomain)
                .find("fp32"),
            std::string::npos);
}

// --optimizer-state-dtype=bf16: the moments are bf16. The update is the fp32
// one on the widened moments; the parameter moves by the fp32 new moments
// (not their rounded copies) and the moments are stored rounded to nearest
// even. A skipped step copies the bf16 bits.
TEST(CpuMpcTrain, SgdAndAdamWithBf16Moments) {
  std::vector<float> pv = randomFloats(64, 51), gv = randomFloats(64, 52),
                     mv = randomFloats(64, 53), vv = randomFloats(64, 54, 0, 1);
  Tensor p = F({8, 8}, pv), g = F({8, 8}, gv), step = I({}, {4});
  Tensor m = H({8, 8}, mv, DType::BF16), v = H({8, 8}, vv, DType::BF16);
  Tensor clean = B({}, {false}), inf = B({}, {true});
  Attrs adam = {{"lr", f32(1e-2f)},           {"beta1", f32(0.9f)},
                {"beta2", f32(0.999f)},       {"epsilon", f32(1e-8f)},
                {"weight_decay", f32(0.01f)}, {"decoupled", i64(1)}};
  std::vector<Tensor> out =
      runNode("Adam", {&clean, &step, &p, &g, &m, &v}, adam, 3, kMpcDomain);
  ASSERT_EQ(out[1].dtype, DType::BF16);
  ASSERT_EQ(out[2].dtype, DType::BF16);
  AdamScalars as = adamScalars(1e-2f, 0.9f, 0.999f, 1e-8f, 0.01f, true, 4);
  int movedByRounding = 0;
  for (int64_t i = 0; i < 64; ++i) {
    float pe = pv[size_t(i)], me = float(m.getAsDouble(i)),
          ve = float(v.getAsDouble(i));
    adamUpdate(pe, gv[size_t(i)], me, ve, as);
    EXPECT_EQ(out[0].data<float>()[i], pe) << i;
    EXPECT_EQ(out[1].data<uint16_t>()[i], floatToBf16(me)) << i;
    EXPECT_EQ(out[2].data<uint16_t>()[i], floatToBf16(ve)) << i;
    // The parameter had it moved by the rounded new moments.
    float denom = roundToBf16(ve);
    denom = std::sqrt(denom) / as.biasCorrection2Sqrt + as.eps;
    float pr = pv[size_t(i)] * as.decayFactor +
               as.negStepSize * roundToBf16(me) / denom;
    movedByRounding += pr != pe;
  }
  // The choice shows: most elements would move otherwise.
  EXPECT_GT(movedByRounding, 32);
  out = runNode("Adam", {&inf, &step, &p, &g, &m, &v}, adam, 3, kMpcDomain);
  EXPECT_EQ(out[0].bytes, p.bytes);
  EXPECT_EQ(out[1].bytes, m.bytes);
  EXPECT_EQ(out[2].bytes, v.bytes);
  // Moments of two dtypes, or fp16 ones, are refused.
  Tensor v32 = F({8, 8}, vv), vh = H({8, 8}, vv);
  EXPECT_NE(errorOf("Adam", {clean, step, p, g, m, v32}, adam, kMpcDomain)
                .find("exp_avg is bf16 but exp_avg_sq is fp32"),
            std::string::npos);
  EXPECT_NE(errorOf("Adam", {clean, step, p, g, vh, vh}, adam, kMpcDomain)
                .find("exp_avg must be fp32 or bf16"),
            std::string::npos);

  Attrs sgd = {{"lr", f32(0.05f)},
               {"momentum", f32(0.9f)},
               {"weight_decay", f32(1e-4f)}};
  out = runNode("SGD", {&clean, &step, &p, &g, &m}, sgd, 2, kMpcDomain);
  ASSERT_EQ(out[1].dtype, DType::BF16);
  SgdScalars ss = sgdScalars(0.05f, 0.9f, 0, 1e-4f, false, 4);
  for (int64_t i = 0; i < 64; ++i) {
    float pe = pv[size_t(i)], be = float(m.getAsDouble(i));
    sgdUpdate(pe, gv[size_t(i)], be, ss);
    EXPECT_EQ(out[0].data<float>()[i], pe) << i;
    EXPECT_EQ(out[1].data<uint16_t>()[i], floatToBf16(be)) << i;
  }
  out = runNode("SGD", {&inf, &step, &p, &g, &m}, sgd, 2, kMpcDomain);
  EXPECT_EQ(out[0].bytes, p.bytes);
  EXPECT_EQ(out[1].bytes, m.bytes);
}

TEST(CpuMpcTrain, IncrementStep) {
  Tensor step = I({}, {7});
  EXPECT_EQ(runMpc("IncrementStep", {step, B({}, {false})}).getAsDouble(0), 8);
  EXPECT_EQ(runMpc("IncrementStep", {step, B({}, {true})}).getAsDouble(0), 7);
  std::vector<Tensor> out =
      runNode("IncrementStep", {&step, nullptr}, {}, 1, kMpcDomain);
  EXPECT_EQ(out[0].getAsDouble(0), 8);
  EXPECT_EQ(out[0].dtype, DType::I64);
}
