// fold-bias-add (passes/fold_bias_add.cpp) on the CPU backend: a Linear's
// product and bias Add become Gemm(rows of x, W, b), whose fp16 result is
// alpha*AB + C in fp32 rounded once. With fp16 operands (widened exactly)
// and K within one BLAS block, that is exactly the fp32 graph's output cast
// to fp16; the unfolded fp16 graph, which rounds the product before adding
// the bias, differs from it in some elements (so the comparison can tell the
// two apart). Shapes: x of rank 3 with the bias first (the export's order)
// and a 2-D x with the bias second.
#include "passes/onnx/onnx_io.h"
#include "passes/pass.h"
#include "passes/pipeline.h"
#include "passes/registry.h"
#include "runtime/backend.h"
#include "runtime/executor.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

using namespace mpc;

namespace {

std::string linearModel(const char *type) {
  return std::string(R"(<ir_version: 8, opset_import: ["" : 17]>
linear ()") +
         type + "[2,5,8] x, " + type + "[16,8] w, " + type + "[16] b, " + type +
         "[7,8] x2, " + type + "[8,16] w2, " + type +
         R"([16] b2) => (z, z2) {
  wt = Transpose <perm = [1, 0]> (w)
  y = MatMul (x, wt)
  z = Add (b, y)
  y2 = MatMul (x2, w2)
  z2 = Add (y2, b2)
})";
}

/// Values in [-2, 2] that fp16 holds exactly (multiples of 2^-8).
Tensor randomTensor(DType t, const std::vector<int64_t> &dims, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(-512, 512);
  Tensor x(t, dims);
  for (int64_t i = 0; i < x.numel(); ++i)
    x.setFromDouble(i, d(rng) / 256.0);
  return x;
}

/// Runs `passes` over the model of `type` and executes it on the CPU;
/// returns outputs z and z2 and how many bias Adds were folded.
struct LinearOutputs {
  Tensor z, z2;
  int64_t folded = 0;
};

LinearOutputs compileAndRun(const char *type, DType t,
                            const std::string &passes) {
  std::unique_ptr<Model> m = parseModelText(linearModel(type), "linear");
  Statistics stats;
  runPipeline(*m, parsePipeline(passes), CompileOptions{}, PipelineConfig{},
              stats);
  LinearOutputs r;
  r.folded = stats["fold-bias-add.bias-adds-folded"];
  std::unique_ptr<Backend> cpu = createCpuBackend();
  Executor exec(*m->graph, *cpu);
  exec.setInput("x", randomTensor(t, {2, 5, 8}, 1));
  exec.setInput("w", randomTensor(t, {16, 8}, 2));
  exec.setInput("b", randomTensor(t, {16}, 3));
  exec.setInput("x2", randomTensor(t, {7, 8}, 4));
  exec.setInput("w2", randomTensor(t, {8, 16}, 5));
  exec.setInput("b2", randomTensor(t, {16}, 6));
  exec.run();
  r.z = exec.output("z");
  r.z2 = exec.output("z2");
  return r;
}

TEST(FoldBiasAdd, Fp16GemmRoundsTheProductPlusBiasOnce) {
  const std::string unfolded = "verify,infer-shapes,fold-transpose";
  LinearOutputs fp32 = compileAndRun("float", DType::F32, unfolded);
  LinearOutputs folded =
      compileAndRun("float16", DType::F16, unfolded + ",fold-bias-add");
  LinearOutputs twoRoundings = compileAndRun("float16", DType::F16, unfolded);
  EXPECT_EQ(fp32.folded, 0);
  EXPECT_EQ(twoRoundings.folded, 0);
  EXPECT_EQ(folded.folded, 2);
  for (auto [want32, got, before, name] :
       {std::tuple{&fp32.z, &folded.z, &twoRoundings.z, "z (rank 3)"},
        std::tuple{&fp32.z2, &folded.z2, &twoRoundings.z2, "z2 (2-D)"}}) {
    Tensor want = want32->castTo(DType::F16);
    ASSERT_EQ(got->dims, want.dims) << name;
    ASSERT_EQ(got->dtype, DType::F16) << name;
    int64_t differBefore = 0;
    for (int64_t i = 0; i < want.numel(); ++i) {
      EXPECT_EQ(got->getAsDouble(i), want.getAsDouble(i))
          << name << "[" << i << "]";
      differBefore += before->getAsDouble(i) != want.getAsDouble(i);
    }
    EXPECT_GT(differBefore, 0)
        << name
        << ": the unfolded fp16 graph rounds twice, yet gave the "
           "folded bits everywhere";
  }
}

} // namespace
