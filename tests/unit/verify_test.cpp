// Tests for the verify and fold-constants passes on IR that ONNX text cannot
// express: graphs broken the way a buggy pass would break them, training
// algorithms with update bindings, and metadata.
#include "passes/pass.h"
#include "passes/shape_inference.h"
#include "passes/verify.h"
#include "support/diagnostics.h"

#include <gtest/gtest.h>

#include <limits>

using namespace mpc;

namespace {

#define EXPECT_CONTAINS(haystack, needle)                                      \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos)             \
      << "message: " << (haystack)

/// The message runVerify throws (empty when the model verifies).
std::string verifyError(Model &m) {
  CompileOptions opts;
  PassContext ctx{opts, {}, {}};
  try {
    runVerify(m, ctx);
  } catch (const Error &e) {
    return e.what();
  }
  return "";
}

/// x[4] -> Relu -> a -> Relu -> y, in the main graph.
struct ReluChain {
  Model m;
  Value *x, *a, *y;
  Node *first, *second;
  ReluChain() {
    Graph &g = *m.graph;
    x = g.addInput("x", DType::F32, {Dim(4)});
    first = g.createNode("Relu", {x}, 1, "first");
    a = first->output(0);
    second = g.createNode("Relu", {a}, 1, "second");
    y = second->output(0);
    g.addOutput(y);
  }
};

TEST(Verify, AcceptsAWellFormedGraphAndLeavesTypesAlone) {
  ReluChain c;
  EXPECT_EQ(verifyError(c.m), "");
  // Verify infers on a copy: the model's unknown types stay unknown.
  EXPECT_EQ(c.a->dtype, DType::Undefined);
  EXPECT_FALSE(c.y->hasShape);
}

TEST(Verify, NodesOutOfOrder) {
  ReluChain c;
  c.m.graph->moveBefore(c.second, c.first);
  std::string msg = verifyError(c.m);
  EXPECT_CONTAINS(msg, "node 'second' (Relu): input 0 'first_out' is used "
                       "before the node that defines it");
}

TEST(VerifyMemo, NodesReorderedAfterAPassingVerify) {
  // A reordering renews no node's revision: a verify that trusted its
  // records of unchanged nodes must still see the new order.
  ReluChain c;
  ASSERT_EQ(verifyError(c.m), "");
  c.m.graph->moveBefore(c.second, c.first);
  EXPECT_CONTAINS(verifyError(c.m), "node 'second' (Relu): input 0 "
                                    "'first_out' is used before the node "
                                    "that defines it");
}

TEST(Verify, Cycle) {
  ReluChain c;
  c.first->setInput(0, c.y);
  EXPECT_CONTAINS(verifyError(c.m), "is part of a cycle");
}

TEST(Verify, UseOfARemovedInitializer) {
  ReluChain c;
  Graph &g = *c.m.graph;
  Value *w = g.addInitializer("w", Tensor::fromFloats({4}, {1, 2, 3, 4}));
  Node *add = g.createNode("Add", {c.y, w}, 1, "add");
  g.setOutput(0, add->output(0));
  g.removeInitializer(w); // a buggy pass: w is still used
  EXPECT_CONTAINS(verifyError(c.m),
                  "node 'add' (Add): input 1 'w' is not defined");
}

TEST(Verify, ValueOfAnotherGraph) {
  ReluChain c;
  Graph other("other");
  Value *foreign = other.addInput("z", DType::F32, {Dim(4)});
  c.second->setInput(0, foreign);
  EXPECT_CONTAINS(verifyError(c.m), "belongs to another graph");
}

TEST(Verify, NoOutputs) {
  ReluChain c;
  c.m.graph->clearOutputs();
  EXPECT_CONTAINS(verifyError(c.m), "graph 'main': has no outputs");
}

TEST(Verify, InitializerTypeMustMatchItsData) {
  ReluChain c;
  Value *w = c.m.graph->addInitializer("w", Tensor::fromFloats({2}, {1, 2}));
  w->dtype = DType::F16;
  EXPECT_CONTAINS(verifyError(c.m),
                  "initializer 'w' is declared fp16[2] but holds fp32[2]");
}

TEST(Verify, UnsupportedOpListsSupported) {
  ReluChain c;
  c.m.graph->createNode("LRN", {c.x}, 1, "lrn");
  std::string msg = verifyError(c.m);
  EXPECT_CONTAINS(msg, "unsupported op 'LRN' (node 'lrn'); supported: Abs, "
                       "Add, ");
  EXPECT_CONTAINS(msg, ", Cast, ");
}

/// A main graph with state w (fp32[2]) and step (int64 []), and a training
/// algorithm producing their new values.
struct TrainingModel {
  Model m;
  Graph *alg;
  Value *wNew, *stepNew;
  TrainingModel() {
    Graph &g = *m.graph;
    Value *x = g.addInput("x", DType::F32, {Dim(2)});
    Value *w = g.addInitializer("w", Tensor::fromFloats({2}, {1, 2}));
    w->isState = true;
    Value *step = g.addInitializer("step", Tensor::scalar(DType::I64, 0));
    step->isState = true;
    g.addOutput(g.createNode("Mul", {x, w}, 1, "mul")->output(0));

    m.training.emplace();
    m.training->algorithm = std::make_unique<Graph>("step_graph");
    alg = m.training->algorithm.get();
    Value *ax = alg->addInput("x", DType::F32, {Dim(2)});
    Value *aw = alg->addInitializer("w", w->initializer());
    aw->isState = true;
    Value *astep = alg->addInitializer("step", step->initializer());
    astep->isState = true;
    Node *upd = alg->createNode("Sub", {aw, ax}, 1, "update");
    wNew = upd->output(0);
    wNew->setType(DType::F32, {Dim(2)});
    Value *one = alg->addInitializer("one", Tensor::scalar(DType::I64, 1));
    Node *inc = alg->createNode("Add", {astep, one}, 1, "inc");
    stepNew = inc->output(0);
    stepNew->setType(DType::I64, {});
    alg->addOutput(wNew);
    alg->addOutput(stepNew);
    m.training->updateBinding = {{"w", wNew->name()},
                                 {"step", stepNew->name()}};
  }
};

TEST(Verify, UpdateBindings) {
  TrainingModel t;
  EXPECT_EQ(verifyError(t.m), "");

  t.m.training->updateBinding.push_back({"nope", t.wNew->name()});
  EXPECT_CONTAINS(verifyError(t.m),
                  "update_binding: key 'nope' is not a state initializer");
  t.m.training->updateBinding.pop_back();

  t.m.training->updateBinding.push_back({"w", t.wNew->name()});
  EXPECT_CONTAINS(verifyError(t.m), "state 'w' is bound twice");
  t.m.training->updateBinding.pop_back();

  t.m.training->updateBinding[1].second = "missing";
  EXPECT_CONTAINS(verifyError(t.m), "value 'missing' (for state 'step') is "
                                    "not a value of the training algorithm");
  t.m.training->updateBinding[1].second = t.wNew->name();
  EXPECT_CONTAINS(verifyError(t.m), "state 'step' is int64[scalar] but its "
                                    "new value 'update_out' is fp32[2]");
}

TEST(Verify, Metadata) {
  TrainingModel t;
  t.m.setMeta("mpc.loss", "no_such_value");
  EXPECT_CONTAINS(verifyError(t.m), "metadata mpc.loss: 'no_such_value' is "
                                    "not a value of graph 'step_graph'");
  t.m.setMeta("mpc.loss", t.wNew->name());
  t.m.setMeta("mpc.params", "w,x");
  EXPECT_CONTAINS(verifyError(t.m),
                  "metadata mpc.params: 'x' is not a state initializer");
  t.m.setMeta("mpc.params", "w");
  t.m.setMeta("mpc.grads", "update_out,inc_out");
  EXPECT_CONTAINS(verifyError(t.m), "mpc.params lists 1 parameters but "
                                    "mpc.grads lists 2 gradients");
  t.m.setMeta("mpc.grads", "update_out");
  t.m.setMeta("mpc.step", "step");
  EXPECT_EQ(verifyError(t.m), "");
}

TEST(Verify, DeclaredTypeContradictsInference) {
  TrainingModel t;
  t.wNew->dtype = DType::F16;
  EXPECT_CONTAINS(verifyError(t.m), "node 'update' (Sub): output "
                                    "'update_out' is declared fp16[2] but the "
                                    "op produces fp32[2]");
}

// Verify remembers what each node inferred (passes/verify.cpp's VerifyMemo):
// after a verify that passed, whatever a pass changes must still be checked.

/// x[2x3] -> Transpose -> t -> Relu -> y, declared types and all.
struct TransposeChain {
  Model m;
  Value *x, *t, *y;
  Node *transpose, *relu;
  TransposeChain() {
    Graph &g = *m.graph;
    x = g.addInput("x", DType::F32, {Dim(2), Dim(3)});
    transpose = g.createNode("Transpose", {x}, 1, "transpose");
    transpose->setAttr("perm", Attribute::ofInts({1, 0}));
    t = transpose->output(0);
    t->setType(DType::F32, {Dim(3), Dim(2)});
    relu = g.createNode("Relu", {t}, 1, "relu");
    y = relu->output(0);
    y->setType(DType::F32, {Dim(3), Dim(2)});
    g.addOutput(y);
  }
};

TEST(VerifyMemo, AnInputRetypedByHandIsChecked) {
  TransposeChain c;
  ASSERT_EQ(verifyError(c.m), "");
  c.x->dims = {Dim(4), Dim(3)};
  EXPECT_CONTAINS(verifyError(c.m), "node 'transpose' (Transpose): output "
                                    "'transpose_out' is declared fp32[3x2] "
                                    "but the op produces fp32[3x4]");
}

TEST(VerifyMemo, AChangedAttributeIsChecked) {
  TransposeChain c;
  ASSERT_EQ(verifyError(c.m), "");
  c.transpose->setAttr("perm", Attribute::ofInts({0, 1}));
  EXPECT_CONTAINS(verifyError(c.m), "is declared fp32[3x2] but the op "
                                    "produces fp32[2x3]");
}

TEST(VerifyMemo, ARetypedOutputIsChecked) {
  TransposeChain c;
  ASSERT_EQ(verifyError(c.m), "");
  c.y->dtype = DType::F16;
  EXPECT_CONTAINS(verifyError(c.m), "node 'relu' (Relu): output 'relu_out' "
                                    "is declared fp16[3x2] but the op "
                                    "produces fp32[3x2]");
  // Put back, it passes again; then the upstream output is retyped: the
  // unchanged Relu downstream sees the new inferred input and is checked.
  c.y->dtype = DType::F32;
  ASSERT_EQ(verifyError(c.m), "");
  c.t->dims = {Dim(2), Dim(3)};
  EXPECT_CONTAINS(verifyError(c.m), "node 'transpose' (Transpose)");
}

TEST(VerifyMemo, InferredTypesStillFlowDownstream) {
  // Undeclared middle value: each verify infers it for the Relu after it
  // (from the memo the second time) and leaves it undeclared.
  TransposeChain c;
  c.t->dtype = DType::Undefined;
  c.t->hasShape = false;
  c.t->dims.clear();
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(verifyError(c.m), "");
    EXPECT_EQ(c.t->dtype, DType::Undefined);
    EXPECT_FALSE(c.t->hasShape);
  }
  c.y->dtype = DType::F16;
  EXPECT_CONTAINS(verifyError(c.m), "is declared fp16[3x2] but the op "
                                    "produces fp32[3x2]");
}

TEST(VerifyMemo, AReplacedConstantIsChecked) {
  // Reshape reads its shape input's data: a new Constant feeding it (same
  // type, other data) must be seen.
  Model m;
  Graph &g = *m.graph;
  Value *x = g.addInput("x", DType::F32, {Dim(6)});
  auto constant = [&](std::vector<int64_t> v) {
    Node *c = g.createNode("Constant", {}, 1, "shape");
    c->setAttr("value", Attribute::ofTensor(Tensor::fromInt64s({2}, v)));
    c->output(0)->setType(DType::I64, {Dim(2)});
    return c;
  };
  Node *c23 = constant({2, 3});
  Node *reshape = g.createNode("Reshape", {x, c23->output(0)}, 1, "reshape");
  reshape->output(0)->setType(DType::F32, {Dim(2), Dim(3)});
  g.addOutput(reshape->output(0));
  ASSERT_EQ(verifyError(m), "");
  c23->setAttr("value", Attribute::ofTensor(Tensor::fromInt64s({2}, {3, 2})));
  EXPECT_CONTAINS(verifyError(m), "is declared fp32[2x3] but the op "
                                  "produces fp32[3x2]");
}

TEST(VerifyMemo, OutputsDeclaredAsInferredAreStillChecked) {
  // infer-shapes declares each output as inferred; the verify after it
  // takes that from the memo without inferring again. What changes next
  // must still be checked against the new declarations.
  TransposeChain c;
  c.t->dtype = DType::Undefined;
  c.t->hasShape = false;
  c.t->dims.clear();
  ASSERT_EQ(verifyError(c.m), "");
  c.t->setType(DType::F32, {Dim(3), Dim(2)});
  ASSERT_EQ(verifyError(c.m), "");
  EXPECT_EQ(c.t->dims, (Dims{Dim(3), Dim(2)})); // left as declared
  c.x->dims = {Dim(4), Dim(3)};
  EXPECT_CONTAINS(verifyError(c.m), "node 'transpose' (Transpose): output "
                                    "'transpose_out' is declared fp32[3x2] "
                                    "but the op produces fp32[3x4]");
  // Undeclared again: inferred as before, and flows to the Relu.
  c.x->dims = {Dim(2), Dim(3)};
  c.t->dtype = DType::Undefined;
  c.t->hasShape = false;
  c.t->dims.clear();
  ASSERT_EQ(verifyError(c.m), "");
  EXPECT_EQ(c.t->dtype, DType::Undefined);
  c.y->dims = {Dim(2), Dim(3)};
  EXPECT_CONTAINS(verifyError(c.m), "node 'relu' (Relu): output 'relu_out' "
                                    "is declared fp32[2x3] but the op "
                                    "produces fp32[3x2]");
}

/// y = Reshape(x, shape) with y declared fp32[2x3], the graph's output; x is
/// the graph's input fp32[6].
void addReshapeTo2x3(Graph &g, Value *x, Value *shape) {
  Node *reshape = g.createNode("Reshape", {x, shape}, 1, "reshape");
  reshape->output(0)->setType(DType::F32, {Dim(2), Dim(3)});
  g.addOutput(reshape->output(0));
}

TEST(VerifyMemo, AConstantDeclaredAsInferredThenReplacedIsChecked) {
  // A Constant's consumers see its data anew only when its attributes
  // changed: declaring its output as inferred does not hide a later change.
  Model m;
  Graph &g = *m.graph;
  Value *x = g.addInput("x", DType::F32, {Dim(6)});
  Node *c = g.createNode("Constant", {}, 1, "shape");
  c->setAttr("value", Attribute::ofTensor(Tensor::fromInt64s({2}, {2, 3})));
  addReshapeTo2x3(g, x, c->output(0));
  ASSERT_EQ(verifyError(m), "");
  c->output(0)->setType(DType::I64, {Dim(2)});
  ASSERT_EQ(verifyError(m), "");
  c->setAttr("value", Attribute::ofTensor(Tensor::fromInt64s({2}, {3, 2})));
  EXPECT_CONTAINS(verifyError(m), "is declared fp32[2x3] but the op "
                                  "produces fp32[3x2]");
}

// What a pass does between two verifies through the Graph API must be
// checked by the second, however little of the graph it touched.

TEST(VerifyMemo, ANewNodeWithAWrongTypeIsChecked) {
  // A buggy pass inserts a Cast to fp16 whose output it declares fp32.
  TransposeChain c;
  ASSERT_EQ(verifyError(c.m), "");
  Node *cast = c.m.graph->createNode("Cast", {c.t}, 1, "cast", "", c.relu);
  cast->setAttr("to", Attribute::ofInt(10));
  cast->output(0)->setType(DType::F32, {Dim(3), Dim(2)});
  c.relu->setInput(0, cast->output(0));
  EXPECT_CONTAINS(verifyError(c.m), "node 'cast' (Cast): output 'cast_out' "
                                    "is declared fp32[3x2] but the op "
                                    "produces fp16[3x2]");
}

TEST(VerifyMemo, ARewiredInputIsChecked) {
  // The Relu is pointed at the untransposed input: its declared output no
  // longer matches, though no type was edited.
  TransposeChain c;
  ASSERT_EQ(verifyError(c.m), "");
  c.relu->setInput(0, c.x);
  EXPECT_CONTAINS(verifyError(c.m), "node 'relu' (Relu): output 'relu_out' "
                                    "is declared fp32[3x2] but the op "
                                    "produces fp32[2x3]");
}

TEST(VerifyMemo, AReplacedInitializerIsChecked) {
  // Reshape reads its shape from an initializer: new data of the same type.
  Model m;
  Graph &g = *m.graph;
  Value *x = g.addInput("x", DType::F32, {Dim(6)});
  Value *shape = g.addInitializer("shape", Tensor::fromInt64s({2}, {2, 3}));
  addReshapeTo2x3(g, x, shape);
  ASSERT_EQ(verifyError(m), "");
  shape->setInitializer(
      std::make_shared<Tensor>(Tensor::fromInt64s({2}, {3, 2})));
  EXPECT_CONTAINS(verifyError(m), "is declared fp32[2x3] but the op "
                                  "produces fp32[3x2]");
  shape->setInitializer(
      std::make_shared<Tensor>(Tensor::fromInt64s({2}, {2, 3})));
  ASSERT_EQ(verifyError(m), "");
  // The old data freed first, the new may be allocated where it was: the
  // memo must not take it for the data it checked.
  shape->setInitializer(nullptr);
  shape->setInitializer(
      std::make_shared<Tensor>(Tensor::fromInt64s({2}, {3, 2})));
  EXPECT_CONTAINS(verifyError(m), "produces fp32[3x2]");
}

TEST(VerifyMemo, AChangeSeenByAnAbortedVerifyIsCheckedNextTime) {
  // x feeds two Relus. Retyping x breaks both; the first error stops the
  // type checks, so the second Relu is not checked by that verify. Once the
  // first is mended, the next verify must still check the second, though x
  // has not changed since the verify before.
  Model m;
  Graph &g = *m.graph;
  Value *x = g.addInput("x", DType::F32, {Dim(4)});
  Node *first = g.createNode("Relu", {x}, 1, "first");
  first->output(0)->setType(DType::F32, {Dim(4)});
  Node *second = g.createNode("Relu", {x}, 1, "second");
  second->output(0)->setType(DType::F32, {Dim(4)});
  g.addOutput(first->output(0));
  g.addOutput(second->output(0));
  ASSERT_EQ(verifyError(m), "");
  x->dims = {Dim(5)};
  EXPECT_CONTAINS(verifyError(m), "node 'first' (Relu)");
  first->output(0)->dims = {Dim(5)};
  EXPECT_CONTAINS(verifyError(m), "node 'second' (Relu): output "
                                  "'second_out' is declared fp32[4] but the "
                                  "op produces fp32[5]");
  // The same after a structural error, which stops the walk itself.
  second->output(0)->dims = {Dim(5)};
  ASSERT_EQ(verifyError(m), "");
  Value *w = g.addInitializer("w", Tensor::fromFloats({5}, {1, 2, 3, 4, 5}));
  Node *bad = g.createNode("Relu", {w}, 1, "bad", "", first);
  g.removeInitializer(w); // a buggy pass: w is still used
  x->dims = {Dim(6)};
  EXPECT_CONTAINS(verifyError(m), "node 'bad' (Relu): input 0 'w' is not "
                                  "defined");
  g.removeNode(bad);
  EXPECT_CONTAINS(verifyError(m), "node 'first' (Relu)");
}

TEST(VerifyMemo, ABindingRetargetedToABoundStateIsReported) {
  // Verify skips the duplicate check while each binding finds the state it
  // found last time: one that finds another binding's state must be seen,
  // though the number of bindings is the same.
  TrainingModel t;
  ASSERT_EQ(verifyError(t.m), "");
  ASSERT_EQ(verifyError(t.m), "");
  t.m.training->updateBinding[1] = {"w", t.wNew->name()};
  EXPECT_CONTAINS(verifyError(t.m), "state 'w' is bound twice");
  EXPECT_CONTAINS(verifyError(t.m), "state 'w' is bound twice");
  t.m.training->updateBinding[1] = {"step", t.stepNew->name()};
  EXPECT_EQ(verifyError(t.m), "");
  EXPECT_EQ(verifyError(t.m), "");
}

TEST(VerifyMemo, BindingsAndMetadataFollowTheGraph) {
  // Verify remembers which value each binding and metadata name found: a
  // removed, renamed or demoted value must be looked up again.
  TrainingModel t;
  t.m.setMeta("mpc.step", "step");
  t.m.setMeta("mpc.loss", t.wNew->name());
  ASSERT_EQ(verifyError(t.m), "");
  // The algorithm's step is no longer state: the main graph's is found.
  t.alg->findValue("step")->isState = false;
  ASSERT_EQ(verifyError(t.m), "");
  t.m.graph->removeInitializer(t.m.graph->findValue("step"));
  EXPECT_CONTAINS(verifyError(t.m),
                  "update_binding: key 'step' is not a state initializer");
  t.m.training->updateBinding.pop_back();
  EXPECT_CONTAINS(verifyError(t.m),
                  "metadata mpc.step: 'step' is not a state initializer");
  t.alg->findValue("step")->isState = true;
  ASSERT_EQ(verifyError(t.m), "");
  // Renamed: the old name finds nothing; renamed back, it passes again.
  t.alg->renameValue(t.wNew, "renamed");
  EXPECT_CONTAINS(verifyError(t.m), "value 'update_out' (for state 'w') is "
                                    "not a value of the training algorithm");
  t.m.training->updateBinding[0].second = "renamed";
  EXPECT_CONTAINS(verifyError(t.m), "metadata mpc.loss: 'update_out' is not "
                                    "a value of graph 'step_graph'");
  t.alg->renameValue(t.wNew, "update_out");
  t.m.training->updateBinding[0].second = "update_out";
  ASSERT_EQ(verifyError(t.m), "");
  // A new algorithm graph (a copy): nothing remembered of the old one is
  // used.
  t.m.training->algorithm = t.alg->clone();
  t.alg = t.m.training->algorithm.get();
  EXPECT_EQ(verifyError(t.m), "");
  t.alg->renameValue(t.alg->findValue("update_out"), "renamed");
  EXPECT_CONTAINS(verifyError(t.m), "value 'update_out' (for state 'w') is "
                                    "not a value of the training algorithm");
}

TEST(VerifyMemo, InitializerDataIsComparedAfterTheDataPoolCompacts) {
  // The records' initializer data sit in a pool that each verify compacts:
  // a removed initializer's data is let go of and the slots after it move
  // down. An initializer whose slot moved is still compared with its own
  // data, not with what now sits where its slot was: here that is the data
  // of `other`, which `shape` is then given.
  Model m;
  Graph &g = *m.graph;
  Value *x = g.addInput("x", DType::F32, {Dim(6)});
  Value *unused = g.addInitializer("unused", Tensor::fromInt64s({2}, {5, 5}));
  Value *shape = g.addInitializer("shape", Tensor::fromInt64s({2}, {2, 3}));
  Value *other = g.addInitializer("other", Tensor::fromInt64s({2}, {3, 2}));
  addReshapeTo2x3(g, x, shape);
  Node *reshapeOther = g.createNode("Reshape", {x, other}, 1, "other_reshape");
  reshapeOther->output(0)->setType(DType::F32, {Dim(3), Dim(2)});
  g.addOutput(reshapeOther->output(0));
  ASSERT_EQ(verifyError(m), "");
  g.removeInitializer(unused);
  ASSERT_EQ(verifyError(m), "");
  shape->setInitializer(other->initializer());
  EXPECT_CONTAINS(verifyError(m), "node 'reshape' (Reshape): output "
                                  "'reshape_out' is declared fp32[2x3] but "
                                  "the op produces fp32[3x2]");
  shape->setInitializer(
      std::make_shared<Tensor>(Tensor::fromInt64s({2}, {2, 3})));
  ASSERT_EQ(verifyError(m), "");
  // One added now gets a slot of its own.
  g.addInitializer("later", Tensor::fromInt64s({2}, {7, 7}));
  ASSERT_EQ(verifyError(m), "");
  shape->setInitializer(other->initializer());
  EXPECT_CONTAINS(verifyError(m), "produces fp32[3x2]");
}

TEST(VerifyMemo, AChangedOpsetIsChecked) {
  // A node's record holds at the opset it was checked at, which the memo
  // keeps once per graph: Squeeze takes its axes as an input from opset 13,
  // as an attribute before, so the same node passes at 13 only.
  Model m;
  m.setOpsetVersion("", 13);
  Graph &g = *m.graph;
  Value *x = g.addInput("x", DType::F32, {Dim(1), Dim(4)});
  Value *axes = g.addInitializer("axes", Tensor::fromInt64s({1}, {0}));
  Node *squeeze = g.createNode("Squeeze", {x, axes}, 1, "squeeze");
  squeeze->output(0)->setType(DType::F32, {Dim(4)});
  g.addOutput(squeeze->output(0));
  ASSERT_EQ(verifyError(m), "");
  m.setOpsetVersion("", 12);
  EXPECT_CONTAINS(verifyError(m), "node 'squeeze' (Squeeze): takes 'axes' as "
                                  "an attribute before opset 13");
  m.setOpsetVersion("", 13);
  EXPECT_EQ(verifyError(m), "");
  m.setOpsetVersion("", 12);
  EXPECT_CONTAINS(verifyError(m), "takes 'axes' as an attribute");
}

TEST(VerifyMemo, TheVerifyCountWrapsByForgettingTheRecords) {
  // The records hold 32-bit verify counts. After the last count, verify
  // starts again from no records: a new value is not taken for one defined
  // twice, and a change is not hidden by a record that looks newer than it.
  TransposeChain c;
  ASSERT_EQ(verifyError(c.m), "");
  setVerifyCountForTesting(c.m, std::numeric_limits<uint32_t>::max() - 1);
  // The last count: both nodes are checked and recorded in it.
  c.x->dims = {Dim(4), Dim(3)};
  c.t->dims = {Dim(3), Dim(4)};
  c.y->dims = {Dim(3), Dim(4)};
  ASSERT_EQ(verifyError(c.m), "");
  Node *extra = c.m.graph->createNode("Relu", {c.y}, 1, "extra");
  extra->output(0)->setType(DType::F32, {Dim(3), Dim(4)});
  c.m.graph->addOutput(extra->output(0));
  EXPECT_EQ(verifyError(c.m), "");
  c.x->dims = {Dim(2), Dim(3)};
  EXPECT_CONTAINS(verifyError(c.m), "node 'transpose' (Transpose): output "
                                    "'transpose_out' is declared fp32[3x4] "
                                    "but the op produces fp32[3x2]");
  c.x->dims = {Dim(4), Dim(3)};
  EXPECT_EQ(verifyError(c.m), "");
}

// --- fold-constants
// ------------------------------------------------------------

void fold(Model &m) {
  CompileOptions opts;
  PassContext ctx{opts, {}, {}};
  runFoldConstants(m, ctx);
}

TEST(FoldConstants, AlgorithmGraphAndBoundState) {
  TrainingModel t;
  // A shape computation in the algorithm folds; the bound step counter
  // (int64 state) must not be folded into "step + 1".
  Graph &alg = *t.alg;
  Value *shape = alg.addInitializer("shape", Tensor::fromInt64s({1}, {2}));
  shape->isState = false;
  Node *sh = alg.createNode("Shape", {alg.findValue("x")}, 1, "shape_of_x");
  Node *eq = alg.createNode("Equal", {sh->output(0), shape}, 1, "eq");
  alg.addOutput(eq->output(0));
  fold(t.m);
  EXPECT_EQ(alg.findValue("inc_out")->producer()->opType(), "Add");
  Value *folded = alg.findValue("eq_out");
  ASSERT_TRUE(folded && folded->isInitializer());
  EXPECT_FALSE(folded->isState);
  EXPECT_EQ(folded->typeString(), "bool[1]");
  EXPECT_EQ(folded->initializer()->getAsDouble(0), 1.0);
  EXPECT_EQ(verifyError(t.m), "");
}

TEST(FoldConstants, KeepsInitializersTheMetadataNames) {
  ReluChain c;
  Value *seed =
      c.m.graph->addInitializer("seed", Tensor::scalar(DType::F32, 1));
  seed->isState = false;
  Value *unused =
      c.m.graph->addInitializer("unused", Tensor::scalar(DType::F32, 1));
  unused->isState = false;
  c.m.setMeta("mpc.grad_seed", "seed");
  fold(c.m);
  EXPECT_TRUE(c.m.graph->findValue("seed")->isInitializer());
  EXPECT_FALSE(c.m.graph->findValue("unused") &&
               c.m.graph->findValue("unused")->isInitializer());
}

} // namespace
