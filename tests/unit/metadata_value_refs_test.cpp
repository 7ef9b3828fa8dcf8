// Unit tests for metadata that names values
// (ir/metadata_value_refs.cpp).
//
// A value that a rewrite replaced and then removed is named by its
// replacement, a renamed value by its new name; a value that is replaced but
// still lives (a loss read through a new scaling node) keeps the name; a
// name a pass hands to a new value stands; an entry written by hand is
// taken as it reads. The pipeline does
// this after every pass: cleanup removing a gradient's Identity leaves
// mpc.grads naming the value the Identity copied.
#include "ir/graph.h"
#include "ir/step_metadata.h"
#include "passes/onnx/onnx_io.h"
#include "passes/pass.h"
#include "passes/pipeline.h"
#include "passes/registry.h"
#include "support/diagnostics.h"

#include <gtest/gtest.h>

#include <set>
#include <string_view>

using namespace mpc;

namespace {

/// x -> Relu -> r -> Identity -> id (a "gradient"), and `keep` read by a
/// graph output so that the graph is not empty after a removal.
struct Chain {
  Model m;
  Value *x, *r, *id;
  Node *relu, *identity;
  Chain() {
    Graph &g = *m.graph;
    x = g.addInput("x", DType::F32, {4});
    relu = g.createNodeWithOutputs("Relu", {x}, {"r"}, "relu");
    r = relu->output(0);
    identity = g.createNodeWithOutputs("Identity", {r}, {"w_grad"}, "copy");
    id = identity->output(0);
    g.addOutput(r);
  }
  /// What cleanup does to a no-op copy: readers read its input, it goes.
  void removeIdentity() {
    m.graph->replaceAllUsesWith(id, r);
    m.graph->removeNode(identity);
  }
};

std::string metaText(const Model &m, const char *key) {
  const std::string *s = m.meta(key);
  return s ? *s : "<absent>";
}

} // namespace

TEST(MetadataValueRefs, AReplacedAndRemovedValueIsNamedByItsReplacement) {
  Chain c;
  c.m.setMeta("mpc.grads", "x,w_grad");
  c.removeIdentity();
  EXPECT_EQ(metaText(c.m, "mpc.grads"), "x,w_grad"); // nothing until asked
  c.m.updateValueReferences();
  EXPECT_EQ(metaText(c.m, "mpc.grads"), "x,r");
  c.m.updateValueReferences(); // converges
  EXPECT_EQ(metaText(c.m, "mpc.grads"), "x,r");
}

TEST(MetadataValueRefs, AChainOfReplacementsIsFollowed) {
  Chain c;
  Graph &g = *c.m.graph;
  c.m.setMeta("mpc.loss", "w_grad");
  // w_grad -> t (a second copy) -> r, each removed in turn.
  Node *t = g.createNodeWithOutputs("Identity", {c.r}, {"t"}, "t");
  g.replaceAllUsesWith(c.id, t->output(0));
  g.removeNode(c.identity);
  g.replaceAllUsesWith(t->output(0), c.r);
  g.removeNode(t);
  c.m.updateValueReferences();
  EXPECT_EQ(metaText(c.m, "mpc.loss"), "r");
}

TEST(MetadataValueRefs, ARenamedValueIsNamedByItsNewName) {
  Chain c;
  c.m.setMeta("mpc.step", "w_grad");
  c.m.graph->renameValue(c.id, "renamed");
  c.m.updateValueReferences();
  EXPECT_EQ(metaText(c.m, "mpc.step"), "renamed");
}

TEST(MetadataValueRefs, AValueThatStillLivesKeepsItsName) {
  // Loss scaling's pattern: every reader of the loss reads loss * scale,
  // and the loss itself stays, still the loss.
  Chain c;
  Graph &g = *c.m.graph;
  c.m.setMeta("mpc.loss", "r");
  Node *scaled = g.createNodeWithOutputs("Neg", {c.r}, {"scaled"}, "scale");
  g.replaceAllUsesWith(c.r, scaled->output(0));
  scaled->setInput(0, c.r);
  c.m.updateValueReferences();
  EXPECT_EQ(metaText(c.m, "mpc.loss"), "r");
}

TEST(MetadataValueRefs, AValueRemovedWithNothingInItsPlaceKeepsItsName) {
  // The verifier then reports the name against the pass that removed it.
  Chain c;
  c.m.setMeta("mpc.grads", "w_grad");
  c.m.graph->removeNode(c.identity);
  c.m.updateValueReferences();
  EXPECT_EQ(metaText(c.m, "mpc.grads"), "w_grad");
  EXPECT_EQ(c.m.graph->findValue("w_grad"), nullptr);
}

TEST(MetadataValueRefs, ANameHandedToANewValueStands) {
  // autocast's pattern: the node that computed the gradient now computes it
  // in half precision under another name, and an fp32 Cast of it takes the
  // gradient's name. The entry names the Cast, not the renamed value.
  Chain c;
  Graph &g = *c.m.graph;
  c.m.setMeta("mpc.grads", "w_grad");
  g.renameValue(c.id, "w_grad_fp16");
  Node *cast = g.createNodeWithOutputs("Cast", {c.id}, {"w_grad"}, "cast");
  c.m.updateValueReferences();
  EXPECT_EQ(metaText(c.m, "mpc.grads"), "w_grad");
  // ... and the entry follows the Cast from then on.
  g.renameValue(cast->output(0), "w_grad_fp32");
  c.m.updateValueReferences();
  EXPECT_EQ(metaText(c.m, "mpc.grads"), "w_grad_fp32");
}

TEST(MetadataValueRefs, PairsFollowTheirValuesOnBothSides) {
  Chain c;
  c.m.setMeta("mpc.ema", "x=w_grad");
  c.removeIdentity();
  c.m.updateValueReferences();
  EXPECT_EQ(metaText(c.m, "mpc.ema"), "x=r");
}

TEST(MetadataValueRefs, AnEntryWrittenByHandIsTakenAsItReads) {
  Chain c;
  c.m.setMeta("mpc.grads", "w_grad");
  c.m.metadata[0].second = "x"; // not through setMeta
  c.removeIdentity();
  c.m.updateValueReferences();
  EXPECT_EQ(metaText(c.m, "mpc.grads"), "x");
  // ... and followed from then on.
  c.m.graph->renameValue(c.x, "input");
  c.m.updateValueReferences();
  EXPECT_EQ(metaText(c.m, "mpc.grads"), "input");
}

TEST(MetadataValueRefs, KeysThatNameNoValuesAreLeftAlone) {
  // mpc.buffers holds state_dict names: a folded buffer is an error, not a
  // name to move; other keys are not names at all.
  Chain c;
  c.m.setMeta("mpc.buffers", "w_grad");
  c.m.setMeta("mpc.optimizer", "w_grad");
  c.removeIdentity();
  c.m.updateValueReferences();
  EXPECT_EQ(metaText(c.m, "mpc.buffers"), "w_grad");
  EXPECT_EQ(metaText(c.m, "mpc.optimizer"), "w_grad");
}

TEST(MetadataValueRefs, AReplacedGraphIsReadByName) {
  Chain c;
  c.m.setMeta("mpc.grads", "w_grad");
  // The recorded values belonged to the old graph; its replacement is
  // looked up by name (and the old graph's values are never touched).
  c.m.graph = std::make_unique<Graph>("other");
  Value *w = c.m.graph->addInput("w_grad", DType::F32, {4});
  c.m.updateValueReferences();
  c.m.graph->renameValue(w, "w2");
  c.m.updateValueReferences();
  EXPECT_EQ(metaText(c.m, "mpc.grads"), "w2");
}

TEST(MetadataValueRefs, CleanupInThePipelineKeepsTheGradientListTrue) {
  // A gradient that autodiff wrote as an Identity, no longer a graph
  // output (as after the optimizer): cleanup removes the copy, and the
  // verifier after it finds mpc.grads naming a value of the graph.
  auto m = parseModelText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[4] x) => (float[4] y) {
  d = Neg(x)
  w_grad = Identity(d)
  y = Relu(w_grad)
}
)",
                          "t.onnxtext");
  m->setMeta("mpc.grads", "w_grad");
  Statistics stats;
  runPipeline(*m, parsePipeline("verify,cleanup,verify"), CompileOptions{},
              PipelineConfig{}, stats);
  EXPECT_EQ(metaText(*m, "mpc.grads"), "d");
  EXPECT_EQ(m->graph->findValue("w_grad"), nullptr);
}

TEST(MetadataValueRefs, VerifyChecksEveryStateList) {
  // The optimizer's moments, the master weights, the gradient-accumulation
  // buffers and counter and the plateau's learning rate are state the
  // metadata names: a name that is not one is reported, as for mpc.params.
  auto m = parseModelText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2,4] x, float[2,3] y) => (float loss)
<float[3,4] w = {0.1, -0.2, 0.3, 0.4, -0.5, 0.6, 0.7, -0.8, 0.9, 1.0, -1.1, 1.2}>
{
  t = Transpose<perm = [1, 0]>(w)
  h = MatMul(x, t)
  d = Sub(h, y)
  sq = Mul(d, d)
  loss = ReduceMean<keepdims = 0>(sq)
}
)",
                          "t.onnxtext");
  CompileOptions o;
  o.optimizer = "adam";
  o.precision = DType::F16;
  o.gradAccum = 2;
  Statistics stats;
  runPipeline(*m, defaultPipeline(), o, PipelineConfig{}, stats);
  for (const char *key : {"mpc.optimizer_state", "mpc.master_params",
                          "mpc.grad_accum_buffers", "mpc.grad_accum_counter"}) {
    SCOPED_TRACE(key);
    ASSERT_NE(m->meta(key), nullptr);
    std::string kept = *m->meta(key);
    m->setMeta(key, kept + ",gone");
    PassContext ctx{o, {}, {}};
    try {
      runVerify(*m, ctx);
      ADD_FAILURE() << "verify accepted a missing state";
    } catch (const Error &e) {
      EXPECT_NE(std::string(e.what()).find(std::string("metadata ") + key +
                                           ": 'gone' is not a state "
                                           "initializer"),
                std::string::npos)
          << e.what();
    }
    m->setMeta(key, kept);
    runVerify(*m, ctx);
  }
}

TEST(MetadataValueRefs, UpdateBindingFollowsTheStepsOutputs) {
  // A rewrite replaces the node computing a state's new value, moving the
  // step's output (replaceAllUsesWith moves graph outputs too) to a value
  // of another name, and removes the old node: the binding follows it.
  Model m;
  Graph &main = *m.graph;
  main.addInitializer("w", Tensor::scalar(DType::F32, 1.0))->isState = true;
  m.training.emplace();
  m.training->algorithm = std::make_unique<Graph>("step");
  Graph &step = *m.training->algorithm;
  Value *w = step.addInitializer("w", Tensor::scalar(DType::F32, 1.0));
  w->isState = true;
  Node *old = step.createNodeWithOutputs("Neg", {w}, {"w_new"}, "old");
  step.addOutput(old->output(0));
  m.training->updateBinding.emplace_back("w", "w_new");
  m.updateValueReferences();

  Node *fresh = step.createNodeWithOutputs("Abs", {w}, {"w_abs"}, "fresh");
  step.replaceAllUsesWith(old->output(0), fresh->output(0));
  step.removeNode(old);
  m.updateValueReferences();
  EXPECT_EQ(m.training->updateBinding[0].second, "w_abs");
  EXPECT_EQ(step.outputs()[0]->name(), "w_abs");
}

// The typed keys of ir/step_metadata.h: one table, each key once, and every
// key that names values follows them (the table is the list
// metadata_value_refs mends), while mpc.buffers, state_dict names, does not.
TEST(StepMetadata, EveryKeyIsDeclaredOnceUnderMpc) {
  std::set<std::string_view> seen;
  for (const MetaKeyInfo &k : kStepMetadata) {
    EXPECT_EQ(k.name.substr(0, 4), "mpc.") << k.name;
    EXPECT_TRUE(seen.insert(k.name).second) << k.name << " twice";
    EXPECT_EQ(stepMetadataKey(k.name), &k);
  }
  EXPECT_EQ(stepMetadataKey("mpc.not_a_key"), nullptr);
}

TEST(StepMetadata, ListsRoundTripAndAbsentListsAreEmpty) {
  Chain c;
  EXPECT_TRUE(readMeta(c.m, meta::kGrads).empty());
  EXPECT_FALSE(hasMeta(c.m, meta::kGrads));
  writeMeta(c.m, meta::kGrads, {"x", "w_grad"});
  EXPECT_EQ(metaText(c.m, "mpc.grads"), "x,w_grad");
  EXPECT_EQ(readMeta(c.m, meta::kGrads),
            (std::vector<std::string>{"x", "w_grad"}));
  writeMeta(c.m, meta::kLossScaleMode, "dynamic");
  ASSERT_NE(readMeta(c.m, meta::kLossScaleMode), nullptr);
  EXPECT_EQ(*readMeta(c.m, meta::kLossScaleMode), "dynamic");
}

TEST(StepMetadata, EveryValueNamingKeyFollowsARenamedValue) {
  for (const MetaKeyInfo &k : kStepMetadata) {
    Chain c;
    std::string key(k.name);
    c.m.setMeta(key, k.form == MetaForm::ValuePairs ? "x=w_grad" : "w_grad");
    c.m.graph->renameValue(c.id, "renamed");
    c.m.updateValueReferences();
    bool namesValues = k.form == MetaForm::Value ||
                       k.form == MetaForm::ValueList ||
                       k.form == MetaForm::ValuePairs;
    std::string want = namesValues ? "renamed" : "w_grad";
    if (k.form == MetaForm::ValuePairs)
      want = "x=" + want;
    EXPECT_EQ(metaText(c.m, key.c_str()), want) << key;
  }
}
