// Tests of the standard-op expansion of mpc's variadic ops
// (passes/onnx/expand_variadic.h), the form --emit=step writes for other
// runtimes: the same step, run on the CPU backend with the fused kernels and
// with the expansion, gives the same unscaled gradients and found_inf bit
// for bit (finite, inf and NaN gradients, fp16 and fp32), the clipped
// gradients and norm to fp32 rounding, and the gradients of Max and Min of
// several broadcasting inputs (ExtremumGrad) bit for bit, ties and NaNs
// included.
#include "ir/mpc_ops.h"
#include "passes/onnx/expand_variadic.h"
#include "runtime/backend.h"
#include "runtime/executor.h"
#include "support/diagnostics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

using namespace mpc;

namespace {

/// scale, g1 (fp16 [3,4]), g2 (fp32 [5]) -> UnscaleGradients -> ClipGradNorm.
std::unique_ptr<Graph> unscaleThenClip() {
  auto g = std::make_unique<Graph>("step");
  Value *scale = g->addInput("scale", DType::F32, {});
  Value *g1 = g->addInput("g1", DType::F16, toDims({3, 4}));
  Value *g2 = g->addInput("g2", DType::F32, toDims({5}));
  Node *unscale = g->createNode("UnscaleGradients", {scale, g1, g2}, 3,
                                "unscale", kMpcDomain);
  Node *clip =
      g->createNode("ClipGradNorm", {unscale->output(1), unscale->output(2)}, 3,
                    "clip", kMpcDomain);
  clip->setAttr("max_norm", Attribute::ofFloat(0.5f));
  // Typed as infer-shapes types them: the expansion reads the dtypes.
  unscale->output(0)->setType(DType::Bool, {});
  unscale->output(1)->setType(DType::F32, toDims({3, 4}));
  unscale->output(2)->setType(DType::F32, toDims({5}));
  clip->output(0)->setType(DType::F32, toDims({3, 4}));
  clip->output(1)->setType(DType::F32, toDims({5}));
  clip->output(2)->setType(DType::F32, {});
  for (Value *v : {unscale->output(0), unscale->output(1), unscale->output(2),
                   clip->output(0), clip->output(1), clip->output(2)})
    g->addOutput(v);
  return g;
}

Tensor vectorOf(DType t, std::vector<int64_t> dims, std::vector<double> v) {
  Tensor x(t, dims);
  for (size_t i = 0; i < v.size(); ++i)
    x.setFromDouble(int64_t(i), v[i]);
  return x;
}

struct Outputs {
  std::vector<Tensor> values;
  std::vector<std::string> names;
};

Outputs run(const Graph &g, double scale, const Tensor &g1, const Tensor &g2) {
  std::unique_ptr<Backend> cpu = createCpuBackend();
  Executor exec(g, *cpu);
  exec.setInput("scale", vectorOf(DType::F32, {}, {scale}));
  exec.setInput("g1", g1);
  exec.setInput("g2", g2);
  exec.run();
  Outputs o;
  for (Value *v : g.outputs()) {
    o.values.push_back(exec.output(v->name()));
    o.names.push_back(v->name());
  }
  return o;
}

void expectSameStep(double scale, const Tensor &g1, const Tensor &g2,
                    const std::string &label) {
  auto fused = unscaleThenClip();
  auto expanded = unscaleThenClip();
  ASSERT_EQ(expandVariadicMpcOps(*expanded), 2u);
  for (const auto &n : expanded->nodes())
    EXPECT_NE(n->domain(), kMpcDomain) << n->opType();
  Outputs want = run(*fused, scale, g1, g2);
  Outputs got = run(*expanded, scale, g1, g2);
  ASSERT_EQ(got.names, want.names) << label; // the outputs keep their names
  for (size_t i = 0; i < want.values.size(); ++i) {
    const Tensor &w = want.values[i], &h = got.values[i];
    ASSERT_EQ(h.dtype, w.dtype) << label << " output " << i;
    ASSERT_EQ(h.numel(), w.numel()) << label << " output " << i;
    for (int64_t k = 0; k < w.numel(); ++k) {
      double a = h.getAsDouble(k), b = w.getAsDouble(k);
      if (std::isnan(b)) {
        EXPECT_TRUE(std::isnan(a))
            << label << " output " << i << "[" << k << "]";
      } else if (i < 3 || std::isinf(b)) { // found_inf, unscaled: exact
        EXPECT_EQ(a, b) << label << " output " << i << "[" << k << "]";
      } else { // clipped and norm: only the order of fp32 sums differs
        EXPECT_NEAR(a, b, 2e-6 * std::fabs(b) + 1e-30)
            << label << " output " << i << "[" << k << "]";
      }
    }
  }
}

TEST(ExpandVariadic, FiniteGradientsUnscaleAndClipLikeTheKernels) {
  std::vector<double> v1;
  for (int i = 0; i < 12; ++i)
    v1.push_back(std::sin(i + 1.0) * 3000.0);
  Tensor g1 = vectorOf(DType::F16, {3, 4}, v1);
  Tensor g2 = vectorOf(DType::F32, {5}, {1e4, -2e4, 3.5, 0, -7.25e3});
  expectSameStep(65536.0, g1, g2, "scale 65536");
  expectSameStep(3.0, g1, g2, "scale 3 (inexact inverse)");
  expectSameStep(1.0, g1, g2, "scale 1");
}

TEST(ExpandVariadic, AnInfOrNaNInAnyGradientSetsFoundInf) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> v1(12, 0.5);
  Tensor finite1 = vectorOf(DType::F16, {3, 4}, v1);
  v1[7] = -inf;
  Tensor inf1 = vectorOf(DType::F16, {3, 4}, v1);
  Tensor finite2 = vectorOf(DType::F32, {5}, {1, 2, 3, 4, 5});
  Tensor nan2 = vectorOf(DType::F32, {5}, {1, 2, nan, 4, 5});
  expectSameStep(1024.0, inf1, finite2, "inf in the fp16 gradient");
  expectSameStep(1024.0, finite1, nan2, "NaN in the fp32 gradient");

  auto g = unscaleThenClip();
  expandVariadicMpcOps(*g);
  EXPECT_EQ(run(*g, 1024.0, inf1, finite2).values[0].getAsDouble(0), 1.0);
  EXPECT_EQ(run(*g, 1024.0, finite1, finite2).values[0].getAsDouble(0), 0.0);
}

TEST(ExpandVariadic, RefusesAnUnscaleWithoutGradients) {
  Graph g("g");
  Value *scale = g.addInput("scale", DType::F32, {});
  Node *n = g.createNode("UnscaleGradients", {scale}, 1, "unscale", kMpcDomain);
  g.addOutput(n->output(0));
  EXPECT_THROW(expandVariadicMpcOps(g), Error);
}

/// X0..Xn-1 -> Y = op(X0..Xn-1) -> dXi = ExtremumGrad(dY, Y, X0..Xn-1)
/// <index = i> for each of `indices`; the outputs are Y, then each dXi. Y
/// and dXi have the inputs' broadcast shape (rank 2 here), Y the inputs'
/// dtype, dXi dY's. `hideForward` passes Y through an Identity, so the
/// expansion cannot see which Max/Min made it.
std::unique_ptr<Graph>
extremumGradStep(const std::string &op, DType gradType, DType fwdType,
                 const std::vector<Dims> &shapes, const Dims &full,
                 const std::vector<int64_t> &indices, bool hideForward) {
  auto g = std::make_unique<Graph>("step");
  Value *dY = g->addInput("dY", gradType, full);
  std::vector<Value *> xs;
  for (size_t k = 0; k < shapes.size(); ++k)
    xs.push_back(g->addInput("x" + std::to_string(k), fwdType, shapes[k]));
  Node *fwd = g->createNode(op, xs, 1, "extremum");
  fwd->output(0)->setType(fwdType, full);
  Value *y = fwd->output(0);
  if (hideForward) {
    y = g->createNode("Identity", {y}, 1, "hidden")->output(0);
    y->setType(fwdType, full);
  }
  g->addOutput(y);
  std::vector<Value *> inputs = {dY, y};
  inputs.insert(inputs.end(), xs.begin(), xs.end());
  for (int64_t index : indices) {
    Node *grad =
        g->createNode("ExtremumGrad", inputs, 1, "extremum_grad", kMpcDomain);
    grad->setAttr("index", Attribute::ofInt(index));
    grad->output(0)->setType(gradType, full);
    g->addOutput(grad->output(0));
  }
  return g;
}

/// Values from a short list, so that the inputs tie often (-0 and +0 among
/// them, which compare equal), and a NaN in input 1 at one element.
Tensor tiedValues(DType t, const Dims &dims, size_t k) {
  const double levels[] = {-1.0, 0.5, 2.0, 0.5, -0.0, 0.0, 2.0, 3.0};
  std::vector<int64_t> sizes;
  for (const auto &d : dims)
    sizes.push_back(d.value);
  Tensor x(t, sizes);
  for (int64_t i = 0; i < x.numel(); ++i)
    x.setFromDouble(i, levels[size_t(i * int64_t(k + 2) + int64_t(k)) % 8]);
  if (k == 1 && x.numel() > 2)
    x.setFromDouble(2, std::numeric_limits<double>::quiet_NaN());
  return x;
}

struct ExtremumGradCase {
  std::string op;
  DType gradType, fwdType;
  std::vector<Dims> shapes;
  std::vector<int64_t> indices;
  bool hideForward = false;
};

/// Runs the fused ExtremumGrads and their expansion on the CPU backend and
/// compares Y and every dXi byte for byte; returns how many elements of Y
/// tie between two or more inputs, so a case can show it tests the split.
int64_t expectSameExtremumGrad(const ExtremumGradCase &c) {
  Dims full = toDims({4, 3});
  auto fused = extremumGradStep(c.op, c.gradType, c.fwdType, c.shapes, full,
                                c.indices, c.hideForward);
  auto expanded = extremumGradStep(c.op, c.gradType, c.fwdType, c.shapes, full,
                                   c.indices, c.hideForward);
  std::string label =
      c.op + " of " + std::to_string(c.shapes.size()) + " inputs, indices";
  for (int64_t i : c.indices)
    label += " " + std::to_string(i);
  label += std::string(c.hideForward ? ", Y hidden" : "") + ", dY " +
           dtypeName(c.gradType) + ", X " + dtypeName(c.fwdType);
  EXPECT_EQ(expandVariadicMpcOps(*expanded), c.indices.size()) << label;
  size_t comparisons = 0;
  for (const auto &n : expanded->nodes()) {
    EXPECT_NE(n->domain(), kMpcDomain) << label << ": " << n->opType();
    comparisons += n->opType() == "Equal" ? 1 : 0;
  }
  // The gradients of one Max/Min share its comparisons.
  EXPECT_EQ(comparisons, c.shapes.size()) << label;
  Tensor dY(c.gradType, {4, 3});
  for (int64_t i = 0; i < 12; ++i) // 1/3 and 1/2 shares round in fp16
    dY.setFromDouble(i, std::sin(i + 1.0) * 7.0 + 0.001 * double(i));
  std::vector<Tensor> xs;
  for (size_t k = 0; k < c.shapes.size(); ++k)
    xs.push_back(tiedValues(c.fwdType, c.shapes[k], k));
  auto run = [&](const Graph &g) {
    std::unique_ptr<Backend> cpu = createCpuBackend();
    Executor exec(g, *cpu);
    exec.setInput("dY", dY);
    for (size_t k = 0; k < xs.size(); ++k)
      exec.setInput("x" + std::to_string(k), xs[k]);
    exec.run();
    std::vector<Tensor> outputs;
    for (const Value *v : g.outputs())
      outputs.push_back(exec.output(v->name()));
    return outputs;
  };
  std::vector<Tensor> want = run(*fused), got = run(*expanded);
  for (size_t o = 0; o < want.size(); ++o) {
    EXPECT_EQ(expanded->outputs()[o]->name(), fused->outputs()[o]->name())
        << label; // the outputs keep their names
    const Tensor &w = want[o], &h = got[o];
    if (h.dtype != w.dtype || h.numel() != w.numel() || w.numel() != 12) {
      ADD_FAILURE() << label << ": output " << o << " has another type";
      return 0;
    }
    size_t size = w.byteSize() / size_t(w.numel());
    for (int64_t i = 0; i < w.numel(); ++i)
      EXPECT_EQ(std::memcmp(h.data<char>() + size_t(i) * size,
                            w.data<char>() + size_t(i) * size, size),
                0)
          << label << ": output " << o << "[" << i << "] is "
          << h.getAsDouble(i) << ", the kernel's " << w.getAsDouble(i);
  }
  // Ties: positions where two or more inputs (broadcast) equal Y.
  int64_t tied = 0;
  for (int64_t r = 0; r < 4; ++r)
    for (int64_t col = 0; col < 3; ++col) {
      double y = want[0].getAsDouble(r * 3 + col);
      int equal = 0;
      for (size_t k = 0; k < xs.size(); ++k) {
        int64_t rows = c.shapes[k][0].value, cols = c.shapes[k][1].value;
        int64_t at = (rows == 1 ? 0 : r) * cols + (cols == 1 ? 0 : col);
        equal += xs[k].getAsDouble(at) == y ? 1 : 0;
      }
      tied += equal >= 2 ? 1 : 0;
    }
  return tied;
}

TEST(ExpandVariadic, ExtremumGradSplitsTiesLikeTheKernel) {
  const Dims nc = toDims({4, 3}), row = toDims({1, 3}), col = toDims({4, 1});
  const DType f16 = DType::F16, f32 = DType::F32, f64 = DType::F64;
  for (const char *op : {"Max", "Min"}) {
    std::vector<ExtremumGradCase> cases = {
        {op, f32, f32, {nc, row}, {0}},
        {op, f32, f32, {nc, row}, {1}},
        {op, f32, f32, {row, nc, col}, {0}},
        {op, f32, f32, {row, nc, col}, {2}},
        {op, f16, f16, {nc, row}, {0}},
        {op, f16, f16, {nc, row}, {1}},
        {op, f16, f16, {row, nc, col}, {0}},
        {op, f16, f16, {row, nc, col}, {2}},
        {op, f64, f64, {nc, row, col}, {0}},
        {op, f64, f64, {nc, row, col}, {2}},
        // Every input's gradient, as the gradient rule emits them.
        {op, f32, f32, {row, nc, col}, {0, 1, 2}},
        {op, f16, f16, {nc, row}, {0, 1}},
        // autocast can leave an fp32 gradient meeting fp16 activations.
        {op, f32, f16, {nc, row, col}, {1}},
        // Y of unknown origin: compared as given, converted.
        {op, f16, f16, {row, nc, col}, {0, 2}, true},
        {op, f32, f32, {nc, row}, {0, 1}, true},
    };
    for (const auto &c : cases)
      EXPECT_GT(expectSameExtremumGrad(c), 0)
          << op << ": the data has no ties to split";
  }
}

TEST(ExpandVariadic, RefusesAnExtremumGradIndexOutOfRange) {
  Graph g("g");
  Value *dY = g.addInput("dY", DType::F32, toDims({2}));
  Value *y = g.addInput("y", DType::F32, toDims({2}));
  Value *x = g.addInput("x", DType::F32, toDims({2}));
  Node *n = g.createNode("ExtremumGrad", {dY, y, x, x}, 1, "grad", kMpcDomain);
  n->setAttr("index", Attribute::ofInt(2));
  g.addOutput(n->output(0));
  EXPECT_THROW(expandVariadicMpcOps(g), Error);
}

} // namespace

namespace {

/// dY, X ([2, 3, 2, 2] of dtype t) and fp32 scale, mean, var [3] ->
/// BatchNormalizationGrad with its statistics given -> dX, dScale, dBias.
std::unique_ptr<Graph> batchNormGradWithStatistics(DType t) {
  auto g = std::make_unique<Graph>("step");
  Dims dims = toDims({2, 3, 2, 2});
  std::vector<Value *> inputs = {g->addInput("dy", t, dims),
                                 g->addInput("x", t, dims)};
  for (const char *name : {"scale", "mean", "var"})
    inputs.push_back(g->addInput(name, DType::F32, toDims({3})));
  Node *n =
      g->createNode("BatchNormalizationGrad", inputs, 3, "bn_grad", kMpcDomain);
  n->setAttr("epsilon", Attribute::ofFloat(0.01f));
  n->output(0)->setType(t, dims);
  n->output(1)->setType(DType::F32, toDims({3}));
  n->output(2)->setType(DType::F32, toDims({3}));
  for (size_t i = 0; i < 3; ++i)
    g->addOutput(n->output(i));
  return g;
}

std::vector<Tensor> runBatchNormGrad(const Graph &g, DType t) {
  std::vector<double> dy, x;
  for (int i = 0; i < 24; ++i) {
    dy.push_back(std::sin(0.7 * i + 0.3));
    x.push_back(2.0 * std::cos(1.3 * i) + 0.5);
  }
  std::unique_ptr<Backend> cpu = createCpuBackend();
  Executor exec(g, *cpu);
  exec.setInput("dy", vectorOf(t, {2, 3, 2, 2}, dy));
  exec.setInput("x", vectorOf(t, {2, 3, 2, 2}, x));
  exec.setInput("scale", vectorOf(DType::F32, {3}, {0.5, 1.5, -2.0}));
  exec.setInput("mean", vectorOf(DType::F32, {3}, {0.25, -0.5, 1.0}));
  exec.setInput("var", vectorOf(DType::F32, {3}, {1.0, 0.3, 4.0}));
  exec.run();
  std::vector<Tensor> out;
  for (Value *v : g.outputs())
    out.push_back(exec.output(v->name()));
  return out;
}

} // namespace

TEST(ExpandVariadic, BatchNormGradWithStatisticsLikeTheKernel) {
  // The 3-input (training-mode) form has a function body; with mean and
  // var given (an inference-mode batch norm, --sync-batchnorm's global
  // statistics) --emit=step writes it in standard ops, at opsets where
  // ReduceSum's axes are an attribute (11) and an input (17).
  for (DType t : {DType::F32, DType::F16})
    for (int64_t opset : {11, 17}) {
      std::string label =
          std::string(dtypeName(t)) + " opset " + std::to_string(opset);
      auto fused = batchNormGradWithStatistics(t);
      auto expanded = batchNormGradWithStatistics(t);
      ASSERT_EQ(expandVariadicMpcOps(*expanded, opset), 1u) << label;
      for (const auto &n : expanded->nodes())
        EXPECT_NE(n->domain(), kMpcDomain) << label << ": " << n->opType();
      std::vector<Tensor> want = runBatchNormGrad(*fused, t);
      std::vector<Tensor> got = runBatchNormGrad(*expanded, t);
      for (size_t i = 0; i < 3; ++i) {
        ASSERT_EQ(got[i].dtype, want[i].dtype) << label << " output " << i;
        ASSERT_EQ(got[i].numel(), want[i].numel()) << label << " output " << i;
        for (int64_t k = 0; k < want[i].numel(); ++k) {
          double a = got[i].getAsDouble(k), b = want[i].getAsDouble(k);
          // dX is one rounding of the same product; the sums' order may
          // differ (fp32, 8 terms).
          EXPECT_NEAR(a, b, (i == 0 ? 1e-7 : 2e-6) * (std::fabs(b) + 1))
              << label << " output " << i << "[" << k << "]";
        }
      }
    }
}
