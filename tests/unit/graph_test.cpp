// Unit tests for the graph IR (ir/graph.h).
//
// Every mutation of the API must keep the def-use lists exact (each use in a
// value's list matches one input slot, and every input slot is listed once),
// generated names must never collide with existing or imported ones, the
// topological sort must be stable and detect cycles, and clone() must be a
// deep copy that shares only initializer data.
#include "ir/graph.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>

using namespace mpc;

namespace {

/// Every value the graph can reach: inputs, initializers, node inputs and
/// outputs.
std::set<const Value *> reachableValues(const Graph &g) {
  std::set<const Value *> values(g.inputs().begin(), g.inputs().end());
  values.insert(g.initializers().begin(), g.initializers().end());
  for (const auto &n : g.nodes()) {
    for (const Value *v : n->inputs())
      if (v)
        values.insert(v);
    for (const Value *v : n->outputs())
      if (v)
        values.insert(v);
  }
  for (const Value *v : g.outputs())
    if (v)
      values.insert(v);
  return values;
}

/// Checks that use lists and producers agree exactly with the node inputs and
/// outputs. Returns "" or a description of the first mismatch.
std::string useListError(const Graph &g) {
  std::set<const Node *> inGraph;
  std::map<std::pair<const Value *, std::pair<const Node *, int>>, int>
      expected;
  for (const auto &n : g.nodes()) {
    inGraph.insert(n.get());
    for (size_t i = 0; i < n->numInputs(); ++i)
      if (n->input(i))
        ++expected[{n->input(i), {n.get(), int(i)}}];
    for (size_t i = 0; i < n->numOutputs(); ++i) {
      const Value *o = n->output(i);
      if (o && (o->producer() != n.get() || o->producerIndex() != int(i)))
        return "output " + std::to_string(i) + " of " + n->describe() +
               " has the wrong producer";
    }
  }
  std::map<std::pair<const Value *, std::pair<const Node *, int>>, int> actual;
  for (const Value *v : reachableValues(g)) {
    for (const Use &u : v->uses()) {
      if (!inGraph.count(u.user))
        return "value '" + v->name() +
               "' lists a use by a node not in the "
               "graph";
      ++actual[{v, {u.user, u.index}}];
    }
    if (v->producer() && !inGraph.count(v->producer()))
      return "value '" + v->name() + "' has a producer not in the graph";
    if (v->owner() != &g)
      return "value '" + v->name() + "' belongs to another graph";
  }
  for (const auto &kv : expected) {
    auto it = actual.find(kv.first);
    int have = it == actual.end() ? 0 : it->second;
    if (have != kv.second)
      return "value '" + kv.first.first->name() + "' lists input " +
             std::to_string(kv.first.second.second) + " of " +
             kv.first.second.first->describe() + " " + std::to_string(have) +
             " times, expected " + std::to_string(kv.second);
  }
  for (const auto &kv : actual)
    if (!expected.count(kv.first))
      return "value '" + kv.first.first->name() + "' lists a stale use (" +
             kv.first.second.first->describe() + " input " +
             std::to_string(kv.first.second.second) + ")";
  return "";
}

#define EXPECT_USES_OK(g) EXPECT_EQ(useListError(g), "")

std::vector<std::string> nodeNames(const Graph &g) {
  std::vector<std::string> out;
  for (const auto &n : g.nodes())
    out.push_back(n->name());
  return out;
}

std::vector<Use> usesOf(const Value *v) { return v->uses(); }

TEST(GraphUses, SetInputRewiresBothValues) {
  Graph g;
  Value *x = g.addInput("x", DType::F32, {Dim(4)});
  Value *y = g.addInput("y", DType::F32, {Dim(4)});
  Node *add = g.createNode("Add", {x, x}, 1, "add");
  ASSERT_EQ(x->uses().size(), 2u);
  EXPECT_USES_OK(g);

  add->setInput(1, y);
  EXPECT_EQ(x->uses(), (std::vector<Use>{{add, 0}}));
  EXPECT_EQ(y->uses(), (std::vector<Use>{{add, 1}}));
  EXPECT_USES_OK(g);

  // Past the end: the gap is an omitted (nullptr) input.
  add->setInput(3, x);
  ASSERT_EQ(add->numInputs(), 4u);
  EXPECT_EQ(add->input(2), nullptr);
  EXPECT_EQ(x->uses().size(), 2u);
  EXPECT_USES_OK(g);

  add->setInput(0, nullptr);
  EXPECT_EQ(x->uses(), (std::vector<Use>{{add, 3}}));
  EXPECT_USES_OK(g);

  // Setting the same value again does not duplicate its use.
  add->setInput(1, y);
  EXPECT_EQ(y->uses().size(), 1u);
  EXPECT_USES_OK(g);
}

TEST(GraphUses, AddInputAndTruncateInputs) {
  Graph g;
  Value *x = g.addInput("x", DType::F32, {Dim(4)});
  Value *y = g.addInput("y", DType::F32, {Dim(4)});
  Node *n = g.createNode("Sum", {x}, 1, "sum");
  n->addInput(y);
  n->addInput(x);
  n->addInput(nullptr);
  n->addInput(y);
  EXPECT_EQ(n->numInputs(), 5u);
  EXPECT_EQ(x->uses().size(), 2u);
  EXPECT_EQ(y->uses().size(), 2u);
  EXPECT_USES_OK(g);

  // Drops (x at 2, nullptr at 3, y at 4), keeps x at 0 and y at 1.
  n->truncateInputs(2);
  EXPECT_EQ(n->numInputs(), 2u);
  EXPECT_EQ(x->uses(), (std::vector<Use>{{n, 0}}));
  EXPECT_EQ(y->uses(), (std::vector<Use>{{n, 1}}));
  EXPECT_USES_OK(g);

  n->truncateInputs(5); // no-op
  EXPECT_EQ(n->numInputs(), 2u);
  n->truncateInputs(0);
  EXPECT_TRUE(x->uses().empty());
  EXPECT_TRUE(y->uses().empty());
  EXPECT_USES_OK(g);
}

TEST(GraphUses, ReplaceAllUsesWithMovesUsesAndGraphOutputs) {
  Graph g;
  Value *x = g.addInput("x", DType::F32, {Dim(4)});
  Node *a = g.createNode("Relu", {x}, 1, "a");
  Node *b = g.createNode("Add", {a->output(0), a->output(0)}, 1, "b");
  Node *c = g.createNode("Neg", {a->output(0)}, 1, "c");
  g.addOutput(a->output(0));
  g.addOutput(b->output(0));
  Node *r = g.createNode("Sigmoid", {x}, 1, "r");
  Value *from = a->output(0), *to = r->output(0);

  g.replaceAllUsesWith(from, to);
  EXPECT_TRUE(from->uses().empty());
  EXPECT_EQ(to->uses().size(), 3u);
  EXPECT_EQ(b->input(0), to);
  EXPECT_EQ(b->input(1), to);
  EXPECT_EQ(c->input(0), to);
  EXPECT_EQ(g.outputs()[0], to);
  EXPECT_EQ(g.outputs()[1], b->output(0));
  EXPECT_FALSE(from->isGraphOutput());
  EXPECT_TRUE(to->isGraphOutput());
  EXPECT_USES_OK(g);

  // Replacing a value with itself changes nothing.
  g.replaceAllUsesWith(to, to);
  EXPECT_EQ(to->uses().size(), 3u);
  EXPECT_USES_OK(g);

  // Now a is dead and can be removed; its output is no longer findable.
  g.removeNode(a);
  EXPECT_TRUE(x->uses() == (std::vector<Use>{{r, 0}}));
  EXPECT_EQ(g.findValue("a_out"), nullptr);
  EXPECT_USES_OK(g);
}

TEST(GraphUses, ReplaceAllUsesWithAppendsTheUsesInTheirOrder) {
  // Use-list order is visible (passes walk uses in order to name and place
  // nodes): `to` keeps its own uses first, then takes from's in from's order.
  Graph g;
  Value *x = g.addInput("x", DType::F32, {Dim(4)});
  Value *y = g.addInput("y", DType::F32, {Dim(4)});
  Node *keep = g.createNode("Neg", {y}, 1, "keep");
  Node *a = g.createNode("Add", {x, y}, 1, "a");
  Node *b = g.createNode("Mul", {x, x}, 1, "b");
  Node *c = g.createNode("Sub", {y, x}, 1, "c");
  g.replaceAllUsesWith(x, y);
  EXPECT_TRUE(x->uses().empty());
  EXPECT_EQ(y->uses(),
            (std::vector<Use>{
                {keep, 0}, {a, 1}, {c, 0}, {a, 0}, {b, 0}, {b, 1}, {c, 1}}));
  EXPECT_USES_OK(g);
  // x can take uses again after losing them all.
  c->setInput(1, x);
  EXPECT_EQ(x->uses(), (std::vector<Use>{{c, 1}}));
  EXPECT_USES_OK(g);
}

TEST(GraphUses, RemoveNodeDropsItsUsesAndFreesItsNames) {
  Graph g;
  Value *x = g.addInput("x", DType::F32, {Dim(4)});
  Node *keep = g.createNode("Relu", {x}, 1, "keep");
  Node *dead = g.createNode("Add", {x, keep->output(0)}, 2, "dead");
  g.addOutput(keep->output(0));
  Value *deadOut = dead->output(0);
  EXPECT_EQ(deadOut->name(), "dead_out0");
  EXPECT_EQ(x->uses().size(), 2u);

  g.removeNode(dead);
  EXPECT_EQ(g.numNodes(), 1u);
  EXPECT_EQ(x->uses(), (std::vector<Use>{{keep, 0}}));
  EXPECT_TRUE(keep->output(0)->uses().empty());
  EXPECT_EQ(deadOut->producer(), nullptr);
  EXPECT_EQ(g.findValue("dead_out0"), nullptr);
  EXPECT_EQ(g.findValue("dead_out1"), nullptr);
  EXPECT_USES_OK(g);

  // The freed value name can be taken again exactly.
  Value *again = g.createValue("dead_out0");
  EXPECT_EQ(again->name(), "dead_out0");
  EXPECT_EQ(g.findValue("dead_out0"), again);
}

TEST(GraphUses, RemoveInitializer) {
  Graph g;
  Value *w = g.addInitializer("w", Tensor::fromFloats({2}, {1, 2}));
  Value *k = g.addInitializer("k", Tensor::fromFloats({1}, {3}));
  ASSERT_EQ(g.initializers().size(), 2u);
  g.removeInitializer(w);
  EXPECT_EQ(g.initializers(), (std::vector<Value *>{k}));
  EXPECT_FALSE(w->isInitializer());
  EXPECT_EQ(g.findValue("w"), nullptr);
  EXPECT_EQ(g.findValue("k"), k);
  EXPECT_EQ(g.uniqueValueName("w"), "w");
  Value *w2 = g.addInitializer("w", Tensor::fromFloats({1}, {5}));
  EXPECT_EQ(w2->name(), "w");
  EXPECT_EQ(g.findValue("w"), w2);

  // Removing the stale value again must not unregister the new "w".
  g.removeInitializer(w);
  EXPECT_EQ(g.findValue("w"), w2);
  EXPECT_EQ(g.initializers().size(), 2u);
  EXPECT_USES_OK(g);
}

TEST(GraphUses, MoveBeforeReordersWithoutTouchingUses) {
  Graph g;
  Value *x = g.addInput("x", DType::F32, {Dim(4)});
  Node *a = g.createNode("Relu", {x}, 1, "a");
  Node *b = g.createNode("Neg", {x}, 1, "b");
  Node *c = g.createNode("Add", {a->output(0), b->output(0)}, 1, "c");
  auto usesBefore = usesOf(x);

  g.moveBefore(b, a);
  EXPECT_EQ(nodeNames(g), (std::vector<std::string>{"b", "a", "c"}));
  g.moveBefore(b, nullptr);
  EXPECT_EQ(nodeNames(g), (std::vector<std::string>{"a", "c", "b"}));
  g.moveBefore(c, c); // before itself: no-op
  EXPECT_EQ(nodeNames(g), (std::vector<std::string>{"a", "c", "b"}));
  g.moveBefore(b, c);
  EXPECT_EQ(nodeNames(g), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(usesOf(x), usesBefore);
  EXPECT_USES_OK(g);

  // Builder-style insertion before a node lands right there.
  Node *d = g.createNode("Abs", {x}, 1, "d", "", b);
  EXPECT_EQ(nodeNames(g), (std::vector<std::string>{"a", "d", "b", "c"}));
  EXPECT_EQ(d->owner(), &g);
  EXPECT_USES_OK(g);
}

// setOp changes what a node computes in place: the node keeps its name,
// place, inputs and output value (id, name, readers, graph-output listing);
// the old op's attributes go, the node gets a new revision, and no value or
// node name is made.
TEST(GraphUses, SetOpKeepsTheNodeAndItsOutputValue) {
  Graph g;
  Value *x = g.addInput("x", DType::F32, {Dim(4), Dim(4)});
  Value *w = g.addInput("w", DType::F32, {Dim(4), Dim(4)});
  Node *t = g.createNode("Transpose", {w}, 1, "t");
  t->setAttr("perm", Attribute::ofInts({1, 0}));
  Node *r = g.createNode("Relu", {t->output(0)}, 1, "r");
  Value *out = t->output(0);
  g.addOutput(out);
  const size_t ids = g.numValueIds();
  const uint64_t revision = t->revision(), readerRevision = r->revision();

  t->setOp("FusedMatMul", "mpc");
  EXPECT_EQ(t->opType(), "FusedMatMul");
  EXPECT_EQ(t->domain(), "mpc");
  EXPECT_TRUE(t->isOp("mpc", "FusedMatMul"));
  EXPECT_TRUE(t->attributes().empty());
  EXPECT_NE(t->revision(), revision);
  EXPECT_EQ(t->name(), "t");
  EXPECT_EQ(t->output(0), out);
  EXPECT_EQ(out->producer(), t);
  EXPECT_EQ(out->name(), "t_out");
  EXPECT_TRUE(out->isLive() && out->isGraphOutput());
  EXPECT_EQ(g.findValue("t_out"), out);
  EXPECT_EQ(usesOf(out), (std::vector<Use>{{r, 0}}));
  EXPECT_EQ(r->revision(), readerRevision);
  EXPECT_EQ(g.numValueIds(), ids);
  EXPECT_EQ(nodeNames(g), (std::vector<std::string>{"t", "r"}));
  EXPECT_EQ(g.uniqueNodeName("t"), "t_1"); // no name claimed for it

  // Back to the default domain; the inputs stay until rewired.
  t->setAttr("transB", Attribute::ofInt(1));
  t->setOp("MatMul", "");
  EXPECT_TRUE(t->isOp("", "MatMul"));
  EXPECT_TRUE(t->attributes().empty());
  EXPECT_EQ(t->inputs(), (std::vector<Value *>{w}));
  t->addInput(x);
  EXPECT_EQ(usesOf(x), (std::vector<Use>{{t, 1}}));
  EXPECT_USES_OK(g);
}

TEST(GraphNames, UniqueValueNamesNeverCollide) {
  Graph g;
  EXPECT_EQ(g.uniqueValueName(""), "v");
  // Imported names that look generated.
  g.addInput("x", DType::F32, {});
  g.addInput("x_1", DType::F32, {});
  g.addInitializer("x_3", Tensor::fromFloats({1}, {0}));
  EXPECT_EQ(g.uniqueValueName("x"), "x_2");
  // uniqueValueName does not reserve.
  EXPECT_EQ(g.uniqueValueName("x"), "x_2");
  std::set<std::string> names{"x", "x_1", "x_3"};
  for (int i = 0; i < 50; ++i) {
    Value *v = g.createValue("x");
    EXPECT_TRUE(names.insert(v->name()).second) << v->name();
    EXPECT_EQ(g.findValue(v->name()), v);
  }
  for (int i = 0; i < 5; ++i) {
    Value *v = g.createValue("x_1");
    EXPECT_TRUE(names.insert(v->name()).second) << v->name();
  }
  // Node outputs go through the same names.
  g.createNodeWithOutputs("Relu", {}, {"y_out"}, "imported");
  Node *n = g.createNode("Relu", {}, 1, "y");
  EXPECT_EQ(n->output(0)->name(), "y_out_1");
  g.renameValue(n->output(0), "renamed");
  EXPECT_EQ(g.findValue("y_out_1"), nullptr);
  EXPECT_EQ(g.findValue("renamed"), n->output(0));
  EXPECT_EQ(g.uniqueValueName("renamed"), "renamed_1");
}

// New names come from the lowest free hint_<i>, i >= 1, also after names
// are freed (renamed, removed): the floor that spares the search from
// starting at 1 each time (a fan-out of 100,000 gradient parts) must not
// change which name that is. Checked against the search from 1 over a
// random run of creations, renames, imported look-alikes and removals.
TEST(GraphNames, GeneratedNamesAreTheLowestFreeOnesAfterAnyHistory) {
  Graph g;
  std::mt19937 rng(7);
  auto lowestFree = [&](const std::string &hint) {
    if (!g.findValue(hint))
      return hint;
    for (int i = 1;; ++i)
      if (!g.findValue(hint + "_" + std::to_string(i)))
        return hint + "_" + std::to_string(i);
  };
  const std::vector<std::string> hints = {"a", "a_1", "b"};
  std::vector<Value *> made, imported;
  int fresh = 0;
  for (int step = 0; step < 3000; ++step) {
    const std::string &hint = hints[rng() % hints.size()];
    switch (rng() % 4) {
    case 0:
    case 1: { // a generated name
      std::string expected = lowestFree(hint);
      ASSERT_EQ(g.uniqueValueName(hint), expected) << "step " << step;
      Value *v = g.createValue(hint);
      ASSERT_EQ(v->name(), expected) << "step " << step;
      made.push_back(v);
      break;
    }
    case 2: // a generated name freed by a rename
      if (!made.empty()) {
        Value *v = made[rng() % made.size()];
        if (g.findValue(v->name()) == v)
          g.renameValue(v, "z" + std::to_string(fresh++));
      }
      break;
    case 3: { // an imported name that looks generated, later removed
      if (!imported.empty() && rng() % 2) {
        Value *v = imported[rng() % imported.size()];
        g.removeInitializer(v);
      } else {
        std::string name = hint + "_" + std::to_string(rng() % 40);
        if (!g.findValue(name))
          imported.push_back(
              g.addInitializer(name, Tensor::fromFloats({1}, {0})));
      }
      break;
    }
    }
  }
}

// createNodeWithOutputHint names its node and output exactly as
// uniqueNodeName + uniqueValueName + createNodeWithOutputs do (autodiff and
// autocast switched to it with the names unchanged), and wires the node the
// same way; createNodeWithOutputs taking its names over gives the same too.
TEST(GraphNames, OutputHintNamesAsTheTwoStepPath) {
  Graph oneStep, twoStep, moved;
  Value *x1 = oneStep.addInput("x", DType::F32, {2});
  Value *x2 = twoStep.addInput("x", DType::F32, {2});
  Value *x3 = moved.addInput("x", DType::F32, {2});
  std::mt19937 rng(11);
  const std::vector<std::string> hints{"a", "a_1", "a_1_1", "",
                                       "v", "v_1", "x",     "x_grad"};
  for (int i = 0; i < 400; ++i) {
    const std::string &nodeHint = hints[rng() % hints.size()];
    const std::string &outHint = hints[rng() % hints.size()];
    Node *a = oneStep.createNodeWithOutputHint("Relu", {x1, x1}, nodeHint,
                                               outHint, "", nullptr);
    Node *b = twoStep.createNodeWithOutputs(
        "Relu", {x2, x2},
        std::vector<std::string>{twoStep.uniqueValueName(outHint)},
        twoStep.uniqueNodeName(nodeHint));
    std::vector<std::string> names{moved.uniqueValueName(outHint)};
    std::string nodeName = moved.uniqueNodeName(nodeHint);
    Node *c = moved.createNodeWithOutputs("Relu", {x3, x3}, std::move(names),
                                          std::move(nodeName));
    ASSERT_EQ(a->name(), b->name());
    ASSERT_EQ(a->output(0)->name(), b->output(0)->name());
    ASSERT_EQ(c->name(), b->name());
    ASSERT_EQ(c->output(0)->name(), b->output(0)->name());
    EXPECT_EQ(oneStep.findValue(a->output(0)->name()), a->output(0));
    EXPECT_EQ(a->output(0)->producer(), a);
    EXPECT_EQ(a->output(0)->producerIndex(), 0);
    // Some outputs are removed again, freeing their names.
    if (rng() % 3 == 0) {
      oneStep.removeNode(a);
      twoStep.removeNode(b);
      moved.removeNode(c);
    }
  }
  EXPECT_EQ(nodeNames(oneStep), nodeNames(twoStep));
  EXPECT_EQ(nodeNames(moved), nodeNames(twoStep));
  EXPECT_EQ(x1->uses().size(), x2->uses().size());
  for (size_t i = 0; i < x1->uses().size(); ++i)
    EXPECT_EQ(x1->uses()[i].index, x2->uses()[i].index);
  // An omitted output in a list given away stays omitted.
  Node *d = moved.createNodeWithOutputs(
      "Dropout", {x3}, std::vector<std::string>{"y", ""}, std::string("drop"));
  EXPECT_EQ(d->output(1), nullptr);
  EXPECT_EQ(d->output(0)->name(), "y");
}

TEST(GraphNames, UniqueNodeNamesNeverCollideWithImportedNames) {
  Graph g;
  // Imported nodes named like generated ones.
  g.createNodeWithOutputs("Relu", {}, {"o1"}, "Relu_1");
  g.createNodeWithOutputs("Relu", {}, {"o2"}, "Relu_3");
  std::set<std::string> names{"Relu_1", "Relu_3"};
  for (int i = 0; i < 10; ++i) {
    Node *n = g.createNode("Relu", {}, 1);
    EXPECT_TRUE(names.insert(n->name()).second) << n->name();
  }
  EXPECT_TRUE(names.count("Relu"));
  EXPECT_TRUE(names.count("Relu_2"));

  // Random mix of hints that are suffixes of each other.
  std::mt19937 rng(7);
  const std::vector<std::string> hints{"a", "a_1",  "a_2",   "a_1_1",
                                       "",  "node", "node_1"};
  for (int i = 0; i < 300; ++i) {
    const std::string &h = hints[rng() % hints.size()];
    std::string name;
    if (rng() % 4 == 0) {
      // Importer path: uniqueNodeName, then an exact-name node.
      name = g.uniqueNodeName(h);
      g.createNodeWithOutputs("Relu", {}, {}, name);
    } else {
      name = g.createNode("Relu", {}, 0, h)->name();
    }
    EXPECT_TRUE(names.insert(name).second) << "duplicate node name " << name;
  }
  std::vector<std::string> all = nodeNames(g);
  std::set<std::string> distinct(all.begin(), all.end());
  EXPECT_EQ(distinct.size(), all.size());
}

// The value table's keys view each holder's own name: lookups must keep
// working while the table grows and entries are erased, for names short
// enough to live inside the Value (SSO) and long ones on the heap.
TEST(GraphNames, LookupsSurviveGrowthAndRemoval) {
  Graph g;
  auto hintOf = [](int i) {
    return i % 2 ? "l" + std::to_string(i)
                 : "layers." + std::to_string(i) + ".attention.query.weight";
  };
  std::vector<Node *> nodes;
  std::vector<Value *> outs; // values outlive their removed node
  for (int i = 0; i < 3000; ++i) {
    nodes.push_back(g.createNode("Relu", {}, 1, hintOf(i)));
    outs.push_back(nodes.back()->output(0));
  }
  for (int i = 0; i < 3000; i += 2)
    g.removeNode(nodes[size_t(i)]);
  for (int i = 0; i < 3000; ++i) {
    const std::string name = hintOf(i) + "_out"; // a separate copy
    Value *found = g.findValue(name);
    if (i % 2 == 0) {
      EXPECT_EQ(found, nullptr) << name;
      EXPECT_FALSE(outs[size_t(i)]->isLive()) << name;
    } else {
      EXPECT_EQ(found, outs[size_t(i)]) << name;
      EXPECT_TRUE(found && found->isLive()) << name;
    }
  }
  // A freed name is given out again as it is, a taken one gets a suffix.
  EXPECT_EQ(g.createValue(hintOf(0) + "_out")->name(), hintOf(0) + "_out");
  EXPECT_EQ(g.createValue(hintOf(1) + "_out")->name(), hintOf(1) + "_out_1");
  // A view that is not a whole string (no terminating NUL) finds too.
  const std::string longer = "l1_out_and_more";
  EXPECT_EQ(g.findValue(std::string_view(longer).substr(0, 6)), outs[1]);
  EXPECT_EQ(g.findValue(std::string_view(longer).substr(0, 5)), nullptr);
}

// Renaming moves the entry to the new name (short to long and back), and a
// value that takes over a name (a pass that broke the unique-name rule) is
// the one findValue returns, until it is renamed away.
TEST(GraphNames, RenameAndTakeOverKeepTheTableExact) {
  Graph g;
  Value *v = g.createValue("a");
  const std::string longName(100, 'n');
  g.renameValue(v, longName);
  for (int i = 0; i < 1000; ++i) // grow the table: entries are rehashed
    g.createValue("filler");
  EXPECT_EQ(g.findValue("a"), nullptr);
  EXPECT_EQ(g.findValue(longName), v);
  g.renameValue(v, "b");
  EXPECT_EQ(g.findValue(longName), nullptr);
  EXPECT_EQ(g.findValue("b"), v);
  EXPECT_EQ(g.createValue(longName)->name(), longName);

  Node *first = g.createNodeWithOutputs("Relu", {}, {"dup"}, "first");
  Node *second = g.createNodeWithOutputs("Relu", {}, {"dup"}, "second");
  Value *older = first->output(0), *newer = second->output(0);
  EXPECT_FALSE(older->isLive());
  EXPECT_TRUE(newer->isLive());
  EXPECT_EQ(g.findValue("dup"), newer);
  g.renameValue(newer, "moved");
  EXPECT_EQ(g.findValue("moved"), newer);
  EXPECT_EQ(g.findValue("dup"), nullptr);
  EXPECT_EQ(older->name(), "dup");
  EXPECT_EQ(g.createValue("dup")->name(), "dup");
}

// Generated names are exactly base, base_1, base_2, ... in order, while the
// node-name table grows under them (its count for a base is kept across
// the growth).
TEST(GraphNames, NodeNamesCountOnWhileTheTableGrows) {
  Graph g;
  for (int i = 0; i < 2000; ++i) {
    std::string expected = i ? "h_" + std::to_string(i) : "h";
    EXPECT_EQ(g.createNode("Relu", {}, 0, "h")->name(), expected);
    EXPECT_EQ(g.uniqueNodeName("d" + std::to_string(i)),
              "d" + std::to_string(i));
    EXPECT_EQ(g.createNode("Neg", {}, 1)->name(),
              i ? "Neg_" + std::to_string(i) : "Neg");
  }
  // An imported name in the way is skipped, and the count goes on after it.
  g.createNodeWithOutputs("Relu", {}, {}, "h_2001");
  EXPECT_EQ(g.uniqueNodeName("h"), "h_2000");
  EXPECT_EQ(g.uniqueNodeName("h"), "h_2002");
  EXPECT_EQ(g.uniqueNodeName(""), "node");
  EXPECT_EQ(g.uniqueNodeName(""), "node_1");
}

TEST(GraphSort, KeepsAValidOrder) {
  Graph g;
  Value *x = g.addInput("x", DType::F32, {Dim(4)});
  // Two interleaved independent chains, already in a valid order.
  Node *b1 = g.createNode("Neg", {x}, 1, "b1");
  Node *a1 = g.createNode("Relu", {x}, 1, "a1");
  Node *a2 = g.createNode("Relu", {a1->output(0)}, 1, "a2");
  Node *b2 = g.createNode("Neg", {b1->output(0)}, 1, "b2");
  g.createNode("Add", {a2->output(0), b2->output(0)}, 1, "join");
  auto before = nodeNames(g);
  EXPECT_TRUE(g.topologicalSort());
  EXPECT_EQ(nodeNames(g), before);
  EXPECT_USES_OK(g);
}

TEST(GraphSort, FixesAReversedChain) {
  Graph g;
  Value *x = g.addInput("x", DType::F32, {Dim(4)});
  std::vector<Node *> chain;
  Value *cur = x;
  for (int i = 0; i < 6; ++i) {
    chain.push_back(g.createNode("Relu", {cur}, 1, "n" + std::to_string(i)));
    cur = chain.back()->output(0);
  }
  // A node using the same value twice counts both uses.
  Node *sq = g.createNode("Mul", {cur, cur}, 1, "sq");
  g.addOutput(sq->output(0));
  // Reverse the list: sq, n5, ..., n0.
  for (Node *n : chain)
    g.moveBefore(n, g.nodes().front().get());
  g.moveBefore(sq, g.nodes().front().get());
  EXPECT_EQ(nodeNames(g), (std::vector<std::string>{"sq", "n5", "n4", "n3",
                                                    "n2", "n1", "n0"}));
  EXPECT_TRUE(g.topologicalSort());
  EXPECT_EQ(nodeNames(g), (std::vector<std::string>{"n0", "n1", "n2", "n3",
                                                    "n4", "n5", "sq"}));
  EXPECT_USES_OK(g);
}

TEST(GraphSort, MovesOnlyWhatMustMove) {
  Graph g;
  Value *x = g.addInput("x", DType::F32, {Dim(4)});
  Node *a = g.createNode("Relu", {x}, 1, "A");
  Node *b = g.createNode("Neg", {a->output(0)}, 1, "B");
  Node *c = g.createNode("Abs", {b->output(0)}, 1, "C");
  g.createNode("Sigmoid", {x}, 1, "D");
  g.moveBefore(c, a); // C, A, B, D: C is too early
  EXPECT_TRUE(g.topologicalSort());
  EXPECT_EQ(nodeNames(g), (std::vector<std::string>{"A", "B", "C", "D"}));
}

TEST(GraphSort, DetectsACycleAndLeavesTheOrder) {
  Graph g;
  Value *x = g.addInput("x", DType::F32, {Dim(4)});
  Node *first = g.createNode("Add", {x}, 1, "first");
  Node *second = g.createNode("Relu", {first->output(0)}, 1, "second");
  g.createNode("Neg", {x}, 1, "free");
  first->addInput(second->output(0)); // first <-> second
  auto before = nodeNames(g);
  EXPECT_FALSE(g.topologicalSort());
  EXPECT_EQ(nodeNames(g), before);
  EXPECT_USES_OK(g);

  Graph self;
  Value *y = self.addInput("y", DType::F32, {});
  Node *loop = self.createNode("Add", {y}, 1, "loop");
  loop->addInput(loop->output(0));
  EXPECT_FALSE(self.topologicalSort());
}

/// A small graph with every kind of value and an omitted input and output.
struct Sample {
  Graph g{"sample"};
  Value *x, *w, *c, *h, *y;
  Node *gemm, *drop;
  Sample() {
    x = g.addInput("x", DType::F32, {Dim::symbolic("N"), Dim(3)});
    w = g.addInitializer("w", Tensor::fromFloats({2, 3}, {1, 2, 3, 4, 5, 6}));
    w->isState = true;
    c = g.addInitializer("c", Tensor::fromInt64s({1}, {7}));
    gemm = g.createNode("Gemm", {x, w}, 1, "gemm");
    gemm->setAttr("transB", Attribute::ofInt(1));
    gemm->setAttr("alpha", Attribute::ofFloat(0.5f));
    h = gemm->output(0);
    h->setType(DType::F32, {Dim::symbolic("N"), Dim(2)});
    drop = g.createNodeWithOutputs("Dropout", {h, nullptr, nullptr}, {"y", ""},
                                   "drop");
    drop->setAttr("seed", Attribute::ofInt(3));
    drop->setAttr("t", Attribute::ofTensor(Tensor::fromFloats({1}, {9})));
    y = drop->output(0);
    g.addOutput(y);
  }
};

TEST(GraphClone, IsDeepAndSharesInitializerData) {
  Sample s;
  auto copy = s.g.clone();
  Graph &g2 = *copy;
  EXPECT_EQ(g2.name(), "sample");
  EXPECT_USES_OK(g2);
  EXPECT_USES_OK(s.g);
  EXPECT_EQ(nodeNames(g2), nodeNames(s.g));
  ASSERT_EQ(g2.inputs().size(), 1u);
  ASSERT_EQ(g2.initializers().size(), 2u);
  ASSERT_EQ(g2.outputs().size(), 1u);
  Value *x2 = g2.findValue("x"), *w2 = g2.findValue("w"),
        *h2 = g2.findValue("gemm_out"), *y2 = g2.findValue("y");
  ASSERT_TRUE(x2 && w2 && h2 && y2);
  EXPECT_NE(x2, s.x);
  EXPECT_TRUE(x2->isGraphInput());
  EXPECT_EQ(x2->typeString(), s.x->typeString());
  EXPECT_EQ(h2->typeString(), "fp32[Nx2]");
  EXPECT_TRUE(w2->isState);
  EXPECT_FALSE(g2.findValue("c")->isState);
  EXPECT_EQ(w2->initializer().get(), s.w->initializer().get());
  EXPECT_EQ(g2.outputs()[0], y2);
  EXPECT_TRUE(y2->isGraphOutput());

  Node *gemm2 = h2->producer();
  ASSERT_NE(gemm2, nullptr);
  EXPECT_NE(gemm2, s.gemm);
  EXPECT_EQ(gemm2->owner(), &g2);
  EXPECT_EQ(gemm2->input(0), x2);
  EXPECT_EQ(gemm2->input(1), w2);
  EXPECT_EQ(gemm2->attrInt("transB", 0), 1);
  EXPECT_EQ(gemm2->attrFloat("alpha", 0), 0.5f);
  Node *drop2 = y2->producer();
  ASSERT_EQ(drop2->numInputs(), 3u);
  EXPECT_EQ(drop2->input(1), nullptr);
  ASSERT_EQ(drop2->numOutputs(), 2u);
  EXPECT_EQ(drop2->output(1), nullptr);

  // Mutating the clone leaves the original alone.
  gemm2->setAttr("transB", Attribute::ofInt(0));
  gemm2->setName("renamed");
  h2->setType(DType::F16, {Dim(1)});
  x2->dims.clear();
  drop2->setInput(0, x2);
  g2.removeNode(gemm2);
  g2.renameValue(y2, "y_new");
  g2.addOutput(x2);
  g2.createNode("Relu", {w2}, 1, "extra");
  EXPECT_USES_OK(g2);

  EXPECT_EQ(s.gemm->attrInt("transB", 0), 1);
  EXPECT_EQ(s.gemm->name(), "gemm");
  EXPECT_EQ(s.h->typeString(), "fp32[Nx2]");
  EXPECT_EQ(s.x->typeString(), "fp32[Nx3]");
  EXPECT_EQ(s.drop->input(0), s.h);
  EXPECT_EQ(s.h->uses(), (std::vector<Use>{{s.drop, 0}}));
  EXPECT_EQ(s.w->uses(), (std::vector<Use>{{s.gemm, 1}}));
  EXPECT_EQ(s.g.findValue("y"), s.y);
  EXPECT_EQ(s.g.outputs().size(), 1u);
  EXPECT_EQ(s.g.numNodes(), 2u);
  EXPECT_USES_OK(s.g);

  // Initializer data is shared by design (the clone is for analysis copies).
  EXPECT_EQ(s.w->initializer().use_count(), 2);
}

TEST(GraphClone, CopiesUseListsInOrderAndSizedOnce) {
  Graph g;
  Value *x = g.addInput("x", DType::F32, {Dim(4)});
  Node *a = g.createNode("Relu", {x}, 1, "a");
  Node *b = g.createNode("Add", {a->output(0), x}, 1, "b");
  Node *c = g.createNode("Mul", {x, a->output(0)}, 1, "c");
  b->setInput(1, a->output(0)); // the original's order is not input order
  b->setInput(1, x);
  auto copy = g.clone();
  EXPECT_USES_OK(*copy);
  auto copied = [&](const Node *n) {
    return copy->findValue(n->output(0)->name())->producer();
  };
  Value *x2 = copy->findValue("x"), *a2 = copied(a)->output(0);
  Node *b2 = copied(b), *c2 = copied(c);
  // Uses are listed in the clone's node order, each list allocated once at
  // the size it ends with.
  EXPECT_EQ(x2->uses(), (std::vector<Use>{{copied(a), 0}, {b2, 1}, {c2, 0}}));
  EXPECT_EQ(a2->uses(), (std::vector<Use>{{b2, 0}, {c2, 1}}));
  EXPECT_EQ(x2->uses().capacity(), 3u);
  EXPECT_EQ(a2->uses().capacity(), 2u);
  EXPECT_TRUE(b2->output(0)->uses().empty());
}

TEST(GraphClone, KeepsEdgesOfAnOutOfOrderGraph) {
  // Verify and the tools clone graphs that may not be sorted yet (a pass bug
  // to report, or an import before sorting): the clone must keep every edge.
  Sample s;
  s.g.moveBefore(s.drop, s.gemm);
  auto copy = s.g.clone();
  EXPECT_USES_OK(*copy);
  Value *h2 = copy->findValue("gemm_out");
  ASSERT_NE(h2, nullptr);
  Node *drop2 = copy->findValue("y")->producer();
  EXPECT_EQ(drop2->input(0), h2);
  EXPECT_EQ(h2->uses(), (std::vector<Use>{{drop2, 0}}));
  EXPECT_TRUE(copy->topologicalSort());
  EXPECT_EQ(nodeNames(*copy), (std::vector<std::string>{"gemm", "drop"}));
}

TEST(GraphClone, NewNamesInTheCloneAvoidTheOriginalOnes) {
  Sample s;
  auto copy = s.g.clone();
  Node *n = copy->createNode("Gemm", {}, 1, "gemm");
  EXPECT_EQ(n->name(), "gemm_1");
  EXPECT_EQ(n->output(0)->name(), "gemm_1_out");
  EXPECT_EQ(copy->createNode("Relu", {}, 1, "drop")->name(), "drop_1");
  EXPECT_EQ(copy->createValue("w")->name(), "w_1");
}

TEST(ModelHelpers, OpsetsAndMetadata) {
  Model m;
  EXPECT_EQ(m.opsetVersion(""), 17);
  EXPECT_EQ(m.opsetVersion("mpc"), -1);
  m.setOpsetVersion("mpc", 1);
  m.setOpsetVersion("", 18);
  EXPECT_EQ(m.opsetVersion(""), 18);
  EXPECT_EQ(m.opsetVersion("mpc"), 1);
  EXPECT_EQ(m.opsets.size(), 2u);

  EXPECT_EQ(m.meta("mpc.loss"), nullptr);
  m.setMeta("mpc.loss", "loss");
  m.setMeta("other", "1");
  m.setMeta("mpc.loss", "total");
  ASSERT_NE(m.meta("mpc.loss"), nullptr);
  EXPECT_EQ(*m.meta("mpc.loss"), "total");
  EXPECT_EQ(m.metadata.size(), 2u);
  EXPECT_EQ(m.metadata[0].first, "mpc.loss");
}

TEST(Attributes, TypedAccessorsFallBackToTheDefault) {
  Graph g;
  Node *n = g.createNode("Op", {}, 0, "n");
  n->setAttr("i", Attribute::ofInt(4));
  n->setAttr("f", Attribute::ofFloat(1.5f));
  n->setAttr("s", Attribute::ofString("mean"));
  n->setAttr("is", Attribute::ofInts({1, 2}));
  n->setAttr("fs", Attribute::ofFloats({0.25f}));
  EXPECT_EQ(n->attrInt("i", 0), 4);
  EXPECT_EQ(n->attrInt("f", -1), -1); // wrong kind
  EXPECT_EQ(n->attrFloat("i", 0), 4.0f);
  EXPECT_EQ(n->attrFloat("f", 0), 1.5f);
  EXPECT_EQ(n->attrString("s"), "mean");
  EXPECT_EQ(n->attrString("missing", "d"), "d");
  EXPECT_EQ(n->attrInts("is"), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(n->attrFloats("fs"), (std::vector<float>{0.25f}));
  n->setAttr("i", Attribute::ofInt(5)); // replaces in place
  EXPECT_EQ(n->attributes().front().first, "i");
  EXPECT_EQ(n->attrInt("i", 0), 5);
  n->removeAttr("i");
  EXPECT_FALSE(n->hasAttr("i"));
  EXPECT_EQ(n->attributes().size(), 4u);
}

// setAttrs is setAttr applied in order: a repeated name keeps its first place
// and its last value, on a new node and on one that has attributes already;
// an empty list leaves the node as it was.
TEST(Attributes, SetAttrsActsLikeSetAttrInOrder) {
  Graph g;
  using Attrs = std::vector<std::pair<std::string, Attribute>>;
  auto attrList = [](const Node &n) {
    std::vector<std::pair<std::string, int64_t>> out;
    for (const auto &kv : n.attributes())
      out.emplace_back(kv.first, kv.second.i);
    return out;
  };
  const std::vector<Attrs> lists = {
      {},
      {{"a", Attribute::ofInt(1)}},
      {{"a", Attribute::ofInt(1)}, {"b", Attribute::ofInt(2)}},
      {{"a", Attribute::ofInt(1)},
       {"b", Attribute::ofInt(2)},
       {"a", Attribute::ofInt(3)}},
      {{"b", Attribute::ofInt(4)}, {"c", Attribute::ofInt(5)}}};
  for (bool hasAttrs : {false, true})
    for (const Attrs &list : lists) {
      Node *bulk = g.createNode("Op", {}, 0, "bulk");
      Node *single = g.createNode("Op", {}, 0, "single");
      if (hasAttrs) {
        bulk->setAttr("b", Attribute::ofInt(9));
        single->setAttr("b", Attribute::ofInt(9));
      }
      const uint64_t before = bulk->revision();
      bulk->setAttrs(list);
      for (const auto &kv : list)
        single->setAttr(kv.first, kv.second);
      EXPECT_EQ(attrList(*bulk), attrList(*single));
      EXPECT_EQ(bulk->revision() == before, list.empty());
    }
}

// A symbol is interned: equal names share one copy (so Dims compare by
// address), the empty name is the empty symbol, and it reads back as text.
TEST(Dims, SymbolsAreInterned) {
  std::string name = "batch";
  Dim a = Dim::symbolic(name), b = Dim::symbolic("batch");
  EXPECT_EQ(a, b);
  EXPECT_EQ(&a.symbol.str(), &b.symbol.str());
  EXPECT_NE(a, Dim::symbolic("seq"));
  EXPECT_EQ(a.symbol.str(), "batch");
  EXPECT_EQ("dim '" + a.symbol + "'", "dim 'batch'");
  EXPECT_TRUE(Dim::symbolic("").symbol.empty());
  EXPECT_EQ(Dim::symbolic(""), Dim());
  EXPECT_TRUE(Dim().symbol.empty());
  EXPECT_EQ(Dim().symbol.str(), "");
  const std::string &asText = a.symbol;
  EXPECT_EQ(asText, "batch");
}

TEST(Dims, Strings) {
  EXPECT_EQ(dimsToString(Dims{}), "scalar");
  EXPECT_EQ(dimsToString(Dims{Dim::symbolic("N"), Dim(10), Dim()}), "Nx10x?");
  EXPECT_EQ(concreteDims(Dims{Dim(2), Dim(3)}),
            (std::optional<std::vector<int64_t>>{{2, 3}}));
  EXPECT_EQ(concreteDims(Dims{Dim(2), Dim::symbolic("N")}), std::nullopt);
  EXPECT_EQ(elementCount({2, 3, 4}), 24);
  EXPECT_EQ(elementCount({2, -1}), -1);
  EXPECT_EQ(elementCount({int64_t(1) << 62, 4}), -1);
  EXPECT_EQ(elementCount({0, int64_t(1) << 62, 4}), 0);
}

} // namespace
