// A mapped input truncated by another process while mpc holds it
// (support/mapped_input_guard.h): reading a page past the new end
// ends the process with a one-line error naming the file and exit code 1,
// and removes the temporary file of the atomic write in progress; a fault
// outside any watched mapping keeps SIGBUS's default action.
#include "support/file_bytes.h"
#include "support/file_io.h"
#include "support/mapped_input_guard.h"

#include <gtest/gtest.h>

#include <csignal>
#include <cstdio>
#include <fcntl.h>
#include <string>
#include <sys/mman.h>
#include <unistd.h>

using namespace mpc;

namespace {

std::string tempPath(const char *name) {
  // No pid in the name: a "threadsafe" death test runs the test again in a
  // new process, which must name the same files.
  return ::testing::TempDir() + "mpc_mapped_guard_" + name;
}

/// A file of `pages` pages of 'x', mapped by a FileBytes.
std::string makeFile(const char *name, size_t pages) {
  std::string path = tempPath(name), error;
  std::string bytes(pages * 4096, 'x');
  EXPECT_TRUE(
      writeFileAtomically(path, bytes.data(), bytes.size(), error, Fsync::No))
      << error;
  return path;
}

/// Reads every page of `bytes`, so that a page the kernel took away faults.
int touchAll(const FileBytes &bytes) {
  volatile int sum = 0;
  for (size_t i = 0; i < bytes.size(); i += 4096)
    sum += bytes.data()[i];
  return sum;
}

TEST(MappedInputGuardDeathTest, TruncatedInputIsAOneLineErrorNotACrash) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  std::string path = makeFile("truncated.onnx", 8);
  std::string pending = tempPath("out.onnx.tmp");
  EXPECT_EXIT(
      {
        FileBytes bytes;
        std::string error;
        if (!bytes.open(path, error))
          std::_Exit(3);
        // The output being written when the input goes away.
        std::FILE *f = std::fopen(pending.c_str(), "w");
        std::fclose(f);
        setPendingTempFile(pending);
        if (::truncate(path.c_str(), 0) != 0)
          std::_Exit(4);
        touchAll(bytes);
        std::_Exit(5); // not reached: the read faults
      },
      ::testing::ExitedWithCode(1),
      "^[^\n]*: " + path +
          ": the file changed while it was being read \\(truncated by "
          "another process\\?\\)\n$");
  EXPECT_NE(::access(pending.c_str(), F_OK), 0)
      << "the temporary output survived";
  std::remove(path.c_str());
}

TEST(MappedInputGuardDeathTest, AnUnwatchedFaultKeepsTheDefaultAction) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  std::string path = makeFile("unwatched.bin", 4);
  std::string watched = makeFile("watched.bin", 4);
  EXPECT_EXIT(
      {
        FileBytes guarded; // installs the handler
        std::string error;
        if (!guarded.open(watched, error))
          std::_Exit(3);
        int fd = ::open(path.c_str(), O_RDONLY);
        void *p = ::mmap(nullptr, 4 * 4096, PROT_READ, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED || ::truncate(path.c_str(), 0) != 0)
          std::_Exit(4);
        volatile char c = static_cast<const char *>(p)[8192];
        (void)c;
        std::_Exit(5);
      },
      ::testing::KilledBySignal(SIGBUS), "");
  std::remove(path.c_str());
  std::remove(watched.c_str());
}

TEST(MappedInputGuard, AClosedMappingIsNoLongerWatched) {
  std::string path = makeFile("closed.bin", 2);
  for (int i = 0; i < 40; ++i) { // more than the 16 slots, one at a time
    FileBytes bytes;
    std::string error;
    ASSERT_TRUE(bytes.open(path, error)) << error;
    EXPECT_EQ(touchAll(bytes), 2 * 'x');
  }
  // Every slot is free again: a new mapping is watched.
  int slot = watchMappedFile(&path, 1, path);
  EXPECT_GE(slot, 0);
  unwatchMappedFile(slot);
  std::remove(path.c_str());
}

} // namespace
