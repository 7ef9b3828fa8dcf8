// Unit tests for ONNX import and export (passes/onnx/onnx_io.h).
//
// Round trips (binary, text, training_info, the --emit=step model), external
// data, the one-line errors every kind of bad model must produce, and a
// corruption loop proving the importer never crashes or over-allocates on
// malformed bytes. Binary fixtures are generated here, into a temporary
// folder, from models/mlp_seed.onnx or from ModelProtos built in code.
#include "ir/mpc_ops.h"
#include "ir/tensor_pb.h"
#include "passes/onnx/onnx_io.h"
#include "passes/pipeline.h"
#include "support/diagnostics.h"

#include "onnx/checker.h"
#include "onnx/onnx_pb.h"
#include "onnx/shape_inference/implementation.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace mpc;

namespace {

const std::string kSeedModel =
    std::string(MPC_SOURCE_DIR) + "/models/mlp_seed.onnx";

#define EXPECT_CONTAINS(haystack, needle)                                      \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos)             \
      << "message: " << (haystack)

/// A fresh folder under the system temp dir, removed with its contents.
class TempDir {
public:
  TempDir() {
    std::string tmpl =
        (std::filesystem::temp_directory_path() / "mpc_io_test_XXXXXX")
            .string();
    if (!mkdtemp(tmpl.data()))
      throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string &path() const { return path_; }
  std::string file(const std::string &name) const { return path_ + "/" + name; }
  std::string write(const std::string &name, const std::string &bytes) const {
    std::string p = file(name);
    std::filesystem::create_directories(std::filesystem::path(p).parent_path());
    std::remove(p.c_str());
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), std::streamsize(bytes.size()));
    return p;
  }

private:
  std::string path_;
};

std::string serialize(const onnx::ModelProto &proto) {
  std::string bytes;
  EXPECT_TRUE(proto.SerializeToString(&bytes));
  return bytes;
}

std::string fileBytes(const std::string &path) { return readFile(path); }

// --- comparing models --------------------------------------------------------

std::string hexBytes(const std::vector<uint8_t> &bytes) {
  static const char *digits = "0123456789abcdef";
  std::string s;
  for (uint8_t b : bytes) {
    s += digits[b >> 4];
    s += digits[b & 15];
  }
  return s;
}

std::string tensorText(const Tensor &t) {
  std::ostringstream os;
  os << dtypeName(t.dtype) << "[" << dimsToString(t.dims) << "]"
     << hexBytes(std::vector<uint8_t>(t.bytes.begin(), t.bytes.end()));
  return os.str();
}

/// Canonical text of an attribute (floats by bit pattern).
std::string attrText(const Attribute &a) {
  std::ostringstream os;
  auto bits = [](float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
  };
  switch (a.kind) {
  case Attribute::Kind::Float:
    os << "f:" << bits(a.f);
    break;
  case Attribute::Kind::Int:
    os << "i:" << a.i;
    break;
  case Attribute::Kind::String:
    os << "s:" << a.s;
    break;
  case Attribute::Kind::Tensor:
    os << "t:" << tensorText(*a.t);
    break;
  case Attribute::Kind::Floats:
    os << "fs:";
    for (float f : a.floats)
      os << bits(f) << ",";
    break;
  case Attribute::Kind::Ints:
    os << "is:";
    for (int64_t i : a.ints)
      os << i << ",";
    break;
  case Attribute::Kind::Strings:
    os << "ss:";
    for (const auto &s : a.strings)
      os << s << "\x1f";
    break;
  }
  return os.str();
}

std::string valueText(const Value *v) {
  return v ? v->name() + ":" + v->typeString() : "<omitted>";
}

std::vector<std::string> valueTexts(const std::vector<Value *> &values) {
  std::vector<std::string> out;
  for (const Value *v : values)
    out.push_back(valueText(v));
  return out;
}

/// One line per node: name, op, inputs, outputs with types, attributes.
std::vector<std::string> nodeTexts(const Graph &g) {
  std::vector<std::string> out;
  for (const auto &n : g.nodes()) {
    std::ostringstream os;
    os << n->name() << " = " << n->domain() << "." << n->opType() << "(";
    for (const Value *in : n->inputs())
      os << (in ? in->name() : "") << ",";
    os << ") -> (";
    for (const Value *o : n->outputs())
      os << valueText(o) << ",";
    os << ") {";
    for (const auto &kv : n->attributes())
      os << kv.first << "=" << attrText(kv.second) << ";";
    os << "}";
    out.push_back(os.str());
  }
  return out;
}

/// name -> "type bytes state" for every initializer.
std::map<std::string, std::string> initializerTexts(const Graph &g) {
  std::map<std::string, std::string> out;
  for (const Value *v : g.initializers())
    out[v->name()] = v->typeString() + " " + tensorText(*v->initializer()) +
                     (v->isState ? " state" : "");
  return out;
}

/// Same inputs, outputs, nodes (names, ops, wiring, attributes, output
/// types). Initializers are compared separately (their set may differ).
void expectSameStructure(const Graph &a, const Graph &b) {
  EXPECT_EQ(a.name(), b.name());
  EXPECT_EQ(valueTexts(a.inputs()), valueTexts(b.inputs()));
  EXPECT_EQ(valueTexts(a.outputs()), valueTexts(b.outputs()));
  EXPECT_EQ(nodeTexts(a), nodeTexts(b));
}

/// Like expectSameStructure, but `b` may complete what the export of `a`
/// completes for mpc ops' model-local functions (fixed arity): an omitted
/// optional input or a missing trailing input/output of a node of `a` may be
/// present in `b`, and `b` may have extra nodes computing those operands.
/// Everything `a` has must be in `b` unchanged.
void expectSameStructureUpToFilledOperands(const Graph &a, const Graph &b) {
  EXPECT_EQ(a.name(), b.name());
  EXPECT_EQ(valueTexts(a.inputs()), valueTexts(b.inputs()));
  EXPECT_EQ(valueTexts(a.outputs()), valueTexts(b.outputs()));
  std::map<std::string, const Node *> byName;
  for (const auto &n : b.nodes())
    byName[n->name()] = n.get();
  std::vector<std::string> orderA, orderB;
  for (const auto &n : a.nodes()) {
    orderA.push_back(n->name());
    auto it = byName.find(n->name());
    if (it == byName.end()) {
      ADD_FAILURE() << "node " << n->describe() << " is missing";
      continue;
    }
    const Node &m = *it->second;
    EXPECT_EQ(m.opType(), n->opType()) << n->describe();
    EXPECT_EQ(m.domain(), n->domain()) << n->describe();
    std::vector<std::string> attrsA, attrsB;
    for (const auto &kv : n->attributes())
      attrsA.push_back(kv.first + "=" + attrText(kv.second));
    for (const auto &kv : m.attributes())
      attrsB.push_back(kv.first + "=" + attrText(kv.second));
    for (const std::string &attr : attrsA)
      EXPECT_TRUE(std::count(attrsB.begin(), attrsB.end(), attr))
          << n->describe() << " lost " << attr;
    EXPECT_GE(m.numInputs(), n->numInputs()) << n->describe();
    for (size_t i = 0; i < n->numInputs() && i < m.numInputs(); ++i) {
      if (n->input(i)) {
        EXPECT_EQ(valueText(m.input(i)), valueText(n->input(i)))
            << n->describe() << " input " << i;
      }
    }
    EXPECT_GE(m.numOutputs(), n->numOutputs()) << n->describe();
    for (size_t i = 0; i < n->numOutputs() && i < m.numOutputs(); ++i) {
      if (n->output(i)) {
        EXPECT_EQ(valueText(m.output(i)), valueText(n->output(i)))
            << n->describe() << " output " << i;
      }
    }
  }
  // The original nodes keep their relative order.
  std::set<std::string> inA(orderA.begin(), orderA.end());
  for (const auto &n : b.nodes())
    if (inA.count(n->name()))
      orderB.push_back(n->name());
  EXPECT_EQ(orderA, orderB);
}

void expectSameGraph(const Graph &a, const Graph &b) {
  expectSameStructure(a, b);
  EXPECT_EQ(initializerTexts(a), initializerTexts(b));
  std::vector<std::string> orderA, orderB;
  for (const Value *v : a.initializers())
    orderA.push_back(v->name());
  for (const Value *v : b.initializers())
    orderB.push_back(v->name());
  EXPECT_EQ(orderA, orderB);
}

std::unique_ptr<Model> reimport(const Model &m, const TempDir &dir,
                                const std::string &name = "roundtrip.onnx") {
  onnx::ModelProto proto;
  exportModel(m, proto);
  return loadModel(dir.write(name, serialize(proto)));
}

std::unique_ptr<Model> compileSeed() {
  auto m = loadModel(kSeedModel);
  Statistics stats;
  runPipeline(*m, defaultPipeline(), CompileOptions{}, PipelineConfig{}, stats);
  return m;
}

/// onnx.checker.check_model(proto, full_check=True): the structural check,
/// then strict shape inference on a copy.
void expectCheckerAccepts(const onnx::ModelProto &proto) {
  try {
    onnx::checker::check_model(proto);
  } catch (const std::exception &e) {
    ADD_FAILURE() << "onnx checker: " << e.what();
    return;
  }
  onnx::ModelProto copy = proto;
  try {
    onnx::shape_inference::InferShapes(
        copy, onnx::OpSchemaRegistry::Instance(),
        onnx::ShapeInferenceOptions(/*check_type=*/true, /*strict_mode=*/1));
  } catch (const std::exception &e) {
    ADD_FAILURE() << "onnx strict shape inference: " << e.what();
  }
}

// --- small ModelProtos -------------------------------------------------------

void setTensorType(onnx::ValueInfoProto &vi, const std::string &name,
                   int elemType, const std::vector<int64_t> &dims) {
  vi.set_name(name);
  auto *tt = vi.mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elemType);
  auto *shape = tt->mutable_shape();
  for (int64_t d : dims)
    shape->add_dim()->set_dim_value(d);
}

onnx::NodeProto &addNode(onnx::GraphProto &g, const std::string &op,
                         const std::vector<std::string> &ins,
                         const std::vector<std::string> &outs,
                         const std::string &name = "") {
  auto *n = g.add_node();
  n->set_op_type(op);
  n->set_name(name);
  for (const auto &i : ins)
    n->add_input(i);
  for (const auto &o : outs)
    n->add_output(o);
  return *n;
}

onnx::TensorProto &addFloatInit(onnx::GraphProto &g, const std::string &name,
                                const std::vector<int64_t> &dims,
                                const std::vector<float> &values) {
  auto *t = g.add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims)
    t->add_dims(d);
  t->set_raw_data(values.data(), values.size() * sizeof(float));
  return *t;
}

/// tiny (float[4] x) => (float[4] y) { y = Relu(x) }, opset 17, IR 8.
onnx::ModelProto tinyModel() {
  onnx::ModelProto p;
  p.set_ir_version(8);
  auto *op = p.add_opset_import();
  op->set_domain("");
  op->set_version(17);
  auto &g = *p.mutable_graph();
  g.set_name("tiny");
  setTensorType(*g.add_input(), "x", onnx::TensorProto::FLOAT, {4});
  addNode(g, "Relu", {"x"}, {"y"}, "relu");
  setTensorType(*g.add_output(), "y", onnx::TensorProto::FLOAT, {4});
  return p;
}

/// Loads bytes written to `dir/name` and returns the mpc::Error message, or
/// "<loaded>". Fails the test on any other exception or a multi-line message.
std::string loadError(const TempDir &dir, const std::string &name,
                      const std::string &bytes) {
  std::string path = dir.write(name, bytes);
  try {
    loadModel(path);
  } catch (const Error &e) {
    std::string msg = e.what();
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "multi-line: " << msg;
    EXPECT_EQ(msg.rfind(path, 0), 0u) << "does not name the file: " << msg;
    return msg;
  } catch (const std::exception &e) {
    ADD_FAILURE() << "not an mpc::Error: " << e.what();
    return "<std::exception>";
  }
  return "<loaded>";
}

std::string loadError(const onnx::ModelProto &proto,
                      const std::string &name = "bad.onnx") {
  TempDir dir;
  return loadError(dir, name, serialize(proto));
}

std::string textError(const std::string &text) {
  try {
    parseModelText(text, "t.onnxtext");
  } catch (const Error &e) {
    std::string msg = e.what();
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "multi-line: " << msg;
    EXPECT_EQ(msg.rfind("t.onnxtext: ", 0), 0u) << msg;
    return msg;
  } catch (const std::exception &e) {
    ADD_FAILURE() << "not an mpc::Error: " << e.what();
    return "<std::exception>";
  }
  return "<loaded>";
}

/// A small model that ONNX 1.12's parser reads: identifiers only, float and
/// int64 initializers, attributes of several kinds.
const char *const kSmallText = R"(<ir_version: 8, opset_import: ["" : 17]>
small (float[2,3] x, int64[2] idx, float[N,3] dyn) => (float[2,3] y, int64[2] z, float[N,3] d)
  <float[3] b = {0.5, -1.25, 3.0}, float[1] s = {2.0}, int64[2] k = {7, -9}, int64[1] one = {1}>
{
  t = Add (x, b)
  u = Mul (t, s)
  y = LeakyRelu <alpha = 0.25> (u)
  z = Add (idx, k)
  d = Transpose <perm = [0, 1]> (dyn)
  w = Identity <note = "a note"> (one)
}
)";

// --- binary round trip -------------------------------------------------------

TEST(OnnxBinary, SeedModelRoundTrips) {
  TempDir dir;
  auto m = loadModel(kSeedModel);
  ASSERT_EQ(m->graph->numNodes(), 4u);
  EXPECT_EQ(m->opsetVersion(""), 17);
  EXPECT_EQ(m->irVersion, 8);
  EXPECT_EQ(m->producerName, "pytorch");
  EXPECT_EQ(valueTexts(m->graph->inputs()),
            (std::vector<std::string>{"x:fp32[64x10]", "y:int64[64]"}));
  Node *gemm = m->graph->findValue("/fc1/Gemm_output_0")->producer();
  EXPECT_EQ(gemm->name(), "/fc1/Gemm");
  EXPECT_EQ(gemm->attrInt("transB", 0), 1);
  EXPECT_EQ(m->graph->findValue("loss")->producer()->attrString("reduction"),
            "mean");
  for (Value *init : m->graph->initializers())
    EXPECT_TRUE(init->isState) << init->name();

  auto m2 = reimport(*m, dir);
  expectSameGraph(*m->graph, *m2->graph);
  EXPECT_EQ(m2->opsets, m->opsets);
  EXPECT_EQ(m2->irVersion, m->irVersion);
  EXPECT_EQ(m2->producerName, m->producerName);
  EXPECT_EQ(m2->producerVersion, m->producerVersion);
  EXPECT_EQ(m2->metadata, m->metadata);
  EXPECT_FALSE(m2->training);

  // The initializer bytes equal the ones in the original file.
  onnx::ModelProto original;
  ASSERT_TRUE(original.ParseFromString(fileBytes(kSeedModel)));
  for (const auto &t : original.graph().initializer()) {
    Value *v = m2->graph->findValue(t.name());
    ASSERT_NE(v, nullptr) << t.name();
    const Tensor &data = *v->initializer();
    ASSERT_TRUE(t.has_raw_data()) << t.name();
    EXPECT_EQ(std::string(data.bytes.begin(), data.bytes.end()), t.raw_data())
        << t.name();
  }

  // Exporting is deterministic and a fixed point after one trip.
  onnx::ModelProto p1, p2;
  exportModel(*m, p1);
  exportModel(*m2, p2);
  EXPECT_EQ(serialize(p1), serialize(p2));
  expectCheckerAccepts(p1);
}

// writeModelFile writes tensor bytes from the IR around protobuf fragments;
// the file must hold exactly what SerializeToString gives for exportModel,
// for a model with training_info and mpc functions, and for one with a
// tensor larger than the writer's block (written past its buffer).
TEST(OnnxBinary, WriteModelFileGivesTheSerializedBytes) {
  TempDir dir;
  auto compiled = compileSeed();
  auto big = loadModel(kSeedModel);
  Tensor large(DType::F32, {3, 1 << 17}); // 1.5 MiB
  for (int64_t i = 0; i < large.numel(); ++i)
    large.data<float>()[i] = float(i % 977) * 0.5f;
  big->graph->addInitializer("large", std::move(large));
  big->graph->addInitializer("empty", Tensor(DType::F32, {0}));
  for (const Model *m : {compiled.get(), big.get()}) {
    onnx::ModelProto expected;
    exportModel(*m, expected);
    std::string path = dir.file("written.onnx");
    writeModelFile(*m, path);
    EXPECT_EQ(fileBytes(path), serialize(expected));
  }
}

// loadModel lets its parsed message go, so the weights' bytes are taken
// over from it rather than copied; importModel of a message the caller
// keeps copies them and leaves the message as it was.
TEST(OnnxBinary, LoadModelHoldsTheParsedWeightsWithoutACopy) {
  const std::string path =
      std::string(MPC_SOURCE_DIR) + "/models/transformer.onnx";
  auto m = loadModel(path);
  size_t large = 0;
  for (const Value *init : m->graph->initializers()) {
    const Tensor &t = *init->initializer();
    EXPECT_EQ(t.bytes.isHeld(), t.byteSize() >= kHeldRawDataBytes)
        << init->name();
    large += t.byteSize() >= kHeldRawDataBytes;
  }
  EXPECT_GT(large, 0u);
  onnx::ModelProto kept;
  ASSERT_TRUE(kept.ParseFromString(fileBytes(path)));
  std::string before = serialize(kept);
  auto copied = importModel(kept, "transformer.onnx", ".");
  EXPECT_EQ(serialize(kept), before);
  for (const Value *init : copied->graph->initializers())
    EXPECT_FALSE(init->initializer()->bytes.isHeld()) << init->name();
  onnx::ModelProto a, b;
  exportModel(*m, a);
  exportModel(*copied, b);
  EXPECT_EQ(serialize(a), serialize(b));
}

// Zero blocks of tensor data (optimizer moments start at zero) become holes
// in the file: the bytes read back are the same, the disk holds none of
// them. Zeros in blocks that also hold other bytes (the edges of a run)
// take their blocks, as does a tensor smaller than a block (which is
// written).
TEST(OnnxBinary, WriteModelFileLeavesHolesForZeroBlocks) {
  TempDir dir;
  auto m = loadModel(kSeedModel);
  Tensor moments = Tensor::zeros(DType::F32, {1 << 18}); // 1 MiB, held
  EXPECT_TRUE(moments.bytes.isHeld());
  m->graph->addInitializer("moments", std::move(moments));
  // Zeros, one value, zeros: two runs, each cut at the file's blocks.
  Tensor mixed(DType::F32, {3 << 14});
  mixed.data<float>()[1 << 14] = 1.5f;
  m->graph->addInitializer("mixed", std::move(mixed));
  m->graph->addInitializer("small", Tensor(DType::F32, {100}));
  onnx::ModelProto expected;
  exportModel(*m, expected);
  std::string path = dir.file("sparse.onnx");
  writeModelFile(*m, path);
  EXPECT_EQ(fileBytes(path), serialize(expected));
  int fd = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  struct stat st {};
  ASSERT_EQ(::fstat(fd, &st), 0);
  off_t firstHole = ::lseek(fd, 0, SEEK_HOLE);
  ::close(fd);
  EXPECT_LT(firstHole, st.st_size);
  // At least the 1 MiB of moments less a block at each edge is not stored.
  EXPECT_LE(st.st_blocks * 512, st.st_size - (1 << 20) + 2 * 4096);
}

// writeModelFile completes the mpc nodes reading the graphs' types and names
// from the IR, where exportModel reads its GraphProto: every example model,
// compiled with each optimizer and precision (found_inf omitted in fp32,
// SGD's momentum buffer omitted without momentum, symbolic batch sizes),
// gives the same bytes, also when the names a fresh name is made from are
// taken by an initializer, a node, or step state (which the step's graph
// does not list).
TEST(OnnxBinary, WriteModelFileMatchesExportModelOnEveryExample) {
  TempDir dir;
  for (const char *name :
       {"mlp_seed", "cnn", "resmlp", "transformer", "transformer_dynbatch"}) {
    for (int variant = 0; variant < 4; ++variant) {
      SCOPED_TRACE(std::string(name) + " variant " + std::to_string(variant));
      auto m =
          loadModel(std::string(MPC_SOURCE_DIR) + "/models/" + name + ".onnx");
      CompileOptions o;
      o.optimizer = variant == 1 ? "adam" : variant == 2 ? "adamw" : "sgd";
      o.precision = variant == 1   ? DType::BF16
                    : variant == 2 ? DType::F32
                                   : DType::F16;
      o.momentum = variant == 3 ? 0.9 : 0.0;
      Statistics stats;
      runPipeline(*m, defaultPipeline(), o, PipelineConfig{}, stats);
      if (variant == 2) {
        Graph &step = *m->training->algorithm;
        Value *taken =
            step.addInitializer("mpc_found_inf_false", Tensor(DType::F32, {1}));
        step.createNode("Identity", {taken}, 1, "mpc_found_inf_false_1");
        step.addInitializer("mpc_found_inf_false_2", Tensor(DType::F32, {1}))
            ->isState = true;
      }
      onnx::ModelProto expected;
      exportModel(*m, expected);
      std::string path = dir.file("written.onnx");
      writeModelFile(*m, path);
      EXPECT_EQ(fileBytes(path), serialize(expected));
      if (variant == 2) {
        // The fp32 step has no found_inf: its Constant false got the first
        // name the step's graph does not list.
        bool named = false;
        for (const auto &n : expected.training_info(0).algorithm().node())
          named |= n.output_size() && n.output(0) == "mpc_found_inf_false_2";
        EXPECT_TRUE(named);
      }
    }
  }
}

TEST(OnnxBinary, ValueTypesSurviveARoundTrip) {
  TempDir dir;
  auto m = loadModel(kSeedModel);
  Graph &g = *m->graph;
  g.findValue("/fc1/Gemm_output_0")
      ->setType(DType::F32, {Dim::symbolic("N"), Dim(20)});
  g.findValue("/relu/Relu_output_0")->dtype = DType::F32; // rank unknown
  auto m2 = reimport(*m, dir);
  EXPECT_EQ(m2->graph->findValue("/fc1/Gemm_output_0")->typeString(),
            "fp32[Nx20]");
  Value *relu = m2->graph->findValue("/relu/Relu_output_0");
  EXPECT_EQ(relu->dtype, DType::F32);
  EXPECT_FALSE(relu->hasShape);
  EXPECT_EQ(m2->graph->findValue("loss")->typeString(), "fp32[scalar]");
  expectSameGraph(g, *m2->graph);
}

// --- text --------------------------------------------------------------------

TEST(OnnxText, CommentsAreStrippedButNotInsideStrings) {
  const char *text = R"(// A model with comments everywhere.
<ir_version: 8, opset_import: ["" : 17]> // header
commented (float[4] x) => (float[4] y) // signature
{
  // a whole-line comment with "quotes" and // more slashes
  h = Relu (x) // trailing comment
  y = Identity <note = "http://example.com/a//b", empty = "//", bs = "dir\">(h) // "odd
} // last line, no newline at the end)";
  auto m = parseModelText(text, "commented.onnxtext");
  ASSERT_EQ(m->graph->numNodes(), 2u);
  Node *id = m->graph->findValue("y")->producer();
  ASSERT_NE(id, nullptr);
  EXPECT_EQ(id->attrString("note"), "http://example.com/a//b");
  EXPECT_EQ(id->attrString("empty"), "//");
  // ONNX text has no escapes: a backslash before the quote is a character.
  EXPECT_EQ(id->attrString("bs"), "dir\\");
}

TEST(OnnxText, LoadModelReadsTextFiles) {
  TempDir dir;
  std::string text = "<ir_version: 8, opset_import: [\"\" : 17]>\n"
                     "g (float[2] x) => (float[2] y) { y = Neg (x) }\n";
  auto m = loadModel(dir.write("m.onnxtext", text));
  EXPECT_EQ(m->sourcePath, dir.file("m.onnxtext"));
  EXPECT_EQ(m->graph->numNodes(), 1u);
  // Text content in a file without the extension is detected too.
  auto m2 = loadModel(dir.write("m.onnx", text));
  EXPECT_EQ(m2->graph->numNodes(), 1u);
}

TEST(OnnxText, PrinterIsDeterministic) {
  auto m = loadModel(kSeedModel);
  std::string a = printModelText(*m);
  std::string b = printModelText(*m);
  EXPECT_EQ(a, b);
  EXPECT_EQ(printModelText(*loadModel(kSeedModel)), a);
  auto c = compileSeed();
  EXPECT_EQ(printModelText(*c), printModelText(*compileSeed()));
}

TEST(OnnxText, PrintParsePrintIsStable) {
  auto m = parseModelText(kSmallText, "small.onnxtext");
  std::string p1 = printModelText(*m);
  auto m2 = parseModelText(p1, "printed.onnxtext");
  std::string p2 = printModelText(*m2);
  EXPECT_EQ(p1, p2);
  expectSameStructure(*m->graph, *m2->graph);
  // Initializer values survive exactly (float and int64).
  EXPECT_EQ(initializerTexts(*m->graph), initializerTexts(*m2->graph));
  EXPECT_EQ(m2->graph->findValue("k")->initializer()->toInt64s(),
            (std::vector<int64_t>{7, -9}));
  EXPECT_EQ(m2->graph->findValue("b")->initializer()->toFloats(),
            (std::vector<float>{0.5f, -1.25f, 3.0f}));
}

TEST(OnnxText, ScalarAndUnknownRankSyntax) {
  // ONNX 1.12 text: `float` is a rank-0 tensor, `float[]` one of unknown
  // rank; an initializer needs a shape (`int64 k` is a scalar).
  auto m = parseModelText(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float a, float[] b, float[?] c) => (float d) <int64 k = {4}> {
  d = Add (a, b)
})",
                          "syntax.onnxtext");
  const Graph &g = *m->graph;
  EXPECT_EQ(g.findValue("a")->typeString(), "fp32[scalar]");
  EXPECT_EQ(g.findValue("b")->typeString(), "fp32");
  EXPECT_EQ(g.findValue("c")->typeString(), "fp32[?]");
  EXPECT_EQ(g.findValue("d")->typeString(), "fp32[scalar]");
  EXPECT_EQ(g.findValue("k")->initializer()->toInt64s(),
            (std::vector<int64_t>{4}));
  EXPECT_TRUE(g.findValue("k")->initializer()->dims.empty());
}

// Disabled: printModelText writes rank 0 as `float[]` and unknown rank as
// `float`, the reverse of the ONNX syntax above, so a printed scalar
// initializer does not parse back ("expected a tensor shape") and printed
// scalars come back as unknown rank. Fixing typeText in onnx_export.cpp
// changes the CHECK lines of ~20 lit files (`float[] loss`), so it is left to
// the lead; enable this test with that fix.
TEST(OnnxText, ScalarsPrintAndParseBack) {
  Model m;
  Graph &g = *m.graph;
  Value *x = g.addInput("x", DType::F32, {});
  Value *s = g.addInitializer("s", Tensor::scalar(DType::F32, 0.1));
  Value *i = g.addInitializer("i", Tensor::scalar(DType::I64, -3));
  // Main-graph initializers are model state once imported.
  s->isState = i->isState = true;
  Value *u = g.addInput("u", DType::F32, {});
  u->hasShape = false; // unknown rank
  Node *mul = g.createNode("Mul", {x, s}, 1, "mul");
  mul->output(0)->setType(DType::F32, {});
  g.addOutput(mul->output(0));
  g.addOutput(i);
  std::string p1 = printModelText(m);
  auto m2 = parseModelText(p1, "scalars.onnxtext");
  EXPECT_EQ(printModelText(*m2), p1);
  EXPECT_EQ(m2->graph->findValue("x")->typeString(), "fp32[scalar]");
  EXPECT_EQ(m2->graph->findValue("u")->typeString(), "fp32");
  EXPECT_EQ(m2->graph->outputs()[0]->typeString(), "fp32[scalar]");
  EXPECT_EQ(initializerTexts(g), initializerTexts(*m2->graph));
}

TEST(OnnxText, ParseErrorsAreOneLine) {
  EXPECT_CONTAINS(textError("<ir_version: 8>\nbroken (float[4] x) => ("),
                  "cannot parse ONNX text");
  EXPECT_CONTAINS(textError(""), "cannot parse ONNX text");
  // Numbers the ONNX parser cannot convert (std::stoll / std::stof throw).
  EXPECT_CONTAINS(textError("<ir_version: 8, opset_import: [\"\" : 17]>\n"
                            "g (float[4] x) => (float[4] y) "
                            "{ y = Relu <a = 99999999999999999999999> (x) }"),
                  "cannot parse ONNX text");
  EXPECT_CONTAINS(textError("<ir_version: 8, opset_import: [\"\" : 17]>\n"
                            "g (float[4] x) => (float[4] y) "
                            "{ y = Relu <a = 1e999999> (x) }"),
                  "cannot parse ONNX text");
  EXPECT_CONTAINS(textError("<ir_version: 8, opset_import: [\"\" : 17]>\n"
                            "g (float[4] x) => (float[4] y) "
                            "{ y = Relu <a = -> (x) }"),
                  "cannot parse ONNX text");
  // Import errors after a successful parse carry the source name too.
  EXPECT_CONTAINS(textError("<ir_version: 8, opset_import: [\"\" : 17]>\n"
                            "g (float[4] x) => (float[4] y) { y = Relu (z) }"),
                  "input 'z' is not defined");
}

// --- external data -----------------------------------------------------------

/// tiny model whose initializer w (float[4]) lives in external data.
onnx::ModelProto
externalModel(const std::vector<std::pair<std::string, std::string>> &kv) {
  onnx::ModelProto p = tinyModel();
  auto &g = *p.mutable_graph();
  g.mutable_node(0)->set_op_type("Add");
  g.mutable_node(0)->add_input("w");
  auto *t = g.add_initializer();
  t->set_name("w");
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_dims(4);
  t->set_data_location(onnx::TensorProto::EXTERNAL);
  for (const auto &e : kv) {
    auto *entry = t->add_external_data();
    entry->set_key(e.first);
    entry->set_value(e.second);
  }
  return p;
}

std::string floatBytes(const std::vector<float> &v) {
  return std::string(reinterpret_cast<const char *>(v.data()),
                     v.size() * sizeof(float));
}

TEST(OnnxExternalData, LoadsTheRightBytes) {
  TempDir dir;
  const std::vector<float> w = {1.5f, -2.0f, 3.25f, 1e-3f};
  dir.write("weights.bin", std::string(16, 'x') + floatBytes(w) + "tail");
  auto proto = externalModel(
      {{"location", "weights.bin"}, {"offset", "16"}, {"length", "16"}});
  auto m = loadModel(dir.write("model.onnx", serialize(proto)));
  Value *v = m->graph->findValue("w");
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->initializer()->toFloats(), w);
  EXPECT_TRUE(v->isState);

  // Without a length: the rest of the file; in a subfolder.
  dir.write("data/w.bin", "abcd" + floatBytes(w));
  auto rest = externalModel({{"location", "data/w.bin"}, {"offset", "4"}});
  m = loadModel(dir.write("model2.onnx", serialize(rest)));
  EXPECT_EQ(m->graph->findValue("w")->initializer()->toFloats(), w);

  // Exported again, the data is inline (and checker-valid).
  onnx::ModelProto out;
  exportModel(*m, out);
  ASSERT_EQ(out.graph().initializer_size(), 1);
  EXPECT_NE(out.graph().initializer(0).data_location(),
            onnx::TensorProto::EXTERNAL);
  EXPECT_EQ(out.graph().initializer(0).raw_data(), floatBytes(w));
  expectCheckerAccepts(out);
}

TEST(OnnxExternalData, BadReferencesAreClearErrors) {
  TempDir dir;
  dir.write("w.bin", std::string(32, '\0'));
  auto err = [&](const std::vector<std::pair<std::string, std::string>> &kv) {
    return loadError(dir, "m.onnx", serialize(externalModel(kv)));
  };
  EXPECT_CONTAINS(err({{"location", "w.bin"}, {"offset", "40"}}),
                  "initializer 'w': external data offset 40 is outside");
  EXPECT_CONTAINS(err({{"location", "w.bin"}, {"offset", "-1"}}),
                  "external data offset -1 is outside");
  EXPECT_CONTAINS(
      err({{"location", "w.bin"}, {"offset", "24"}, {"length", "16"}}),
      "external data range [24, +16) is past the end");
  EXPECT_CONTAINS(err({{"location", "w.bin"}, {"length", "-16"}}),
                  "external data length -16 is negative");
  EXPECT_CONTAINS(err({{"location", "missing.bin"}}),
                  "cannot open external data file");
  EXPECT_CONTAINS(err({{"location", "/etc/passwd"}}),
                  "must be a relative path inside the model's folder");
  EXPECT_CONTAINS(err({{"location", "../w.bin"}}),
                  "must be a relative path inside the model's folder");
  EXPECT_CONTAINS(err({{"location", "sub/../../w.bin"}}),
                  "must be a relative path inside the model's folder");
  EXPECT_CONTAINS(err({{"offset", "0"}}), "external data without a location");
  EXPECT_CONTAINS(err({{"location", "w.bin"}, {"offset", "abc"}}),
                  "external data 'offset' is not a number: 'abc'");
  EXPECT_CONTAINS(err({{"location", "w.bin"}, {"offset", "8junk"}}),
                  "external data 'offset' is not a number: '8junk'");
  EXPECT_CONTAINS(
      err({{"location", "w.bin"}, {"offset", "99999999999999999999999"}}),
      "is not a number");
  // The range is inside the file but holds the wrong number of bytes:
  // refused before anything is read.
  EXPECT_CONTAINS(err({{"location", "w.bin"}, {"length", "12"}}),
                  "external data length 12 does not match the 16 bytes its "
                  "dtype and dims need");
  // Without a length the range is the rest of the file (ONNX's rule), and
  // the rest of a 32-byte file from offset 8 is not the tensor's 16 bytes.
  EXPECT_CONTAINS(err({{"location", "w.bin"}, {"offset", "8"}}),
                  "external data without a length runs from offset 8 to the "
                  "end of");
  EXPECT_CONTAINS(err({{"location", "w.bin"}, {"offset", "8"}}),
                  "24 bytes; its dtype and dims need 16");
  std::filesystem::create_directories(dir.file("adir"));
  EXPECT_CONTAINS(err({{"location", "adir"}}), "adir' is a directory");
}

// --- errors ------------------------------------------------------------------

TEST(OnnxErrors, FilesThatAreNotModels) {
  TempDir dir;
  std::string seed = fileBytes(kSeedModel);
  EXPECT_CONTAINS(loadError(dir, "trunc.onnx", seed.substr(0, seed.size() / 2)),
                  "not an ONNX model");
  EXPECT_CONTAINS(loadError(dir, "trunc100.onnx", seed.substr(0, 100)),
                  "not an ONNX model");
  EXPECT_CONTAINS(loadError(dir, "empty.onnx", ""), "empty file");
  EXPECT_CONTAINS(
      loadError(dir, "garbage.onnx", std::string("\xff\xff\xff", 3)),
      "not an ONNX model");
  try {
    loadModel(dir.file("does_not_exist.onnx"));
    ADD_FAILURE() << "loaded a missing file";
  } catch (const Error &e) {
    EXPECT_CONTAINS(e.what(), "does_not_exist.onnx: cannot open");
  }
  try {
    loadModel(dir.path());
    ADD_FAILURE() << "loaded a directory";
  } catch (const Error &e) {
    EXPECT_CONTAINS(e.what(), "is a directory");
  }
  // A valid protobuf that has no graph.
  onnx::ModelProto noGraph;
  noGraph.set_ir_version(8);
  EXPECT_CONTAINS(loadError(noGraph), "no graph");
}

TEST(OnnxErrors, TinyModelLoads) {
  EXPECT_EQ(loadError(tinyModel()), "<loaded>");
}

TEST(OnnxErrors, UndefinedInput) {
  auto p = tinyModel();
  p.mutable_graph()->mutable_node(0)->set_input(0, "nope");
  EXPECT_CONTAINS(loadError(p), "node 'relu' (Relu): input 'nope' is not "
                                "defined by any node, graph input or "
                                "initializer");
}

TEST(OnnxErrors, DuplicateOutputs) {
  auto twice = tinyModel();
  addNode(*twice.mutable_graph(), "Neg", {"x"}, {"y"}, "neg");
  EXPECT_CONTAINS(loadError(twice), "node 'neg' (Neg): output 'y' is already "
                                    "defined");
  auto listed = tinyModel();
  listed.mutable_graph()->mutable_node(0)->add_output("y");
  EXPECT_CONTAINS(loadError(listed), "output 'y' is listed twice");
  auto shadow = tinyModel();
  shadow.mutable_graph()->mutable_node(0)->set_output(0, "x");
  EXPECT_CONTAINS(loadError(shadow), "output 'x' is already defined");
  auto graphOut = tinyModel();
  setTensorType(*graphOut.mutable_graph()->add_output(), "y",
                onnx::TensorProto::FLOAT, {4});
  EXPECT_CONTAINS(loadError(graphOut), "graph output 'y' is listed twice");
  auto missingOut = tinyModel();
  missingOut.mutable_graph()->mutable_output(0)->set_name("q");
  EXPECT_CONTAINS(loadError(missingOut), "graph output 'q' is not produced");
}

TEST(OnnxErrors, DuplicateNames) {
  auto init = tinyModel();
  addFloatInit(*init.mutable_graph(), "w", {1}, {1});
  addFloatInit(*init.mutable_graph(), "w", {1}, {2});
  EXPECT_CONTAINS(loadError(init), "initializer 'w' is defined twice");
  auto input = tinyModel();
  setTensorType(*input.mutable_graph()->add_input(), "x",
                onnx::TensorProto::FLOAT, {4});
  EXPECT_CONTAINS(loadError(input), "graph input 'x' is defined twice");
  auto unnamed = tinyModel();
  setTensorType(*unnamed.mutable_graph()->add_input(), "",
                onnx::TensorProto::FLOAT, {4});
  EXPECT_CONTAINS(loadError(unnamed), "graph input 1 has an empty name");
  auto noName = tinyModel();
  addFloatInit(*noName.mutable_graph(), "", {1}, {1});
  EXPECT_CONTAINS(loadError(noName), "initializer with an empty name");
  // Old-style models list initializers among the inputs: that is fine.
  auto oldStyle = tinyModel();
  addFloatInit(*oldStyle.mutable_graph(), "w", {4}, {1, 2, 3, 4});
  setTensorType(*oldStyle.mutable_graph()->add_input(), "w",
                onnx::TensorProto::FLOAT, {4});
  EXPECT_EQ(loadError(oldStyle), "<loaded>");
}

TEST(OnnxErrors, Cycle) {
  auto p = tinyModel();
  auto &g = *p.mutable_graph();
  g.clear_node();
  addNode(g, "Add", {"x", "b"}, {"a"}, "first");
  addNode(g, "Relu", {"a"}, {"b"}, "second");
  addNode(g, "Identity", {"b"}, {"y"}, "out");
  EXPECT_CONTAINS(loadError(p), "graph 'tiny' has a cycle through node "
                                "'first' (Add)");
  // Out of order but acyclic is sorted, not rejected.
  auto unsorted = tinyModel();
  auto &u = *unsorted.mutable_graph();
  u.mutable_node(0)->set_input(0, "h");
  addNode(u, "Neg", {"x"}, {"h"}, "neg");
  TempDir dir;
  auto m = loadModel(dir.write("u.onnx", serialize(unsorted)));
  EXPECT_EQ(m->graph->nodes().front()->name(), "neg");
}

TEST(OnnxErrors, Opsets) {
  auto tooNew = tinyModel();
  tooNew.mutable_opset_import(0)->set_version(24);
  EXPECT_CONTAINS(loadError(tooNew),
                  "opset 24 is newer than the newest supported (23)");
  auto newest = tinyModel();
  newest.mutable_opset_import(0)->set_version(23);
  EXPECT_EQ(loadError(newest), "<loaded>");
  // Before opset 7 a model loads when its ops did not change since: Relu-6
  // is opset 7's Relu, Relu-1 (opset 5) is not.
  auto relu6 = tinyModel();
  relu6.mutable_opset_import(0)->set_version(6);
  EXPECT_EQ(loadError(relu6), "<loaded>");
  auto tooOld = tinyModel();
  tooOld.mutable_opset_import(0)->set_version(5);
  EXPECT_CONTAINS(loadError(tooOld),
                  "node 'relu' (Relu): the model imports opset 5, older than "
                  "the oldest supported (7), and Relu changed since (Relu-1 "
                  "at opset 5, Relu-6 at opset 7)");
  auto aiOnnx = tinyModel();
  aiOnnx.mutable_opset_import(0)->set_domain("ai.onnx");
  aiOnnx.mutable_opset_import(0)->set_version(99);
  EXPECT_CONTAINS(loadError(aiOnnx), "opset 99 is newer");
}

TEST(OnnxErrors, BadTensors) {
  auto negInit = tinyModel();
  addFloatInit(*negInit.mutable_graph(), "w", {2, -2}, {});
  EXPECT_CONTAINS(loadError(negInit),
                  "initializer 'w': tensor 'w': negative dimension -2");
  auto negInput = tinyModel();
  negInput.mutable_graph()
      ->mutable_input(0)
      ->mutable_type()
      ->mutable_tensor_type()
      ->mutable_shape()
      ->mutable_dim(0)
      ->set_dim_value(-4);
  EXPECT_CONTAINS(loadError(negInput), "value 'x' has a negative dimension -4");
  auto raw = tinyModel();
  addFloatInit(*raw.mutable_graph(), "w", {4}, {1, 2, 3});
  EXPECT_CONTAINS(loadError(raw),
                  "raw_data has 12 bytes, expected 16 for fp32[4]");
  auto huge = tinyModel();
  addFloatInit(*huge.mutable_graph(), "w", {int64_t(1) << 40, 1 << 20}, {1});
  EXPECT_CONTAINS(loadError(huge), "is too large");
  auto typed = tinyModel();
  auto &t = addFloatInit(*typed.mutable_graph(), "w", {3}, {});
  t.clear_raw_data();
  t.add_float_data(1);
  EXPECT_CONTAINS(loadError(typed), "1 values in float_data, expected 3");
  auto str = tinyModel();
  auto &s = *str.mutable_graph()->add_initializer();
  s.set_name("s");
  s.set_data_type(onnx::TensorProto::STRING);
  s.add_string_data("hello");
  EXPECT_CONTAINS(loadError(str), "unsupported data type STRING");
  auto seq = tinyModel();
  seq.mutable_graph()
      ->mutable_input(0)
      ->mutable_type()
      ->mutable_sequence_type();
  EXPECT_CONTAINS(loadError(seq), "value 'x' is not a tensor");
  auto badElem = tinyModel();
  badElem.mutable_graph()
      ->mutable_input(0)
      ->mutable_type()
      ->mutable_tensor_type()
      ->set_elem_type(8); // STRING
  EXPECT_CONTAINS(loadError(badElem),
                  "value 'x' has unsupported element type 8");
}

TEST(OnnxErrors, GraphAttributes) {
  auto p = tinyModel();
  auto &g = *p.mutable_graph();
  setTensorType(*g.add_input(), "c", onnx::TensorProto::BOOL, {});
  auto &ifNode = addNode(g, "If", {"c"}, {"z"}, "branch");
  for (const char *name : {"then_branch", "else_branch"}) {
    auto *a = ifNode.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::GRAPH);
    auto *body = a->mutable_g();
    body->set_name(name);
    addNode(*body, "Identity", {"x"}, {"out"});
    setTensorType(*body->add_output(), "out", onnx::TensorProto::FLOAT, {4});
  }
  EXPECT_CONTAINS(loadError(p), "node 'branch' (If): attribute 'then_branch' "
                                "has a kind mpc does not support");
  auto ref = tinyModel();
  auto *a = ref.mutable_graph()->mutable_node(0)->add_attribute();
  a->set_name("alpha");
  a->set_ref_attr_name("outer");
  a->set_type(onnx::AttributeProto::FLOAT);
  // A typed ref_attr_name is still only valid inside a function.
  EXPECT_CONTAINS(loadError(ref), "node 'relu' (Relu): attribute 'alpha' "
                                  "refers to a function attribute outside a "
                                  "function");
}

TEST(OnnxErrors, TrainingInfo) {
  auto p = tinyModel();
  addFloatInit(*p.mutable_graph(), "w", {4}, {1, 2, 3, 4});
  auto *ti = p.add_training_info();
  auto &alg = *ti->mutable_algorithm();
  alg.set_name("step");
  addNode(alg, "Neg", {"w"}, {"w_new"}, "update");
  setTensorType(*alg.add_output(), "w_new", onnx::TensorProto::FLOAT, {4});
  auto *b = ti->add_update_binding();
  b->set_key("w");
  b->set_value("w_new");
  TempDir dir;
  auto m = loadModel(dir.write("t.onnx", serialize(p)));
  ASSERT_TRUE(m->training);
  Value *w = m->graph->findValue("w"),
        *wa = m->training->algorithm->findValue("w");
  ASSERT_TRUE(w && wa);
  EXPECT_EQ(w->initializer().get(), wa->initializer().get());
  EXPECT_TRUE(wa->isState);

  auto badKey = p;
  badKey.mutable_training_info(0)->mutable_update_binding(0)->set_key("x");
  EXPECT_CONTAINS(loadError(badKey), "update_binding key 'x' is not an "
                                     "initializer of the main graph");
  auto badValue = p;
  badValue.mutable_training_info(0)->mutable_update_binding(0)->set_value("q");
  EXPECT_CONTAINS(loadError(badValue), "update_binding value 'q' is not a "
                                       "value of the training algorithm");
  auto two = p;
  *two.add_training_info() = p.training_info(0);
  EXPECT_CONTAINS(loadError(two), "more than one training_info");
  auto reads = p;
  reads.mutable_training_info(0)
      ->mutable_algorithm()
      ->mutable_node(0)
      ->set_input(0, "y");
  EXPECT_CONTAINS(loadError(reads), "node 'update' (Neg): input 'y' is not "
                                    "defined");
}

// --- training_info and the step model ----------------------------------------

TEST(OnnxTraining, CompiledModelRoundTrips) {
  TempDir dir;
  auto m = compileSeed();
  ASSERT_TRUE(m->training);
  const Graph &alg = *m->training->algorithm;
  onnx::ModelProto proto;
  exportModel(*m, proto);
  ASSERT_EQ(proto.training_info_size(), 1);
  expectCheckerAccepts(proto);

  auto m2 = loadModel(dir.write("compiled.onnx", serialize(proto)));
  ASSERT_TRUE(m2->training);
  const Graph &alg2 = *m2->training->algorithm;
  expectSameStructure(*m->graph, *m2->graph);
  expectSameStructureUpToFilledOperands(alg, alg2);
  // The import reproduces exactly what the export wrote, but for the
  // outputs the export named "..._unused_..." because an mpc node omitted
  // them (its function binds every formal): omitted again.
  {
    std::vector<std::string> written, read;
    for (const auto &np : proto.training_info(0).algorithm().node()) {
      std::string line = np.name() + " = " + np.domain() + "." + np.op_type();
      for (const auto &in : np.input())
        line += " " + in;
      line += " ->";
      for (const auto &out : np.output())
        line += " " + (np.domain() == kMpcDomain &&
                               out.find("_unused_") != std::string::npos
                           ? std::string()
                           : out);
      written.push_back(line);
    }
    for (const auto &n : alg2.nodes()) {
      std::string line = n->name() + " = " + n->domain() + "." + n->opType();
      for (const Value *in : n->inputs())
        line += " " + (in ? in->name() : std::string());
      line += " ->";
      for (const Value *out : n->outputs())
        line += " " + (out ? out->name() : std::string());
      read.push_back(line);
    }
    EXPECT_EQ(read, written);
  }
  EXPECT_EQ(m2->training->updateBinding, m->training->updateBinding);
  EXPECT_EQ(m2->metadata, m->metadata);
  EXPECT_EQ(m2->opsets, m->opsets);
  ASSERT_NE(m2->meta("mpc.loss"), nullptr);
  EXPECT_EQ(*m2->meta("mpc.loss"), "loss");

  // The algorithm's initializers (state and constants) keep name, type,
  // bytes and kind.
  EXPECT_EQ(initializerTexts(alg), initializerTexts(alg2));
  // All persistent state is in the main graph: what it had, plus what only
  // the step reads (loss scale, step counter, moments).
  auto mainExpected = initializerTexts(*m->graph);
  for (const Value *v : alg.initializers())
    if (v->isState)
      mainExpected.emplace(v->name(), initializerTexts(alg).at(v->name()));
  EXPECT_EQ(initializerTexts(*m2->graph), mainExpected);
  // The step's state is the main graph's tensor, not a copy.
  size_t state = 0;
  for (const Value *v : alg2.initializers()) {
    if (!v->isState)
      continue;
    ++state;
    const Value *mv = m2->graph->findValue(v->name());
    ASSERT_NE(mv, nullptr) << v->name();
    EXPECT_EQ(mv->initializer().get(), v->initializer().get()) << v->name();
  }
  EXPECT_GE(state, m->training->updateBinding.size());
  for (const auto &kv : m2->training->updateBinding) {
    const Value *v = alg2.findValue(kv.first);
    ASSERT_TRUE(v && v->isInitializer() && v->isState) << kv.first;
    EXPECT_NE(alg2.findValue(kv.second), nullptr) << kv.second;
  }

  // A second trip changes nothing: same bytes out.
  onnx::ModelProto proto2;
  exportModel(*m2, proto2);
  EXPECT_EQ(serialize(proto2), serialize(proto));
}

TEST(OnnxTraining, StepModelIsFunctional) {
  auto m = compileSeed();
  const Graph &alg = *m->training->algorithm;
  onnx::ModelProto proto;
  exportStepModel(*m, proto);
  EXPECT_EQ(proto.training_info_size(), 0);
  const auto &g = proto.graph();
  EXPECT_EQ(g.name(), "train_step");

  // Inputs: the state in update_binding order, then the batch.
  std::vector<std::string> inputs, expectedInputs;
  for (const auto &vi : g.input())
    inputs.push_back(vi.name());
  std::set<std::string> bound;
  for (const auto &kv : m->training->updateBinding) {
    expectedInputs.push_back(kv.first);
    bound.insert(kv.first);
  }
  for (const Value *v : alg.initializers())
    if (v->isState && !bound.count(v->name()))
      expectedInputs.push_back(v->name());
  for (const Value *v : alg.inputs())
    expectedInputs.push_back(v->name());
  EXPECT_EQ(inputs, expectedInputs);
  EXPECT_EQ(inputs.back(), "y");
  for (const auto &vi : g.input())
    EXPECT_TRUE(vi.type().tensor_type().has_shape()) << vi.name();

  // Outputs: the loss, then each state's new value, in binding order.
  std::vector<std::string> outputs, expectedOutputs{"loss"};
  for (const auto &vi : g.output())
    outputs.push_back(vi.name());
  for (const auto &kv : m->training->updateBinding)
    expectedOutputs.push_back(kv.second);
  EXPECT_EQ(outputs, expectedOutputs);

  // No state is left as an initializer.
  for (const auto &t : g.initializer())
    EXPECT_FALSE(std::count(inputs.begin(), inputs.end(), t.name()))
        << t.name();
  expectCheckerAccepts(proto);

  // The step model is itself a loadable model; the source is untouched.
  auto step = importModel(proto, "step.onnx", ".");
  EXPECT_EQ(step->graph->inputs().size(), inputs.size());
  EXPECT_FALSE(step->training);
  EXPECT_EQ(alg.inputs().size(), 2u);
  EXPECT_TRUE(alg.findValue("loss_scale")->isInitializer());

  // The same after a round trip through the training_info form.
  TempDir dir;
  auto m2 = reimport(*m, dir);
  onnx::ModelProto proto2;
  exportStepModel(*m2, proto2);
  EXPECT_EQ(serialize(proto2), serialize(proto));

  Model plain;
  onnx::ModelProto none;
  EXPECT_THROW(exportStepModel(plain, none), Error);
}

TEST(OnnxTraining, StepModelFollowsTheBindingOrder) {
  // A step whose outputs are not in binding order and does not output one
  // bound value: the step model still pairs state i with output 1 + i.
  Model m;
  for (const char *name : {"w1", "w2", "frozen"})
    m.graph->addInitializer(name, Tensor::fromFloats({2}, {1, 2}))->isState =
        true;
  TrainingInfo info;
  info.algorithm = std::make_unique<Graph>("train_step");
  Graph &a = *info.algorithm;
  Value *x = a.addInput("x", DType::F32, {Dim(2)});
  std::map<std::string, Value *> state;
  for (const char *name : {"frozen", "w1", "w2"}) {
    state[name] =
        a.addInitializer(name, m.graph->findValue(name)->initializer());
    state[name]->isState = true;
  }
  Value *lr = a.addInitializer("lr", Tensor::fromFloats({1}, {0.5f}));
  Value *w1New =
      a.createNodeWithOutputs("Sub", {state["w1"], x}, {"w1_new"}, "u1")
          ->output(0);
  Value *w2New =
      a.createNodeWithOutputs("Mul", {state["w2"], lr}, {"w2_new"}, "u2")
          ->output(0);
  Value *loss =
      a.createNodeWithOutputs("Add", {w1New, state["frozen"]}, {"loss"}, "l")
          ->output(0);
  for (Value *v : {w1New, w2New, loss})
    v->setType(DType::F32, {Dim(2)});
  a.addOutput(loss);
  a.addOutput(w1New); // w2_new is bound but not an output
  info.updateBinding = {{"w2", "w2_new"}, {"w1", "w1_new"}};
  m.training = std::move(info);

  onnx::ModelProto proto;
  exportStepModel(m, proto);
  std::vector<std::string> inputs, outputs, inits, infos;
  for (const auto &vi : proto.graph().input())
    inputs.push_back(vi.name());
  for (const auto &vi : proto.graph().output())
    outputs.push_back(vi.name());
  for (const auto &t : proto.graph().initializer())
    inits.push_back(t.name());
  for (const auto &vi : proto.graph().value_info())
    infos.push_back(vi.name());
  EXPECT_EQ(inputs, (std::vector<std::string>{"w2", "w1", "frozen", "x"}));
  EXPECT_EQ(outputs, (std::vector<std::string>{"loss", "w2_new", "w1_new"}));
  EXPECT_EQ(inits, (std::vector<std::string>{"lr"}));
  // Every typed value is an output here: none is repeated in value_info.
  EXPECT_EQ(infos, std::vector<std::string>{});
  EXPECT_EQ(proto.graph().output(1).type().tensor_type().shape().dim_size(), 1);
  // The model itself is untouched.
  EXPECT_TRUE(m.training->algorithm->findValue("w1")->isInitializer());
  EXPECT_EQ(m.training->algorithm->outputs().size(), 2u);
}

// --- robustness --------------------------------------------------------------

/// Loads `bytes` from `path`: 0 loaded, 1 mpc::Error; a failure message for
/// anything else.
int tryLoad(const std::string &path, const std::string &bytes,
            std::string &failure) {
  {
    // A new file, not a truncated one: ext4 flushes files replaced by
    // truncation on close, which makes 2000 rewrites take seconds.
    std::remove(path.c_str());
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), std::streamsize(bytes.size()));
  }
  try {
    loadModel(path);
    return 0;
  } catch (const Error &e) {
    if (std::string(e.what()).find('\n') != std::string::npos)
      failure = std::string("multi-line error: ") + e.what();
    return 1;
  } catch (const std::exception &e) {
    failure = std::string("std::exception (not mpc::Error): ") + e.what();
  } catch (...) {
    failure = "unknown exception";
  }
  return -1;
}

/// Runs `body` in a child process with its address space capped at
/// `headroom` bytes above the current size, so that an absurd allocation
/// fails (std::bad_alloc) instead of succeeding, and a crash or abort is
/// reported instead of killing the test binary. `body` returns "" or a
/// failure message.
std::string runIsolated(size_t headroom,
                        const std::function<std::string()> &body) {
  int fds[2];
  if (pipe(fds) != 0)
    return "pipe failed";
  pid_t pid = fork();
  if (pid < 0)
    return "fork failed";
  if (pid == 0) {
    close(fds[0]);
    size_t vm = 0;
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line))
      if (line.rfind("VmSize:", 0) == 0)
        vm = std::stoull(line.substr(7)) * 1024;
#ifndef __SANITIZE_ADDRESS__
    // AddressSanitizer's shadow memory needs terabytes of address space.
    struct rlimit lim;
    lim.rlim_cur = lim.rlim_max = vm + headroom;
    setrlimit(RLIMIT_AS, &lim);
#else
    (void)vm;
    (void)headroom;
#endif
    std::string msg;
    try {
      msg = body();
    } catch (const std::exception &e) {
      msg = std::string("escaped: ") + e.what();
    }
    if (write(fds[1], msg.data(), msg.size()) < 0)
      _exit(3);
    _exit(msg.empty() ? 0 : 1);
  }
  close(fds[1]);
  std::string msg;
  char buf[512];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0)
    msg.append(buf, size_t(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFSIGNALED(status))
    return "child killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
           msg + ")";
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return msg.empty() ? "child failed" : msg;
  return "";
}

TEST(OnnxRobustness, HarnessReportsCrashesAndHugeAllocations) {
  EXPECT_EQ(runIsolated(size_t(1) << 30, [] { return std::string(); }), "");
  EXPECT_CONTAINS(
      runIsolated(size_t(1) << 30, []() -> std::string { std::abort(); }),
      "killed by signal");
#ifdef __SANITIZE_ADDRESS__
  GTEST_SKIP() << "no address-space cap under AddressSanitizer";
#endif
  EXPECT_CONTAINS(runIsolated(size_t(1) << 30,
                              []() -> std::string {
                                std::vector<char> big(size_t(8) << 30, 1);
                                return big[12345] == 1 ? "allocated" : "?";
                              }),
                  "escaped: std::bad_alloc");
}

TEST(OnnxRobustness, CorruptedAndTruncatedSeedNeverCrashes) {
  const std::string seed = fileBytes(kSeedModel);
  ASSERT_GT(seed.size(), 1000u);
  TempDir dir;
  const std::string path = dir.file("fuzz.onnx");
  auto start = std::chrono::steady_clock::now();
  std::string failure = runIsolated(size_t(1) << 30, [&]() -> std::string {
    std::mt19937 rng(20240601);
    int loaded = 0, rejected = 0;
    for (int iter = 0; iter < 2000; ++iter) {
      std::string bytes = seed;
      std::string what;
      if (iter % 2 == 0) {
        size_t pos = rng() % bytes.size();
        char old = bytes[pos];
        do
          bytes[pos] = char(rng() & 0xff);
        while (bytes[pos] == old);
        what = "byte " + std::to_string(pos) + " = " +
               std::to_string(uint8_t(bytes[pos]));
      } else {
        bytes.resize(rng() % bytes.size());
        what = "truncated to " + std::to_string(bytes.size());
      }
      std::string fail;
      int r = tryLoad(path, bytes, fail);
      if (r < 0)
        return what + ": " + fail;
      (r == 0 ? loaded : rejected)++;
    }
    // Both outcomes occur (most corruptions of weights still load).
    if (loaded == 0 || rejected == 0)
      return "loaded " + std::to_string(loaded) + ", rejected " +
             std::to_string(rejected);
    return "";
  });
  EXPECT_EQ(failure, "");
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  EXPECT_LT(seconds, 10.0);
}

TEST(OnnxRobustness, CorruptedTextNeverCrashes) {
  // The same for the text path: the ONNX parser's own number conversions
  // throw std::exception on some inputs.
  const std::string seed = kSmallText;
  ASSERT_NE(parseModelText(seed, "small.onnxtext"), nullptr);
  TempDir dir;
  const std::string path = dir.file("fuzz.onnxtext");
  const std::string alphabet = "<>[](){}=,:;\"/-+.0123456789eE \n\\#xyzfloat";
  std::string failure = runIsolated(size_t(1) << 30, [&]() -> std::string {
    std::mt19937 rng(7);
    int loaded = 0;
    const std::vector<std::string> inserts = {
        "99999999999999999999", "1e99999", "-", "\"", "[", "<", "{", "//"};
    for (int iter = 0; iter < 800; ++iter) {
      std::string bytes = seed;
      std::string what;
      if (iter % 4 == 0) {
        bytes.resize(rng() % bytes.size());
        what = "truncated to " + std::to_string(bytes.size());
      } else if (iter % 4 == 3) {
        size_t pos = rng() % bytes.size();
        const std::string &ins = inserts[rng() % inserts.size()];
        bytes.insert(pos, ins);
        what = "inserted '" + ins + "' at " + std::to_string(pos);
      } else {
        size_t pos = rng() % bytes.size();
        bytes[pos] = iter % 4 == 1 ? alphabet[rng() % alphabet.size()]
                                   : char(rng() & 0xff);
        what = "byte " + std::to_string(pos) + " = " +
               std::to_string(uint8_t(bytes[pos]));
      }
      std::string fail;
      int r = tryLoad(path, bytes, fail);
      if (r < 0)
        return what + ": " + fail;
      loaded += r == 0;
    }
    // Some mutations (inside values) must still parse.
    if (loaded == 0)
      return std::string("no mutated text loaded");
    return std::string();
  });
  EXPECT_EQ(failure, "");
}

} // namespace
