// Unit tests for parsing a model with its weights left in the file
// (passes/onnx/weights_in_file.h) and loadModel's WeightBytes::InFile.
//
// The parse must give protobuf's message less the large raw_data fields,
// whatever order the fields come in, and give up (for protobuf to parse and
// judge) wherever it does not follow the bytes; a model loaded with its
// weights in the file is the model loaded with weights of their own.
#include "passes/onnx/weights_in_file.h"

#include "ir/tensor_pb.h"
#include "passes/onnx/onnx_io.h"

#include "onnx/onnx_pb.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

using namespace mpc;

namespace {

constexpr size_t kMin = kHeldRawDataBytes;

/// A float tensor `name` of `count` elements with raw_data (i * 0.5).
onnx::TensorProto floatTensor(const std::string &name, int count) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(onnx::TensorProto::FLOAT);
  t.add_dims(count);
  std::string raw(size_t(count) * 4, '\0');
  for (int i = 0; i < count; ++i) {
    float v = float(i) * 0.5f;
    std::memcpy(&raw[size_t(i) * 4], &v, 4);
  }
  t.set_raw_data(raw);
  return t;
}

/// y = Add(x, big) + small, with a large, a small and another large weight.
onnx::ModelProto sampleModel() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  onnx::GraphProto &g = *m.mutable_graph();
  g.set_name("g");
  *g.add_initializer() = floatTensor("big", 2000);
  *g.add_initializer() = floatTensor("small", 4);
  *g.add_initializer() = floatTensor("big2", 1024);
  onnx::NodeProto &n = *g.add_node();
  n.set_op_type("Add");
  n.add_input("x");
  n.add_input("big");
  n.add_output("y");
  g.add_input()->set_name("x");
  g.add_output()->set_name("y");
  return m;
}

/// `proto` with each weight the parse left in the bytes put back.
std::string withWeightsBack(onnx::ModelProto proto,
                            const std::vector<WeightInFile> &weights) {
  for (const WeightInFile &w : weights)
    proto.mutable_graph()
        ->mutable_initializer(w.initializer)
        ->set_raw_data(w.data, w.size);
  return proto.SerializeAsString();
}

/// What ParseFromString makes of `bytes`, serialized ("" if it fails).
std::string protobufParse(const std::string &bytes) {
  onnx::ModelProto m;
  return m.ParseFromString(bytes) ? m.SerializeAsString() : std::string();
}

/// Parses `bytes` leaving weights in them; the parse must match protobuf's.
std::vector<WeightInFile> expectSameMessage(const std::string &bytes) {
  onnx::ModelProto proto;
  std::vector<WeightInFile> weights;
  EXPECT_TRUE(parseModelLeavingWeights(bytes, kMin, proto, weights));
  EXPECT_EQ(withWeightsBack(proto, weights), protobufParse(bytes));
  const auto *begin = reinterpret_cast<const uint8_t *>(bytes.data());
  for (const WeightInFile &w : weights) {
    EXPECT_GE(w.data, begin);
    EXPECT_LE(w.data + w.size, begin + bytes.size());
    EXPECT_GE(w.size, kMin);
    EXPECT_FALSE(proto.graph().initializer(w.initializer).has_raw_data());
  }
  return weights;
}

// The large raw_data fields are listed in initializer order, the small
// one stays in the message.
TEST(WeightsInFile, LeavesTheLargeRawDataAndParsesTheRest) {
  onnx::ModelProto m = sampleModel();
  std::string bytes = m.SerializeAsString();
  std::vector<WeightInFile> weights = expectSameMessage(bytes);
  ASSERT_EQ(weights.size(), 2u);
  EXPECT_EQ(weights[0].initializer, 0);
  EXPECT_EQ(weights[0].size, 8000u);
  EXPECT_EQ(weights[1].initializer, 2);
  EXPECT_EQ(std::string(reinterpret_cast<const char *>(weights[1].data),
                        weights[1].size),
            m.graph().initializer(2).raw_data());
}

/// The wire bytes of field `number` (under 16) holding `payload`.
std::string field(int number, const std::string &payload) {
  std::string out(1, char(number << 3 | 2)); // length-delimited
  for (uint64_t v = payload.size();; v >>= 7) {
    out += char(v >= 0x80 ? (v & 0x7f) | 0x80 : v);
    if (v < 0x80)
      return out + payload;
  }
}

// Fields in any order, a graph given in two fields (merged into one), a
// tensor's raw_data before its name: the message is protobuf's all the same.
TEST(WeightsInFile, FieldsInAnyOrderMergeAsProtobufMergesThem) {
  onnx::ModelProto m = sampleModel();
  onnx::TensorProto late = floatTensor("late", 3000);
  std::string lateRaw = late.raw_data();
  late.clear_raw_data();
  std::string rawFirst = field(9, lateRaw) + late.SerializeAsString();
  // The initializers, then a second graph field after the opsets with the
  // nodes, then a third with the late tensor.
  onnx::ModelProto inits, rest;
  *inits.mutable_graph()->mutable_initializer() = m.graph().initializer();
  rest = m;
  rest.mutable_graph()->clear_initializer();
  std::string bytes = inits.SerializeAsString() + rest.SerializeAsString() +
                      field(7, field(5, rawFirst));
  std::vector<WeightInFile> weights = expectSameMessage(bytes);
  ASSERT_EQ(weights.size(), 3u);
  EXPECT_EQ(weights[2].initializer, 3);
  EXPECT_EQ(std::string(reinterpret_cast<const char *>(weights[2].data),
                        weights[2].size),
            lateRaw);
}

// What the walk does not follow is left to protobuf: truncated bytes, a
// tensor with two raw_data fields (protobuf keeps the last), a group.
TEST(WeightsInFile, GivesUpWhereItDoesNotFollowTheBytes) {
  std::string bytes = sampleModel().SerializeAsString();
  onnx::ModelProto proto;
  std::vector<WeightInFile> weights;
  for (size_t cut : {size_t(1), size_t(100), bytes.size() - 1}) {
    EXPECT_FALSE(
        parseModelLeavingWeights(bytes.substr(0, cut), kMin, proto, weights))
        << cut;
    EXPECT_TRUE(weights.empty());
  }
  std::string twice =
      field(7, field(5, floatTensor("t", 2000).SerializeAsString() +
                            field(9, std::string(8000, '\1'))));
  EXPECT_NE(protobufParse(twice), "");
  EXPECT_FALSE(parseModelLeavingWeights(twice, kMin, proto, weights));
  // A group (unused field 15: start, end) at the top level.
  std::string grouped = bytes + std::string("\x7b\x7c", 2);
  EXPECT_NE(protobufParse(grouped), "");
  EXPECT_FALSE(parseModelLeavingWeights(grouped, kMin, proto, weights));
}

/// sampleModel with `levels` If nodes nested in each other's then_branch.
std::string nestedModel(int levels) {
  onnx::ModelProto m = sampleModel();
  onnx::GraphProto inner;
  for (int i = 0; i < levels; ++i) {
    onnx::GraphProto outer;
    onnx::NodeProto &n = *outer.add_node();
    n.set_op_type("If");
    onnx::AttributeProto &a = *n.add_attribute();
    a.set_name("then_branch");
    a.set_type(onnx::AttributeProto::GRAPH);
    *a.mutable_g() = inner;
    inner = std::move(outer);
  }
  *m.mutable_graph()->add_node() = inner.node(0);
  return m.SerializeAsString();
}

// Each piece is parsed with the recursion budget it has in the whole: a
// model nested as deep as protobuf accepts parses, one level deeper fails.
TEST(WeightsInFile, NestingIsLimitedAsInTheWholeParse) {
  int deepest = 0;
  while (protobufParse(nestedModel(deepest + 1)) != "")
    ++deepest;
  ASSERT_GT(deepest, 10);
  expectSameMessage(nestedModel(deepest));
  onnx::ModelProto proto;
  std::vector<WeightInFile> weights;
  EXPECT_FALSE(
      parseModelLeavingWeights(nestedModel(deepest + 1), kMin, proto, weights));
}

/// A scratch file removed at the end of the test.
struct TempFile {
  std::string path =
      (std::filesystem::temp_directory_path() /
       ("mpc_weights_in_file_" + std::to_string(::getpid()) + ".onnx"))
          .string();
  ~TempFile() { std::remove(path.c_str()); }
};

// loadModel with the weights in the file gives the model it gives with
// weights of their own: the large ones in place (but a bool tensor's,
// normalised into a copy), the small ones owned.
TEST(WeightsInFile, LoadModelInFileGivesTheSameModel) {
  onnx::ModelProto m = sampleModel();
  onnx::TensorProto &flags = *m.mutable_graph()->add_initializer();
  flags.set_name("flags");
  flags.set_data_type(onnx::TensorProto::BOOL);
  flags.add_dims(5000);
  flags.set_raw_data(std::string(5000, '\2'));
  TempFile file;
  {
    std::ofstream out(file.path, std::ios::binary);
    out << m.SerializeAsString();
  }
  auto own = loadModel(file.path);
  auto inFile = loadModel(file.path, WeightBytes::InFile);
  for (const Value *init : inFile->graph->initializers()) {
    const ByteBuffer &b = init->initializer()->bytes;
    bool large = b.size() >= kMin && init->name() != "flags";
    EXPECT_EQ(b.isInPlace(), large) << init->name();
  }
  const Tensor &bools = *inFile->graph->findValue("flags")->initializer();
  EXPECT_EQ(bools.bytes.unalignedData()[4999], 1);
  onnx::ModelProto a, b;
  exportModel(*own, a);
  exportModel(*inFile, b);
  EXPECT_EQ(a.SerializeAsString(), b.SerializeAsString());
  for (const Value *init : inFile->graph->initializers()) // no copy made
    EXPECT_EQ(init->initializer()->bytes.isInPlace(),
              init->initializer()->bytes.size() >= kMin &&
                  init->name() != "flags");
  // Typed access copies: the values are the file's.
  const Tensor &big = *inFile->graph->findValue("big")->initializer();
  EXPECT_EQ(big.data<float>()[1999], 999.5f);
  EXPECT_FALSE(big.bytes.isInPlace());
}

} // namespace
