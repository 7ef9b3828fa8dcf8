// Unit tests of the precision map: what autocast records and how it prints.
//
// A small hand-built graph (MatMul -> Softmax -> Relu, plus a Shape) goes
// through runAutocast with and without overrides; the tests assert each
// node's recorded dtype, rule and detail, the records of the Casts autocast
// inserted, the training-support records of nodes added afterwards, and the
// --explain table and --dot text made from them. tests/lit/tools/explain*.test
// and dot*.test check the same through mpc-opt on the exported models.
#include "passes/precision_map.h"

#include "ir/builder.h"
#include "passes/autocast_policy.h"
#include "passes/pass.h"
#include "passes/shape_inference.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

using namespace mpc;

namespace {

/// x[4,8] -> mm = MatMul(x, w) -> sm = Softmax -> act = Relu -> y; and a
/// Shape of x as a second output. w is a parameter (state).
struct SmallModel {
  Model model;
  CompileOptions options;

  SmallModel() {
    Graph &g = *model.graph;
    Value *x = g.addInput("x", DType::F32, toDims({4, 8}));
    Value *w = g.addInitializer("w", Tensor(DType::F32, {8, 8}));
    w->isState = true;
    Builder b(g);
    Value *h = b.op("MatMul", {x, w}, {}, "mm");
    Value *s = b.op("Softmax", {h}, {{"axis", Attribute::ofInt(-1)}}, "sm");
    g.addOutput(b.op("Relu", {s}, {}, "act"));
    g.addOutput(b.op("Shape", {x}, {}, "shape_of_x"));
  }

  void autocast() {
    inferGraph(*model.graph, model.opsetVersion(""));
    PassContext ctx{options, {}, {}};
    runAutocast(model, ctx);
  }

  Node *node(const std::string &name) const {
    for (Node *n : model.graph->nodeList())
      if (n->name() == name)
        return n;
    ADD_FAILURE() << "no node '" << name << "'";
    return nullptr;
  }

  const PrecisionRecord &record(const std::string &name) const {
    static const PrecisionRecord missing{DType::Undefined, "<missing>", ""};
    EXPECT_NE(model.precisionMap, nullptr);
    Node *n = node(name);
    const PrecisionRecord *r =
        model.precisionMap && n ? model.precisionMap->find(*n) : nullptr;
    EXPECT_NE(r, nullptr) << "no record for '" << name << "'";
    return r ? *r : missing;
  }

  std::vector<Node *> casts() const {
    std::vector<Node *> out;
    for (Node *n : model.graph->nodeList())
      if (n->opType() == "Cast")
        out.push_back(n);
    return out;
  }
};

// find() remembers where it found a node's record; the records stay keyed
// by name: a renamed node (or a new node at a freed one's address) is looked
// up again, a node renamed back finds its record again.
TEST(PrecisionMap, FindFollowsRenamesAndRemovedNodes) {
  Graph g;
  Value *x = g.addInput("x", DType::F32, {Dim(2)});
  Node *a = g.createNode("Relu", {x}, 1, "a");
  g.addOutput(a->output(0));
  PrecisionMap m(g);
  m.record(*a, {DType::F16, "policy:fp16-op", "a"});
  ASSERT_NE(m.find(*a), nullptr);
  EXPECT_EQ(m.find(*a)->detail, "a");
  a->setName("renamed");
  EXPECT_EQ(m.find(*a), nullptr);
  m.record(*a, {DType::F32, "island:Softmax", "renamed"});
  EXPECT_EQ(m.find(*a)->detail, "renamed");
  a->setName("a");
  EXPECT_EQ(m.find(*a)->detail, "a");
  g.clearOutputs();
  g.removeNode(a);
  for (int i = 0; i < 50; ++i) { // some land at the freed address
    Node *b = g.createNode("Relu", {x}, 1, "b" + std::to_string(i));
    EXPECT_EQ(m.find(*b), nullptr) << b->name();
  }
  Node *again = g.createNode("Relu", {x}, 1, "again");
  again->setName("a"); // a new node under the recorded name
  ASSERT_NE(m.find(*again), nullptr);
  EXPECT_EQ(m.find(*again)->detail, "a");
}

TEST(PrecisionMap, RecordsThePolicyRuleOfEveryNode) {
  SmallModel m;
  m.autocast();

  const PrecisionRecord &mm = m.record("mm");
  EXPECT_EQ(mm.dtype, DType::F16);
  EXPECT_EQ(mm.rule, "policy:fp16-op");
  EXPECT_EQ(mm.detail, findPolicyEntry("", "MatMul")->reason);

  const PrecisionRecord &sm = m.record("sm");
  EXPECT_EQ(sm.dtype, DType::F32);
  EXPECT_EQ(sm.rule, "island:Softmax");
  EXPECT_EQ(sm.detail, findPolicyEntry("", "Softmax")->reason);

  const PrecisionRecord &act = m.record("act");
  EXPECT_EQ(act.dtype, DType::F32);
  EXPECT_EQ(act.rule, "follow-inputs");
  EXPECT_EQ(act.detail, "its float inputs are fp32");

  const PrecisionRecord &shape = m.record("shape_of_x");
  EXPECT_EQ(shape.rule, "any-type");
  EXPECT_EQ(nodePrecision(*m.node("shape_of_x"), &shape), "int");
}

TEST(PrecisionMap, RecordsEveryInsertedCastWithWhatItFeeds) {
  SmallModel m;
  m.autocast();
  // x and w to fp16 for the MatMul, its result back to fp32 for Softmax.
  std::vector<Node *> casts = m.casts();
  ASSERT_EQ(casts.size(), 3u);
  std::vector<std::string> details;
  for (Node *c : casts) {
    const PrecisionRecord *r = m.model.precisionMap->find(*c);
    ASSERT_NE(r, nullptr) << c->name();
    EXPECT_EQ(r->rule, "cast-inserted") << c->name();
    details.push_back(r->detail);
  }
  EXPECT_EQ(details[0], "fp32->fp16 of 'x' for input of MatMul 'mm'");
  EXPECT_EQ(details[1], "fp32->fp16 of state 'w' for input of MatMul 'mm'");
  EXPECT_EQ(details[2], "fp16->fp32 of '" + m.node("mm")->output(0)->name() +
                            "' for input of Softmax 'sm'");
  EXPECT_EQ(nodePrecision(*casts[1], m.model.precisionMap->find(*casts[1])),
            "fp16");
}

TEST(PrecisionMap, OverridesNameTheFlagAndWhatTheTableSaid) {
  SmallModel fp32Ops;
  fp32Ops.options.fp32Ops = {"MatMul"};
  fp32Ops.autocast();
  EXPECT_EQ(fp32Ops.record("mm").rule, "override:--fp32-ops=MatMul");
  EXPECT_EQ(fp32Ops.record("mm").dtype, DType::F32);
  EXPECT_EQ(fp32Ops.record("mm").detail,
            "instead of the table's policy:fp16-op");
  EXPECT_TRUE(fp32Ops.casts().empty());

  SmallModel fp16Ops;
  fp16Ops.options.fp16Ops = {"Softmax"};
  fp16Ops.autocast();
  EXPECT_EQ(fp16Ops.record("sm").rule, "override:--fp16-ops=Softmax");
  EXPECT_EQ(fp16Ops.record("sm").dtype, DType::F16);
  EXPECT_EQ(fp16Ops.record("sm").detail,
            "instead of the table's island:Softmax");
  // Relu follows the fp16 Softmax now.
  EXPECT_EQ(fp16Ops.record("act").dtype, DType::F16);

  SmallModel fp32Nodes;
  fp32Nodes.options.fp32Nodes = "^m";
  fp32Nodes.autocast();
  EXPECT_EQ(fp32Nodes.record("mm").rule, "override:--fp32-nodes=^m");
  EXPECT_EQ(fp32Nodes.record("mm").detail,
            "the node name matches; instead of the table's policy:fp16-op");
  EXPECT_EQ(fp32Nodes.record("sm").rule, "island:Softmax");
}

TEST(PrecisionMap, FullPrecisionRecordsThatNothingChanged) {
  SmallModel m;
  m.options.precision = DType::F32;
  m.autocast();
  for (Node *n : m.model.graph->nodeList())
    EXPECT_EQ(m.record(n->name()).rule, "precision:fp32") << n->name();
  EXPECT_EQ(nodePrecision(*m.node("mm"), &m.record("mm")), "fp32");
}

TEST(PrecisionMap, NodesAddedAfterAutocastAreTrainingSupport) {
  SmallModel before;
  // Without a map (autocast has not run) there is nothing to add to.
  recordNodesAddedBy(before.model, "optimizer");
  EXPECT_EQ(before.model.precisionMap, nullptr);

  SmallModel m;
  m.autocast();
  Graph &g = *m.model.graph;
  Value *step = g.addInitializer("step", Tensor::fromInt64s({}, {0}));
  Builder b(g);
  Value *next =
      b.mpcOp("IncrementStep", {step, g.outputs()[0]}, {}, "increment_step");
  next->setType(DType::I64, {});
  Value *copy = b.cast(g.outputs()[0], DType::F16, "late_cast");
  (void)copy;
  recordNodesAddedBy(m.model, "optimizer");

  const PrecisionRecord &inc = m.record("increment_step");
  EXPECT_EQ(inc.rule, "training-support");
  EXPECT_EQ(inc.detail, "added by optimizer after autocast: int64 counter");
  EXPECT_EQ(nodePrecision(*m.node("increment_step"), &inc), "int");
  const PrecisionRecord &late = m.record("late_cast");
  EXPECT_EQ(late.rule, "training-support");
  EXPECT_EQ(late.detail, "added by optimizer after autocast: fp32->fp16 of '" +
                             g.outputs()[0]->name() + "'");
  // Earlier records are kept.
  EXPECT_EQ(m.record("mm").rule, "policy:fp16-op");
}

/// The lines of s.
std::vector<std::string> lines(const std::string &s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);)
    out.push_back(line);
  return out;
}

TEST(PrecisionMap, ExplainPrintsOneAlignedLinePerNodeInGraphOrder) {
  SmallModel m;
  m.autocast();
  std::vector<std::string> out = lines(explainPrecision(m.model));
  std::vector<Node *> nodes = m.model.graph->nodeList();
  // Title, header, one line per node, summary.
  ASSERT_EQ(out.size(), nodes.size() + 3);
  EXPECT_EQ(out[0], "precision map of the graph 'main' (--precision=fp16)");
  size_t opColumn = out[1].find("op");
  size_t ruleColumn = out[1].find("rule");
  ASSERT_NE(opColumn, std::string::npos);
  for (size_t i = 0; i < nodes.size(); ++i) {
    const std::string &line = out[i + 2];
    EXPECT_EQ(line.rfind(nodes[i]->name() + " ", 0), 0u) << line;
    EXPECT_EQ(line.substr(opColumn, nodes[i]->opType().size()),
              nodes[i]->opType())
        << line;
  }
  std::string mmLine = out[2 + 2]; // after the two input Casts
  EXPECT_NE(mmLine.find("fp16"), std::string::npos) << mmLine;
  EXPECT_EQ(mmLine.substr(ruleColumn, 14), "policy:fp16-op") << mmLine;
  EXPECT_EQ(out.back(), "7 nodes: 3 fp16, 3 fp32, 1 int; 3 casts inserted by "
                        "autocast");
}

TEST(PrecisionMap, ExplainSaysWhenAutocastDidNotRun) {
  SmallModel m;
  inferGraph(*m.model.graph, m.model.opsetVersion(""));
  std::string out = explainPrecision(m.model);
  EXPECT_NE(out.find("none"), std::string::npos) << out;
  EXPECT_NE(out.find("autocast did not run"), std::string::npos) << out;
}

TEST(PrecisionMap, DotColoursNodesByPrecisionAndMarksCasts) {
  SmallModel m;
  m.autocast();
  std::string dot = precisionDot(m.model);
  EXPECT_EQ(dot.find("digraph \"main\" {"), dot.find('\n') + 1) << dot;
  EXPECT_EQ(dot.substr(dot.size() - 2), "}\n");
  EXPECT_NE(dot.find("subgraph cluster_legend"), std::string::npos);
  // Node ids follow graph order: n0, n1 are the input Casts, n2 the MatMul.
  EXPECT_NE(dot.find("n2 [label=\"mm\\nMatMul\\nfp16, policy:fp16-op\", "
                     "fillcolor=\"#a1d99b\""),
            std::string::npos)
      << dot;
  EXPECT_NE(dot.find("n4 [label=\"sm\\nSoftmax\\nfp32, island:Softmax\", "
                     "fillcolor=\"#9ecae1\""),
            std::string::npos)
      << dot;
  EXPECT_NE(dot.find("shape=cds, color=\"#e6550d\", penwidth=2, "
                     "style=\"filled,bold\""),
            std::string::npos)
      << dot;
  // Edges carry dtype and shape: the fp16 copy of x into the MatMul.
  EXPECT_NE(dot.find("n0 -> n2 [label=\"fp16[4x8]\"]"), std::string::npos)
      << dot;
  // w is state, x a graph input.
  EXPECT_NE(dot.find("[label=\"w\\nfp32[8x8]\", fillcolor=\"#ffffff\", "
                     "shape=cylinder]"),
            std::string::npos)
      << dot;
}

} // namespace
