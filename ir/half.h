// IEEE fp16 and bfloat16 <-> fp32 conversions, round-to-nearest-even.
//
// Bit-exact with the GPU's __float2half_rn / __float2bfloat16_rn: NaN stays NaN
// (quiet), overflow goes to inf, subnormals are kept. Shared by the CPU
// backend, the CUDA kernels and the tests (every one of the 65536 half patterns
// is round-tripped in tests/unit/half_test.cpp).
#pragma once

#include "ir/host_device.h"

#include <cstdint>
#include <cstring>

namespace mpc {

MPC_HD uint32_t floatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

MPC_HD float bitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

/// fp16 bit pattern -> fp32 (exact).
MPC_HD float halfToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) // inf / nan
    return bitsToFloat(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) {
    if (mant == 0)
      return bitsToFloat(sign);
    // Subnormal: value = mant * 2^-24.
    float v = float(mant) * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  return bitsToFloat(sign | ((exp + 112u) << 23) | (mant << 13));
}

/// fp32 -> fp16 bit pattern, round to nearest, ties to even.
MPC_HD uint16_t floatToHalf(float f) {
  uint32_t x = floatBits(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) // inf or nan
    return uint16_t(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0u));
  // Values at or above 65520 round to inf.
  if (absx >= 0x477ff000u)
    return uint16_t(sign | 0x7c00u);
  uint32_t exp = absx >> 23;
  if (exp < 113) {
    // Result is subnormal (or zero): shift the full significand into place.
    if (exp < 102) // below half of the smallest subnormal: rounds to zero
      return uint16_t(sign);
    uint32_t mant = (absx & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - exp; // 14..24
    uint32_t result = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1u);
    uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (result & 1u)))
      ++result;
    return uint16_t(sign | result);
  }
  uint32_t result = ((exp - 112u) << 10) | ((absx >> 13) & 0x3ffu);
  uint32_t rem = absx & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (result & 1u)))
    ++result; // may carry into the exponent, which is still correct
  return uint16_t(sign | result);
}

/// bf16 bit pattern -> fp32 (exact).
MPC_HD float bf16ToFloat(uint16_t b) { return bitsToFloat(uint32_t(b) << 16); }

/// fp32 -> bf16 bit pattern, round to nearest, ties to even.
MPC_HD uint16_t floatToBf16(float f) {
  uint32_t x = floatBits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) // nan: keep it quiet
    return uint16_t((x >> 16) | 0x40u);
  uint32_t lsb = (x >> 16) & 1u;
  x += 0x7fffu + lsb;
  return uint16_t(x >> 16);
}

/// Rounds an fp32 value through fp16 (the value an fp16 store would keep).
MPC_HD float roundToHalf(float f) { return halfToFloat(floatToHalf(f)); }
/// Rounds an fp32 value through bf16.
MPC_HD float roundToBf16(float f) { return bf16ToFloat(floatToBf16(f)); }

} // namespace mpc
