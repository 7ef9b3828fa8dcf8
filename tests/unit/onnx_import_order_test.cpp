// Unit tests for how loadModel builds a graph from a parsed model
// (passes/onnx/onnx_import.cpp): nodes that read only values defined before
// them are created with their inputs, the rest wired after every node
// exists; either way the graph (node order, each value's uses in node
// order, cycles reported) is the one wiring every node last would give.
// Also: the weights taken over from the message parsed onto an arena stay
// valid after loadModel has freed the arena.
#include "ir/tensor_pb.h"
#include "passes/onnx/onnx_io.h"
#include "support/diagnostics.h"

#include "onnx/onnx_pb.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>

using namespace mpc;

namespace {

void addFloatInput(onnx::GraphProto &g, const std::string &name) {
  auto &vi = *g.add_input();
  vi.set_name(name);
  auto &tt = *vi.mutable_type()->mutable_tensor_type();
  tt.set_elem_type(onnx::TensorProto::FLOAT);
  tt.mutable_shape()->add_dim()->set_dim_value(4);
}

void addNode(onnx::GraphProto &g, const std::string &op,
             const std::vector<std::string> &ins,
             const std::vector<std::string> &outs, const std::string &name) {
  auto &n = *g.add_node();
  n.set_op_type(op);
  n.set_name(name);
  for (const auto &i : ins)
    n.add_input(i);
  for (const auto &o : outs)
    n.add_output(o);
}

/// A model around an empty graph "g" with input x (float[4]).
onnx::ModelProto modelWithInput() {
  onnx::ModelProto p;
  p.set_ir_version(8);
  p.add_opset_import()->set_version(17);
  auto &g = *p.mutable_graph();
  g.set_name("g");
  addFloatInput(g, "x");
  return p;
}

/// loadModel of `p` written to a temporary file (removed afterwards).
std::unique_ptr<Model> loadProto(const onnx::ModelProto &p) {
  char path[] = "/tmp/mpc-import-order-XXXXXX.onnx";
  int fd = ::mkstemps(path, 5);
  EXPECT_GE(fd, 0);
  ::close(fd);
  {
    std::ofstream out(path, std::ios::binary);
    out << p.SerializeAsString();
  }
  try {
    auto m = loadModel(path);
    std::remove(path);
    return m;
  } catch (...) {
    std::remove(path);
    throw;
  }
}

/// "user:index" for each use of `name`, in the value's order.
std::vector<std::string> usesOf(const Graph &g, const std::string &name) {
  std::vector<std::string> out;
  const Value *v = g.findValue(name);
  EXPECT_NE(v, nullptr) << name;
  if (v)
    for (const Use &u : v->uses())
      out.push_back(u.user->name() + ":" + std::to_string(u.index));
  return out;
}

std::vector<std::string> nodeNames(const Graph &g) {
  std::vector<std::string> out;
  for (const auto &n : g.nodes())
    out.push_back(n->name());
  return out;
}

} // namespace

// A sorted model keeps its order exactly, even where another order would
// be valid too, and its values' uses are in node order.
TEST(OnnxImportOrder, SortedGraphKeepsItsOrder) {
  auto p = modelWithInput();
  auto &g = *p.mutable_graph();
  addNode(g, "Neg", {"x"}, {"a"}, "neg");
  addNode(g, "Relu", {"x"}, {"b"}, "relu");
  addNode(g, "Add", {"b", "a"}, {"c"}, "add");
  addNode(g, "Mul", {"x", "c"}, {"y"}, "mul");
  g.add_output()->set_name("y");
  auto m = loadProto(p);
  EXPECT_EQ(nodeNames(*m->graph),
            (std::vector<std::string>{"neg", "relu", "add", "mul"}));
  EXPECT_EQ(usesOf(*m->graph, "x"),
            (std::vector<std::string>{"neg:0", "relu:0", "mul:0"}));
  const Node *add = m->graph->findValue("c")->producer();
  ASSERT_EQ(add->inputs().size(), 2u);
  EXPECT_EQ(add->inputs()[0]->name(), "b");
  EXPECT_EQ(add->inputs()[1]->name(), "a");
}

// From the first node that reads a later node's output, nodes are wired
// after all exist: a value read by nodes before and after that point still
// lists its uses in node order (not the earlier-wired ones first), and an
// omitted optional input stays an empty slot.
TEST(OnnxImportOrder, UsesFollowNodeOrderAcrossAForwardReference) {
  auto p = modelWithInput();
  auto &g = *p.mutable_graph();
  addNode(g, "Relu", {"x"}, {"a"}, "first");
  addNode(g, "Add", {"x", "c"}, {"b"}, "forward"); // c is defined below
  addNode(g, "Neg", {"x"}, {"c"}, "producer");
  addNode(g, "Clip", {"a", "", "x"}, {"d"}, "clip");
  addNode(g, "Add", {"b", "d"}, {"y"}, "last");
  g.add_output()->set_name("y");
  auto m = loadProto(p);
  EXPECT_EQ(usesOf(*m->graph, "x"),
            (std::vector<std::string>{"first:0", "forward:0", "producer:0",
                                      "clip:2"}));
  EXPECT_EQ(nodeNames(*m->graph),
            (std::vector<std::string>{"first", "producer", "forward", "clip",
                                      "last"}));
  const Node *clip = m->graph->findValue("d")->producer();
  ASSERT_EQ(clip->inputs().size(), 3u);
  EXPECT_EQ(clip->inputs()[1], nullptr);
}

// A node reading its own output is a cycle, reported as before.
TEST(OnnxImportOrder, ANodeReadingItsOwnOutputIsACycle) {
  auto p = modelWithInput();
  auto &g = *p.mutable_graph();
  addNode(g, "Relu", {"x"}, {"a"}, "ok");
  addNode(g, "Add", {"a", "z"}, {"z"}, "self");
  g.add_output()->set_name("z");
  try {
    loadProto(p);
    ADD_FAILURE() << "a self-loop was accepted";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find(
                  "graph 'g' has a cycle through node 'self' (Add)"),
              std::string::npos)
        << e.what();
  }
}

// Weights large enough to be taken over from the parsed message keep their
// values once loadModel has freed what it parsed (the message lived on an
// arena; the raw_data buffers were moved out of it).
TEST(OnnxImportOrder, TakenOverWeightsOutliveTheParse) {
  auto p = modelWithInput();
  auto &g = *p.mutable_graph();
  const int64_t n = 4096; // 16 KiB, over kHeldRawDataBytes
  std::vector<float> values(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    values[size_t(i)] = float(i) * 0.25f - 7.0f;
  auto &w = *g.add_initializer();
  w.set_name("w");
  w.set_data_type(onnx::TensorProto::FLOAT);
  w.add_dims(n);
  w.set_raw_data(values.data(), values.size() * sizeof(float));
  addNode(g, "Identity", {"w"}, {"y"}, "id");
  g.add_output()->set_name("y");
  auto m = loadProto(p);
  const Tensor &t = *m->graph->findValue("w")->initializer();
  EXPECT_TRUE(t.bytes.isHeld());
  ASSERT_EQ(t.numel(), n);
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(t.data<float>()[i], values[size_t(i)]) << i;
}
