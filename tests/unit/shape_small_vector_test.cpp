// Tests for passes/shape_small_vector.h: the inline-then-heap vector shape
// inference builds its dims in.
#include "passes/shape_small_vector.h"

#include "ir/graph.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace mpc {
namespace {

std::vector<int64_t> toStd(const SmallVector<int64_t, 4> &v) {
  return std::vector<int64_t>(v.begin(), v.end());
}

TEST(SmallVector, StaysInlineUpToItsCapacity) {
  SmallVector<int64_t, 4> v;
  EXPECT_TRUE(v.empty());
  const int64_t *inlineStart = v.data();
  for (int64_t i = 0; i < 4; ++i)
    v.push_back(i * 10);
  EXPECT_EQ(v.data(), inlineStart);
  EXPECT_EQ(toStd(v), (std::vector<int64_t>{0, 10, 20, 30}));
}

TEST(SmallVector, MovesToTheHeapKeepingItsElements) {
  SmallVector<int64_t, 4> v;
  const int64_t *inlineStart = v.data();
  for (int64_t i = 0; i < 100; ++i)
    v.push_back(i);
  EXPECT_NE(v.data(), inlineStart);
  ASSERT_EQ(v.size(), 100u);
  for (int64_t i = 0; i < 100; ++i)
    EXPECT_EQ(v[size_t(i)], i);
  EXPECT_EQ(v.back(), 99);
}

TEST(SmallVector, PushBackOfItsOwnElementWhileGrowing) {
  SmallVector<int64_t, 2> v;
  v.push_back(7);
  v.push_back(8);
  v.push_back(v[0]); // the source moves with the growth
  EXPECT_EQ(std::vector<int64_t>(v.begin(), v.end()),
            (std::vector<int64_t>{7, 8, 7}));
}

TEST(SmallVector, FillAppendAndCopy) {
  SmallVector<Dim, 2> dims(3, Dim());
  ASSERT_EQ(dims.size(), 3u);
  for (const Dim &d : dims)
    EXPECT_FALSE(d.isKnown());
  const Dim more[] = {Dim(4), Dim::symbolic("N")};
  dims.append(more, 2);
  ASSERT_EQ(dims.size(), 5u);
  EXPECT_EQ(dims[3], Dim(4));
  EXPECT_EQ(dims[4], Dim::symbolic("N"));

  SmallVector<Dim, 2> copy = dims;
  dims[3] = Dim(5);
  EXPECT_EQ(copy[3], Dim(4)); // a copy owns its elements
  copy = SmallVector<Dim, 2>(more, 2);
  ASSERT_EQ(copy.size(), 2u);
  EXPECT_EQ(copy[0], Dim(4));
}

TEST(SmallVector, EraseKeepsOrderAndClearEmpties) {
  SmallVector<int64_t, 4> v;
  for (int64_t i = 0; i < 6; ++i)
    v.push_back(i);
  v.erase(0);
  v.erase(2); // was 3
  EXPECT_EQ(toStd(v), (std::vector<int64_t>{1, 2, 4, 5}));
  v.erase(3);
  EXPECT_EQ(toStd(v), (std::vector<int64_t>{1, 2, 4}));
  v.clear();
  EXPECT_TRUE(v.empty());
  v.resize(2, 9);
  EXPECT_EQ(toStd(v), (std::vector<int64_t>{9, 9}));
}

} // namespace
} // namespace mpc
