// The vector/tail split of the elementwise kernels' contiguous paths
// (kernels/cuda/vector_split.h), checked on the CPU: every element is
// covered exactly once, by a whole 16-byte group or by the tail, and an
// unaligned buffer sends everything to the tail.
#include "kernels/cuda/vector_split.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

using namespace mpc::cuda;

namespace {

TEST(VectorSplit, GroupIs16BytesOfTheNarrowestType) {
  EXPECT_EQ((VectorGroup<4>::value), 4);       // fp32
  EXPECT_EQ((VectorGroup<2>::value), 8);       // fp16, bf16
  EXPECT_EQ((VectorGroup<1>::value), 16);      // bool
  EXPECT_EQ((VectorGroup<4, 2>::value), 8);    // fp32 -> fp16 cast
  EXPECT_EQ((VectorGroup<2, 4, 2>::value), 8); // fp16 grad, fp32 input
  EXPECT_EQ((VectorGroup<8, 4>::value), 4);
}

TEST(VectorSplit, CoversEveryElementOnce) {
  alignas(16) static char buffer[64];
  for (int group : {4, 8, 16})
    for (int64_t n : {int64_t(0), int64_t(1), int64_t(7), int64_t(8),
                      int64_t(9), int64_t(4096), int64_t(4096 + 7)}) {
      VectorSplit s = vectorSplit(n, group, {buffer, buffer + 32});
      EXPECT_EQ(s.count, n);
      EXPECT_EQ(s.groups, n / group) << n << " / " << group;
      EXPECT_EQ(s.tailStart, s.groups * group);
      EXPECT_LT(s.count - s.tailStart, group);
      EXPECT_EQ(s.work(), n / group + n % group);
      // The grid's items, mapped back to elements, cover [0, n) once.
      std::vector<int> seen(size_t(n), 0);
      for (int64_t g = 0; g < s.groups; ++g)
        for (int k = 0; k < group; ++k)
          ++seen[size_t(g * group + k)];
      for (int64_t i = s.tailStart; i < s.count; ++i)
        ++seen[size_t(i)];
      for (int64_t i = 0; i < n; ++i)
        EXPECT_EQ(seen[size_t(i)], 1) << "element " << i << " of " << n;
    }
}

TEST(VectorSplit, AnyUnalignedBufferTakesTheScalarLoop) {
  alignas(16) static char buffer[64];
  EXPECT_TRUE(aligned16(reinterpret_cast<uintptr_t>(buffer)));
  EXPECT_FALSE(aligned16(reinterpret_cast<uintptr_t>(buffer + 4)));
  for (const char *odd : {buffer + 1, buffer + 2, buffer + 4, buffer + 8}) {
    VectorSplit s = vectorSplit(4103, 8, {buffer, odd});
    EXPECT_EQ(s.groups, 0);
    EXPECT_EQ(s.tailStart, 0);
    EXPECT_EQ(s.work(), 4103);
  }
  VectorSplit s = vectorSplit(4103, 8, {buffer, buffer + 16, buffer + 48});
  EXPECT_EQ(s.groups, 512);
  EXPECT_EQ(s.tailStart, 4096);
}

// The packed row kernels (bias sums, LayerNormalizationGrad's columns,
// zipped rows) take rows of whole 16-byte groups at aligned addresses only.
TEST(VectorSplit, PackedRowsNeedWholeGroupsAndAlignedBuffers) {
  alignas(16) static char buffer[64];
  EXPECT_TRUE(wholeAlignedGroups(40, 8, {buffer, buffer + 16})); // fp16
  EXPECT_TRUE(wholeAlignedGroups(40, 4, {buffer}));              // fp32
  EXPECT_TRUE(wholeAlignedGroups(20, 4, {buffer}));
  EXPECT_FALSE(wholeAlignedGroups(20, 8, {buffer})); // 2.5 groups of fp16
  EXPECT_FALSE(wholeAlignedGroups(18, 4, {buffer}));
  EXPECT_FALSE(wholeAlignedGroups(40, 8, {buffer, buffer + 8}));
  EXPECT_FALSE(wholeAlignedGroups(40, 0, {buffer}));
}

} // namespace
