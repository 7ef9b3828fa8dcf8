// The GPU's fp16/bf16 conversions (kernels/cuda/half_convert.cuh) give the
// software routine's bits (ir/half.h) for every input: all 65536 fp16
// patterns to fp32, a list of fp32 patterns (every rounding boundary,
// subnormals, overflow, infinities, NaNs with payloads and both signs, and
// a stride through all patterns) to fp16 and bf16 against the host routine,
// and all 2^32 fp32 patterns against the routine's device build. Skipped
// without a GPU (ctest backend-ops).
#include "half_convert_nvcc.h"

#include "ir/half.h"

#include <gtest/gtest.h>

#include <cstdio>

using namespace mpc;

namespace {

std::string hex(uint32_t v) {
  char b[16];
  std::snprintf(b, sizeof b, "0x%08x", v);
  return b;
}

/// fp32 patterns where rounding to fp16/bf16 is delicate.
std::vector<uint32_t> edgePatterns() {
  std::vector<uint32_t> v;
  for (uint32_t sign : {0u, 0x80000000u}) {
    // Around every fp16 value: the value, its midpoints' neighbours.
    for (uint32_t h = 0; h < 0x7c00u; ++h) {
      uint32_t x = floatBits(halfToFloat(uint16_t(h)));
      for (int d = -2; d <= 2; ++d)
        v.push_back(sign | uint32_t(int64_t(x) + d));
      uint32_t mid = floatBits(
          0.5f * (halfToFloat(uint16_t(h)) + halfToFloat(uint16_t(h + 1))));
      for (int d = -1; d <= 1; ++d)
        v.push_back(sign | uint32_t(int64_t(mid) + d));
    }
    // bf16 ties: the low 16 bits 0x8000 with odd and even kept bits.
    for (uint32_t hi = 0; hi < 0x7f80u; hi += 7)
      for (uint32_t lo : {0x7fffu, 0x8000u, 0x8001u, 0u, 0xffffu})
        v.push_back(sign | (hi << 16) | lo);
    // Overflow, infinities, NaN payloads (quiet and signalling).
    for (uint32_t x :
         {0x477fe000u, 0x477fefffu, 0x477ff000u, 0x477fffffu, 0x7f7fffffu,
          0x7f800000u, 0x7f800001u, 0x7fa00000u, 0x7fc00000u, 0x7fc00001u,
          0x7fffffffu, 0x7f80ffffu, 0x7fbfffffu, 0x00000001u, 0x007fffffu,
          0x00800000u, 0x33000000u, 0x33000001u, 0x32ffffffu})
      v.push_back(sign | x);
  }
  for (uint64_t p = 0; p < (uint64_t(1) << 32); p += 65521)
    v.push_back(uint32_t(p));
  return v;
}

} // namespace

TEST(BackendOps, HalfConversionsMatchTheSoftwareRoutine) {
  std::vector<uint32_t> floats = edgePatterns(), fromHalf;
  std::vector<uint16_t> toHalf, toBf16;
  std::string why;
  if (!nvcc::runHalfConversions(floats, fromHalf, toHalf, toBf16, why))
    GTEST_SKIP() << "backend-ops skipped: no usable CUDA GPU: " << why;
  int bad = 0;
  for (uint32_t h = 0; h < 65536 && bad < 10; ++h) {
    uint32_t want = floatBits(halfToFloat(uint16_t(h)));
    if (fromHalf[h] != want) {
      ++bad;
      ADD_FAILURE() << "fp16 " << hex(h) << " -> fp32: gpu " << hex(fromHalf[h])
                    << ", cpu " << hex(want);
    }
  }
  for (size_t i = 0; i < floats.size() && bad < 20; ++i) {
    float f = bitsToFloat(floats[i]);
    if (toHalf[i] != floatToHalf(f)) {
      ++bad;
      ADD_FAILURE() << "fp32 " << hex(floats[i]) << " -> fp16: gpu "
                    << hex(toHalf[i]) << ", cpu " << hex(floatToHalf(f));
    }
    if (toBf16[i] != floatToBf16(f)) {
      ++bad;
      ADD_FAILURE() << "fp32 " << hex(floats[i]) << " -> bf16: gpu "
                    << hex(toBf16[i]) << ", cpu " << hex(floatToBf16(f));
    }
  }
}

TEST(BackendOps, HalfConversionsOfEveryFloatPattern) {
  nvcc::SweepResult r;
  std::string why;
  if (!nvcc::sweepAllFloats(r, why))
    GTEST_SKIP() << "backend-ops skipped: no usable CUDA GPU: " << why;
  EXPECT_EQ(r.halfMismatches, 0u) << "first: fp32 " << hex(r.firstHalf);
  EXPECT_EQ(r.bf16Mismatches, 0u) << "first: fp32 " << hex(r.firstBf16);
}
