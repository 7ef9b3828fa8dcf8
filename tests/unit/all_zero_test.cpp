// allZero and zeroSteps (support/all_zero.h): every length, every
// alignment, a single set bit anywhere.
#include "support/all_zero.h"

#include <gtest/gtest.h>

#include <vector>

namespace mpc {
namespace {

TEST(AllZero, EmptyIsZero) {
  uint8_t b = 1;
  EXPECT_TRUE(allZero(&b, 0));
}

// Lengths around the loops' strides (32, 256) and a file block (4096), at
// each offset of a 32-byte vector: zero, then one set bit at the first,
// a middle and the last byte (and the bytes just outside never count).
TEST(AllZero, FindsOneSetBitAtAnyLengthAndAlignment) {
  std::vector<uint8_t> buf(4096 + 512 + 64, 0);
  for (size_t size : {1, 2, 31, 32, 33, 255, 256, 257, 511, 512, 513, 1000,
                      1023, 1024, 1025, 4095, 4096, 4097, 4096 + 300}) {
    for (size_t offset = 0; offset < 33; ++offset) {
      SCOPED_TRACE("size " + std::to_string(size) + " offset " +
                   std::to_string(offset));
      uint8_t *p = buf.data() + 16 + offset;
      p[-1] = 0xff;
      p[size] = 0xff;
      EXPECT_TRUE(allZero(p, size));
      for (size_t at : {size_t(0), size / 2, size - 1}) {
        p[at] = 0x80;
        EXPECT_FALSE(allZero(p, size)) << "set byte " << at;
        p[at] = 0;
      }
      p[-1] = 0;
      p[size] = 0;
    }
  }
}

// The AVX2 loop keeps four accumulators across 1024-byte steps: a set bit
// in any 32-byte lane of any step (the first, or one after zero steps)
// must reach the test.
TEST(AllZero, FindsASetBitInEveryLaneOfEveryStep) {
  std::vector<uint8_t> buf(3 * 1024, 0);
  ASSERT_TRUE(allZero(buf.data(), buf.size()));
  for (size_t at = 0; at < buf.size(); at += 32) {
    for (size_t inLane : {size_t(0), size_t(31)}) {
      buf[at + inLane] = 1;
      EXPECT_FALSE(allZero(buf.data(), buf.size()))
          << "set byte " << at + inLane;
      buf[at + inLane] = 0;
    }
  }
}

// zeroSteps counts whole zero steps up to the first that is not: a set byte
// anywhere in a step stops the count at that step's start, a partial step
// at the end is never counted, and neither are steps after a non-zero one.
TEST(ZeroSteps, CountsWholeZeroStepsUpToTheFirstThatIsNot) {
  std::vector<uint8_t> buf(4 * kZeroStep + 100, 0);
  EXPECT_EQ(zeroSteps(buf.data(), 0), 0u);
  EXPECT_EQ(zeroSteps(buf.data(), kZeroStep - 1), 0u);
  EXPECT_EQ(zeroSteps(buf.data(), buf.size()), 4 * kZeroStep);
  for (size_t at : {size_t(0), size_t(31), kZeroStep - 1, kZeroStep,
                    2 * kZeroStep + 500, 4 * kZeroStep - 1}) {
    buf[at] = 1;
    EXPECT_EQ(zeroSteps(buf.data(), buf.size()), at / kZeroStep * kZeroStep)
        << "set byte " << at;
    buf[at] = 0;
  }
  buf[4 * kZeroStep + 50] = 1; // in the partial step: not looked at
  EXPECT_EQ(zeroSteps(buf.data(), buf.size()), 4 * kZeroStep);
  EXPECT_EQ(zeroSteps(buf.data() + 7, 2 * kZeroStep), 2 * kZeroStep);
}

} // namespace
} // namespace mpc
