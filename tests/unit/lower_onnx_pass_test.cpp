// The lower-onnx pass: an import without lowering (ImportOptions::lower off,
// as mpc-opt imports) followed by the pass gives the same model as the
// lowering import every other caller uses; the pass is implied first in a
// --passes list, refused after another pass, counted per op, and the
// models whose import reads the lowered graph (Gradient nodes) are lowered
// at import regardless.
#include "passes/onnx/import_lowering.h"
#include "passes/onnx/onnx_io.h"
#include "passes/pipeline.h"
#include "passes/registry.h"
#include "support/diagnostics.h"

#include <gtest/gtest.h>

namespace mpc {
namespace {

const ImportOptions kDeferred{/*lower=*/false};

const char *kResize = R"(<ir_version: 8, opset_import: ["" : 17]>
resize (float[1,1,2,2] x) => (float[1,1,4,4] y) {
  s = Constant <value = float[4] {1.0, 1.0, 2.0, 2.0}> ()
  r = Resize <mode = "nearest"> (x, , s)
  y = Softplus (r)
}
)";

const char *kEinsum = R"(<ir_version: 8, opset_import: ["" : 17]>
einsum (float[2,3,4] a, float[2,4,5] b) => (float[2,3,5] c) {
  c = Einsum <equation = "bij,bjk->bik"> (a, b)
}
)";

const char *kInstanceNorm = R"(<ir_version: 8, opset_import: ["" : 17]>
norm (float[2,3,5] x, float[3] s, float[3] b) => (float[2,3,5] y) {
  y = InstanceNormalization <epsilon = 0.001> (x, s, b)
}
)";

const char *kLstm = R"(<ir_version: 8, opset_import: ["" : 17]>
lstm (float[3,2,4] x, float[1,20,4] w, float[1,20,5] r) => (float[3,1,2,5] y) {
  y = LSTM <hidden_size = 5> (x, w, r)
}
)";

bool hasOp(const Graph &g, const std::string &op) {
  for (const auto &n : g.nodes())
    if (n->opType() == op)
      return true;
  return false;
}

std::vector<std::string> names(const std::vector<PipelineEntry> &pipeline) {
  std::vector<std::string> out;
  for (const PipelineEntry &e : pipeline)
    out.push_back(e.pass->name);
  return out;
}

Statistics runPasses(Model &m, const std::string &passes) {
  Statistics stats;
  runPipeline(m, parsePipeline(passes), CompileOptions{}, PipelineConfig{},
              stats);
  return stats;
}

TEST(LowerOnnxPass, SameModelAsTheLoweringImport) {
  for (const char *text : {kResize, kEinsum, kInstanceNorm, kLstm}) {
    std::unique_ptr<Model> atImport = parseModelText(text, "t");
    std::unique_ptr<Model> deferred = parseModelText(text, "t", kDeferred);
    std::string raw = printModelText(*deferred);
    Statistics stats = runPasses(*deferred, "lower-onnx");
    EXPECT_NE(printModelText(*deferred), raw) << text;
    EXPECT_EQ(printModelText(*deferred), printModelText(*atImport)) << text;
    EXPECT_GE(stats["lower-onnx.nodes-lowered"], 1) << text;
  }
}

TEST(LowerOnnxPass, ImportWithoutLoweringKeepsTheOnnxOps) {
  std::unique_ptr<Model> m = parseModelText(kResize, "t", kDeferred);
  EXPECT_TRUE(hasOp(*m->graph, "Resize"));
  EXPECT_TRUE(hasOp(*m->graph, "Softplus"));
  std::unique_ptr<Model> lowered = parseModelText(kResize, "t");
  EXPECT_FALSE(hasOp(*lowered->graph, "Resize"));
  EXPECT_FALSE(hasOp(*lowered->graph, "Softplus"));
}

TEST(LowerOnnxPass, CountsWhatItLoweredPerOp) {
  std::unique_ptr<Model> m = parseModelText(kResize, "t", kDeferred);
  Statistics stats = runPasses(*m, "verify");
  EXPECT_FALSE(hasOp(*m->graph, "Resize"));
  EXPECT_EQ(stats["lower-onnx.nodes-lowered"], 2);
  EXPECT_EQ(stats["lower-onnx.Resize"], 1);
  EXPECT_EQ(stats["lower-onnx.Softplus"], 1);
}

TEST(LowerOnnxPass, NothingToLowerLeavesNoStatistics) {
  std::unique_ptr<Model> m = parseModelText(kResize, "t");
  Statistics stats = runPasses(*m, "lower-onnx");
  for (const auto &kv : stats)
    EXPECT_NE(kv.first.rfind("lower-onnx.", 0), 0u) << kv.first;
}

TEST(LowerOnnxPass, ImpliedFirstInAPassList) {
  EXPECT_EQ(names(parsePipeline("verify,infer-shapes")),
            (std::vector<std::string>{"lower-onnx", "verify", "infer-shapes"}));
  EXPECT_EQ(names(parsePipeline("lower-onnx,verify")),
            (std::vector<std::string>{"lower-onnx", "verify"}));
  EXPECT_TRUE(parsePipeline("").empty());
  EXPECT_EQ(std::string(defaultPipeline().front().pass->name), "lower-onnx");
}

TEST(LowerOnnxPass, RefusedAfterAnotherPass) {
  for (const char *list : {"verify,lower-onnx", "lower-onnx,lower-onnx"}) {
    try {
      parsePipeline(list);
      ADD_FAILURE() << list << " was accepted";
    } catch (const Error &e) {
      EXPECT_NE(std::string(e.what()).find("lower-onnx must come first"),
                std::string::npos)
          << e.what();
    }
  }
}

TEST(LowerOnnxPass, TakesNoOptions) {
  EXPECT_THROW(parsePipeline("lower-onnx{precision=bf16}"), Error);
}

TEST(LowerOnnxPass, AGradientModelIsLoweredAtImportAnyway) {
  // Expanding the Gradient differentiates through the lowered Softplus.
  const char *text =
      R"(<ir_version: 8, opset_import: ["" : 17, "ai.onnx.preview.training" : 1]>
grad (float[3] a) => (float s, float[3] ds_da) {
  p = Softplus (a)
  s = ReduceSum <keepdims = 0> (p)
  ds_da = ai.onnx.preview.training.Gradient <xs = ["a"], y = "s"> (a)
}
)";
  std::unique_ptr<Model> m = parseModelText(text, "t", kDeferred);
  EXPECT_FALSE(hasOp(*m->graph, "Softplus"));
  EXPECT_FALSE(hasOp(*m->graph, "Gradient"));
  std::string before = printModelText(*m);
  Statistics stats = runPasses(*m, "lower-onnx");
  EXPECT_EQ(printModelText(*m), before);
  EXPECT_EQ(stats.count("lower-onnx.nodes-lowered"), 0u);
}

TEST(LowerOnnxPass, ABadInputIsNotBlamedOnIt) {
  // An op mpc neither supports nor lowers, next to one it lowers: the
  // verifier's message after lower-onnx is the input's, as the verify
  // pass gives it, not "a bug in lower-onnx" (nothing had verified the
  // import), whether or not the verify pass comes next.
  const char *text = R"(<ir_version: 8, opset_import: ["" : 17]>
bad (float[1,1,2,2] x) => (float[1,1,4,4] y) {
  s = Constant <value = float[4] {1.0, 1.0, 2.0, 2.0}> ()
  r = Resize <mode = "nearest"> (x, , s)
  y = Frobnicate (r)
}
)";
  for (const char *passes : {"verify", "infer-shapes", "lower-onnx"}) {
    std::unique_ptr<Model> m = parseModelText(text, "t", kDeferred);
    try {
      runPasses(*m, passes);
      ADD_FAILURE() << passes << ": the bad model passed";
    } catch (const Error &e) {
      std::string msg = e.what();
      EXPECT_NE(msg.find("unsupported op 'Frobnicate'"), std::string::npos)
          << passes << ": " << msg;
      EXPECT_EQ(msg.find("a bug in"), std::string::npos)
          << passes << ": " << msg;
    }
  }
}

} // namespace
} // namespace mpc
