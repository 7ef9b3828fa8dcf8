// Unit tests of the autocast policy table and the autocast pass.
//
// Graphs are built with Builder, typed with inferGraph, and run through
// runAutocast; the tests assert the dtype each node ends up running in, how
// many Casts exist and what they read. The lit tests in tests/lit/autocast/
// check the printed form of the same rules.
#include "ir/builder.h"
#include "ir/mpc_ops.h"
#include "passes/autocast_policy.h"
#include "passes/pass.h"
#include "passes/shape_inference.h"
#include "support/diagnostics.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

using namespace mpc;

namespace {

/// A model under construction plus the options the pass will see.
struct Fixture {
  Model model;
  CompileOptions options;
  Statistics stats;

  Graph &g() { return *model.graph; }

  Value *input(const std::string &name, std::vector<int64_t> dims,
               DType t = DType::F32) {
    return g().addInput(name, t, toDims(dims));
  }
  /// A parameter: a state initializer, as the importer makes them.
  Value *param(const std::string &name, std::vector<int64_t> dims,
               DType t = DType::F32) {
    Tensor data(t, dims);
    Value *v = g().addInitializer(name, std::move(data));
    v->isState = true;
    return v;
  }

  /// Types every value, then runs autocast with `options`.
  void run() {
    inferGraph(g(), model.opsetVersion(""));
    PassContext ctx{options, {}, {}};
    runAutocast(model, ctx);
    stats = ctx.stats;
    inferGraph(g(), model.opsetVersion("")); // still well typed
  }
};

std::vector<Node *> nodesOf(const Graph &g, const std::string &op) {
  std::vector<Node *> out;
  for (Node *n : g.nodeList())
    if (n->opType() == op)
      out.push_back(n);
  return out;
}

/// The Casts reading v.
std::vector<Node *> castsOf(const Value *v) {
  std::vector<Node *> out;
  for (const Use &u : v->uses())
    if (u.user->opType() == "Cast")
      out.push_back(u.user);
  return out;
}

DType castTarget(const Node *cast) {
  return *fromOnnxDataType(int(cast->attrInt("to", 0)));
}

Value *producerInput(Value *v, size_t i) { return v->producer()->input(i); }

// --- the policy table --------------------------------------------------------

TEST(AutocastPolicy, TableRowsAreUniqueAndExplained) {
  std::set<std::pair<std::string, std::string>> seen;
  for (const PolicyEntry &e : autocastPolicyTable()) {
    EXPECT_TRUE(seen.insert({e.domain, e.op}).second)
        << "duplicate row " << e.domain << "." << e.op;
    EXPECT_GT(std::string(e.reason).size(), 5u) << e.op << " has no reason";
    if (e.castCommutes) {
      EXPECT_EQ(e.cls, PrecisionClass::Follow) << e.op;
    }
  }
}

TEST(AutocastPolicy, ClassesFollowTheReferenceLists) {
  auto cls = [](const char *domain, const char *op) {
    const PolicyEntry *e = findPolicyEntry(domain, op);
    EXPECT_NE(e, nullptr) << op;
    return e ? e->cls : PrecisionClass::Keep;
  };
  for (const char *op : {"Gemm", "MatMul", "Conv"})
    EXPECT_EQ(cls("", op), PrecisionClass::Lower) << op;
  for (const char *op :
       {"Softmax", "LogSoftmax", "SoftmaxCrossEntropyLoss",
        "NegativeLogLikelihoodLoss", "ReduceMean", "ReduceSum", "Exp", "Log",
        "Pow", "Sqrt", "BatchNormalization", "LayerNormalization"})
    EXPECT_EQ(cls("", op), PrecisionClass::Fp32) << op;
  for (const char *op :
       {"SoftmaxGrad", "LogSoftmaxGrad", "SoftmaxCrossEntropyLossGrad",
        "NegativeLogLikelihoodLossGrad", "ReduceGrad", "SumToShape"})
    EXPECT_EQ(cls(kMpcDomain, op), PrecisionClass::Fp32) << op;
  for (const char *op :
       {"Relu", "Add", "Sub", "Mul", "Div", "Neg", "Identity", "Reshape",
        "Flatten", "Transpose", "Squeeze", "Unsqueeze", "Concat", "Gather",
        "Slice", "Expand", "Tanh", "Sigmoid", "Where"})
    EXPECT_EQ(cls("", op), PrecisionClass::Follow) << op;
  EXPECT_EQ(cls(kMpcDomain, "ReluGrad"), PrecisionClass::Follow);
  for (const char *op : {"Shape", "Constant", "Cast"})
    EXPECT_EQ(cls("", op), PrecisionClass::AnyType) << op;
  for (const char *op : {"UnscaleGradients", "UpdateLossScale", "ClipGradNorm",
                         "SGD", "Adam", "IncrementStep"})
    EXPECT_EQ(cls(kMpcDomain, op), PrecisionClass::Keep) << op;
}

TEST(AutocastPolicy, OverridesApplyInOrder) {
  Graph g;
  Value *x = g.addInput("x", DType::F32, toDims({2, 2}));
  Node *mm = g.createNode("MatMul", {x, x}, 1, "fc1");
  Node *sm = g.createNode("Softmax", {x}, 1, "attn/softmax");
  Node *unknown = g.createNode("Celu", {x}, 1);
  Node *foreign = g.createNode("Thing", {x}, 1, "", "com.example");
  Node *shape = g.createNode("Shape", {x}, 1, "fc1_shape");

  AutocastPolicy plain;
  EXPECT_EQ(plain.classify(*mm), PrecisionClass::Lower);
  EXPECT_EQ(plain.classify(*sm), PrecisionClass::Fp32);
  EXPECT_EQ(plain.classify(*unknown), PrecisionClass::Fp32);
  EXPECT_EQ(plain.classify(*foreign), PrecisionClass::Keep);

  CompileOptions o;
  o.fp32Ops = {"MatMul"};
  o.fp16Ops = {"Softmax"};
  AutocastPolicy swapped = AutocastPolicy::fromOptions(o);
  EXPECT_EQ(swapped.classify(*mm), PrecisionClass::Fp32);
  EXPECT_EQ(swapped.classify(*sm), PrecisionClass::Lower);

  o.fp32Nodes = "^attn/|fc1";
  AutocastPolicy byName = AutocastPolicy::fromOptions(o);
  EXPECT_EQ(byName.classify(*sm), PrecisionClass::Fp32); // regex beats list
  EXPECT_EQ(byName.classify(*mm), PrecisionClass::Fp32);
  EXPECT_EQ(byName.classify(*shape), PrecisionClass::AnyType); // never cast
}

TEST(AutocastPolicy, BadOverridesNameTheFlagAndTheOp) {
  auto message = [](CompileOptions o) -> std::string {
    try {
      AutocastPolicy::fromOptions(o);
    } catch (const Error &e) {
      return e.what();
    }
    return "";
  };
  CompileOptions o;
  o.fp32Ops = {"MatMull"};
  EXPECT_NE(message(o).find("--fp32-ops: unknown op 'MatMull'"),
            std::string::npos)
      << message(o);
  o = {};
  o.fp16Ops = {"Adam"};
  EXPECT_NE(message(o).find("--fp16-ops: op 'Adam' is never cast"),
            std::string::npos)
      << message(o);
  o = {};
  o.fp32Ops = {"Gemm"};
  o.fp16Ops = {"Gemm"};
  EXPECT_NE(message(o).find("'Gemm' is given in both"), std::string::npos);
  o = {};
  o.fp32Nodes = "(";
  EXPECT_NE(message(o).find("--fp32-nodes: invalid regular expression"),
            std::string::npos);
  o = {};
  o.fp32Ops = {"mpc.SumToShape", "Softmax"}; // the mpc. prefix is accepted
  EXPECT_EQ(message(o), "");
}

// --- the pass
// ------------------------------------------------------------------

TEST(Autocast, SoftmaxIslandBetweenTwoMatMuls) {
  Fixture f;
  Value *x = f.input("x", {4, 8});
  Value *w = f.param("w", {8, 8});
  Builder b(f.g());
  Value *h = b.op("MatMul", {x, w}, {}, "mm1");
  Value *s = b.op("Softmax", {h}, {{"axis", Attribute::ofInt(1)}}, "sm");
  Value *y = b.op("MatMul", {s, w}, {}, "mm2");
  f.g().addOutput(y);
  f.run();

  EXPECT_EQ(h->dtype, DType::F16);
  EXPECT_EQ(s->dtype, DType::F32);
  EXPECT_EQ(producerInput(s, 0)->producer()->opType(), "Cast");
  EXPECT_EQ(producerInput(s, 0)->dtype, DType::F32);
  // x, w, h up, s down, and the output back to fp32.
  EXPECT_EQ(nodesOf(f.g(), "Cast").size(), 5u);
  EXPECT_EQ(f.stats["casts-inserted"], 5);
  EXPECT_EQ(f.stats["nodes-lowered"], 2);
  ASSERT_EQ(f.g().outputs().size(), 1u);
  EXPECT_EQ(f.g().outputs()[0]->dtype, DType::F32);
  EXPECT_EQ(f.g().outputs()[0]->name(), "mm2_out");
  EXPECT_EQ(*f.model.meta("mpc.precision"), "fp16");
}

TEST(Autocast, ParameterUsedTwiceHasOneSharedCast) {
  Fixture f;
  Value *x = f.input("x", {4, 8});
  Value *w = f.param("w", {8, 8});
  Value *bias = f.param("b", {8});
  Builder b(f.g());
  Value *h = b.op("Gemm", {x, w, bias});
  Value *r = b.op("Relu", {h});
  Value *y = b.op("Gemm", {r, w, bias});
  f.g().addOutput(y);
  f.run();

  ASSERT_EQ(castsOf(w).size(), 1u);
  ASSERT_EQ(castsOf(bias).size(), 1u);
  Value *w16 = castsOf(w)[0]->output(0);
  EXPECT_EQ(w16->dtype, DType::F16);
  EXPECT_EQ(w16->uses().size(), 2u);
  EXPECT_EQ(w->dtype, DType::F32); // the master stays fp32
  EXPECT_EQ(r->dtype, DType::F16);
}

TEST(Autocast, DataMovementBetweenMatMulsAddsNoCasts) {
  Fixture f;
  Value *x = f.input("x", {4, 8});
  Value *w = f.input("w", {8, 8});
  Builder b(f.g());
  Value *h = b.op("MatMul", {x, w});
  Value *r = b.op("Reshape", {h, b.int64s({8, 4})});
  Value *t = b.op("Transpose", {r}, {{"perm", Attribute::ofInts({1, 0})}});
  Value *u = b.op("Unsqueeze", {t, b.int64s({0})});
  Value *sq = b.op("Squeeze", {u, b.int64s({0})});
  Value *y = b.op("MatMul", {sq, r});
  f.g().addOutput(y);
  f.run();

  for (Value *v : {h, r, t, u, sq})
    EXPECT_EQ(v->dtype, DType::F16) << v->name();
  // x and w down, y back up: nothing in between.
  EXPECT_EQ(nodesOf(f.g(), "Cast").size(), 3u);
}

TEST(Autocast, ConstantsConvertAtCompileTime) {
  Fixture f;
  Value *x = f.input("x", {4, 8});
  Value *w = f.input("w", {8, 8});
  Builder b(f.g());
  Value *half = b.scalar(DType::F32, 0.5, "half"); // non-state initializer
  Value *two = b.scalar(DType::F32, 2.0, "two");
  Value *h = b.op("MatMul", {x, w});
  Value *m = b.op("Mul", {h, half});
  Value *m2 = b.op("Mul", {m, two});
  Value *s = b.op("Softmax", {m2}, {{"axis", Attribute::ofInt(1)}});
  Value *y = b.op("Div", {s, two});
  f.g().addOutput(y);
  f.run();

  // Only fp16 users: converted in place, no Cast, no copy.
  EXPECT_EQ(half->dtype, DType::F16);
  EXPECT_EQ(half->initializer()->dtype, DType::F16);
  EXPECT_TRUE(castsOf(half).empty());
  EXPECT_EQ(m->dtype, DType::F16);
  // Users in both dtypes: the fp32 user keeps `two`, the fp16 one a copy.
  EXPECT_EQ(two->dtype, DType::F32);
  Value *twoCopy = m2->producer()->input(1);
  EXPECT_NE(twoCopy, two);
  EXPECT_TRUE(twoCopy->isInitializer());
  EXPECT_FALSE(twoCopy->isState);
  EXPECT_EQ(twoCopy->dtype, DType::F16);
  EXPECT_EQ(twoCopy->initializer()->getAsDouble(0), 2.0);
  EXPECT_EQ(f.stats["constants-converted"], 2);
  EXPECT_TRUE(castsOf(two).empty());
}

TEST(Autocast, ConstantNodeIsConvertedInPlace) {
  Fixture f;
  Value *x = f.input("x", {4, 8});
  Value *w = f.input("w", {8, 8});
  Builder b(f.g());
  Node *k = b.node("Constant", {}, 1, {{"value_float", Attribute::ofFloat(3)}});
  Value *h = b.op("MatMul", {x, w});
  Value *y = b.op("Add", {h, k->output(0)});
  f.g().addOutput(y);
  f.run();

  EXPECT_EQ(k->output(0)->dtype, DType::F16);
  EXPECT_FALSE(k->hasAttr("value_float"));
  ASSERT_TRUE(k->hasAttr("value"));
  EXPECT_EQ(k->attr("value")->t->dtype, DType::F16);
  EXPECT_EQ(y->producer()->opType(), "Add");
  EXPECT_EQ(f.g().outputs()[0]->producer()->opType(), "Cast"); // cast back
  EXPECT_EQ(nodesOf(f.g(), "Cast").size(), 3u);
}

TEST(Autocast, FollowPromotesToTheWidestInput) {
  Fixture f;
  Value *x = f.input("x", {4, 8});
  Value *w = f.param("w", {8, 8});
  Value *scale = f.input("scale", {}); // rank 0: does not promote
  Builder b(f.g());
  Value *z = b.op("MatMul", {x, w});
  Value *scaled = b.op("Mul", {z, scale});
  Value *y = b.op("Add", {scaled, x}); // a residual: x is computed, fp32
  f.g().addOutput(y);
  f.run();

  EXPECT_EQ(scaled->dtype, DType::F16);
  EXPECT_EQ(castsOf(scale).size(), 1u);
  // The fp32 residual tensor wins over the fp16 activation, as in PyTorch.
  EXPECT_EQ(y->dtype, DType::F32);
  EXPECT_EQ(producerInput(y, 0)->producer()->opType(), "Cast");
}

TEST(Autocast, FollowParametersAdaptToComputedInputs) {
  Fixture f;
  Value *x = f.input("x", {4, 8});
  Value *w = f.param("w", {8, 3});
  Value *bias = f.param("b", {3});
  Value *gain = f.param("g", {3});
  Builder b(f.g());
  Value *z = b.op("MatMul", {x, w});
  // The exporter's Linear: MatMul + Add(bias). In PyTorch the bias joins
  // the fp16 product, so the fp32 parameter must not widen it back.
  Value *y = b.op("Add", {z, bias});
  // A node that reads only parameters keeps their dtype.
  Value *gb = b.op("Mul", {gain, bias});
  f.g().addOutput(b.op("Relu", {y}));
  f.g().addOutput(gb);
  f.run();

  EXPECT_EQ(y->dtype, DType::F16);
  ASSERT_EQ(castsOf(bias).size(), 1u); // one runtime Cast, fp32 master kept
  EXPECT_EQ(bias->dtype, DType::F32);
  EXPECT_EQ(gb->dtype, DType::F32);
  EXPECT_EQ(gb->producer()->input(1), bias); // reads the fp32 parameter
}

TEST(Autocast, GraphInterfaceKeepsItsTypesAndNames) {
  Fixture f;
  Value *x = f.input("x", {4, 8});
  Value *xh = f.input("xh", {4, 8}, DType::F16);
  Value *labels = f.input("labels", {4}, DType::I64);
  Value *w = f.input("w", {8, 3});
  Builder b(f.g());
  Value *logits = b.op("MatMul", {x, w}, {}, "logits");
  Value *loss = b.op("SoftmaxCrossEntropyLoss", {logits, labels}, {}, "loss");
  Value *r = b.op("Relu", {xh}, {}, "rh");
  f.g().addOutput(loss);
  f.g().addOutput(logits);
  f.g().addOutput(r);
  f.model.setMeta("mpc.loss", loss->name());
  f.run();

  EXPECT_EQ(x->dtype, DType::F32);
  EXPECT_EQ(xh->dtype, DType::F16);
  EXPECT_TRUE(castsOf(labels).empty());
  EXPECT_TRUE(castsOf(xh).empty());
  const auto &outs = f.g().outputs();
  ASSERT_EQ(outs.size(), 3u);
  EXPECT_EQ(outs[0], loss);
  EXPECT_EQ(loss->dtype, DType::F32);
  EXPECT_EQ(outs[1]->name(), "logits_out");
  EXPECT_EQ(outs[1]->dtype, DType::F32);
  EXPECT_EQ(outs[2], r);
  EXPECT_EQ(r->dtype, DType::F16);
  // The loss reads the same fp32 Cast that became the logits output.
  EXPECT_EQ(loss->producer()->input(0), outs[1]);
  EXPECT_EQ(nodesOf(f.g(), "Cast").size(), 3u);
}

TEST(Autocast, LossComputedInFp16IsCastBackUnderItsName) {
  Fixture f;
  Value *x = f.input("x", {1, 8});
  Value *w = f.input("w", {8, 1});
  Builder b(f.g());
  Value *z = b.op("MatMul", {x, w});
  Value *loss = b.op("Reshape", {z, b.int64s({})}, {}, "loss");
  Value *twice = b.op("Add", {loss, loss});
  f.g().addOutput(twice);
  f.model.setMeta("mpc.loss", "loss_out");
  f.run();

  Value *named = f.g().findValue("loss_out");
  ASSERT_NE(named, nullptr);
  EXPECT_EQ(named->dtype, DType::F32);
  EXPECT_EQ(named->producer()->opType(), "Cast");
  EXPECT_EQ(loss->dtype, DType::F16); // the fp16 value, renamed
  EXPECT_NE(loss->name(), "loss_out");
}

TEST(Autocast, WidenedGradientOutputStaysWide) {
  // The gradient of an fp16 parameter summed by the fp32 SumToShape: later
  // passes want fp32 gradients, so it is not rounded back to fp16.
  Fixture f;
  f.model.setOpsetVersion(kMpcDomain, 1);
  Value *dy = f.input("dy", {4, 3}, DType::F16);
  Value *bias = f.param("b", {3}, DType::F16);
  Builder b(f.g());
  Value *grad = b.mpcOp("SumToShape", {dy, bias}, {}, "b_grad");
  Value *other = b.op("Relu", {dy}, {}, "not_a_grad");
  Value *wide = b.op("Softmax", {other}, {}, "wide");
  f.g().addOutput(grad);
  f.g().addOutput(wide);
  f.model.setMeta("mpc.grads", grad->name());
  f.run();

  EXPECT_EQ(f.g().outputs()[0], grad);
  EXPECT_EQ(grad->dtype, DType::F32);
  EXPECT_TRUE(castsOf(bias).empty()); // X is read for its shape only
  // Any other output is cast back to the dtype it had.
  EXPECT_EQ(f.g().outputs()[1]->dtype, DType::F16);
  EXPECT_EQ(f.g().outputs()[1]->name(), "wide_out");
}

TEST(Autocast, GradSeedGetsARuntimeCast) {
  // loss-scale replaces every use of the seed at run time, so the seed must
  // stay one value with all its uses, not a compile-time copy.
  Fixture f;
  Value *x = f.input("x", {4, 8});
  Value *w = f.input("w", {8, 8});
  Builder b(f.g());
  Value *seed = b.scalar(DType::F32, 1.0, "seed");
  f.model.setMeta("mpc.grad_seed", seed->name());
  Value *h = b.op("MatMul", {x, w});
  Value *y = b.op("Mul", {h, seed});
  f.g().addOutput(y);
  f.run();

  EXPECT_EQ(seed->dtype, DType::F32);
  ASSERT_EQ(castsOf(seed).size(), 1u);
  EXPECT_EQ(castTarget(castsOf(seed)[0]), DType::F16);
}

TEST(Autocast, KeepOpsReadTheirOriginalTypes) {
  Fixture f;
  f.model.setOpsetVersion(kMpcDomain, 1);
  Value *x = f.input("x", {8, 8});
  Value *w = f.param("w", {8, 8});
  Builder b(f.g());
  Value *grad = b.op("MatMul", {x, w}, {}, "grad");
  Value *found = b.constant(Tensor(DType::Bool, {}), "found_inf");
  Value *step = f.param("step", {}, DType::I64);
  Value *updated = b.mpcOp("SGD", {found, step, w, grad},
                           {{"lr", Attribute::ofFloat(0.1f)}});
  f.g().addOutput(updated);
  f.run();

  Node *sgd = updated->producer();
  EXPECT_EQ(sgd->input(2), w);
  EXPECT_EQ(sgd->input(3)->dtype, DType::F32);
  EXPECT_EQ(sgd->input(3)->producer()->opType(), "Cast");
  EXPECT_EQ(grad->dtype, DType::F16);
  EXPECT_EQ(updated->dtype, DType::F32);
}

TEST(Autocast, ExistingCastIsReusedAndMovedUp) {
  Fixture f;
  Value *x = f.input("x", {4, 8});
  Value *w = f.input("w", {8, 8});
  Builder b(f.g());
  Value *h = b.op("MatMul", {x, w});
  Value *x16 = b.cast(x, DType::F16, "x16");
  f.g().addOutput(h);
  f.g().addOutput(x16);
  f.run();

  EXPECT_EQ(castsOf(x).size(), 1u);
  Node *mm = nodesOf(f.g(), "MatMul")[0];
  EXPECT_EQ(mm->input(0), x16);
  // The reused Cast now comes before its new user.
  bool castFirst = false;
  for (Node *n : f.g().nodeList()) {
    if (n == mm)
      break;
    castFirst = castFirst || n == x16->producer();
  }
  EXPECT_TRUE(castFirst);
}

TEST(Autocast, WideningCastIsReadAtItsSource) {
  Fixture f;
  Value *xh = f.input("xh", {4, 8}, DType::F16);
  Value *w = f.input("w", {8, 8}, DType::F16);
  Builder b(f.g());
  Value *u = b.cast(xh, DType::F32, "u");
  Value *w32 = b.cast(w, DType::F32, "w32");
  f.g().addOutput(b.op("MatMul", {u, w32}));
  f.run();

  Node *mm = nodesOf(f.g(), "MatMul")[0];
  EXPECT_EQ(mm->input(0), xh);
  EXPECT_EQ(mm->input(1), w);
  EXPECT_TRUE(castsOf(u).empty());
}

TEST(Autocast, TransposeOfAWeightSharesTheWeightsCast) {
  // The MatMul backward pattern: dX = dY * W^T next to the forward X * W.
  Fixture f;
  Value *x = f.input("x", {4, 8});
  Value *dy = f.input("dy", {4, 8});
  Value *w = f.param("w", {8, 8});
  Builder b(f.g());
  Value *y = b.op("MatMul", {x, w});
  Value *wt = b.op("Transpose", {w}, {{"perm", Attribute::ofInts({1, 0})}});
  Value *dx = b.op("MatMul", {dy, wt});
  f.g().addOutput(y);
  f.g().addOutput(dx);
  f.run();

  ASSERT_EQ(castsOf(w).size(), 1u);
  EXPECT_EQ(wt->dtype, DType::F16);
  EXPECT_EQ(wt->producer()->input(0), castsOf(w)[0]->output(0));
  EXPECT_TRUE(castsOf(wt).empty());
}

TEST(Autocast, Bf16UsesTheSamePolicy) {
  Fixture f;
  f.options.precision = DType::BF16;
  Value *x = f.input("x", {4, 8});
  Value *w = f.input("w", {8, 8});
  Builder b(f.g());
  Value *h = b.op("MatMul", {x, w});
  Value *s = b.op("Softmax", {h}, {{"axis", Attribute::ofInt(1)}});
  f.g().addOutput(s);
  f.run();

  EXPECT_EQ(h->dtype, DType::BF16);
  EXPECT_EQ(s->dtype, DType::F32);
  for (Node *c : castsOf(x))
    EXPECT_EQ(castTarget(c), DType::BF16);
  EXPECT_EQ(*f.model.meta("mpc.precision"), "bf16");
}

TEST(Autocast, Fp32PrecisionChangesNothing) {
  Fixture f;
  f.options.precision = DType::F32;
  Value *x = f.input("x", {4, 8});
  Value *w = f.input("w", {8, 8});
  Builder b(f.g());
  Value *h = b.op("MatMul", {x, w});
  f.g().addOutput(h);
  size_t before = f.g().numNodes();
  f.run();

  EXPECT_EQ(f.g().numNodes(), before);
  EXPECT_EQ(h->dtype, DType::F32);
  EXPECT_EQ(f.stats["casts-inserted"], 0);
}

TEST(Autocast, Fp64NodesAreLeftAlone) {
  Fixture f;
  Value *x = f.input("x", {4, 8}, DType::F64);
  Value *w = f.input("w", {8, 8}, DType::F64);
  Builder b(f.g());
  Value *h = b.op("MatMul", {x, w});
  f.g().addOutput(h);
  f.run();

  EXPECT_EQ(h->dtype, DType::F64);
  EXPECT_TRUE(nodesOf(f.g(), "Cast").empty());
}

TEST(Autocast, SecondRunChangesNothing) {
  Fixture f;
  Value *x = f.input("x", {4, 8});
  Value *w = f.param("w", {8, 8});
  Builder b(f.g());
  Value *h = b.op("MatMul", {x, w});
  Value *s = b.op("Softmax", {h}, {{"axis", Attribute::ofInt(1)}});
  Value *t = b.op("Transpose", {w}, {{"perm", Attribute::ofInts({1, 0})}});
  Value *y = b.op("MatMul", {s, t});
  f.g().addOutput(y);
  f.run();
  size_t nodes = f.g().numNodes();
  f.run();

  EXPECT_EQ(f.g().numNodes(), nodes);
  EXPECT_EQ(f.stats["casts-inserted"], 0);
}

TEST(Autocast, UntypedValueIsAnError) {
  Model model;
  Graph &g = *model.graph;
  Value *x = g.addInput("x", DType::F32, toDims({2, 2}));
  Node *n = g.createNode("MatMul", {x, x}, 1, "mm");
  g.addOutput(n->output(0));
  CompileOptions o;
  PassContext ctx{o, {}, {}};
  try {
    runAutocast(model, ctx);
    FAIL() << "expected an error";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("mm"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("infer-shapes"), std::string::npos);
  }
}

} // namespace
