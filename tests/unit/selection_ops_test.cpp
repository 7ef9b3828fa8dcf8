// TopK, ArgMax, ArgMin and Sign: the CPU kernels against hand-computed
// values (ties to the lower index, NaN above every number, select_last_index,
// keepdims, fp16 and integer inputs, K at its bounds), their shape inference,
// errors that name the node, and fold-constants over constants (TopK's two
// outputs both folded).
#include "kernels/cpu/kernel_table.h"
#include "passes/onnx/onnx_io.h"
#include "passes/pass.h"
#include "passes/pipeline.h"
#include "passes/registry.h"
#include "passes/shape_inference.h"
#include "support/diagnostics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

using namespace mpc;

namespace {

using Attrs = std::vector<std::pair<std::string, Attribute>>;

Tensor F(std::vector<int64_t> dims, std::vector<float> v) {
  return Tensor::fromFloats(dims, v);
}
Tensor I(std::vector<int64_t> dims, std::vector<int64_t> v) {
  return Tensor::fromInt64s(dims, v);
}

std::vector<double> values(const Tensor &t) {
  std::vector<double> v(size_t(t.numel()));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = t.getAsDouble(int64_t(i));
  return v;
}

/// Runs a one-node graph of `op` on the CPU and returns its outputs.
std::vector<Tensor> run(const std::string &op, const std::vector<Tensor> &in,
                        const Attrs &attrs = {}, size_t outputs = 1) {
  Graph g;
  std::vector<Value *> vals;
  std::vector<const Tensor *> ptrs;
  for (size_t i = 0; i < in.size(); ++i) {
    vals.push_back(
        g.addInput("in" + std::to_string(i), in[i].dtype, toDims(in[i].dims)));
    ptrs.push_back(&in[i]);
  }
  Node *n = g.createNode(op, vals, outputs, "sel");
  for (const auto &kv : attrs)
    n->setAttr(kv.first, kv.second);
  std::vector<Tensor> outs;
  runCpuNode(*n, ptrs, outs);
  return outs;
}

Attribute A(int64_t v) { return Attribute::ofInt(v); }

TEST(SelectionKernels, SignKeepsTypeAndNaN) {
  Tensor y = run("Sign", {F({5}, {-2.5f, -0.0f, 0.0f, 3.0f, NAN})})[0];
  EXPECT_EQ(y.dtype, DType::F32);
  std::vector<double> v = values(y);
  EXPECT_EQ(std::vector<double>(v.begin(), v.begin() + 4),
            (std::vector<double>{-1, 0, 0, 1}));
  EXPECT_TRUE(std::isnan(v[4]));
  Tensor yi = run("Sign", {I({3}, {-7, 0, 9})})[0];
  EXPECT_EQ(yi.dtype, DType::I64);
  EXPECT_EQ(values(yi), (std::vector<double>{-1, 0, 1}));
  Tensor yh = run("Sign", {F({2}, {-0.5f, 2}).castTo(DType::F16)})[0];
  EXPECT_EQ(yh.dtype, DType::F16);
  EXPECT_EQ(values(yh), (std::vector<double>{-1, 1}));
}

TEST(SelectionKernels, ArgMaxArgMinTiesNaNAndAttributes) {
  // [2, 4]: row 0 has a tie (3 at 1 and 3), row 1 a NaN at 2.
  Tensor x = F({2, 4}, {1, 3, 0, 3, 5, -1, NAN, 2});
  auto argmax = [&](Attrs a) { return values(run("ArgMax", {x}, a)[0]); };
  auto argmin = [&](Attrs a) { return values(run("ArgMin", {x}, a)[0]); };
  EXPECT_EQ(argmax({{"axis", A(1)}}), (std::vector<double>{1, 2}));
  EXPECT_EQ(argmax({{"axis", A(-1)}, {"select_last_index", A(1)}}),
            (std::vector<double>{3, 2}));
  EXPECT_EQ(argmin({{"axis", A(1)}}), (std::vector<double>{2, 2}));
  // Axis 0 (the default): column 2 holds the NaN, which wins both ways.
  EXPECT_EQ(argmax({}), (std::vector<double>{1, 0, 1, 0}));
  EXPECT_EQ(argmin({}), (std::vector<double>{0, 1, 1, 1}));
  Tensor kept = run("ArgMax", {x}, {{"axis", A(1)}})[0];
  EXPECT_EQ(kept.dtype, DType::I64);
  EXPECT_EQ(kept.dims, (std::vector<int64_t>{2, 1}));
  Tensor dropped = run("ArgMax", {x}, {{"axis", A(1)}, {"keepdims", A(0)}})[0];
  EXPECT_EQ(dropped.dims, (std::vector<int64_t>{2}));
  // Token ids (CLIP's end-of-text argmax): int64 input.
  Tensor ids = I({2, 5}, {4, 9, 63, 0, 0, 5, 63, 1, 63, 0});
  EXPECT_EQ(
      values(run("ArgMax", {ids}, {{"axis", A(-1)}, {"keepdims", A(0)}})[0]),
      (std::vector<double>{2, 1}));
}

TEST(SelectionKernels, TopKOrderTiesNaNAndAxis) {
  Tensor x = F({1, 6}, {2, NAN, 5, 2, INFINITY, -1});
  auto topk = [&](int64_t k, int64_t largest) {
    return run("TopK", {x, I({1}, {k})}, {{"largest", A(largest)}}, 2);
  };
  std::vector<Tensor> big = topk(4, 1);
  EXPECT_EQ(values(big[1]), (std::vector<double>{1, 4, 2, 0}));
  EXPECT_TRUE(std::isnan(values(big[0])[0]));
  EXPECT_EQ(values(big[0])[1], INFINITY);
  std::vector<Tensor> small = topk(3, 0);
  EXPECT_EQ(values(small[0]), (std::vector<double>{-1, 2, 2}));
  EXPECT_EQ(values(small[1]), (std::vector<double>{5, 0, 3}));
  // The whole axis (argsort), NaN last when smallest first.
  EXPECT_EQ(values(topk(6, 0)[1]), (std::vector<double>{5, 0, 3, 2, 4, 1}));
  // K = 0: empty outputs of the right shape.
  std::vector<Tensor> none = topk(0, 1);
  EXPECT_EQ(none[0].dims, (std::vector<int64_t>{1, 0}));
  // Axis 0 of a [3, 2], fp16 values kept bit for bit.
  Tensor h = F({3, 2}, {0.5f, 7, 1.25f, -3, 0.5f, 4}).castTo(DType::F16);
  std::vector<Tensor> cols = run("TopK", {h, I({1}, {2})}, {{"axis", A(0)}}, 2);
  EXPECT_EQ(cols[0].dtype, DType::F16);
  EXPECT_EQ(cols[0].dims, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(values(cols[0]), (std::vector<double>{1.25, 7, 0.5, 4}));
  EXPECT_EQ(values(cols[1]), (std::vector<double>{1, 0, 0, 2}));
  // int64 values.
  std::vector<Tensor> ints =
      run("TopK", {I({4}, {3, 9, 9, 1}), I({1}, {2})}, {}, 2);
  EXPECT_EQ(values(ints[0]), (std::vector<double>{9, 9}));
  EXPECT_EQ(values(ints[1]), (std::vector<double>{1, 2}));
}

TEST(SelectionKernels, BadInputsNameTheNode) {
  Tensor x = F({2, 3}, {1, 2, 3, 4, 5, 6});
  auto message = [](auto &&f) {
    try {
      f();
    } catch (const Error &e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  std::string k4 = message([&] { run("TopK", {x, I({1}, {4})}, {}, 2); });
  EXPECT_NE(k4.find("'sel'"), std::string::npos) << k4;
  EXPECT_NE(k4.find("K = 4 is out of range"), std::string::npos) << k4;
  std::string kNeg = message([&] { run("TopK", {x, I({1}, {-1})}, {}, 2); });
  EXPECT_NE(kNeg.find("K = -1"), std::string::npos) << kNeg;
  std::string kTwo = message([&] { run("TopK", {x, I({2}, {1, 2})}, {}, 2); });
  EXPECT_NE(kTwo.find("one value"), std::string::npos) << kTwo;
  std::string axis = message([&] { run("ArgMax", {x}, {{"axis", A(2)}}); });
  EXPECT_NE(axis.find("axis 2"), std::string::npos) << axis;
  std::string empty = message([&] {
    run("ArgMin", {F({2, 0}, {})}, {{"axis", A(1)}});
  });
  EXPECT_NE(empty.find("empty"), std::string::npos) << empty;
  std::string scalar = message([&] { run("ArgMax", {F({}, {1})}); });
  EXPECT_NE(scalar.find("rank >= 1"), std::string::npos) << scalar;
}

std::unique_ptr<Model> parse(const std::string &body, const char *sig) {
  return parseModelText(std::string("<ir_version: 8, opset_import: [\"\" : "
                                    "17]>\nsel ") +
                            sig + " {\n" + body + "\n}",
                        "sel.onnxtext");
}

TEST(SelectionShapes, InferredTypesAndErrors) {
  auto m = parse("  v, i = TopK <axis = 1> (x, k)\n"
                 "  a = ArgMax <axis = -1, keepdims = 0> (x)\n"
                 "  b = ArgMin (x)\n"
                 "  s = Sign (x)",
                 "(float16[N,7,3] x, int64[1] k) => (v, i, a, b, s)");
  Statistics stats;
  runPipeline(*m, parsePipeline("verify,infer-shapes"), CompileOptions{},
              PipelineConfig{}, stats);
  Graph &g = *m->graph;
  // K is a graph input: its value, and so the axis' size, is unknown.
  EXPECT_EQ(g.findValue("v")->typeString(), "fp16[Nx?x3]");
  EXPECT_EQ(g.findValue("i")->typeString(), "int64[Nx?x3]");
  EXPECT_EQ(g.findValue("a")->typeString(), "int64[Nx7]");
  EXPECT_EQ(g.findValue("b")->typeString(), "int64[1x7x3]");
  EXPECT_EQ(g.findValue("s")->typeString(), "fp16[Nx7x3]");

  auto known = parse("  k = Constant <value = int64[1] {2}> ()\n"
                     "  v, i = TopK <axis = 1> (x, k)",
                     "(float[N,7,3] x) => (v, i)");
  runPipeline(*known, parsePipeline("verify,infer-shapes"), CompileOptions{},
              PipelineConfig{}, stats);
  EXPECT_EQ(known->graph->findValue("v")->typeString(), "fp32[Nx2x3]");

  auto tooMany = parse("  k = Constant <value = int64[1] {8}> ()\n"
                       "  v, i = TopK <axis = 1> (x, k)",
                       "(float[N,7,3] x) => (v, i)");
  try {
    runPipeline(*tooMany, parsePipeline("verify,infer-shapes"),
                CompileOptions{}, PipelineConfig{}, stats);
    FAIL() << "K = 8 over an axis of 7 was accepted";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("K = 8 is out of range"),
              std::string::npos)
        << e.what();
  }
  auto boolArg = parse("  a = ArgMax (x)", "(bool[3] x) => (a)");
  EXPECT_THROW(runPipeline(*boolArg, parsePipeline("verify,infer-shapes"),
                           CompileOptions{}, PipelineConfig{}, stats),
               Error);
}

TEST(SelectionFold, TopKArgMaxAndSignOverConstantsFold) {
  auto m = parse("  c = Constant <value = float[2,3] {4, -1, 7, 0, 2, 2}> ()\n"
                 "  k = Constant <value = int64[1] {2}> ()\n"
                 "  v, i = TopK <axis = 1> (c, k)\n"
                 "  a = ArgMin <axis = 1> (c)\n"
                 "  s = Sign (c)\n"
                 "  iv = Cast <to = 1> (i)\n"
                 "  av = Cast <to = 1> (a)\n"
                 "  t = Add (v, iv)\n"
                 "  u = Add (t, av)\n"
                 "  w = Mul (s, x)",
                 "(float[2,3] x) => (u, w)");
  Statistics stats;
  runPipeline(*m, parsePipeline("verify,infer-shapes,fold-constants"),
              CompileOptions{}, PipelineConfig{}, stats);
  std::vector<std::string> ops;
  for (const Node *n : m->graph->nodeList())
    ops.push_back(n->opType());
  // Only the node that reads x is left.
  EXPECT_EQ(ops, (std::vector<std::string>{"Mul"}));
  const Value *u = m->graph->findValue("u");
  ASSERT_TRUE(u && u->isInitializer());
  // v = {7, 4 | 2, 2}, i = {2, 0 | 1, 2}, a = {1 | 0}.
  EXPECT_EQ(values(*u->initializer()), (std::vector<double>{10, 5, 3, 4}));
  const Value *s = m->graph->findValue("s");
  ASSERT_TRUE(s && s->isInitializer());
  EXPECT_EQ(values(*s->initializer()),
            (std::vector<double>{1, -1, 1, 0, 1, 1}));
}

} // namespace
