// Unit tests of loss-scale, master-weights and optimizer: the state they
// create (names, dtypes, shapes, initial values), the nodes, the outputs and
// update bindings of the training step, the metadata, and their errors.
//
// The post-autodiff model is built by hand (a stand-in backward whose
// gradients have each parameter's shape), so these tests depend only on the
// IR and on the three passes under test.
#include "passes/onnx/onnx_io.h"
#include "passes/pass.h"
#include "support/diagnostics.h"

#include "onnx/onnx_pb.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

using namespace mpc;

namespace {

const char *kMlp = R"(<ir_version: 8, opset_import: ["" : 17]>
mlp (float[4,3] x, int64[4] y) => (float loss)
  <float[5,3] w1 = {0.1, -0.2, 0.3, 0.05, 0.4, -0.1, 0.2, 0.2, -0.3, 0.1, 0.0, 0.15, -0.25, 0.35, 0.05},
   float[5] b1 = {0.0, 0.0, 0.0, 0.0, 0.0},
   float[2,5] w2 = {0.3, -0.1, 0.2, 0.1, -0.2, -0.3, 0.25, 0.1, 0.05, 0.2},
   float[2] b2 = {0.0, 0.0}>
{
  h = Gemm <transB = 1> (x, w1, b1)
  r = Relu (h)
  z = Gemm <transB = 1> (r, w2, b2)
  loss = SoftmaxCrossEntropyLoss <reduction = "mean"> (z, y)
}
)";

const std::vector<std::string> kParams = {"w1", "b1", "w2", "b2"};

struct FakeAutodiff {
  /// Dtype of the gradients (autocast may leave them fp16).
  DType gradDtype = DType::F32;
  /// Dtype of the loss and the grad seed.
  DType seedDtype = DType::F32;
  /// Imported parameters in this dtype (both graphs share the tensors).
  DType paramDtype = DType::F32;
};

/// The MLP after a stand-in autodiff: algorithm = forward clone + one
/// `grad = Mul(p, seed)` (then Cast to gradDtype) per parameter, outputs
/// [loss, grads...], and the metadata autodiff writes.
std::unique_ptr<Model> makeTrainingModel(FakeAutodiff f = {}) {
  auto model = parseModelText(kMlp, "mlp.onnxtext");
  if (f.paramDtype != DType::F32)
    for (Value *init : model->graph->initializers()) {
      init->setInitializer(
          std::make_shared<Tensor>(init->initializer()->castTo(f.paramDtype)));
      init->dtype = f.paramDtype;
    }
  model->graph->findValue("loss")->setType(DType::F32, {});
  TrainingInfo info;
  info.algorithm = model->graph->clone();
  Graph &g = *info.algorithm;
  g.setName("train");
  Value *seed =
      g.addInitializer("loss_grad_seed", Tensor::scalar(f.seedDtype, 1.0));
  std::vector<std::string> grads;
  for (const std::string &name : kParams) {
    Value *p = g.findValue(name);
    EXPECT_TRUE(p->isState);
    Value *s = seed;
    if (seed->dtype != p->dtype) {
      Node *c = g.createNode("Cast", {seed}, 1, "seed_cast");
      c->setAttr("to", Attribute::ofInt(toOnnxDataType(p->dtype)));
      s = c->output(0);
      s->setType(p->dtype, {});
    }
    Node *mul = g.createNode("Mul", {p, s}, 1, name + "_bwd");
    Value *grad = mul->output(0);
    grad->copyTypeFrom(*p);
    if (f.gradDtype != p->dtype) {
      Node *c = g.createNode("Cast", {grad}, 1, name + "_grad_cast");
      c->setAttr("to", Attribute::ofInt(toOnnxDataType(f.gradDtype)));
      grad = c->output(0);
      grad->copyTypeFrom(*p);
      grad->dtype = f.gradDtype;
    }
    g.renameValue(grad, name + "_grad");
    g.addOutput(grad);
    grads.push_back(grad->name());
  }
  model->training = std::move(info);
  model->setMeta("mpc.loss", "loss");
  model->setMeta("mpc.params", joinList(kParams));
  model->setMeta("mpc.grads", joinList(grads));
  model->setMeta("mpc.grad_seed", "loss_grad_seed");
  return model;
}

Graph &algo(Model &m) { return *m.training->algorithm; }

std::vector<Node *> nodesOf(const Graph &g, const std::string &op) {
  std::vector<Node *> out;
  for (const auto &n : g.nodes())
    if (n->opType() == op)
      out.push_back(n.get());
  return out;
}

std::string meta(const Model &m, const std::string &key) {
  const std::string *v = m.meta(key);
  return v ? *v : "<unset>";
}

std::string boundTo(const Model &m, const std::string &state) {
  for (const auto &kv : m.training->updateBinding)
    if (kv.first == state)
      return kv.second;
  return "<unbound>";
}

/// Runs a pass and returns its error message ("" when it succeeds).
template <typename Fn> std::string errorOf(Fn fn) {
  try {
    fn();
  } catch (const Error &e) {
    return e.what();
  }
  return "";
}

struct Passes {
  CompileOptions options;
  Statistics last;
  void run(void (*pass)(Model &, PassContext &), Model &m) {
    PassContext ctx{options, {}, {}};
    pass(m, ctx);
    last = ctx.stats;
  }
};

/// Every bound value has its state's dtype and shape, is an output, and the
/// state is a state initializer of the algorithm.
void expectBindingsWellTyped(Model &m) {
  Graph &g = algo(m);
  for (const auto &kv : m.training->updateBinding) {
    Value *state = g.findValue(kv.first);
    Value *out = g.findValue(kv.second);
    ASSERT_TRUE(state) << kv.first;
    ASSERT_TRUE(out) << kv.second;
    EXPECT_TRUE(state->isState && state->isInitializer()) << kv.first;
    EXPECT_TRUE(out->isGraphOutput()) << kv.second;
    EXPECT_EQ(state->dtype, out->dtype) << kv.first;
    EXPECT_EQ(dimsToString(state->dims), dimsToString(out->dims)) << kv.first;
  }
}

// --- CompileOptions ----------------------------------------------------------

TEST(CompileOptions, LossScaleModeDefaultsByPrecision) {
  CompileOptions o;
  o.precision = DType::F16;
  EXPECT_EQ(o.effectiveLossScaleMode(), "dynamic");
  o.precision = DType::BF16;
  EXPECT_EQ(o.effectiveLossScaleMode(), "none");
  o.precision = DType::F32;
  EXPECT_EQ(o.effectiveLossScaleMode(), "none");
  o.lossScale = "dynamic";
  EXPECT_EQ(o.effectiveLossScaleMode(), "dynamic");
  o.precision = DType::F16;
  o.lossScale = "none";
  EXPECT_EQ(o.effectiveLossScaleMode(), "none");
  o.lossScale = "static:128";
  EXPECT_EQ(o.effectiveLossScaleMode(), "static");
  EXPECT_EQ(o.staticScale(), 128.0);
  o.lossScale = "static:0.5";
  EXPECT_EQ(o.staticScale(), 0.5);
}

TEST(CompileOptions, BadLossScaleIsAFlagError) {
  for (const char *bad : {"static:0", "static:-4", "static:abc",
                          "static:", "static", "static:inf", "dynamc"}) {
    CompileOptions o;
    o.lossScale = bad;
    std::string msg = errorOf([&] { o.effectiveLossScaleMode(); });
    EXPECT_EQ(msg.rfind("--loss-scale: ", 0), 0u) << bad << ": " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos);
  }
}

TEST(CompileOptions, SplitAndJoinLists) {
  EXPECT_EQ(splitList("a,b,,c,"), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_TRUE(splitList("").empty());
  EXPECT_EQ(splitList("2x3", 'x'), (std::vector<std::string>{"2", "3"}));
  EXPECT_EQ(joinList({"a", "b"}), "a,b");
  EXPECT_EQ(joinList({}), "");
}

TEST(CompileOptions, WorkingGraphIsTheAlgorithmWhenThereIsOne) {
  auto plain = parseModelText(kMlp, "mlp.onnxtext");
  EXPECT_EQ(&workingGraph(*plain), plain->graph.get());
  auto trained = makeTrainingModel();
  EXPECT_EQ(&workingGraph(*trained), trained->training->algorithm.get());
}

// --- loss-scale --------------------------------------------------------------

TEST(LossScale, DynamicCreatesScalerStateAndUnscalesInFp32) {
  auto m = makeTrainingModel({DType::F16});
  Passes p;
  p.options.precision = DType::F16;
  p.run(runLossScale, *m);
  Graph &g = algo(*m);

  Value *scale = g.findValue("loss_scale");
  ASSERT_TRUE(scale);
  EXPECT_TRUE(scale->isState);
  EXPECT_EQ(scale->dtype, DType::F32);
  EXPECT_EQ(scale->initializer()->dims, std::vector<int64_t>{});
  EXPECT_EQ(scale->initializer()->getAsDouble(0), 65536.0);
  Value *tracker = g.findValue("loss_scale_growth_tracker");
  ASSERT_TRUE(tracker);
  EXPECT_TRUE(tracker->isState);
  EXPECT_EQ(tracker->dtype, DType::I64);
  EXPECT_EQ(tracker->initializer()->getAsDouble(0), 0.0);

  // The seed is gone: the backward reads the scale instead.
  for (const Value *init : g.initializers())
    EXPECT_NE(init->name(), "loss_grad_seed");
  EXPECT_EQ(meta(*m, "mpc.grad_seed"), "loss_scale");
  for (const std::string &name : kParams)
    EXPECT_EQ(g.findValue(name + "_bwd_out")->producer()->input(1), scale);

  auto unscale = nodesOf(g, "UnscaleGradients");
  ASSERT_EQ(unscale.size(), 1u);
  Node *u = unscale[0];
  EXPECT_EQ(u->domain(), "mpc");
  ASSERT_EQ(u->numInputs(), kParams.size() + 1);
  ASSERT_EQ(u->numOutputs(), kParams.size() + 1);
  EXPECT_EQ(u->input(0), scale);
  for (size_t i = 0; i < kParams.size(); ++i) {
    Value *in = u->input(i + 1);
    EXPECT_EQ(in->dtype, DType::F32);
    ASSERT_TRUE(in->producer());
    EXPECT_EQ(in->producer()->opType(), "Cast");
    EXPECT_EQ(in->producer()->input(0)->name(), kParams[i] + "_grad");
    EXPECT_EQ(u->output(i + 1)->dtype, DType::F32);
    EXPECT_EQ(u->output(i + 1)->dims, g.findValue(kParams[i])->dims);
  }
  Value *foundInf = u->output(0);
  EXPECT_EQ(foundInf->dtype, DType::Bool);
  EXPECT_TRUE(foundInf->hasShape && foundInf->dims.empty());
  EXPECT_EQ(meta(*m, "mpc.found_inf"), foundInf->name());
  EXPECT_EQ(p.last["gradient-casts"], 4);

  auto update = nodesOf(g, "UpdateLossScale");
  ASSERT_EQ(update.size(), 1u);
  Node *up = update[0];
  EXPECT_EQ(up->input(0), scale);
  EXPECT_EQ(up->input(1), tracker);
  EXPECT_EQ(up->input(2), foundInf);
  EXPECT_EQ(up->attrFloat("growth_factor", 0), 2.0f);
  EXPECT_EQ(up->attrFloat("backoff_factor", 0), 0.5f);
  EXPECT_EQ(up->attrInt("growth_interval", 0), 2000);
  EXPECT_EQ(boundTo(*m, "loss_scale"), up->output(0)->name());
  EXPECT_EQ(boundTo(*m, "loss_scale_growth_tracker"), up->output(1)->name());

  // Outputs: the unscaled fp32 loss, the unscaled gradients, the scaler.
  ASSERT_EQ(g.outputs().size(), kParams.size() + 3);
  EXPECT_EQ(g.outputs()[0]->name(), "loss");
  std::vector<std::string> grads = splitList(meta(*m, "mpc.grads"));
  ASSERT_EQ(grads.size(), kParams.size());
  for (size_t i = 0; i < grads.size(); ++i) {
    EXPECT_EQ(g.outputs()[i + 1]->name(), grads[i]);
    EXPECT_EQ(g.findValue(grads[i]), u->output(i + 1));
  }
  EXPECT_EQ(meta(*m, "mpc.loss_scale"), "loss_scale");
  EXPECT_EQ(meta(*m, "mpc.growth_tracker"), "loss_scale_growth_tracker");
  EXPECT_EQ(meta(*m, "mpc.loss_scale_mode"), "dynamic");
  EXPECT_EQ(m->opsetVersion("mpc"), 1);
  EXPECT_TRUE(g.topologicalSort());
  expectBindingsWellTyped(*m);
}

TEST(LossScale, ScalerOptionsBecomeAttributes) {
  auto m = makeTrainingModel();
  Passes p;
  p.options.lossScale = "dynamic";
  p.options.initScale = 1024;
  p.options.growthFactor = 4;
  p.options.backoffFactor = 0.25;
  p.options.growthInterval = 10;
  p.run(runLossScale, *m);
  Node *up = nodesOf(algo(*m), "UpdateLossScale").at(0);
  EXPECT_EQ(up->attrFloat("growth_factor", 0), 4.0f);
  EXPECT_EQ(up->attrFloat("backoff_factor", 0), 0.25f);
  EXPECT_EQ(up->attrInt("growth_interval", 0), 10);
  EXPECT_EQ(algo(*m).findValue("loss_scale")->initializer()->getAsDouble(0),
            1024.0);
  // fp32 gradients need no cast.
  EXPECT_EQ(p.last["gradient-casts"], 0);
}

TEST(LossScale, ReusesAnExistingCastToFp32) {
  auto m = makeTrainingModel({DType::F16});
  Graph &g = algo(*m);
  Value *grad = g.findValue("w1_grad");
  Node *c = g.createNode("Cast", {grad}, 1, "existing_cast");
  c->setAttr("to", Attribute::ofInt(toOnnxDataType(DType::F32)));
  c->output(0)->copyTypeFrom(*grad);
  c->output(0)->dtype = DType::F32;
  Passes p;
  p.run(runLossScale, *m);
  EXPECT_EQ(nodesOf(g, "UnscaleGradients").at(0)->input(1), c->output(0));
  EXPECT_EQ(p.last["gradient-casts"], 3);
}

TEST(LossScale, Fp16SeedReadsTheScaleThroughACast) {
  auto m = makeTrainingModel({DType::F16, DType::F16});
  Passes p;
  p.run(runLossScale, *m);
  Graph &g = algo(*m);
  Value *scale = g.findValue("loss_scale");
  ASSERT_EQ(scale->uses().size(), 3u); // seed cast, unscale, update
  Value *seed = g.findValue(meta(*m, "mpc.grad_seed"));
  ASSERT_TRUE(seed && seed->producer());
  EXPECT_EQ(seed->producer()->opType(), "Cast");
  EXPECT_EQ(seed->producer()->input(0), scale);
  EXPECT_EQ(seed->dtype, DType::F16);
  EXPECT_TRUE(g.topologicalSort());
}

TEST(LossScale, StaticScaleIsStateThatIsNeverUpdated) {
  auto m = makeTrainingModel({DType::F16});
  Passes p;
  p.options.lossScale = "static:128";
  p.run(runLossScale, *m);
  Graph &g = algo(*m);
  Value *scale = g.findValue("loss_scale");
  ASSERT_TRUE(scale);
  EXPECT_TRUE(scale->isState);
  EXPECT_EQ(scale->initializer()->getAsDouble(0), 128.0);
  EXPECT_EQ(nodesOf(g, "UnscaleGradients").size(), 1u);
  EXPECT_TRUE(nodesOf(g, "UpdateLossScale").empty());
  EXPECT_TRUE(m->training->updateBinding.empty());
  EXPECT_EQ(g.findValue("loss_scale_growth_tracker"), nullptr);
  EXPECT_EQ(meta(*m, "mpc.growth_tracker"), "<unset>");
  EXPECT_NE(meta(*m, "mpc.found_inf"), "<unset>");
  EXPECT_EQ(meta(*m, "mpc.loss_scale_mode"), "static");
}

TEST(LossScale, NoneOnlyCastsGradientsToFp32) {
  auto m = makeTrainingModel({DType::BF16});
  Passes p;
  p.options.precision = DType::BF16;
  size_t before = algo(*m).numNodes();
  p.run(runLossScale, *m);
  Graph &g = algo(*m);
  EXPECT_EQ(g.numNodes(), before + 4);
  EXPECT_EQ(g.findValue("loss_scale"), nullptr);
  EXPECT_NE(g.findValue("loss_grad_seed"), nullptr);
  EXPECT_EQ(meta(*m, "mpc.found_inf"), "<unset>");
  for (const std::string &name : splitList(meta(*m, "mpc.grads")))
    EXPECT_EQ(g.findValue(name)->dtype, DType::F32) << name;
  for (size_t i = 1; i < g.outputs().size(); ++i)
    EXPECT_EQ(g.outputs()[i]->dtype, DType::F32);
}

TEST(LossScale, NoneWithFp32GradientsChangesNoNode) {
  auto m = makeTrainingModel();
  Passes p;
  p.options.precision = DType::F32;
  size_t before = algo(*m).numNodes();
  p.run(runLossScale, *m);
  EXPECT_EQ(algo(*m).numNodes(), before);
  EXPECT_EQ(meta(*m, "mpc.grads"), "w1_grad,b1_grad,w2_grad,b2_grad");
}

TEST(LossScale, Errors) {
  Passes p;
  auto plain = parseModelText(kMlp, "mlp.onnxtext");
  EXPECT_EQ(errorOf([&] { p.run(runLossScale, *plain); }),
            "loss-scale: no gradients (run autodiff first)");

  auto twice = makeTrainingModel();
  p.run(runLossScale, *twice);
  EXPECT_EQ(errorOf([&] { p.run(runLossScale, *twice); }),
            "loss-scale: already applied (mpc.loss_scale_mode is set)");

  auto late = makeTrainingModel();
  p.options.precision = DType::F32;
  p.run(runOptimizer, *late);
  EXPECT_EQ(errorOf([&] { p.run(runLossScale, *late); }),
            "loss-scale: must run before optimizer (mpc.optimizer is set)");

  auto bad = makeTrainingModel();
  p.options.lossScale = "static:-1";
  EXPECT_EQ(
      errorOf([&] { p.run(runLossScale, *bad); }).rfind("--loss-scale:", 0),
      0u);
  p.options.lossScale = "dynamic";
  p.options.growthFactor = 0.5;
  EXPECT_EQ(errorOf([&] { p.run(runLossScale, *bad); }),
            "--growth-factor: must be > 1, got 0.5");
}

// --- master-weights ----------------------------------------------------------

TEST(MasterWeights, Fp16ParametersGetFp32MastersAndACastInFront) {
  auto m = makeTrainingModel({DType::F16, DType::F32, DType::F16});
  Passes p;
  p.run(runMasterWeights, *m);
  Graph &g = algo(*m);
  for (const std::string &name : kParams) {
    Value *param = g.findValue(name);
    EXPECT_EQ(param->dtype, DType::F32) << name;
    EXPECT_EQ(param->initializer()->dtype, DType::F32) << name;
    EXPECT_TRUE(param->isState);
    // One Cast back to fp16 feeds every former use.
    ASSERT_EQ(param->uses().size(), 1u) << name;
    Node *cast = param->uses()[0].user;
    EXPECT_EQ(cast->opType(), "Cast");
    EXPECT_EQ(cast->attrInt("to", 0), toOnnxDataType(DType::F16));
    EXPECT_EQ(cast->output(0)->dtype, DType::F16);
    EXPECT_GE(cast->output(0)->uses().size(), 2u) << name; // fwd + bwd
    // The main graph holds the same master.
    Value *inMain = m->graph->findValue(name);
    EXPECT_EQ(inMain->dtype, DType::F32);
    EXPECT_EQ(inMain->initializer(), param->initializer());
    ASSERT_EQ(inMain->uses().size(), 1u);
    EXPECT_EQ(inMain->uses()[0].user->opType(), "Cast");
  }
  EXPECT_NEAR(g.findValue("w1")->initializer()->getAsDouble(1), -0.2, 1e-3);
  for (const std::string &grad : splitList(meta(*m, "mpc.grads")))
    EXPECT_EQ(g.findValue(grad)->dtype, DType::F32) << grad;
  EXPECT_EQ(meta(*m, "mpc.master_params"), "w1,b1,w2,b2");
  EXPECT_EQ(p.last["params-converted-to-fp32"], 4);
  EXPECT_EQ(p.last["gradient-casts"], 4);
  EXPECT_TRUE(g.topologicalSort());
  EXPECT_TRUE(m->graph->topologicalSort());
}

TEST(MasterWeights, CastsLowPrecisionGradientsOfFp32Parameters) {
  auto m = makeTrainingModel({DType::F16});
  Passes p;
  p.run(runMasterWeights, *m);
  Graph &g = algo(*m);
  for (size_t i = 0; i < kParams.size(); ++i) {
    Value *grad = g.findValue(splitList(meta(*m, "mpc.grads"))[i]);
    EXPECT_EQ(grad->dtype, DType::F32);
    EXPECT_EQ(g.outputs()[i + 1], grad);
  }
  EXPECT_EQ(p.last["params-converted-to-fp32"], 0);
}

TEST(MasterWeights, Fp32ChangesNothing) {
  auto m = makeTrainingModel();
  Passes p;
  p.options.precision = DType::F32;
  size_t before = algo(*m).numNodes();
  auto metaBefore = m->metadata;
  p.run(runMasterWeights, *m);
  EXPECT_EQ(algo(*m).numNodes(), before);
  EXPECT_EQ(m->metadata, metaBefore);
}

TEST(MasterWeights, Errors) {
  Passes p;
  auto plain = parseModelText(kMlp, "mlp.onnxtext");
  EXPECT_EQ(errorOf([&] { p.run(runMasterWeights, *plain); }),
            "master-weights: no gradients (run autodiff first)");
  auto twice = makeTrainingModel();
  p.run(runMasterWeights, *twice);
  EXPECT_EQ(errorOf([&] { p.run(runMasterWeights, *twice); }),
            "master-weights: already applied (mpc.master_params is set)");
  EXPECT_EQ(
      errorOf([&] { p.run(runLossScale, *twice); }),
      "loss-scale: must run before master-weights (mpc.master_params is set)");
}

// --- optimizer ---------------------------------------------------------------

TEST(Optimizer, SgdWithMomentumAndNoLossScaling) {
  auto m = makeTrainingModel();
  Passes p;
  p.options.optimizer = "sgd";
  p.options.lr = 0.05;
  p.options.momentum = 0.9;
  p.options.weightDecay = 1e-4;
  p.options.nesterov = true;
  p.run(runOptimizer, *m);
  Graph &g = algo(*m);

  Value *step = g.findValue("optimizer_step");
  ASSERT_TRUE(step);
  EXPECT_TRUE(step->isState);
  EXPECT_EQ(step->dtype, DType::I64);
  EXPECT_TRUE(step->dims.empty());
  EXPECT_EQ(meta(*m, "mpc.step"), "optimizer_step");

  auto sgd = nodesOf(g, "SGD");
  ASSERT_EQ(sgd.size(), kParams.size());
  for (size_t i = 0; i < kParams.size(); ++i) {
    Node *n = sgd[i];
    Value *param = g.findValue(kParams[i]);
    Value *buf = g.findValue(kParams[i] + "_momentum");
    ASSERT_TRUE(buf);
    EXPECT_TRUE(buf->isState);
    EXPECT_EQ(buf->dtype, DType::F32);
    EXPECT_EQ(buf->initializer()->dims, param->initializer()->dims);
    for (int64_t k = 0; k < buf->initializer()->numel(); ++k)
      EXPECT_EQ(buf->initializer()->getAsDouble(k), 0.0);
    EXPECT_EQ(n->domain(), "mpc");
    ASSERT_EQ(n->numInputs(), 5u);
    EXPECT_EQ(n->input(0), nullptr); // no loss scaling: never skipped
    EXPECT_EQ(n->input(1), step);
    EXPECT_EQ(n->input(2), param);
    EXPECT_EQ(n->input(3)->name(), kParams[i] + "_grad");
    EXPECT_EQ(n->input(4), buf);
    EXPECT_EQ(n->attrFloat("lr", 0), 0.05f);
    EXPECT_EQ(n->attrFloat("momentum", 0), 0.9f);
    EXPECT_EQ(n->attrFloat("dampening", 1), 0.0f);
    EXPECT_EQ(n->attrFloat("weight_decay", 0), 1e-4f);
    EXPECT_EQ(n->attrInt("nesterov", 0), 1);
    EXPECT_EQ(boundTo(*m, kParams[i]), n->output(0)->name());
    EXPECT_EQ(boundTo(*m, buf->name()), n->output(1)->name());
  }
  auto inc = nodesOf(g, "IncrementStep");
  ASSERT_EQ(inc.size(), 1u);
  EXPECT_EQ(inc[0]->numInputs(), 1u);
  EXPECT_EQ(boundTo(*m, "optimizer_step"), inc[0]->output(0)->name());

  // [loss, p', buf' per parameter..., step']: no gradient outputs.
  ASSERT_EQ(g.outputs().size(), 1 + 2 * kParams.size() + 1);
  EXPECT_EQ(g.outputs()[0]->name(), "loss");
  for (const Value *out : g.outputs())
    EXPECT_EQ(out->name().find("_grad"), std::string::npos) << out->name();
  EXPECT_EQ(m->training->updateBinding.size(), 2 * kParams.size() + 1);
  EXPECT_EQ(meta(*m, "mpc.optimizer"),
            "sgd lr=0.05 momentum=0.9 dampening=0 weight_decay=0.0001 "
            "nesterov=1");
  EXPECT_EQ(meta(*m, "mpc.optimizer_state"),
            "w1_momentum,b1_momentum,w2_momentum,b2_momentum");
  expectBindingsWellTyped(*m);
}

TEST(Optimizer, PlainSgdHasNoMomentumBuffer) {
  auto m = makeTrainingModel();
  Passes p;
  p.run(runOptimizer, *m);
  Graph &g = algo(*m);
  for (Node *n : nodesOf(g, "SGD")) {
    EXPECT_EQ(n->numInputs(), 4u);
    EXPECT_EQ(n->numOutputs(), 1u);
  }
  EXPECT_EQ(g.findValue("w1_momentum"), nullptr);
  EXPECT_EQ(m->training->updateBinding.size(), kParams.size() + 1);
  EXPECT_EQ(meta(*m, "mpc.optimizer_state"), "<unset>");
}

TEST(Optimizer, AdamAndAdamW) {
  for (const char *name : {"adam", "adamw"}) {
    auto m = makeTrainingModel();
    Passes p;
    p.options.optimizer = name;
    p.options.lr = 1e-3;
    p.run(runOptimizer, *m);
    Graph &g = algo(*m);
    auto adam = nodesOf(g, "Adam");
    ASSERT_EQ(adam.size(), kParams.size()) << name;
    bool w = std::string(name) == "adamw";
    for (size_t i = 0; i < kParams.size(); ++i) {
      Node *n = adam[i];
      Value *param = g.findValue(kParams[i]);
      Value *m1 = g.findValue(kParams[i] + "_exp_avg");
      Value *m2 = g.findValue(kParams[i] + "_exp_avg_sq");
      ASSERT_TRUE(m1 && m2);
      EXPECT_TRUE(m1->isState && m2->isState);
      EXPECT_EQ(m1->dims, param->dims);
      EXPECT_EQ(m2->dtype, DType::F32);
      ASSERT_EQ(n->numInputs(), 6u);
      EXPECT_EQ(n->input(4), m1);
      EXPECT_EQ(n->input(5), m2);
      ASSERT_EQ(n->numOutputs(), 3u);
      EXPECT_EQ(n->attrFloat("lr", 0), 1e-3f);
      EXPECT_EQ(n->attrFloat("beta1", 0), 0.9f);
      EXPECT_EQ(n->attrFloat("beta2", 0), 0.999f);
      EXPECT_EQ(n->attrFloat("epsilon", 0), 1e-8f);
      EXPECT_EQ(n->attrFloat("weight_decay", -1), w ? 1e-2f : 0.0f);
      EXPECT_EQ(n->attrInt("decoupled", -1), w ? 1 : 0);
      EXPECT_EQ(boundTo(*m, m1->name()), n->output(1)->name());
      EXPECT_EQ(boundTo(*m, m2->name()), n->output(2)->name());
    }
    EXPECT_EQ(meta(*m, "mpc.optimizer"),
              std::string(name) + " lr=0.001 beta1=0.9 beta2=0.999 eps=1e-08 " +
                  "weight_decay=" + (w ? "0.01" : "0"));
    EXPECT_EQ(m->training->updateBinding.size(), 3 * kParams.size() + 1);
    expectBindingsWellTyped(*m);
  }
}

TEST(Optimizer, AdamWTakesAnExplicitWeightDecay) {
  auto m = makeTrainingModel();
  Passes p;
  p.options.optimizer = "adamw";
  p.options.weightDecay = 0;
  p.options.weightDecaySet = true;
  p.run(runOptimizer, *m);
  EXPECT_EQ(nodesOf(algo(*m), "Adam").at(0)->attrFloat("weight_decay", -1),
            0.0f);
}

TEST(Optimizer, ClipsAllGradientsTogetherBeforeTheUpdate) {
  auto m = makeTrainingModel();
  Passes p;
  p.options.maxGradNorm = 1.0;
  p.run(runOptimizer, *m);
  Graph &g = algo(*m);
  auto clip = nodesOf(g, "ClipGradNorm");
  ASSERT_EQ(clip.size(), 1u);
  Node *c = clip[0];
  EXPECT_EQ(c->attrFloat("max_norm", 0), 1.0f);
  ASSERT_EQ(c->numInputs(), kParams.size());
  ASSERT_EQ(c->numOutputs(), kParams.size() + 1);
  auto sgd = nodesOf(g, "SGD");
  for (size_t i = 0; i < kParams.size(); ++i) {
    EXPECT_EQ(c->input(i)->name(), kParams[i] + "_grad");
    EXPECT_EQ(sgd[i]->input(3), c->output(i));
  }
  EXPECT_EQ(c->output(kParams.size())->dtype, DType::F32);
  EXPECT_NE(meta(*m, "mpc.optimizer").find("max_grad_norm=1"),
            std::string::npos);
  EXPECT_TRUE(g.topologicalSort());
}

TEST(Optimizer, SkipsOnFoundInfAndKeepsTheScalerBindings) {
  auto m = makeTrainingModel({DType::F16});
  Passes p;
  p.options.optimizer = "adam";
  p.options.maxGradNorm = 0.5;
  p.run(runLossScale, *m);
  p.run(runMasterWeights, *m);
  p.run(runOptimizer, *m);
  Graph &g = algo(*m);
  Value *foundInf = g.findValue(meta(*m, "mpc.found_inf"));
  ASSERT_TRUE(foundInf);
  for (Node *n : nodesOf(g, "Adam"))
    EXPECT_EQ(n->input(0), foundInf);
  Node *inc = nodesOf(g, "IncrementStep").at(0);
  ASSERT_EQ(inc->numInputs(), 2u);
  EXPECT_EQ(inc->input(1), foundInf);
  // The clip reads the unscaled gradients.
  Node *clip = nodesOf(g, "ClipGradNorm").at(0);
  EXPECT_EQ(clip->input(0)->producer()->opType(), "UnscaleGradients");

  ASSERT_EQ(g.outputs().size(), 1 + 2 + 3 * kParams.size() + 1);
  EXPECT_EQ(g.outputs()[0]->name(), "loss");
  EXPECT_EQ(g.outputs()[1]->name(), boundTo(*m, "loss_scale"));
  EXPECT_EQ(g.outputs()[2]->name(), boundTo(*m, "loss_scale_growth_tracker"));
  const auto &b = m->training->updateBinding;
  ASSERT_EQ(b.size(), 2 + 3 * kParams.size() + 1);
  EXPECT_EQ(b[0].first, "loss_scale");
  EXPECT_EQ(b[1].first, "loss_scale_growth_tracker");
  EXPECT_EQ(b.back().first, "optimizer_step");
  expectBindingsWellTyped(*m);
  EXPECT_TRUE(g.topologicalSort());
}

TEST(Optimizer, FullChainOnFp16ParametersKeepsStateDtypes) {
  auto m = makeTrainingModel({DType::F16, DType::F32, DType::F16});
  Passes p;
  p.options.optimizer = "sgd";
  p.options.momentum = 0.9;
  p.run(runLossScale, *m);
  p.run(runMasterWeights, *m);
  p.run(runOptimizer, *m);
  for (const std::string &name : kParams) {
    EXPECT_EQ(algo(*m).findValue(name)->dtype, DType::F32);
    EXPECT_EQ(algo(*m).findValue(name + "_momentum")->dtype, DType::F32);
  }
  expectBindingsWellTyped(*m);
}

TEST(Optimizer, StateIsExportedIntoTheMainGraph) {
  auto m = makeTrainingModel({DType::F16});
  Passes p;
  p.options.optimizer = "adam";
  p.run(runLossScale, *m);
  p.run(runMasterWeights, *m);
  p.run(runOptimizer, *m);
  onnx::ModelProto proto;
  exportModel(*m, proto);
  auto back = importModel(proto, "roundtrip.onnx", ".");
  ASSERT_TRUE(back->training);
  for (const char *state : {"loss_scale", "loss_scale_growth_tracker",
                            "optimizer_step", "w1_exp_avg", "b2_exp_avg_sq"}) {
    Value *v = back->graph->findValue(state);
    ASSERT_TRUE(v) << state;
    EXPECT_TRUE(v->isInitializer()) << state;
  }
  EXPECT_EQ(back->training->updateBinding, m->training->updateBinding);
  EXPECT_EQ(*back->meta("mpc.optimizer"), *m->meta("mpc.optimizer"));
}

TEST(Optimizer, Errors) {
  auto m = makeTrainingModel();
  auto expectError = [&](CompileOptions o, const std::string &msg) {
    PassContext ctx{o, {}, {}};
    EXPECT_EQ(errorOf([&] { runOptimizer(*m, ctx); }), msg);
  };
  CompileOptions o;
  o.optimizer = "rmsprop";
  expectError(
      o,
      "--optimizer: unknown 'rmsprop' (expected sgd, adam, adamw, adafactor)");
  o = CompileOptions();
  o.nesterov = true;
  expectError(o, "--nesterov: Nesterov momentum requires --momentum > 0");
  o.momentum = 0.9;
  o.dampening = 0.1;
  expectError(o, "--nesterov: Nesterov momentum requires zero dampening, got "
                 "--dampening=0.1");
  o = CompileOptions();
  o.lr = -1;
  expectError(o, "--lr: must be a finite number >= 0, got -1");
  o = CompileOptions();
  o.optimizer = "adam";
  o.beta2 = 1.0;
  expectError(o, "--beta2: must be in [0, 1), got 1");
  o = CompileOptions();
  o.optimizer = "adam";
  o.momentum = 0.9;
  expectError(o, "--momentum: only applies to --optimizer=sgd ('adam' uses "
                 "--beta1 and --beta2)");
  o = CompileOptions();
  o.maxGradNorm = -1;
  expectError(o, "--max-grad-norm: must be a finite number >= 0, got -1");

  Passes p;
  auto plain = parseModelText(kMlp, "mlp.onnxtext");
  EXPECT_EQ(errorOf([&] { p.run(runOptimizer, *plain); }),
            "optimizer: no gradients (run autodiff first)");
  auto twice = makeTrainingModel();
  p.run(runOptimizer, *twice);
  EXPECT_EQ(errorOf([&] { p.run(runOptimizer, *twice); }),
            "optimizer: already applied (mpc.optimizer is set)");
  EXPECT_EQ(errorOf([&] { p.run(runMasterWeights, *twice); }),
            "master-weights: must run before optimizer (mpc.optimizer is set)");

  auto fp16 = makeTrainingModel({DType::F16});
  EXPECT_EQ(errorOf([&] { p.run(runOptimizer, *fp16); }),
            "optimizer: gradient 'w1_grad' of parameter 'w1' is fp16 but the "
            "parameter is fp32 (run loss-scale and master-weights first)");
  auto fp16Params = makeTrainingModel({DType::F16, DType::F32, DType::F16});
  EXPECT_EQ(errorOf([&] { p.run(runOptimizer, *fp16Params); }),
            "optimizer: parameter 'w1' is fp16; the optimizer updates fp32 "
            "master weights (run master-weights first)");
}

} // namespace
