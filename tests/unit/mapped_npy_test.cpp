// MappedNpy (runtime/data/mapped_npy.h): a .npy mapped for data bigger than
// memory copies its samples out; a file truncated after it was mapped (a
// data set rewritten during a run) is an Error naming the file, not the
// SIGBUS that reading its vanished pages raises, and a later copy on the
// same thread is guarded again.
#include "runtime/data/mapped_npy.h"

#include "runtime/data/npy.h"
#include "support/diagnostics.h"

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

TEST(MappedNpy, AFileTruncatedWhileMappedIsAnErrorNamingIt) {
#if defined(__SANITIZE_ADDRESS__)
  // ASan takes SIGBUS for itself (handle_sigbus); the guard is the
  // product's, tested in the plain build.
  GTEST_SKIP() << "SIGBUS is AddressSanitizer's under the sanitizer build";
#endif
  for (int round = 0; round < 2; ++round) { // the guard holds twice
    std::string path =
        writeRows("mapped_truncated_" + std::to_string(round) + ".npy", 64);
    MappedNpy m(path);
    std::vector<float> row(1024);
    m.copy(0, 4096, reinterpret_cast<uint8_t *>(row.data()));
    ASSERT_EQ(::truncate(path.c_str(), 4096), 0); // the header's page left
    try {
      m.copy(40 * 4096, 4096, reinterpret_cast<uint8_t *>(row.data()));
      FAIL() << "a copy past the new end returned";
    } catch (const Error &e) {
      std::string what = e.what();
      EXPECT_EQ(what.rfind(path + ": ", 0), 0u) << what;
      EXPECT_NE(what.find("shorter"), std::string::npos) << what;
    }
    std::remove(path.c_str());
  }
}

} // namespace
} // namespace mpc
