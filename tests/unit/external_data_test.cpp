// ONNX external data on write (passes/onnx/external_data_writer.h): the
// model file writer and writeModelAtomically lay a model's tensors out the
// same way and write the same files; what they write loads back; and no
// failure (a missing or unwritable folder, a full disk, a fill that fails or
// throws, an output naming an input) leaves a partial file or breaks the
// previous model and data file pair.
#include "passes/onnx/external_data_writer.h"
#include "passes/onnx/onnx_io.h"
#include "passes/pipeline.h"
#include "passes/registry.h"
#include "support/diagnostics.h"
#include "support/file_io.h"

#include "onnx/onnx_pb.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <string>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace mpc {
namespace {

const std::string kModels = std::string(MPC_SOURCE_DIR) + "/models/";

/// gpt2_tiny compiled with Adam: 31 tensors of 1 KiB or more (weights and
/// moments), the rest under.
std::unique_ptr<Model> compiledModel() {
  auto m = loadModel(kModels + "gpt2_tiny.onnx");
  CompileOptions o;
  o.optimizer = "adam";
  Statistics stats;
  runPipeline(*m, defaultPipeline(), o, PipelineConfig{}, stats);
  return m;
}

ModelWriteOptions always() {
  ModelWriteOptions o;
  o.externalData = ExternalData::Always;
  o.fsync = Fsync::No;
  return o;
}

// A fresh folder per test, removed with what is left in it.
class ExternalDataTest : public ::testing::Test {
protected:
  void SetUp() override {
    char tmpl[] = "/tmp/mpc-external-data-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::permissions(dir_, std::filesystem::perms::owner_all,
                                 std::filesystem::perm_options::add, ec);
    std::filesystem::remove_all(dir_, ec);
  }
  /// The names in `folder` (default: the test's), sorted.
  std::vector<std::string> entries(const std::string &folder = "") const {
    std::vector<std::string> names;
    for (const auto &e :
         std::filesystem::directory_iterator(folder.empty() ? dir_ : folder))
      names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }
  std::string dir_;
};

using Names = std::vector<std::string>;

TEST_F(ExternalDataTest, WriterAndProtoPathWriteTheSameFiles) {
  auto m = compiledModel();
  std::filesystem::create_directory(dir_ + "/a");
  std::filesystem::create_directory(dir_ + "/b");
  writeModelFile(*m, dir_ + "/a/m.onnx", always());
  onnx::ModelProto proto;
  exportModel(*m, proto);
  writeModelAtomically(dir_ + "/b/m.onnx", proto, always());
  EXPECT_EQ(entries(dir_ + "/a"), (Names{"m.onnx", "m.onnx.data"}));
  EXPECT_EQ(entries(dir_ + "/b"), (Names{"m.onnx", "m.onnx.data"}));
  EXPECT_EQ(readFile(dir_ + "/a/m.onnx"), readFile(dir_ + "/b/m.onnx"));
  EXPECT_EQ(readFile(dir_ + "/a/m.onnx.data"),
            readFile(dir_ + "/b/m.onnx.data"));
  // The proto is left pointing into the data file, as the model says.
  std::string left;
  ASSERT_TRUE(proto.SerializeToString(&left));
  EXPECT_EQ(left, readFile(dir_ + "/a/m.onnx"));
}

TEST_F(ExternalDataTest, LargeTensorsGoOutAlignedAndSmallOnesStay) {
  auto m = compiledModel();
  writeModelFile(*m, dir_ + "/m.onnx", always());
  onnx::ModelProto proto;
  ASSERT_TRUE(proto.ParseFromString(readFile(dir_ + "/m.onnx")));
  size_t dataSize = std::filesystem::file_size(dir_ + "/m.onnx.data");
  int external = 0, inlineSmall = 0;
  for (const onnx::TensorProto &t : proto.graph().initializer()) {
    if (t.data_location() != onnx::TensorProto::EXTERNAL) {
      EXPECT_LT(t.raw_data().size(), kExternalDataMinBytes) << t.name();
      ++inlineSmall;
      continue;
    }
    ++external;
    EXPECT_FALSE(t.has_raw_data()) << t.name();
    ASSERT_EQ(t.external_data_size(), 3) << t.name();
    EXPECT_EQ(t.external_data(0).key(), "location");
    EXPECT_EQ(t.external_data(0).value(), "m.onnx.data");
    EXPECT_EQ(t.external_data(1).key(), "offset");
    EXPECT_EQ(t.external_data(2).key(), "length");
    size_t offset = std::stoull(t.external_data(1).value());
    size_t length = std::stoull(t.external_data(2).value());
    EXPECT_EQ(offset % kExternalDataAlignment, 0u) << t.name();
    EXPECT_GE(length, kExternalDataMinBytes) << t.name();
    EXPECT_LE(offset + length, dataSize) << t.name();
  }
  EXPECT_GT(external, 0);
  EXPECT_GT(inlineSmall, 0);
}

TEST_F(ExternalDataTest, LoadsBackTheSameTensors) {
  auto m = compiledModel();
  writeModelFile(*m, dir_ + "/m.onnx", always());
  auto back = loadModel(dir_ + "/m.onnx");
  ASSERT_TRUE(back->training);
  for (const Graph *g : {m->graph.get(), m->training->algorithm.get()}) {
    const Graph &theirs =
        g == m->graph.get() ? *back->graph : *back->training->algorithm;
    for (const Value *init : g->initializers()) {
      const Value *other = theirs.findValue(init->name());
      if (!other || !other->isInitializer())
        continue; // step state lives in the main graph of the file
      const ByteBuffer &a = init->initializer()->bytes;
      const ByteBuffer &b = other->initializer()->bytes;
      ASSERT_EQ(a.size(), b.size()) << init->name();
      EXPECT_EQ(std::memcmp(a.unalignedData(), b.unalignedData(), a.size()), 0)
          << init->name();
    }
  }
}

TEST_F(ExternalDataTest, AutoKeepsASmallModelInOneFile) {
  auto m = compiledModel();
  writeModelFile(*m, dir_ + "/m.onnx", ModelWriteOptions{});
  onnx::ModelProto proto;
  exportModel(*m, proto);
  writeModelAtomically(dir_ + "/p.onnx", proto, ModelWriteOptions{});
  EXPECT_EQ(entries(), (Names{"m.onnx", "p.onnx"}));
}

TEST_F(ExternalDataTest, AMissingOrUnwritableFolderIsOneLineAndLeavesNothing) {
  auto m = compiledModel();
  auto expectRefused = [&](const std::string &path) {
    try {
      writeModelFile(*m, path, always());
      ADD_FAILURE() << path << " was written";
    } catch (const Error &e) {
      std::string msg = e.what();
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
      EXPECT_EQ(msg.rfind(path + ".data: cannot create", 0), 0u) << msg;
    }
  };
  expectRefused(dir_ + "/missing/m.onnx");
  // A folder that is a file.
  writeFileAtomically(dir_ + "/file", std::string("x"), Fsync::No);
  expectRefused(dir_ + "/file/m.onnx");
  EXPECT_EQ(entries(), (Names{"file"}));
  // A folder without write permission (root writes anywhere: nothing to
  // refuse then).
  if (::geteuid() != 0) {
    std::filesystem::create_directory(dir_ + "/ro");
    ::chmod((dir_ + "/ro").c_str(), 0555);
    expectRefused(dir_ + "/ro/m.onnx");
    EXPECT_TRUE(entries(dir_ + "/ro").empty());
  }
}

/// Sets RLIMIT_FSIZE to `bytes` (SIGXFSZ ignored: a write past it fails
/// with EFBIG, as on a full disk) until destroyed.
class FileSizeLimit {
public:
  explicit FileSizeLimit(rlim_t bytes) {
    old_ = std::signal(SIGXFSZ, SIG_IGN);
    ::getrlimit(RLIMIT_FSIZE, &saved_);
    rlimit r = saved_;
    r.rlim_cur = bytes;
    ::setrlimit(RLIMIT_FSIZE, &r);
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &saved_);
    std::signal(SIGXFSZ, old_);
  }

private:
  rlimit saved_{};
  void (*old_)(int) = nullptr;
};

TEST_F(ExternalDataTest, AFailureMidWriteKeepsThePreviousPair) {
  auto m = compiledModel();
  std::string path = dir_ + "/m.onnx";
  writeModelFile(*m, path, always());
  std::string model = readFile(path), data = readFile(path + ".data");
  // Other weights, a data file that stops growing a third of the way in.
  for (Value *init : m->graph->initializers()) {
    Tensor &t = *init->initializer();
    t.bytes = ByteBuffer(std::vector<uint8_t>(t.bytes.size(), 1));
  }
  try {
    FileSizeLimit limit(data.size() / 3);
    writeModelFile(*m, path, always());
    ADD_FAILURE() << "the write past the file size limit succeeded";
  } catch (const Error &e) {
    std::string msg = e.what();
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    EXPECT_EQ(msg.rfind(path + ".data: write error: File too large", 0), 0u)
        << msg;
  }
  EXPECT_EQ(entries(), (Names{"m.onnx", "m.onnx.data"}));
  EXPECT_EQ(readFile(path), model);
  EXPECT_EQ(readFile(path + ".data"), data);
  EXPECT_NO_THROW(loadModel(path));
}

TEST_F(ExternalDataTest, AFailedOrThrowingModelFillKeepsThePreviousPair) {
  std::string path = dir_ + "/m.onnx", data = path + ".data", error;
  auto writes = [](const std::string &bytes) {
    return [bytes](int fd, std::string &err) {
      return writeAll(fd, bytes.data(), bytes.size(), "f", err);
    };
  };
  ASSERT_TRUE(writeFilePairAtomically(data, writes("old data"), path,
                                      writes("old model"), error, Fsync::No))
      << error;
  // The data file is complete when the model's fill fails: it goes too.
  EXPECT_FALSE(writeFilePairAtomically(
      data, writes("new data"), path,
      [](int fd, std::string &err) {
        ::write(fd, "partial", 7);
        err = "m.onnx: write error: No space left on device";
        return false;
      },
      error, Fsync::No));
  EXPECT_EQ(error, "m.onnx: write error: No space left on device");
  EXPECT_FALSE(writeFilePairAtomically(
      data, writes("new data"), path,
      [](int, std::string &) -> bool {
        throw Error("cannot serialize the output model (over 2 GiB?)");
      },
      error, Fsync::No));
  EXPECT_EQ(error, path + ": cannot serialize the output model (over 2 GiB?)");
  EXPECT_EQ(entries(), (Names{"m.onnx", "m.onnx.data"}));
  EXPECT_EQ(readFile(path), "old model");
  EXPECT_EQ(readFile(data), "old data");
  // And a pair that succeeds replaces both, leaving nothing set aside.
  ASSERT_TRUE(writeFilePairAtomically(data, writes("new data"), path,
                                      writes("new model"), error, Fsync::No))
      << error;
  EXPECT_EQ(entries(), (Names{"m.onnx", "m.onnx.data"}));
  EXPECT_EQ(readFile(path), "new model");
  EXPECT_EQ(readFile(data), "new data");
}

TEST_F(ExternalDataTest, ATargetThatIsNotARegularFileIsRefusedFirst) {
  std::string path = dir_ + "/m.onnx", error;
  std::filesystem::create_directory(path + ".data");
  bool filled = false;
  auto fill = [&](int, std::string &) { return filled = true; };
  EXPECT_FALSE(
      writeFilePairAtomically(path + ".data", fill, path, fill, error));
  EXPECT_FALSE(filled);
  EXPECT_EQ(error.rfind(path + ".data: is not a regular file", 0), 0u) << error;
  EXPECT_EQ(entries(), (Names{"m.onnx.data"}));
}

TEST_F(ExternalDataTest, RefusesToReplaceAFileTheInputReads) {
  auto m = compiledModel();
  std::string path = dir_ + "/m.onnx";
  writeModelFile(*m, path, always());
  std::string data = readFile(path + ".data");
  // The input reads the data file under another name (a hard link): the
  // files are told apart by identity, not by name.
  ASSERT_EQ(::link((path + ".data").c_str(), (dir_ + "/in.data").c_str()), 0);
  ModelWriteOptions o = always();
  o.inputFiles = {dir_ + "/in.onnx", dir_ + "/in.data"};
  try {
    writeModelFile(*m, path, o);
    ADD_FAILURE() << "an input's data file was replaced";
  } catch (const Error &e) {
    EXPECT_EQ(std::string(e.what()),
              path + ".data: is " + dir_ +
                  "/in.data, a file the input model reads; choose another "
                  "output path");
  }
  EXPECT_EQ(readFile(dir_ + "/in.data"), data);
  // Written inline, the model leaves the data file alone: allowed.
  o.externalData = ExternalData::Auto;
  EXPECT_NO_THROW(writeModelFile(*m, path, o));
  EXPECT_EQ(readFile(dir_ + "/in.data"), data);
}

TEST_F(ExternalDataTest, InputFilesToKeepAreTheInputAndItsDataFiles) {
  auto m = compiledModel();
  std::string in = dir_ + "/in.onnx", other = dir_ + "/other.onnx";
  writeModelFile(*m, other, always());
  std::filesystem::rename(other, in); // reads other.onnx.data
  EXPECT_EQ(externalDataFiles(in), (Names{dir_ + "/other.onnx.data"}));
  EXPECT_EQ(inputFilesToKeep(in, other),
            (Names{in, dir_ + "/other.onnx.data"}));
  // Onto itself: the input is replaced whole.
  EXPECT_TRUE(inputFilesToKeep(in, in).empty());
  // Nothing at the output's paths: nothing to replace.
  EXPECT_TRUE(inputFilesToKeep(in, dir_ + "/fresh.onnx").empty());
  EXPECT_TRUE(externalDataFiles(kModels + "gpt2_tiny.onnx").empty());
}

TEST_F(ExternalDataTest, RefusesADataFileNameOnnxWouldRefuse) {
  auto m = compiledModel();
  std::string path = dir_ + "/m..onnx";
  try {
    writeModelFile(*m, path, always());
    ADD_FAILURE() << path << " was written";
  } catch (const Error &e) {
    EXPECT_EQ(std::string(e.what()).rfind(path + ": cannot name a data file "
                                                 "m..onnx.data",
                                          0),
              0u)
        << e.what();
  }
  EXPECT_TRUE(entries().empty());
}

} // namespace
} // namespace mpc
