// Reading ONNX external data safely (passes/onnx/external_data_reader.h):
// locations stay in the model's folder whatever symlinks say, non-regular
// files are refused without blocking, sizes are checked before anything is
// read (dims, data type, the file's real size, the byte limit), and what is
// read is exactly the file's bytes.
#include "passes/onnx/external_data_reader.h"
#include "passes/onnx/onnx_io.h"
#include "support/available_memory.h"
#include "support/diagnostics.h"

#include "onnx/onnx_pb.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace mpc {
namespace {

#define EXPECT_CONTAINS(text, part)                                            \
  EXPECT_NE(std::string(text).find(part), std::string::npos)                   \
      << "'" << (text) << "' does not contain '" << (part) << "'"

/// root/ with the model's folder m/ (w.bin: 16 bytes, sub/) and a folder
/// outside it (outside/secret.bin), removed at the end.
class ExternalDataReaderTest : public ::testing::Test {
protected:
  void SetUp() override {
    char tmpl[] = "/tmp/mpc-external-reader-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    dir_ = root_ + "/m";
    std::filesystem::create_directories(dir_ + "/sub");
    std::filesystem::create_directories(root_ + "/outside");
    write(dir_ + "/w.bin", bytes_);
    write(root_ + "/outside/secret.bin", bytes_);
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
  static void write(const std::string &path, const std::string &bytes) {
    std::ofstream(path, std::ios::binary) << bytes;
  }
  /// A float tensor 'w' of `dims` whose data is at `location`.
  static onnx::TensorProto
  tensor(const std::string &location, std::vector<int64_t> dims = {4},
         int dataType = onnx::TensorProto::FLOAT,
         std::vector<std::pair<std::string, std::string>> more = {}) {
    onnx::TensorProto tp;
    tp.set_name("w");
    tp.set_data_type(dataType);
    for (int64_t d : dims)
      tp.add_dims(d);
    tp.set_data_location(onnx::TensorProto::EXTERNAL);
    more.insert(more.begin(), {"location", location});
    for (const auto &kv : more) {
      auto *e = tp.add_external_data();
      e->set_key(kv.first);
      e->set_value(kv.second);
    }
    return tp;
  }
  /// The error reading `tp` gives ("" when it reads).
  std::string error(onnx::TensorProto tp, uint64_t limit = 0) {
    ExternalDataReader reader(dir_, limit);
    try {
      reader.read(tp, "initializer 'w'");
    } catch (const Error &e) {
      return e.what();
    }
    return "";
  }
  std::string root_, dir_;
  const std::string bytes_ = std::string("0123456789abcdef");
};

TEST_F(ExternalDataReaderTest, ReadsTheRangeAndLeavesNoExternalData) {
  onnx::TensorProto tp = tensor("w.bin", {2}, onnx::TensorProto::FLOAT,
                                {{"offset", "4"}, {"length", "8"}});
  ExternalDataReader reader(dir_);
  reader.read(tp, "initializer 'w'");
  EXPECT_EQ(tp.raw_data(), "456789ab");
  EXPECT_EQ(tp.data_location(), onnx::TensorProto::DEFAULT);
  EXPECT_EQ(tp.external_data_size(), 0);
}

TEST_F(ExternalDataReaderTest, SymlinksOutOfTheFolderAreRefused) {
  ASSERT_EQ(::symlink("/etc/passwd", (dir_ + "/passwd.bin").c_str()), 0);
  ASSERT_EQ(::symlink((root_ + "/outside/secret.bin").c_str(),
                      (dir_ + "/secret.bin").c_str()),
            0);
  ASSERT_EQ(::symlink("../outside", (dir_ + "/linked").c_str()), 0);
  EXPECT_CONTAINS(error(tensor("passwd.bin")),
                  "initializer 'w': external data location 'passwd.bin' "
                  "resolves to '/etc/passwd', outside the model's folder");
  EXPECT_CONTAINS(error(tensor("secret.bin")), "outside the model's folder");
  // The same file, through a symlinked folder.
  EXPECT_CONTAINS(error(tensor("linked/secret.bin")),
                  "outside the model's folder");
  // A folder named like the model's, beside it: 'm' is a prefix of 'm2'.
  std::filesystem::create_directories(root_ + "/m2");
  write(root_ + "/m2/w.bin", bytes_);
  ASSERT_EQ(::symlink("../m2/w.bin", (dir_ + "/twin.bin").c_str()), 0);
  EXPECT_CONTAINS(error(tensor("twin.bin")), "outside the model's folder");
}

TEST_F(ExternalDataReaderTest, SymlinksInsideTheFolderAreFollowed) {
  ASSERT_EQ(::symlink("w.bin", (dir_ + "/link.bin").c_str()), 0);
  ASSERT_EQ(::symlink("..", (dir_ + "/sub/up").c_str()), 0);
  write(dir_ + "/sub/v.bin", bytes_);
  EXPECT_EQ(error(tensor("link.bin")), "");
  EXPECT_EQ(error(tensor("./w.bin")), "");
  EXPECT_EQ(error(tensor("sub/v.bin")), "");
  EXPECT_EQ(error(tensor("sub/up/w.bin")), ""); // up stays inside
}

TEST_F(ExternalDataReaderTest, LocationsLikeOnnxsAreRequired) {
  EXPECT_CONTAINS(error(tensor("")), "external data without a location");
  EXPECT_CONTAINS(error(tensor(root_ + "/outside/secret.bin")),
                  "must be a relative path inside the model's folder");
  EXPECT_CONTAINS(error(tensor("../outside/secret.bin")),
                  "must be a relative path inside the model's folder");
  EXPECT_CONTAINS(error(tensor(std::string("w.bin\0.x", 8))),
                  "must be a relative path inside the model's folder");
  EXPECT_CONTAINS(error(tensor("missing.bin")),
                  "cannot open external data file '" + dir_ +
                      "/missing.bin': No such file or directory");
}

TEST_F(ExternalDataReaderTest, NonRegularFilesAreRefusedWithoutWaiting) {
  ASSERT_EQ(::mkfifo((dir_ + "/fifo").c_str(), 0600), 0);
  auto start = std::chrono::steady_clock::now();
  EXPECT_CONTAINS(error(tensor("fifo")), "/m/fifo' is not a regular file");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_CONTAINS(error(tensor("sub")), "/m/sub' is a directory");
}

TEST_F(ExternalDataReaderTest, SizesAreCheckedBeforeReading) {
  // A sparse terabyte that agrees with the dims: the 16 GiB cap refuses it
  // from the dims; without a size (data type 0) it is not opened at all.
  { std::ofstream(dir_ + "/huge.bin"); }
  ASSERT_EQ(::truncate((dir_ + "/huge.bin").c_str(), off_t(1) << 40), 0);
  EXPECT_CONTAINS(error(tensor("huge.bin", {int64_t(1) << 38})),
                  "shape 274877906944 is too large (limit 16 GiB)");
  EXPECT_CONTAINS(error(tensor("huge.bin", {4}, 0)),
                  "unsupported data type UNDEFINED (0)");
  EXPECT_CONTAINS(error(tensor("fifo-that-is-not-there", {4}, 0)),
                  "unsupported data type");
  // Without a length the range runs to the end of the file, which must be
  // what the dims take.
  EXPECT_CONTAINS(error(tensor("huge.bin", {4})),
                  "external data without a length runs from offset 0 to the "
                  "end of");
  // A range past the file, or of the wrong size.
  EXPECT_CONTAINS(
      error(tensor("w.bin", {4}, onnx::TensorProto::FLOAT, {{"offset", "8"}})),
      "8 bytes; its dtype and dims need 16");
  EXPECT_CONTAINS(error(tensor("w.bin", {4}, onnx::TensorProto::FLOAT,
                               {{"offset", "8"}, {"length", "16"}})),
                  "external data range [8, +16) is past the end");
}

TEST_F(ExternalDataReaderTest, TheBytesReadInAllStayUnderTheLimit) {
  // 2 GiB on a sparse file, one limit of 64 MiB: refused with the numbers.
  { std::ofstream(dir_ + "/big.bin"); }
  ASSERT_EQ(::truncate((dir_ + "/big.bin").c_str(), off_t(2) << 30), 0);
  EXPECT_CONTAINS(
      error(tensor("big.bin", {int64_t(1) << 29}), uint64_t(64) << 20),
      "external data of 2147483648 bytes (2.0 GiB) in '" + dir_ +
          "/big.bin' does not fit in memory");
  // The limit is for all the tensors one reader reads: 16 + 16 > 24.
  ExternalDataReader reader(dir_, 24);
  onnx::TensorProto first = tensor("w.bin"), second = tensor("w.bin");
  reader.read(first, "initializer 'a'");
  try {
    reader.read(second, "initializer 'b'");
    ADD_FAILURE() << "read past the limit";
  } catch (const Error &e) {
    EXPECT_CONTAINS(e.what(), "initializer 'b': external data of 16 bytes");
    EXPECT_CONTAINS(e.what(), "what is left of the reader's limit of 24 "
                              "bytes is 8 bytes");
  }
}

TEST_F(ExternalDataReaderTest, LoadModelRefusesALinkOutAndNamesTheFile) {
  // Through the importer: a model whose initializer links to /etc/passwd.
  ASSERT_EQ(::symlink("/etc/passwd", (dir_ + "/passwd.bin").c_str()), 0);
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  onnx::GraphProto *g = m.mutable_graph();
  g->set_name("g");
  *g->add_initializer() = tensor("passwd.bin");
  onnx::NodeProto *n = g->add_node();
  n->set_op_type("Identity");
  n->add_input("w");
  n->add_output("y");
  g->add_output()->set_name("y");
  std::string path = dir_ + "/model.onnx";
  write(path, m.SerializeAsString());
  try {
    loadModel(path);
    ADD_FAILURE() << "loaded /etc/passwd as a weight";
  } catch (const Error &e) {
    EXPECT_CONTAINS(e.what(), path + ": initializer 'w': external data "
                                     "location 'passwd.bin' resolves to "
                                     "'/etc/passwd'");
  }
}

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif
#else
constexpr bool kAddressSanitizer = false;
#endif

TEST(AvailableMemory, IsBoundedByTheAddressSpaceLimit) {
  AvailableMemory free = availableMemory();
  ASSERT_GT(free.bytes, 0u);
  EXPECT_FALSE(free.source.empty());
  // ASan reserves terabytes of shadow and cannot allocate under a tight
  // RLIMIT_AS.
  if (kAddressSanitizer)
    GTEST_SKIP() << "no ulimit -v under AddressSanitizer";
  // In a child (the limit is the process's): ulimit -v of its size + 64 MiB
  // leaves about 64 MiB, and says so.
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::ifstream statm("/proc/self/statm");
    unsigned long long pages = 0;
    statm >> pages;
    rlim_t size = rlim_t(pages) * rlim_t(sysconf(_SC_PAGESIZE));
    struct rlimit rl = {size + (rlim_t(64) << 20), RLIM_INFINITY};
    if (::setrlimit(RLIMIT_AS, &rl) != 0)
      ::_exit(2);
    AvailableMemory m = availableMemory();
    bool ok = m.bytes > 0 && m.bytes <= (uint64_t(64) << 20) &&
              m.source.find("ulimit -v") != std::string::npos;
    ::_exit(ok ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(AvailableMemory, FormatsSizes) {
  EXPECT_EQ(formatMemorySize(512), "512 bytes");
  EXPECT_EQ(formatMemorySize(uint64_t(3) << 20), "3.0 MiB");
  EXPECT_EQ(formatMemorySize(uint64_t(3) << 39), "1536.0 GiB");
}

} // namespace
} // namespace mpc
