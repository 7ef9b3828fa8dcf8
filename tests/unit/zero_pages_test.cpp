// Held and in-place byte buffers and the zero pages optimizer state starts
// in (ir/byte_buffer.h, ir/zero_pages.h).
#include "ir/byte_buffer.h"
#include "ir/tensor.h"
#include "ir/zero_pages.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

namespace mpc {
namespace {

bool allZero(const ByteBuffer &b) {
  return std::all_of(b.begin(), b.end(), [](uint8_t x) { return x == 0; });
}

/// Bytes held by a shared owner that records when it is let go.
ByteBuffer heldBytes(std::vector<uint8_t> bytes, bool &released) {
  auto owner = std::shared_ptr<std::vector<uint8_t>>(
      new std::vector<uint8_t>(std::move(bytes)),
      [&released](std::vector<uint8_t> *v) {
        released = true;
        delete v;
      });
  uint8_t *p = owner->data();
  size_t size = owner->size();
  return ByteBuffer::held(p, size, std::move(owner));
}

TEST(ByteBuffer, HeldBytesMoveWithTheirOwnerAndCopyIntoOwnedOnes) {
  bool released = false;
  ByteBuffer h = heldBytes({1, 2, 3, 4}, released);
  const uint8_t *at = h.data();
  EXPECT_TRUE(h.isHeld());
  h[0] = 5; // held bytes are the buffer's own to write
  ByteBuffer moved = std::move(h);
  EXPECT_TRUE(moved.isHeld());
  EXPECT_EQ(moved.data(), at);
  EXPECT_FALSE(h.isHeld());
  ByteBuffer copy = moved;
  EXPECT_FALSE(copy.isHeld());
  EXPECT_NE(copy.data(), at);
  EXPECT_TRUE(copy == moved);
  EXPECT_EQ(copy[0], 5);
  moved.resize(4); // same size: stays where it is
  EXPECT_EQ(moved.data(), at);
  EXPECT_FALSE(released);
  moved.resize(6); // detaches into owned bytes, then lets the owner go
  EXPECT_FALSE(moved.isHeld());
  EXPECT_TRUE(released);
  EXPECT_EQ(moved.size(), 6u);
  EXPECT_EQ(moved[0], 5);
  EXPECT_EQ(moved[3], 4);
}

TEST(ByteBuffer, ReplacingHeldBytesLetsTheirOwnerGo) {
  bool assigned = false, cleared = false, overwritten = false;
  ByteBuffer a = heldBytes({1, 2}, assigned);
  a.assign(2, 9);
  EXPECT_TRUE(assigned);
  EXPECT_FALSE(a.isHeld());
  EXPECT_EQ(a[1], 9);
  ByteBuffer b = heldBytes({1, 2}, cleared);
  b.clear();
  EXPECT_TRUE(cleared);
  EXPECT_TRUE(b.empty());
  ByteBuffer c = heldBytes({1, 2}, overwritten);
  c = ByteBuffer(std::vector<uint8_t>{7});
  EXPECT_TRUE(overwritten);
  EXPECT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0], 7);
}

/// In-place bytes at an odd address of a shared owner that records when
/// it is let go: `bytes` from its second byte on.
ByteBuffer inPlaceBytes(std::vector<uint8_t> bytes, bool &released,
                        const uint8_t *&at) {
  bytes.insert(bytes.begin(), 0xee);
  auto owner = std::shared_ptr<std::vector<uint8_t>>(
      new std::vector<uint8_t>(std::move(bytes)),
      [&released](std::vector<uint8_t> *v) {
        released = true;
        delete v;
      });
  at = owner->data() + 1;
  size_t size = owner->size() - 1;
  return ByteBuffer::inPlace(at, size, std::move(owner));
}

// In-place bytes are read where they lie only through unalignedData(); a
// move keeps them there, a copy is owned, and the first data() (const or
// not) copies them into storage of the buffer's own, aligned and writable,
// and lets the owner go.
TEST(ByteBuffer, InPlaceBytesAreCopiedOnTheirFirstTypedAccess) {
  bool released = false;
  const uint8_t *at = nullptr;
  ByteBuffer b = inPlaceBytes({1, 2, 3, 4, 5, 6, 7, 8}, released, at);
  EXPECT_TRUE(b.isInPlace());
  EXPECT_TRUE(b.isHeld());
  EXPECT_EQ(b.unalignedData(), at);
  ByteBuffer moved = std::move(b);
  EXPECT_TRUE(moved.isInPlace());
  EXPECT_FALSE(b.isInPlace());
  EXPECT_EQ(moved.unalignedData(), at);
  ByteBuffer copy = moved;
  EXPECT_FALSE(copy.isInPlace());
  EXPECT_TRUE(copy == moved);
  EXPECT_EQ(std::vector<uint8_t>(moved), std::vector<uint8_t>(copy));
  moved.resize(8); // same size: still in place
  EXPECT_TRUE(moved.isInPlace());
  EXPECT_FALSE(released);

  const ByteBuffer &readOnly = moved;
  const uint8_t *owned = readOnly.data();
  EXPECT_NE(owned, at);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(owned) % alignof(double), 0u);
  EXPECT_FALSE(moved.isInPlace());
  EXPECT_FALSE(moved.isHeld());
  EXPECT_TRUE(released);
  EXPECT_EQ(moved.unalignedData(), owned);
  moved[0] = 9; // the copy is the buffer's own to write
  EXPECT_EQ(moved[0], 9);
  EXPECT_EQ(moved[7], 8);
  EXPECT_EQ(copy[0], 1);
}

TEST(ByteBuffer, WritingOrReplacingInPlaceBytesLetsTheirOwnerGo) {
  bool written = false, resized = false, assigned = false;
  const uint8_t *at = nullptr;
  ByteBuffer w = inPlaceBytes({1, 2, 3}, written, at);
  *w.begin() = 7; // a non-const access copies first
  EXPECT_TRUE(written);
  EXPECT_EQ(w[0], 7);
  ByteBuffer r = inPlaceBytes({1, 2, 3}, resized, at);
  r.resize(4);
  EXPECT_TRUE(resized);
  EXPECT_FALSE(r.isInPlace());
  EXPECT_EQ(r[2], 3);
  EXPECT_EQ(r[3], 0);
  ByteBuffer a = inPlaceBytes({1, 2, 3}, assigned, at);
  a.assign(2, 5);
  EXPECT_TRUE(assigned);
  EXPECT_FALSE(a.isInPlace());
  EXPECT_EQ(a.size(), 2u);
}

TEST(ZeroPages, LargeZerosAreHeldAndEachBuffersWritesAreItsOwn) {
  ByteBuffer a = zeroBytes(1 << 20), b = zeroBytes(1 << 20);
  ASSERT_TRUE(a.isHeld());
  ASSERT_TRUE(b.isHeld());
  EXPECT_EQ(a.size(), size_t(1) << 20);
  EXPECT_TRUE(allZero(a));
  EXPECT_TRUE(allZero(b));
  // Slots do not overlap, even where one ends mid-page.
  ByteBuffer odd = zeroBytes(kZeroPagesMinBytes + 3),
             after = zeroBytes(1 << 16);
  for (ByteBuffer *x : {&a, &b, &odd})
    std::fill(x->begin(), x->end(), uint8_t(0xab));
  EXPECT_TRUE(allZero(after));
  EXPECT_EQ(a[(1 << 20) - 1], 0xab);
  EXPECT_EQ(odd[odd.size() - 1], 0xab);
  ByteBuffer c = zeroBytes(1 << 20); // new slots are zero again
  EXPECT_TRUE(allZero(c));
}

TEST(ZeroPages, SmallZerosAreInPlaceAndTensorZerosHaveTheirType) {
  ByteBuffer small = zeroBytes(kZeroPagesMinBytes - 1);
  ByteBuffer other = zeroBytes(100);
  EXPECT_TRUE(small.isInPlace());
  EXPECT_EQ(small.unalignedData(), other.unalignedData()); // one block
  EXPECT_EQ(small.size(), kZeroPagesMinBytes - 1);
  EXPECT_TRUE(allZero(small)); // a copy of its own, which it may write
  EXPECT_FALSE(small.isInPlace());
  small[7] = 1;
  EXPECT_TRUE(std::all_of(other.unalignedData(),
                          other.unalignedData() + other.size(),
                          [](uint8_t x) { return x == 0; }));
  EXPECT_TRUE(zeroBytes(0).empty());
  Tensor t = Tensor::zeros(DType::F16, {512, 64});
  EXPECT_EQ(t.dtype, DType::F16);
  EXPECT_EQ(t.dims, (std::vector<int64_t>{512, 64}));
  EXPECT_EQ(t.byteSize(), size_t(512 * 64 * 2));
  EXPECT_TRUE(t.bytes.isHeld());
  EXPECT_EQ(t.toFloats(), std::vector<float>(512 * 64, 0.0f));
  // A copy of the tensor (a pass that duplicates state) owns its zeros.
  Tensor copy = t;
  EXPECT_FALSE(copy.bytes.isHeld());
  EXPECT_TRUE(copy.bytes == t.bytes);
  EXPECT_THROW(Tensor::zeros(DType::F32, {-1}), std::exception);
}

TEST(ZeroPages, ABufferLargerThanAMappingGetsItsOwnAndNewOnesAreZero) {
  // Buffers larger than a whole mapping get one of their own, which goes
  // when they do; what a write put there must not reappear in later zeros.
  for (int round = 0; round < 3; ++round) {
    ByteBuffer big = zeroBytes(size_t(80) << 20);
    ASSERT_TRUE(big.isHeld());
    EXPECT_EQ(big[big.size() - 1], 0);
    big[big.size() - 1] = 1;
    big[0] = 1;
  }
}

} // namespace
} // namespace mpc
