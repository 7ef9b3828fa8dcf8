// Tests for runtime/data/safetensors.h (the format writer),
// runtime/state_dict.h (which tensors of a compiled model a state_dict holds)
// and runtime/run_length.h (epochs, the schedule's end, durations), with
// Dataset::batch's epochs (drop_last).
#include "runtime/data/dataset.h"
#include "runtime/data/safetensors.h"
#include "runtime/run_length.h"
#include "runtime/state_dict.h"

#include "passes/onnx/onnx_io.h"
#include "passes/pipeline.h"
#include "runtime/data/npz.h"
#include "support/diagnostics.h"

#include "onnx/onnx_pb.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <unistd.h>

using namespace mpc;

namespace {

std::string tempPath(const std::string &name) {
  std::string dir = ::testing::TempDir();
  if (!dir.empty() && dir.back() != '/')
    dir += '/';
  return dir + "mpc_safetensors_test_" + std::to_string(::getpid()) + "_" +
         name;
}

std::string readBytes(const std::string &p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

/// A JSON value, as much of JSON as a safetensors header uses: objects,
/// arrays, strings and non-negative integers.
struct Json {
  enum Kind { Object, Array, String, Number } kind = Number;
  std::vector<std::pair<std::string, Json>> members; ///< in file order
  std::vector<Json> items;
  std::string text;
  uint64_t number = 0;

  const Json &operator[](const std::string &key) const {
    for (const auto &m : members)
      if (m.first == key)
        return m.second;
    throw std::runtime_error("no member " + key);
  }
};

/// A strict little parser: throws on anything it does not expect.
class JsonParser {
public:
  explicit JsonParser(const std::string &s) : s_(s) {}
  Json parseAll() {
    Json v = value();
    skipSpace();
    if (at_ != s_.size())
      throw std::runtime_error("trailing bytes");
    return v;
  }

private:
  void skipSpace() {
    while (at_ < s_.size() && (s_[at_] == ' ' || s_[at_] == '\n'))
      ++at_;
  }
  char next() {
    skipSpace();
    if (at_ >= s_.size())
      throw std::runtime_error("truncated");
    return s_[at_];
  }
  void expect(char c) {
    if (next() != c)
      throw std::runtime_error(std::string("expected ") + c);
    ++at_;
  }
  std::string string() {
    expect('"');
    std::string out;
    while (at_ < s_.size() && s_[at_] != '"') {
      char c = s_[at_++];
      if (static_cast<unsigned char>(c) < 0x20)
        throw std::runtime_error("raw control character in a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      char e = s_.at(at_++);
      if (e == 'u') {
        out += char(std::stoi(s_.substr(at_, 4), nullptr, 16));
        at_ += 4;
      } else if (e == '"' || e == '\\' || e == '/') {
        out += e;
      } else {
        throw std::runtime_error("unexpected escape");
      }
    }
    expect('"');
    return out;
  }
  Json value() {
    Json v;
    char c = next();
    if (c == '{') {
      v.kind = Json::Object;
      ++at_;
      if (next() == '}') {
        ++at_;
        return v;
      }
      for (;;) {
        std::string key = string();
        expect(':');
        v.members.emplace_back(key, value());
        if (next() == '}') {
          ++at_;
          return v;
        }
        expect(',');
      }
    }
    if (c == '[') {
      v.kind = Json::Array;
      ++at_;
      if (next() == ']') {
        ++at_;
        return v;
      }
      for (;;) {
        v.items.push_back(value());
        if (next() == ']') {
          ++at_;
          return v;
        }
        expect(',');
      }
    }
    if (c == '"') {
      v.kind = Json::String;
      v.text = string();
      return v;
    }
    if (c < '0' || c > '9')
      throw std::runtime_error("unexpected character");
    while (at_ < s_.size() && s_[at_] >= '0' && s_[at_] <= '9')
      v.number = v.number * 10 + uint64_t(s_[at_++] - '0');
    return v;
  }

  const std::string &s_;
  size_t at_ = 0;
};

/// A written file taken apart: its header and the data after it.
struct ParsedFile {
  uint64_t headerSize = 0;
  Json header;
  std::string data;
};

ParsedFile parseFile(const std::string &bytes) {
  ParsedFile f;
  EXPECT_GE(bytes.size(), 8u);
  for (int i = 0; i < 8; ++i)
    f.headerSize |= uint64_t(static_cast<unsigned char>(bytes[size_t(i)]))
                    << (8 * i);
  EXPECT_LE(8 + f.headerSize, bytes.size());
  f.header = JsonParser(bytes.substr(8, f.headerSize)).parseAll();
  f.data = bytes.substr(8 + f.headerSize);
  return f;
}

TEST(Safetensors, HeaderAndBytesReadBack) {
  Tensor w = Tensor::fromFloats({2, 3}, {1, 2, 3, 4, 5, -6.5f});
  Tensor b = Tensor::fromFloats({1}, {0.25f});
  Tensor count = Tensor::scalar(DType::I64, 7);
  Tensor empty(DType::F32, {0, 4});
  std::string odd = "layer.\"0\"\\x\n";
  std::vector<SafetensorsTensor> tensors = {
      {"w", &w}, {odd, &b}, {"bn.num_batches_tracked", &count}, {"e", &empty}};
  std::string path = tempPath("a.safetensors");
  writeSafetensors(path, tensors, {{"format", "pt"}, {"note", "a\"b"}});
  std::string bytes = readBytes(path);
  ParsedFile f = parseFile(bytes);
  // The data starts 8-aligned, the header padded with spaces.
  EXPECT_EQ((8 + f.headerSize) % 8, 0u);
  EXPECT_EQ(f.header.kind, Json::Object);
  EXPECT_EQ(f.header["__metadata__"]["format"].text, "pt");
  EXPECT_EQ(f.header["__metadata__"]["note"].text, "a\"b");
  uint64_t end = 0;
  for (const SafetensorsTensor &t : tensors) {
    const Json &e = f.header[t.name];
    EXPECT_EQ(e["dtype"].text, safetensorsDType(t.value->dtype)) << t.name;
    ASSERT_EQ(e["shape"].items.size(), t.value->dims.size()) << t.name;
    for (size_t i = 0; i < t.value->dims.size(); ++i)
      EXPECT_EQ(int64_t(e["shape"].items[i].number), t.value->dims[i]);
    uint64_t begin = e["data_offsets"].items.at(0).number;
    uint64_t stop = e["data_offsets"].items.at(1).number;
    EXPECT_EQ(begin, end) << t.name << ": data back to back, in order";
    ASSERT_EQ(stop - begin, t.value->byteSize()) << t.name;
    if (t.value->byteSize() > 0) { // an empty tensor has no bytes to compare
      EXPECT_EQ(std::memcmp(f.data.data() + begin, t.value->bytes.data(),
                            t.value->byteSize()),
                0)
          << t.name;
    }
    end = stop;
  }
  EXPECT_EQ(f.data.size(), end) << "nothing after the last tensor";
  EXPECT_EQ(f.header["w"]["dtype"].text, "F32");
  EXPECT_EQ(f.header["bn.num_batches_tracked"]["dtype"].text, "I64");
  EXPECT_EQ(f.header["bn.num_batches_tracked"]["shape"].items.size(), 0u);
  std::remove(path.c_str());
}

TEST(Safetensors, JsonQuoteEscapes) {
  EXPECT_EQ(jsonQuote("a.b"), "\"a.b\"");
  EXPECT_EQ(jsonQuote("q\"b\\s"), "\"q\\\"b\\\\s\"");
  EXPECT_EQ(jsonQuote(std::string("\n\x01", 2)), "\"\\u000a\\u0001\"");
  EXPECT_EQ(jsonQuote("\xc3\xa9"), "\"\xc3\xa9\""); // UTF-8 as it is
}

TEST(Safetensors, RefusesBadNamesAndLeavesNoFile) {
  Tensor t = Tensor::fromFloats({1}, {1});
  std::string path = tempPath("bad.safetensors");
  for (const auto &names : std::vector<std::vector<std::string>>{
           {"a", "a"}, {"__metadata__"}, {""}}) {
    std::vector<SafetensorsTensor> tensors;
    for (const std::string &n : names)
      tensors.push_back({n, &t});
    try {
      writeSafetensors(path, tensors, {});
      FAIL() << "accepted " << names[0];
    } catch (const Error &e) {
      EXPECT_EQ(std::string(e.what()).rfind(path + ": safetensors: ", 0), 0u)
          << e.what();
    }
    EXPECT_TRUE(readBytes(path).empty()) << "no file written";
  }
}

TEST(Safetensors, NoMetadataNoTensors) {
  std::string header = safetensorsHeader({}, {});
  ParsedFile f = parseFile(header);
  EXPECT_EQ(f.header.kind, Json::Object);
  EXPECT_TRUE(f.header.members.empty());
  EXPECT_EQ(header.size() % 8, 0u);
}

// The rule of state_dict.h on a compiled model: parameters (trainable and
// frozen) and batch-norm statistics; no optimizer state, counter or
// constant; num_batches_tracked added.
TEST(StateDict, CompiledModelsParametersAndBuffers) {
  const char *text = R"(
<ir_version: 8, opset_import: ["" : 17]>
net (float[4,3] x, int64[4] y) => (float loss)
  <float[5,3] enc_weight = {0.1, -0.2, 0.3, 0.05, 0.4, -0.1, 0.2, 0.2, -0.3, 0.1, 0.0, 0.15, -0.25, 0.35, 0.05},
   float[5] bn_weight = {1, 0.9, 1.1, 1, 0.8},
   float[5] bn_bias = {0, 0.1, -0.1, 0, 0.05},
   float[5] bn_running_mean = {0, 0, 0, 0, 0},
   float[5] bn_running_var = {1, 1, 1, 1, 1},
   float[2,5] head_weight = {0.3, -0.1, 0.2, 0.1, -0.2, -0.3, 0.25, 0.1, 0.05, 0.2},
   float[2] head_bias = {0, 0}>
{
  h = Gemm<transB = 1>(x, enc_weight)
  n, m, v = BatchNormalization<training_mode = 1, momentum = 0.9>(h, bn_weight, bn_bias, bn_running_mean, bn_running_var)
  half = Constant<value = float {0.5}>()
  r = Relu(n)
  s = Mul(r, half)
  z = Gemm<transB = 1>(s, head_weight, head_bias)
  loss = SoftmaxCrossEntropyLoss<reduction = "mean">(z, y)
}
)";
  // Compiled with head.* frozen, then written and read back as mpc-run
  // reads a compiled model (the importer tells the step's state from its
  // constants).
  std::unique_ptr<Model> compiled = parseModelText(text, "net.onnxtext");
  // The text syntax takes no '.' in names; torch's are module paths.
  for (const char *name :
       {"enc_weight", "bn_weight", "bn_bias", "bn_running_mean",
        "bn_running_var", "head_weight", "head_bias"}) {
    std::string dotted = name;
    dotted[dotted.find('_')] = '.';
    compiled->graph->renameValue(compiled->graph->findValue(name), dotted);
  }
  CompileOptions options;
  options.precision = DType::F32;
  options.optimizer = "adam";
  options.frozen = "head\\..*";
  Statistics stats;
  runPipeline(*compiled, defaultPipeline(), options, PipelineConfig{}, stats);
  onnx::ModelProto proto;
  exportModel(*compiled, proto);
  std::unique_ptr<Model> model = importModel(proto, "net.onnx", ".");
  std::vector<StateDictEntry> sd = stateDictOf(*model, 12, false);
  std::vector<std::string> names;
  for (const StateDictEntry &e : sd)
    names.push_back(e.name);
  EXPECT_EQ(names, (std::vector<std::string>{
                       "enc.weight", "bn.weight", "bn.bias", "bn.running_mean",
                       "bn.running_var", "bn.num_batches_tracked",
                       "head.weight", "head.bias"}));
  for (const StateDictEntry &e : sd)
    if (e.name == "bn.num_batches_tracked") {
      EXPECT_EQ(e.value.dtype, DType::I64);
      EXPECT_TRUE(e.value.dims.empty());
      EXPECT_EQ(e.value.getAsDouble(0), 12);
    }
}

// torch's dynamo export of a batch norm kept in eval mode (fine-tuning with
// frozen statistics): its statistics are constants of the step but buffers
// of the module; the constant 0.5 (val_8) is not module state. The
// persistent buffer `offset` is a constant to the step but state to the
// module: the importer keeps its name (mpc.buffers), so it is written.
TEST(StateDict, DynamoExportWithFrozenBatchNorm) {
  std::unique_ptr<Model> compiled = loadModel(
      std::string(MPC_SOURCE_DIR) + "/models/frozen_norm_dynamo.onnx");
  CompileOptions options;
  options.precision = DType::F32;
  options.optimizer = "adamw";
  Statistics stats;
  runPipeline(*compiled, defaultPipeline(), options, PipelineConfig{}, stats);
  onnx::ModelProto proto;
  exportModel(*compiled, proto);
  std::unique_ptr<Model> model = importModel(proto, "net.onnx", ".");
  std::vector<std::string> names;
  for (const StateDictEntry &e : stateDictOf(*model, 5, false)) {
    names.push_back(e.name);
    if (e.name == "norm.num_batches_tracked") {
      EXPECT_EQ(e.value.getAsDouble(0), 0) << "a frozen batch norm counts none";
    }
  }
  EXPECT_EQ(names, (std::vector<std::string>{
                       "temperature", "fc1.weight", "fc1.bias", "norm.weight",
                       "norm.bias", "fc2.weight", "fc2.bias", "offset",
                       "norm.running_mean", "norm.running_var",
                       "norm.num_batches_tracked"}));
}

TEST(RunLength, EpochsOfWholeSteps) {
  EpochPlan p = planEpochs(100, 8, 1, 1, "d.npz");
  EXPECT_EQ(p.globalBatch, 8);
  EXPECT_EQ(p.stepsPerEpoch, 12);
  EXPECT_EQ(p.leftOut, 4);
  EXPECT_EQ(p.batchesPerEpoch, 12);
  p = planEpochs(100, 4, 3, 2, "d.npz"); // 24 samples a step
  EXPECT_EQ(p.stepsPerEpoch, 4);
  EXPECT_EQ(p.leftOut, 4);
  EXPECT_EQ(p.batchesPerEpoch, 24);
  try {
    planEpochs(20, 4, 3, 2, "d.npz");
    FAIL();
  } catch (const Error &e) {
    EXPECT_STREQ(e.what(), "d.npz: holds 20 samples, fewer than one optimizer "
                           "step takes (4 x 3 micro-batches x 2 ranks = 24)");
  }
}

TEST(RunLength, ScheduleEnd) {
  LrSchedule s;
  s.kind = LrScheduleKind::Linear;
  s.baseLr = 0.1;
  s.totalSteps = 10;
  EXPECT_EQ(lrScheduleWarning(s, 10), "");
  EXPECT_EQ(lrScheduleWarning(s, 15),
            "the learning-rate schedule (linear) decays to 0 at step 10, the "
            "run takes 15 steps; after step 10 the rate stays at 0 (mpc-opt "
            "--total-steps sets where it ends)");
  s.kind = LrScheduleKind::Cosine;
  EXPECT_NE(lrScheduleWarning(s, 15).find("the rate rises again"),
            std::string::npos);
  s.kind = LrScheduleKind::Step;
  EXPECT_EQ(lrScheduleEnd(s), std::nullopt);
  EXPECT_EQ(lrScheduleWarning(s, 1000), "");
  s.kind = LrScheduleKind::WarmupStableDecay;
  s.warmupSteps = 2;
  s.stableSteps = 3;
  s.decaySteps = 4;
  EXPECT_EQ(lrScheduleEnd(s), 9);
}

TEST(RunLength, Durations) {
  EXPECT_EQ(formatDuration(0.042), "0.04s");
  EXPECT_EQ(formatDuration(4.24), "4.2s");
  EXPECT_EQ(formatDuration(42.4), "42s");
  EXPECT_EQ(formatDuration(185), "3m05s");
  EXPECT_EQ(formatDuration(7620), "2h07m");
}

/// The samples of a batch of the one-column dataset 0..n-1.
std::vector<int64_t> samplesOf(const Dataset &d, int64_t index, int64_t batch,
                               bool shuffle, int64_t perEpoch = 0) {
  auto b = d.batch(index, batch, shuffle, 3, perEpoch);
  std::vector<int64_t> out;
  for (int64_t i = 0; i < batch; ++i)
    out.push_back(int64_t(b[0].second.getAsDouble(i)));
  return out;
}

Dataset countingDataset(int64_t n) {
  Tensor x(DType::F32, {n, 1});
  for (int64_t i = 0; i < n; ++i)
    x.setFromDouble(i, double(i));
  std::string path = tempPath("count.npz");
  // Through an npz, as mpc-run reads data.
  std::vector<std::pair<std::string, Tensor>> arrays = {{"x", x}};
  std::string err;
  EXPECT_TRUE(writeNpz(path, arrays, err)) << err;
  DataInputSpec spec;
  spec.name = "x";
  spec.dtype = DType::F32;
  spec.sampleDims = {1};
  Dataset d = Dataset::fromNpz(path, {spec});
  std::remove(path.c_str());
  return d;
}

TEST(DatasetEpochs, DropLastNotWrapped) {
  Dataset d = countingDataset(10);
  // 3 batches of 3 an epoch; sample 9 is left out, never wrapped.
  EXPECT_EQ(samplesOf(d, 2, 3, false), (std::vector<int64_t>{6, 7, 8}));
  EXPECT_EQ(samplesOf(d, 3, 3, false), (std::vector<int64_t>{0, 1, 2}));
  // Epochs of 2 batches (a step of 2 micro-batches: 3 would straddle).
  EXPECT_EQ(samplesOf(d, 2, 3, false, 2), (std::vector<int64_t>{0, 1, 2}));
  // Shuffled: each epoch a permutation, its first 9 taken.
  std::vector<int64_t> e0, e1;
  for (int64_t i = 0; i < 3; ++i) {
    for (int64_t s : samplesOf(d, i, 3, true))
      e0.push_back(s);
    for (int64_t s : samplesOf(d, 3 + i, 3, true))
      e1.push_back(s);
  }
  EXPECT_NE(e0, e1);
  for (auto *e : {&e0, &e1}) {
    std::sort(e->begin(), e->end());
    EXPECT_EQ(std::adjacent_find(e->begin(), e->end()), e->end())
        << "no sample twice in an epoch";
  }
  try {
    d.batch(0, 11, false, 0);
    FAIL();
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("holds 10 samples, fewer than one "
                                         "batch of 11"),
              std::string::npos)
        << e.what();
  }
}

} // namespace
