// Tests for support/file_io and file_bytes: atomic writes, with and
// without fsync, replace the target whole or leave it as it was and never
// leave a temp; FileBytes maps what it can and reports what it cannot read.
#include "support/file_bytes.h"
#include "support/file_io.h"

#include <gtest/gtest.h>

#include <dirent.h>
#include <fcntl.h>
#include <ostream>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace mpc {
// Names the parameter in test listings (gtest prints unknown types as bytes).
void PrintTo(Fsync f, std::ostream *os) {
  *os << (f == Fsync::Yes ? "Fsync::Yes" : "Fsync::No");
}
} // namespace mpc

using namespace mpc;

namespace {

// A fresh folder per test, removed with what is left in it.
class FileIoTest : public ::testing::TestWithParam<Fsync> {
protected:
  void SetUp() override {
    char tmpl[] = "/tmp/mpc-file-io-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    for (const std::string &name : entries())
      ::unlink((dir_ + "/" + name).c_str());
    ::rmdir(dir_.c_str());
  }
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    if (DIR *d = ::opendir(dir_.c_str())) {
      while (dirent *e = ::readdir(d))
        if (std::string(e->d_name) != "." && std::string(e->d_name) != "..")
          names.push_back(e->d_name);
      ::closedir(d);
    }
    return names;
  }
  std::string read(const std::string &path) {
    std::string bytes, error;
    EXPECT_TRUE(readWholeFile(path, bytes, error)) << error;
    return bytes;
  }
  std::string dir_;
};

TEST_P(FileIoTest, WritesAndReplacesWithoutLeavingATemp) {
  std::string path = dir_ + "/out.bin", error;
  std::string first(1 << 20, 'a');
  ASSERT_TRUE(
      writeFileAtomically(path, first.data(), first.size(), error, GetParam()))
      << error;
  EXPECT_EQ(read(path), first);
  std::string second = "short";
  ASSERT_TRUE(writeFileAtomically(path, second.data(), second.size(), error,
                                  GetParam()))
      << error;
  EXPECT_EQ(read(path), second);
  EXPECT_EQ(entries(), std::vector<std::string>{"out.bin"});
}

TEST_P(FileIoTest, AFailedFillLeavesThePreviousFile) {
  std::string path = dir_ + "/out.bin", error;
  std::string good = "the last good checkpoint";
  ASSERT_TRUE(
      writeFileAtomically(path, good.data(), good.size(), error, GetParam()));
  bool ok = writeFileAtomically(
      path,
      [&](int fd, std::string &err) {
        std::string half = "half of a";
        EXPECT_TRUE(writeAll(fd, half.data(), half.size(), path, err));
        err = path + ": write error: disk full";
        return false;
      },
      error, GetParam());
  EXPECT_FALSE(ok);
  EXPECT_EQ(error, path + ": write error: disk full");
  EXPECT_EQ(read(path), good);
  EXPECT_EQ(entries(), std::vector<std::string>{"out.bin"});
}

TEST_P(FileIoTest, AMissingFolderIsOneLineNamingTheFile) {
  std::string path = dir_ + "/no/such/out.bin", error;
  EXPECT_FALSE(writeFileAtomically(path, "x", 1, error, GetParam()));
  EXPECT_EQ(error.rfind(path + ": cannot create ", 0), 0u) << error;
  EXPECT_EQ(error.find('\n'), std::string::npos);
  EXPECT_TRUE(entries().empty());
}

// Renaming a temp over a FIFO (or /dev/null, as `mpc-opt -o /dev/null` once
// did as root) would replace it with a plain file; it is written in place.
TEST_P(FileIoTest, AFifoIsWrittenInPlaceAndStaysAFifo) {
  std::string path = dir_ + "/pipe", error;
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  // The read end is opened first (without blocking) and the bytes fit in the
  // pipe's buffer, so the write neither waits for a reader nor, when it goes
  // elsewhere, leaves this test waiting.
  int readEnd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(readEnd, 0);
  std::string sent(1000, 'p');
  bool ok =
      writeFileAtomically(path, sent.data(), sent.size(), error, GetParam());
  std::string received(2 * sent.size(), '\0');
  ssize_t got = ::read(readEnd, received.data(), received.size());
  ::close(readEnd);
  ASSERT_TRUE(ok) << error;
  EXPECT_EQ(received.substr(0, got > 0 ? size_t(got) : 0), sent);
  struct stat st {};
  ASSERT_EQ(::lstat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  EXPECT_EQ(entries(), std::vector<std::string>{"pipe"});
}

INSTANTIATE_TEST_SUITE_P(SyncedAndNot, FileIoTest,
                         ::testing::Values(Fsync::Yes, Fsync::No),
                         [](const auto &info) {
                           return info.param == Fsync::Yes ? "Fsync"
                                                           : "NoFsync";
                         });

TEST_P(FileIoTest, FileBytesHoldsTheFileAndOutlivesItsReplacement) {
  std::string path = dir_ + "/model.onnx", error;
  std::string first(3 << 20, 'm');
  first[12345] = 'x';
  ASSERT_TRUE(
      writeFileAtomically(path, first.data(), first.size(), error, GetParam()));
  FileBytes bytes;
  ASSERT_TRUE(bytes.open(path, error)) << error;
  EXPECT_EQ(bytes.view(), first);
  // mpc-opt may write its output over its input: the rename leaves the
  // mapped (old) file's bytes as they were.
  std::string second = "replaced";
  ASSERT_TRUE(writeFileAtomically(path, second.data(), second.size(), error,
                                  GetParam()));
  EXPECT_EQ(bytes.view(), first);
  FileBytes moved = std::move(bytes);
  EXPECT_EQ(moved.view(), first);
  EXPECT_EQ(bytes.size(), 0u);
}

TEST(FileBytes, EmptyMissingAndFolderInputs) {
  char tmpl[] = "/tmp/mpc-file-bytes-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  std::string dir = tmpl, error;
  std::string empty = dir + "/empty.onnx";
  ASSERT_TRUE(writeFileAtomically(empty, "", 0, error));
  FileBytes bytes;
  ASSERT_TRUE(bytes.open(empty, error)) << error;
  EXPECT_EQ(bytes.size(), 0u);
  EXPECT_FALSE(bytes.open(dir + "/missing.onnx", error));
  EXPECT_EQ(error,
            dir + "/missing.onnx: cannot open: No such file or directory");
  EXPECT_FALSE(bytes.open(dir, error));
  EXPECT_EQ(error, dir + ": is a directory");
  ::unlink(empty.c_str());
  ::rmdir(dir.c_str());
}

} // namespace
