// Unit tests for AutocastNodeIndex (passes/autocast_node_index.h).
//
// Every listed node is found at its position, whatever its outputs (none,
// an omitted first output); nodes added after the index, or left out of the
// list, are not found.
#include "passes/autocast_node_index.h"

#include <gtest/gtest.h>

using namespace mpc;

namespace {

TEST(AutocastNodeIndex, FindsEveryListedNodeAtItsPosition) {
  Graph g;
  Value *x = g.addInput("x", DType::F32, {2});
  Node *a = g.createNode("Relu", {x}, 1, "a");
  Node *b = g.createNode("Split", {a->output(0)}, 2, "b");
  Node *sink = g.createNode("Sink", {b->output(1)}, 0, "sink", "test");
  Node *c = g.createNode("Neg", {b->output(0)}, 1, "c");
  std::vector<Node *> nodes = g.nodeList();
  AutocastNodeIndex index(g, nodes);
  for (size_t k = 0; k < nodes.size(); ++k)
    EXPECT_EQ(index.find(nodes[k]), k);
  EXPECT_EQ(index.find(sink), 2u);
  EXPECT_EQ(index.find(c), 3u);
}

TEST(AutocastNodeIndex, NodeWithOmittedFirstOutputIsFoundByItsSecond) {
  Graph g;
  Value *x = g.addInput("x", DType::F32, {2});
  Node *a = g.createNode("Relu", {x}, 1, "a");
  // The first output omitted: the node is indexed by its second.
  Node *d = g.createNodeWithOutputs("Dropout", {a->output(0)},
                                    std::vector<std::string>{"", "mask"}, "d");
  ASSERT_EQ(d->output(0), nullptr);
  std::vector<Node *> nodes = g.nodeList();
  AutocastNodeIndex index(g, nodes);
  EXPECT_EQ(index.find(a), 0u);
  EXPECT_EQ(index.find(d), 1u);
}

TEST(AutocastNodeIndex, NodesAddedLaterOrNotListedAreNotFound) {
  Graph g;
  Value *x = g.addInput("x", DType::F32, {2});
  Node *a = g.createNode("Relu", {x}, 1, "a");
  Node *b = g.createNode("Neg", {a->output(0)}, 1, "b");
  Node *quiet = g.createNode("Sink", {x}, 0, "quiet", "test");
  std::vector<Node *> listed = {a};
  AutocastNodeIndex index(g, listed);
  EXPECT_EQ(index.find(a), 0u);
  EXPECT_EQ(index.find(b), AutocastNodeIndex::npos);
  EXPECT_EQ(index.find(quiet), AutocastNodeIndex::npos);
  Node *later = g.createNode("Cast", {a->output(0)}, 1, "later", "", b);
  Node *laterSink = g.createNode("Sink", {x}, 0, "later_sink", "test");
  EXPECT_EQ(index.find(later), AutocastNodeIndex::npos);
  EXPECT_EQ(index.find(laterSink), AutocastNodeIndex::npos);
}

} // namespace
