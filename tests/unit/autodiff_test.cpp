// Unit tests of the autodiff pass's structure: what it leaves in the model
// (training step, outputs, metadata, seed, names and types), what it must
// not build (dead gradient code, gradients of frozen or unreachable values)
// and that an error leaves the model untouched. The numbers themselves are
// checked against finite differences in gradcheck_test.cpp.
#include "passes/gradients/gradient_rules.h"
#include "passes/onnx/onnx_io.h"
#include "passes/pass.h"
#include "support/diagnostics.h"

#include "onnx/onnx_pb.h"

#include <gtest/gtest.h>

#include <string>
#include <unordered_set>

using namespace mpc;

namespace {

const char *kMlp = R"(<ir_version: 8, opset_import: ["" : 17]>
mlp (float[N,3] x, int64[N] y) => (float loss)
  <float[5,3] w1 = {0.1, -0.2, 0.3, 0.05, 0.4, -0.1, 0.2, 0.2, -0.3, 0.1, 0.0, 0.15, -0.25, 0.35, 0.05},
   float[5] b1 = {0.0, 0.01, -0.01, 0.02, 0.0},
   float[2,5] w2 = {0.3, -0.1, 0.2, 0.1, -0.2, -0.3, 0.25, 0.1, 0.05, 0.2},
   float[2] b2 = {0.0, 0.0},
   float[3] unused = {1.0, 2.0, 3.0}>
{
  h = Gemm <transB = 1> (x, w1, b1)
  r = Relu (h)
  z = Gemm <transB = 1> (r, w2, b2)
  loss = SoftmaxCrossEntropyLoss <reduction = "mean"> (z, y)
}
)";

struct Compiled {
  std::unique_ptr<Model> model;
  Statistics stats;
};

Compiled compile(const std::string &text, CompileOptions opts = {}) {
  Compiled c;
  c.model = parseModelText(text, "test.onnxtext");
  PassContext ctx{opts, {}, {}};
  runInferShapes(*c.model, ctx);
  runAutodiff(*c.model, ctx);
  c.stats = ctx.stats;
  return c;
}

std::string metaOf(const Model &m, const std::string &key) {
  const std::string *v = m.meta(key);
  return v ? *v : "<unset>";
}

TEST(Autodiff, StepOutputsAndMetadata) {
  Compiled c = compile(kMlp);
  const Model &m = *c.model;
  ASSERT_TRUE(m.training.has_value());
  const Graph &step = *m.training->algorithm;
  EXPECT_EQ(step.name(), "train_step");
  std::vector<std::string> outs;
  for (const Value *o : step.outputs())
    outs.push_back(o->name());
  // "unused" does not reach the loss: no gradient, not a parameter.
  EXPECT_EQ(outs, (std::vector<std::string>{"loss", "w1_grad", "b1_grad",
                                            "w2_grad", "b2_grad"}));
  EXPECT_EQ(metaOf(m, "mpc.loss"), "loss");
  EXPECT_EQ(metaOf(m, "mpc.params"), "w1,b1,w2,b2");
  EXPECT_EQ(metaOf(m, "mpc.grads"), "w1_grad,b1_grad,w2_grad,b2_grad");
  EXPECT_EQ(c.stats.at("parameters"), 4);
  EXPECT_TRUE(m.training->updateBinding.empty());
  EXPECT_EQ(m.opsetVersion("mpc"), 1);

  // Each gradient has its parameter's type.
  for (const char *p : {"w1", "b1", "w2", "b2"}) {
    const Value *param = step.findValue(p);
    const Value *grad = step.findValue(p + std::string("_grad"));
    ASSERT_TRUE(param && grad) << p;
    EXPECT_EQ(grad->typeString(), param->typeString()) << p;
  }
}

TEST(Autodiff, SeedIsANonStateOneOfTheLossType) {
  Compiled c = compile(kMlp);
  const Graph &step = *c.model->training->algorithm;
  const Value *seed = step.findValue(metaOf(*c.model, "mpc.grad_seed"));
  ASSERT_NE(seed, nullptr);
  ASSERT_TRUE(seed->isInitializer());
  EXPECT_FALSE(seed->isState);
  EXPECT_EQ(seed->dtype, DType::F32);
  EXPECT_TRUE(seed->initializer()->dims.empty());
  EXPECT_EQ(seed->initializer()->getAsDouble(0), 1.0);
}

TEST(Autodiff, MainGraphIsLeftAlone) {
  auto before = parseModelText(kMlp, "test.onnxtext");
  Compiled c = compile(kMlp);
  const Graph &main = *c.model->graph;
  EXPECT_EQ(main.numNodes(), before->graph->numNodes());
  EXPECT_EQ(main.outputs().size(), 1u);
  for (const auto &n : main.nodes()) {
    EXPECT_TRUE(n->domain().empty()) << n->describe();
    if (n->opType() == "SoftmaxCrossEntropyLoss") {
      EXPECT_EQ(n->numOutputs(), 1u) << "log_prob is added in the step only";
    }
  }
}

TEST(Autodiff, BackwardNodesAreNamedAfterTheirForwardNode) {
  Compiled c = compile(kMlp);
  const Graph &step = *c.model->training->algorithm;
  std::unordered_set<std::string> forward;
  for (const auto &n : c.model->graph->nodes())
    forward.insert(n->name());
  size_t backward = 0;
  for (const auto &n : step.nodes()) {
    if (forward.count(n->name()))
      continue;
    ++backward;
    std::string name = n->name();
    size_t pos = name.find("_grad");
    ASSERT_NE(pos, std::string::npos) << name;
    EXPECT_TRUE(forward.count(name.substr(0, pos))) << name;
  }
  EXPECT_EQ(int64_t(backward), c.stats.at("backward-nodes"));
  // w1_grad comes from the first Gemm's backward.
  const Node *w1g = step.findValue("w1_grad")->producer();
  const Node *fc1 = step.findValue("h")->producer();
  EXPECT_EQ(w1g->name(),
            fc1->name() + "_grad" + w1g->name().substr(fc1->name().size() + 5));
}

TEST(Autodiff, EveryBackwardValueIsTypedAndUsed) {
  Compiled c = compile(kMlp);
  const Graph &step = *c.model->training->algorithm;
  std::unordered_set<std::string> forward;
  for (const auto &n : c.model->graph->nodes())
    forward.insert(n->name());
  for (const auto &n : step.nodes())
    for (const Value *o : n->outputs()) {
      ASSERT_NE(o, nullptr) << n->describe();
      EXPECT_NE(o->dtype, DType::Undefined) << o->name();
      EXPECT_TRUE(o->hasShape) << o->name();
      // No dead gradient code: every backward value feeds something.
      if (!forward.count(n->name())) {
        EXPECT_TRUE(!o->uses().empty() || o->isGraphOutput()) << o->name();
      }
    }
  // And the step passes verify.
  CompileOptions opts;
  PassContext ctx{opts, {}, {}};
  EXPECT_NO_THROW(runVerify(*c.model, ctx));
}

TEST(Autodiff, FrozenParametersAndWhatOnlyTheyNeed) {
  CompileOptions opts;
  opts.trainable = "2$";
  Compiled c = compile(kMlp, opts);
  const Graph &step = *c.model->training->algorithm;
  EXPECT_EQ(metaOf(*c.model, "mpc.params"), "w2,b2");
  // The backward stops at the second Gemm: nothing flows into r, h, x.
  for (const auto &n : step.nodes()) {
    EXPECT_NE(n->opType(), "ReluGrad");
    for (const Value *o : n->outputs())
      EXPECT_EQ(o->name().find("r_grad"), std::string::npos);
  }
}

TEST(Autodiff, ErrorsLeaveTheModelUnchanged) {
  auto model = parseModelText(kMlp, "test.onnxtext");
  CompileOptions opts;
  opts.frozen = ".";
  PassContext ctx{opts, {}, {}};
  runInferShapes(*model, ctx);
  try {
    runAutodiff(*model, ctx);
    FAIL() << "expected an error";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("no trainable parameter reaches"),
              std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(model->training.has_value());
  EXPECT_EQ(model->meta("mpc.grads"), nullptr);
}

TEST(Autodiff, RunsOnce) {
  Compiled c = compile(kMlp);
  CompileOptions opts;
  PassContext ctx{opts, {}, {}};
  EXPECT_THROW(runAutodiff(*c.model, ctx), Error);
}

/// Parses, lets `edit` change the imported model, then compiles.
template <typename Edit>
Compiled compileEdited(const std::string &text, Edit edit) {
  Compiled c;
  c.model = parseModelText(text, "test.onnxtext");
  edit(*c.model);
  CompileOptions opts;
  PassContext ctx{opts, {}, {}};
  runInferShapes(*c.model, ctx);
  runAutodiff(*c.model, ctx);
  return c;
}

TEST(Autodiff, Fp16GradientsStayInTheirPrecision) {
  // ONNX 1.12's text parser has no fp16 literals: convert after import.
  const char *text = R"(<ir_version: 8, opset_import: ["" : 17]>
half (float[4,3] x) => (float loss)
  <float[3,2] w = {0.1, -0.2, 0.3, 0.05, 0.4, -0.1}>
{
  y = MatMul (x, w)
  loss = ReduceMean <keepdims = 0> (y)
}
)";
  Compiled c = compileEdited(text, [](Model &m) {
    Value *w = m.graph->findValue("w");
    w->setInitializer(
        std::make_shared<Tensor>(w->initializer()->castTo(DType::F16)));
    w->dtype = DType::F16;
    m.graph->findValue("x")->dtype = DType::F16;
  });
  const Graph &step = *c.model->training->algorithm;
  EXPECT_EQ(step.findValue("w_grad")->typeString(), "fp16[3x2]");
  EXPECT_EQ(step.findValue(metaOf(*c.model, "mpc.grad_seed"))->dtype,
            DType::F16);
}

TEST(Autodiff, ParameterNamesBecomeIdentifiers) {
  // PyTorch names parameters "fc.weight": the gradient is fc_weight_grad.
  const char *text = R"(<ir_version: 8, opset_import: ["" : 17]>
dotted (float[4,3] x) => (float loss)
  <float[3] w = {0.1, 0.2, 0.3}>
{
  y = Mul (x, w)
  loss = ReduceSum <keepdims = 0> (y)
}
)";
  Compiled c = compileEdited(text, [](Model &m) {
    m.graph->renameValue(m.graph->findValue("w"), "fc.weight");
  });
  EXPECT_EQ(metaOf(*c.model, "mpc.params"), "fc.weight");
  EXPECT_EQ(metaOf(*c.model, "mpc.grads"), "fc_weight_grad");
}

TEST(Autodiff, SharedGradientsGetTheirOwnValues) {
  // y = a + b with equal shapes: both gradients are dY itself; each
  // parameter still gets a value of its own that nothing else reads.
  const char *text = R"(<ir_version: 8, opset_import: ["" : 17]>
shared () => (float loss)
  <float[3] a = {0.1, 0.2, 0.3}, float[3] b = {0.1, 0.2, 0.3}>
{
  y = Add (a, b)
  loss = ReduceSum <keepdims = 0> (y)
}
)";
  Compiled c = compile(text);
  const Graph &step = *c.model->training->algorithm;
  const Value *ga = step.findValue("a_grad");
  const Value *gb = step.findValue("b_grad");
  ASSERT_TRUE(ga && gb);
  EXPECT_NE(ga, gb);
  EXPECT_TRUE(ga->uses().empty());
  EXPECT_TRUE(gb->uses().empty());
}

TEST(Autodiff, ExportsAndReimports) {
  Compiled c = compile(kMlp);
  onnx::ModelProto proto;
  exportModel(*c.model, proto);
  auto back = importModel(proto, "roundtrip", ".");
  ASSERT_TRUE(back->training.has_value());
  EXPECT_EQ(back->training->algorithm->outputs().size(), 5u);
  EXPECT_EQ(metaOf(*back, "mpc.grads"), "w1_grad,b1_grad,w2_grad,b2_grad");
}

TEST(Autodiff, RuleTableListsOpsSorted) {
  std::vector<std::string> ops = opsWithGradients();
  EXPECT_TRUE(std::is_sorted(ops.begin(), ops.end()));
  EXPECT_NE(findGradientRule("Gemm", ""), nullptr);
  EXPECT_NE(findGradientRule("Gemm", "ai.onnx"), nullptr);
  EXPECT_EQ(findGradientRule("Gemm", "mpc"), nullptr);
  // Shape has an int64 output: nothing is ever differentiated through it.
  EXPECT_EQ(findGradientRule("Shape", ""), nullptr);
}

} // namespace

// sanitizedWithSuffix builds "<sanitized name><suffix>" in one buffer; it
// must give exactly what sanitizeIdentifier(name) + suffix gives, also for
// the edge cases (empty name, leading digit, chars outside [A-Za-z0-9_]).
TEST(Autodiff, SanitizedWithSuffixMatchesSanitizeThenAppend) {
  for (const std::string &name : std::vector<std::string>{
           "", "w", "layer.0/weight", "0abc", "9", "a-b c", "_x",
           "\xc3\xa9t\xc3\xa9", "Z_09az", std::string(70, '.')}) {
    for (const char *suffix : {"_grad", "_grad_sum", ""}) {
      EXPECT_EQ(sanitizedWithSuffix(name, suffix),
                sanitizeIdentifier(name) + suffix)
          << "name '" << name << "' suffix '" << suffix << "'";
    }
  }
  EXPECT_EQ(sanitizedWithSuffix("", "_grad"), "__grad");
  EXPECT_EQ(sanitizedWithSuffix("1.w", "_grad"), "_1_w_grad");
}
