// writeModelFile (passes/onnx/model_file_writer.cpp) on what its shortcuts
// must still get right: attributes too long for a one-byte length, and
// nodes whose attributes differ only in a float's sign, completed one after
// the other. The file must hold exactly exportModel's serialized bytes.
#include "passes/onnx/onnx_io.h"
#include "passes/pipeline.h"

#include "onnx/onnx_pb.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <string>
#include <vector>

namespace mpc {
namespace {

const std::string kModels = std::string(MPC_SOURCE_DIR) + "/models/";

/// The bytes writeModelFile gives for `m` and the bytes of exportModel's
/// proto, serialized.
std::pair<std::string, std::string> writtenAndExpected(const Model &m) {
  char path[] = "/tmp/mpc_model_file_writer_test_XXXXXX";
  int fd = ::mkstemp(path);
  EXPECT_GE(fd, 0);
  ::close(fd);
  writeModelFile(m, path, Fsync::No);
  std::string written = readFile(path);
  ::unlink(path);
  onnx::ModelProto proto;
  exportModel(m, proto);
  std::string expected;
  EXPECT_TRUE(proto.SerializeToString(&expected));
  return {written, expected};
}

// Attributes of 128 bytes and more take two bytes of length: written after
// room for one, they are moved up (and the ones after them still fit).
TEST(ModelFileWriter, WritesAttributesLongerThanAOneByteLength) {
  auto m = loadModel(kModels + "mlp_seed.onnx");
  Graph &g = *m->graph;
  Value *x = g.inputs().at(0);
  Node *n = g.createNode("Identity", {x}, 1, "long_attributes");
  std::vector<int64_t> ints;
  for (int64_t i = 0; i < 100; ++i)
    ints.push_back(i * 1000003);
  n->setAttr("a_short", Attribute::ofInt(7));
  n->setAttr("b_ints", Attribute::ofInts(ints));
  n->setAttr("c_string", Attribute::ofString(std::string(300, 's')));
  n->setAttr("d_floats", Attribute::ofFloats(std::vector<float>(40, 0.5f)));
  n->setAttr("e_short", Attribute::ofFloat(-0.0f));
  auto [written, expected] = writtenAndExpected(*m);
  EXPECT_EQ(written, expected);
}

// Two Adam nodes of the step that differ only in lr = +0 and lr = -0: the
// second must not take the first's completed attributes (a float compared
// with == would say they are the same).
TEST(ModelFileWriter, TellsSignaturesApartByTheirBytes) {
  auto m = loadModel(kModels + "mlp_seed.onnx");
  CompileOptions o;
  o.optimizer = "adam";
  Statistics stats;
  runPipeline(*m, defaultPipeline(), o, PipelineConfig{}, stats);
  std::vector<Node *> adams;
  for (const auto &n : m->training->algorithm->nodes())
    if (n->opType() == "Adam")
      adams.push_back(n.get());
  ASSERT_GE(adams.size(), 2u);
  adams[0]->setAttr("lr", Attribute::ofFloat(0.0f));
  adams[1]->setAttr("lr", Attribute::ofFloat(-0.0f));
  auto [written, expected] = writtenAndExpected(*m);
  EXPECT_EQ(written, expected);
}

} // namespace
} // namespace mpc
