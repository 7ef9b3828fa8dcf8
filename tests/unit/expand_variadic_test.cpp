// Tests of the standard-op expansion of mpc's variadic ops
// (passes/onnx/expand_variadic.h), the form --emit=step writes for other
// runtimes: the same step, run on the CPU backend with the fused kernels and
// with the expansion, gives the same unscaled gradients and found_inf bit
// for bit (finite, inf and NaN gradients, fp16 and fp32), and the clipped
// gradients and norm to fp32 rounding.
#include "passes/ir/mpc_ops.h"
#include "passes/onnx/expand_variadic.h"
#include "passes/support/diagnostics.h"
#include "runtime/backend.h"
#include "runtime/executor.h"

#include <gtest/gtest.h>

#include <cmath>
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

} // namespace
