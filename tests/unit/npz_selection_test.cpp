// Reading only the .npz arrays a run uses, within a memory limit
// (runtime/data/npz.h NpzSelection, Dataset::fromNpz): an array that is not
// asked for is never inflated (its corruption goes unnoticed, its size costs
// nothing), and the arrays asked for are refused from their declared sizes
// when they do not fit, before any is read.
#include "runtime/data/dataset.h"
#include "runtime/data/npz.h"
#include "support/diagnostics.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

namespace mpc {
namespace {

#define EXPECT_CONTAINS(text, part)                                            \
  EXPECT_NE(std::string(text).find(part), std::string::npos)                   \
      << "'" << (text) << "' does not contain '" << (part) << "'"

Tensor floats(std::vector<int64_t> dims) {
  Tensor t(DType::F32, dims);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.setFromDouble(i, double(i) / 8);
  return t;
}

Tensor labels(int64_t n) {
  Tensor t(DType::I64, {n});
  for (int64_t i = 0; i < n; ++i)
    t.setFromDouble(i, double(i % 2));
  return t;
}

/// x [8, 10] float, junk [64] float and y [8] int64, junk's bytes corrupted
/// (its CRC-32 no longer matches), in a file removed at the end.
class NpzSelectionTest : public ::testing::Test {
protected:
  void SetUp() override {
    path_ = ::testing::TempDir() + "/npz_selection_" +
            std::to_string(::getpid()) + ".npz";
    std::string err;
    ASSERT_TRUE(writeNpz(
        path_,
        {{"x", floats({8, 10})}, {"junk", floats({64})}, {"y", labels(8)}},
        err))
        << err;
    std::string bytes;
    {
      std::ifstream in(path_, std::ios::binary);
      bytes.assign(std::istreambuf_iterator<char>(in), {});
    }
    // The third local header starts right after junk's last byte.
    size_t at = 0;
    for (int i = 0; i < 3; ++i)
      at = bytes.find("PK\x03\x04", i ? at + 1 : 0);
    ASSERT_NE(at, std::string::npos);
    bytes[at - 1] ^= 0x55;
    std::ofstream(path_, std::ios::binary | std::ios::trunc) << bytes;
  }
  void TearDown() override { std::filesystem::remove(path_); }
  std::string path_;
};

TEST_F(NpzSelectionTest, OnlyTheArraysAskedForAreInflated) {
  std::vector<std::pair<std::string, Tensor>> arrays;
  std::string err;
  // All of them: junk is read, and its CRC fails.
  EXPECT_FALSE(readNpz(path_, arrays, err));
  EXPECT_CONTAINS(err, "array 'junk': CRC-32 mismatch");
  // x and y: junk is never read; the names still list it.
  NpzSelection only;
  only.only = {"y", "x"};
  std::vector<std::string> names;
  ASSERT_TRUE(readNpz(path_, only, arrays, &names, err)) << err;
  ASSERT_EQ(arrays.size(), 2u);
  EXPECT_EQ(arrays[0].first, "x"); // archive order
  EXPECT_EQ(arrays[1].first, "y");
  EXPECT_EQ(arrays[0].second.dims, (std::vector<int64_t>{8, 10}));
  EXPECT_EQ(arrays[0].second.getAsDouble(79), 79.0 / 8);
  EXPECT_EQ(names, (std::vector<std::string>{"x", "junk", "y"}));
}

TEST_F(NpzSelectionTest, TheArraysAskedForMustFitTheLimitTogether) {
  std::vector<std::pair<std::string, Tensor>> arrays;
  std::string err;
  NpzSelection both;
  both.only = {"x", "y"};
  both.limitBytes = 300; // x alone is 320 bytes and its .npy header
  both.limitSource = "the test's 300 bytes";
  EXPECT_FALSE(readNpz(path_, both, arrays, nullptr, err));
  EXPECT_CONTAINS(err, path_ + ": arrays 'x', 'y' take ");
  EXPECT_CONTAINS(err, "to read, more than the test's 300 bytes allows");
  both.limitBytes = 4096;
  EXPECT_TRUE(readNpz(path_, both, arrays, nullptr, err)) << err;
}

TEST_F(NpzSelectionTest, DatasetReadsTheStepsInputsOnly) {
  DataInputSpec x, y;
  x.name = "x";
  x.dtype = DType::F32;
  x.sampleDims = {10};
  y.name = "y";
  y.dtype = DType::I64;
  y.numClasses = 2;
  Dataset d = Dataset::fromNpz(path_, {x, y});
  EXPECT_EQ(d.numSamples(), 8);
  // Under a limit: one line naming the file, the arrays and the limit.
  try {
    Dataset::fromNpz(path_, {x, y}, 100, "the memory limit of the test");
    ADD_FAILURE() << "read past the limit";
  } catch (const Error &e) {
    EXPECT_CONTAINS(e.what(), "more than the memory limit of the test allows");
  }
  // A missing input still lists every array of the file.
  DataInputSpec z = x;
  z.name = "z";
  try {
    Dataset::fromNpz(path_, {z});
    ADD_FAILURE() << "found no 'z' but did not say so";
  } catch (const Error &e) {
    EXPECT_CONTAINS(e.what(), "no array named 'z' (the model's data input); "
                              "the file has: x, junk, y");
  }
}

} // namespace
} // namespace mpc
