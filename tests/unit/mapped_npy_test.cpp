// MappedNpy (runtime/data/mapped_npy.h): a .npy mapped for data bigger than
// memory copies its samples out; a file truncated after it was mapped (a
// data set rewritten during a run) ends the process with one line naming
// it and exit code 1 (support/mapped_input_guard.h), not a SIGBUS.
#include "runtime/data/mapped_npy.h"

#include "runtime/data/npy.h"

#include <cstdio>
#include <gtest/gtest.h>
#include <string>
#include <unistd.h>

namespace mpc {
namespace {

/// A .npy of `rows` x 1024 float32 (4 KiB a row: whole pages), row r all r.
std::string writeRows(const std::string &name, int64_t rows) {
  std::string path = ::testing::TempDir() + "/" + name;
  Tensor t(DType::F32, {rows, 1024});
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<float>()[i] = float(i / 1024);
  std::string error;
  EXPECT_TRUE(writeNpy(path, t, error)) << error;
  return path;
}

TEST(MappedNpy, CopiesRowsOfTheArray) {
  std::string path = writeRows("mapped_rows.npy", 8);
  MappedNpy m(path);
  EXPECT_EQ(m.dims(), (std::vector<int64_t>{8, 1024}));
  std::vector<float> row(1024);
  m.copy(5 * 4096, 4096, reinterpret_cast<uint8_t *>(row.data()));
  EXPECT_EQ(row[0], 5.0f);
  EXPECT_EQ(row[1023], 5.0f);
  std::remove(path.c_str());
}

TEST(MappedNpyDeathTest, AFileTruncatedWhileMappedIsAOneLineError) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  std::string path = writeRows("mapped_truncated.npy", 64);
  EXPECT_EXIT(
      {
        MappedNpy m(path);
        std::vector<float> row(1024);
        m.copy(0, 4096, reinterpret_cast<uint8_t *>(row.data()));
        if (::truncate(path.c_str(), 4096) != 0) // the header's page left
          std::_Exit(4);
        m.copy(40 * 4096, 4096, reinterpret_cast<uint8_t *>(row.data()));
        std::_Exit(5); // not reached: the copy faults
      },
      ::testing::ExitedWithCode(1),
      "^[^\n]*: " + path +
          ": the file changed while it was being read \\(truncated by "
          "another process\\?\\)\n$");
  std::remove(path.c_str());
}

} // namespace
} // namespace mpc
