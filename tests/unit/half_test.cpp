// Tests of the fp16/bf16 conversions in ir/half.h and of the
// bulk fp16 conversions (F16C or software) in kernels/cpu/half_convert.h.
//
// Every one of the 65536 half (and bf16) bit patterns must survive
// half -> float -> half (NaNs stay NaN); float -> half must round to nearest
// with ties to even, including at subnormals and at the overflow threshold
// 65520; a wide sample of float bit patterns is checked against an
// independent reference (nearest value in the sorted list of all halves).
#include "ir/half.h"
#include "ir/tensor.h"
#include "kernels/cpu/half_convert.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

using namespace mpc;

namespace {

bool isHalfNaN(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu); }
bool isBf16NaN(uint16_t b) { return (b & 0x7f80u) == 0x7f80u && (b & 0x7fu); }

/// The exact value of a finite half, from its fields.
double halfValue(uint16_t h) {
  int sign = h >> 15, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  double v = exp == 0 ? std::ldexp(double(mant), -24)
                      : std::ldexp(1.0 + mant / 1024.0, exp - 15);
  return sign ? -v : v;
}

/// Reference float -> half by search: the nearest finite half, ties to the
/// even pattern, and inf at or beyond 65520 (where the next "half" would be
/// 65536). Independent of the bit tricks in half.h.
uint16_t referenceFloatToHalf(float f, const std::vector<double> &positives) {
  if (std::isnan(f))
    return 0x7e00;
  double a = std::fabs(double(f));
  uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  if (a >= 65520.0)
    return sign | 0x7c00;
  // positives[i] is the value of pattern i for i in [0, 0x7bff].
  auto it = std::lower_bound(positives.begin(), positives.end(), a);
  size_t hi = size_t(it - positives.begin());
  if (hi < positives.size() && positives[hi] == a)
    return uint16_t(sign | hi);
  if (hi == positives.size()) // in (65504, 65520): rounds down to 65504
    return uint16_t(sign | 0x7bff);
  size_t lo = hi - 1;
  double dlo = a - positives[lo], dhi = positives[hi] - a;
  size_t pick = dlo < dhi ? lo : dhi < dlo ? hi : (lo % 2 == 0 ? lo : hi);
  return uint16_t(sign | pick);
}

} // namespace

TEST(Half, EveryHalfPatternRoundTrips) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    uint16_t bits = uint16_t(h);
    float f = halfToFloat(bits);
    uint16_t back = floatToHalf(f);
    if (isHalfNaN(bits)) {
      EXPECT_TRUE(std::isnan(f)) << std::hex << h;
      EXPECT_TRUE(isHalfNaN(back)) << std::hex << h;
      continue;
    }
    ASSERT_EQ(back, bits) << std::hex << h;
    if ((bits & 0x7c00u) != 0x7c00u) {
      ASSERT_EQ(double(f), halfValue(bits)) << std::hex << h;
    }
  }
}

TEST(Half, EveryBf16PatternRoundTrips) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    uint16_t bits = uint16_t(b);
    float f = bf16ToFloat(bits);
    uint16_t back = floatToBf16(f);
    if (isBf16NaN(bits)) {
      EXPECT_TRUE(std::isnan(f));
      EXPECT_TRUE(isBf16NaN(back)) << std::hex << b;
      continue;
    }
    ASSERT_EQ(back, bits) << std::hex << b;
  }
}

TEST(Half, TiesToEvenNormals) {
  // 1 + 2^-11 is halfway between 1 (0x3c00, even) and 1 + 2^-10 (0x3c01).
  EXPECT_EQ(floatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  // 1 + 3 * 2^-11 is halfway between 0x3c01 (odd) and 0x3c02 (even).
  EXPECT_EQ(floatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  // Just above a tie rounds up, just below rounds down.
  EXPECT_EQ(floatToHalf(std::nextafter(1.0f + std::ldexp(1.0f, -11), 2.0f)),
            0x3c01);
  EXPECT_EQ(floatToHalf(std::nextafter(1.0f + 3 * std::ldexp(1.0f, -11), 0.f)),
            0x3c01);
  EXPECT_EQ(floatToHalf(-(1.0f + std::ldexp(1.0f, -11))), 0xbc00);
  // A tie that carries into the exponent: 2 - 2^-11 -> 2.0 (0x4000).
  EXPECT_EQ(floatToHalf(2.0f - std::ldexp(1.0f, -11)), 0x4000);
}

TEST(Half, TiesToEvenSubnormals) {
  float tiny = std::ldexp(1.0f, -24); // smallest half subnormal, 0x0001
  EXPECT_EQ(floatToHalf(tiny), 0x0001);
  EXPECT_EQ(floatToHalf(tiny / 2), 0x0000);  // tie with 0 -> 0 (even)
  EXPECT_EQ(floatToHalf(-tiny / 2), 0x8000); // -0
  EXPECT_EQ(floatToHalf(std::nextafter(tiny / 2, 1.0f)), 0x0001);
  EXPECT_EQ(floatToHalf(tiny * 1.5f), 0x0002); // tie 1|2 -> 2
  EXPECT_EQ(floatToHalf(tiny * 2.5f), 0x0002); // tie 2|3 -> 2
  EXPECT_EQ(floatToHalf(tiny * 3.5f), 0x0004); // tie 3|4 -> 4
  EXPECT_EQ(floatToHalf(tiny / 4), 0x0000);
  // Largest subnormal 0x03ff and smallest normal 0x0400: the tie -> 0x0400.
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -14) - std::ldexp(1.0f, -25)), 0x0400);
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -14) - 3 * std::ldexp(1.0f, -25)),
            0x03fe);
  // fp32 subnormals are far below half's range.
  EXPECT_EQ(floatToHalf(std::numeric_limits<float>::denorm_min()), 0x0000);
}

TEST(Half, OverflowThreshold) {
  EXPECT_EQ(floatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(floatToHalf(std::nextafter(65520.0f, 0.0f)), 0x7bff);
  EXPECT_EQ(floatToHalf(65520.0f), 0x7c00); // tie with "65536" -> inf
  EXPECT_EQ(floatToHalf(-65520.0f), 0xfc00);
  EXPECT_EQ(floatToHalf(1e10f), 0x7c00);
  EXPECT_EQ(floatToHalf(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(floatToHalf(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_TRUE(isHalfNaN(floatToHalf(std::nanf(""))));
  EXPECT_TRUE(isHalfNaN(floatToHalf(-std::nanf(""))));
}

TEST(Half, FloatSampleMatchesReference) {
  std::vector<double> positives;
  for (uint32_t h = 0; h <= 0x7bff; ++h)
    positives.push_back(halfValue(uint16_t(h)));
  // Every 2503rd float pattern (about 1.7M): the prime stride lands in every
  // exponent and all over the mantissas, including the dropped bits.
  for (uint64_t u = 0; u < (uint64_t(1) << 32); u += 2503) {
    float f = bitsToFloat(uint32_t(u));
    uint16_t got = floatToHalf(f), want = referenceFloatToHalf(f, positives);
    if (std::isnan(f)) {
      ASSERT_TRUE(isHalfNaN(got));
      continue;
    }
    ASSERT_EQ(got, want) << "float bits 0x" << std::hex << u;
  }
  // Exact ties between consecutive halves, all of them.
  for (uint32_t h = 0; h < 0x7bff; ++h) {
    double mid = (halfValue(uint16_t(h)) + halfValue(uint16_t(h + 1))) / 2;
    float f = float(mid); // exact: a half tie needs only 12 bits
    ASSERT_EQ(double(f), mid);
    ASSERT_EQ(floatToHalf(f), uint16_t(h % 2 == 0 ? h : h + 1))
        << std::hex << h;
  }
}

TEST(Bf16, TiesToEvenAndNaN) {
  // 1 + 2^-8 is halfway between 1 (0x3f80) and 1 + 2^-7 (0x3f81).
  EXPECT_EQ(floatToBf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  EXPECT_EQ(floatToBf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_EQ(floatToBf16(std::nextafter(1.0f + std::ldexp(1.0f, -8), 2.f)),
            0x3f81);
  EXPECT_EQ(floatToBf16(-(1.0f + std::ldexp(1.0f, -8))), 0xbf80);
  EXPECT_EQ(floatToBf16(1.0f), 0x3f80);
  // The largest float rounds past bf16's largest finite value to inf.
  EXPECT_EQ(floatToBf16(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(floatToBf16(std::numeric_limits<float>::infinity()), 0x7f80);
  // NaN stays NaN even when its payload lives only in the low 16 bits
  // (truncation would turn it into inf).
  EXPECT_TRUE(isBf16NaN(floatToBf16(bitsToFloat(0x7f800001u))));
  EXPECT_TRUE(isBf16NaN(floatToBf16(bitsToFloat(0xff800001u))));
  EXPECT_TRUE(isBf16NaN(floatToBf16(std::nanf(""))));
  EXPECT_EQ(roundToBf16(3.0f), 3.0f);
}

// --- the bulk conversions of kernels/cpu/half_convert.h ----------------------
//
// The F16C path must give the software path's bits for every input. Every
// half is checked; for floats, every pattern of sign, exponent and the 10
// kept mantissa bits is combined with the dropped-bit patterns that decide
// rounding (0, 1, just below/at/above the tie, all ones, a random one), every
// float whose half is subnormal is sampled densely, and NaNs with every
// payload position sit at every lane of a vector block. Set
// MPC_HALF_EXHAUSTIVE=1 to compare all 2^32 floats (about 30 s).

namespace {

/// Converts `in` with both paths, in one call (so that the vector loop and
/// its scalar tail both run), and compares bit patterns.
void expectSameHalves(const std::vector<float> &in) {
  std::vector<uint16_t> fast(in.size()), soft(in.size());
  cpu::floatToHalfN(in.data(), fast.data(), int64_t(in.size()));
  cpu::floatToHalfNSoftware(in.data(), soft.data(), int64_t(in.size()));
  for (size_t i = 0; i < in.size(); ++i)
    ASSERT_EQ(fast[i], soft[i])
        << "float bits 0x" << std::hex << floatBits(in[i]);
}

} // namespace

// The fast path must really be taken where the CPU has it (else the
// comparisons below compare the software path with itself): the detection
// once broke under clang, which does not know __builtin_cpu_supports("f16c").
// Tensor::setFromDouble (constants, folded values, AllReduce results) rounds
// a double once to fp16/bf16. Just past a half-way point of the narrow type
// a double rounds to the half-way point in fp32, which then ties to even:
// the wrong neighbour. Exactly at the half-way point it still ties to even.
TEST(Half, SetFromDoubleRoundsOnce) {
  const double halfUlp16 = std::ldexp(1.0, -11),
               halfUlpBf = std::ldexp(1.0, -8);
  const double tiny = std::ldexp(1.0, -40); // far below an fp32 ulp at 1
  struct Case {
    DType type;
    double value;
    double want;
  };
  for (const Case &c :
       {Case{DType::F16, 1 + halfUlp16 + tiny, 1 + 2 * halfUlp16},
        Case{DType::F16, 1 + halfUlp16, 1},
        Case{DType::F16, -(1 + halfUlp16 + tiny), -(1 + 2 * halfUlp16)},
        Case{DType::F16, 1 + 3 * halfUlp16 - tiny, 1 + 2 * halfUlp16},
        Case{DType::BF16, 1 + halfUlpBf + tiny, 1 + 2 * halfUlpBf},
        Case{DType::BF16, 1 + halfUlpBf, 1}}) {
    Tensor t(c.type, {1});
    t.setFromDouble(0, c.value);
    EXPECT_EQ(t.getAsDouble(0), c.want)
        << dtypeName(c.type) << " from " << c.value;
  }
}

TEST(HalfBulk, F16cIsUsedWhereTheCpuHasIt) {
#if defined(__x86_64__) || defined(__i386__)
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string text((std::istreambuf_iterator<char>(cpuinfo)),
                   std::istreambuf_iterator<char>());
  bool listed = text.find(" f16c") != std::string::npos &&
                text.find(" avx") != std::string::npos;
  if (!listed || std::getenv("MPC_NO_F16C"))
    GTEST_SKIP() << "no f16c in /proc/cpuinfo, or MPC_NO_F16C is set";
  EXPECT_TRUE(mpc::cpu::haveF16c());
#else
  EXPECT_FALSE(mpc::cpu::haveF16c());
#endif
}

TEST(HalfBulk, EveryHalfWidensLikeSoftware) {
  std::vector<uint16_t> h(0x10000 + 5); // + 5: a scalar tail too
  for (size_t i = 0; i < h.size(); ++i)
    h[i] = uint16_t(i);
  std::vector<float> fast(h.size()), soft(h.size());
  cpu::halfToFloatN(h.data(), fast.data(), int64_t(h.size()));
  cpu::halfToFloatNSoftware(h.data(), soft.data(), int64_t(h.size()));
  for (size_t i = 0; i < h.size(); ++i)
    ASSERT_EQ(floatBits(fast[i]), floatBits(soft[i]))
        << "half 0x" << std::hex << h[i];
  // Same through the per-element function of half.h.
  for (size_t i = 0; i < h.size(); ++i)
    ASSERT_EQ(floatBits(fast[i]), floatBits(halfToFloat(h[i])));
  // A NaN in any lane of a block of 8 leaves the other lanes exact.
  for (int lane = 0; lane < 8; ++lane) {
    uint16_t block[8] = {0x3c00, 0x0001, 0x83ff, 0x7c00,
                         0xfc00, 0x7bff, 0x8000, 0x0400};
    block[lane] = 0x7c01; // signalling NaN: halfToFloat keeps it signalling
    float f[8], s[8];
    cpu::halfToFloatN(block, f, 8);
    cpu::halfToFloatNSoftware(block, s, 8);
    for (int i = 0; i < 8; ++i)
      ASSERT_EQ(floatBits(f[i]), floatBits(s[i])) << lane << " " << i;
  }
}

TEST(HalfBulk, FloatsRoundLikeSoftware) {
  const uint32_t dropped[] = {0x0000, 0x0001, 0x0fff, 0x1000,
                              0x1001, 0x1fff, 0x0a5b};
  std::vector<float> in;
  in.reserve(size_t(1) << 22);
  // Sign, exponent and kept mantissa: all 2^19 patterns.
  for (uint32_t top = 0; top < (1u << 19); ++top)
    for (uint32_t low : dropped)
      in.push_back(bitsToFloat((top << 13) | low));
  expectSameHalves(in);
  in.clear();
  // Floats whose half is subnormal or zero (exponents 101..113), both
  // signs, every 61st mantissa, plus each exponent's extreme mantissas.
  for (uint32_t sign : {0u, 0x80000000u})
    for (uint32_t exp = 101; exp <= 113; ++exp) {
      for (uint32_t m = 0; m < (1u << 23); m += 61)
        in.push_back(bitsToFloat(sign | (exp << 23) | m));
      in.push_back(bitsToFloat(sign | (exp << 23) | 0x7fffffu));
    }
  expectSameHalves(in);
  in.clear();
  // Every 997th float pattern: the whole range, NaNs and float subnormals.
  for (uint64_t u = 0; u < (uint64_t(1) << 32); u += 997)
    in.push_back(bitsToFloat(uint32_t(u)));
  expectSameHalves(in);
}

TEST(HalfBulk, NaNsAndSpecialsInEveryLane) {
  const uint32_t nans[] = {0x7f800001u, 0x7fc00000u, 0xffffffffu,
                           0x7fbfe000u, 0xff802000u, 0x7fffe001u};
  const float specials[] = {0.0f,     -0.0f,     65504.0f, 65520.0f,
                            -1e-8f,   6.1e-5f,   1.0f,     -2.5f,
                            INFINITY, -INFINITY, 5.96e-8f, 2.98e-8f};
  for (uint32_t nan : nans)
    for (int lane = 0; lane < 8; ++lane) {
      std::vector<float> in(std::begin(specials), std::end(specials));
      in.insert(in.begin() + lane, bitsToFloat(nan));
      expectSameHalves(in);
    }
}

// A run's last 1-7 elements take F16C as one zero-padded block: every half,
// a sample of floats, and NaNs at every position of such a short run, in
// runs of every length below 8.
TEST(HalfBulk, ShortRunsConvertLikeSoftware) {
  std::vector<uint16_t> h(0x10000);
  for (size_t i = 0; i < h.size(); ++i)
    h[i] = uint16_t(i);
  for (int64_t len = 1; len < 8; ++len)
    for (int64_t i = 0; i < int64_t(h.size()); i += len) {
      int64_t m = std::min<int64_t>(len, int64_t(h.size()) - i);
      float fast[8], soft[8];
      cpu::halfToFloatN(h.data() + i, fast, m);
      cpu::halfToFloatNSoftware(h.data() + i, soft, m);
      for (int64_t j = 0; j < m; ++j)
        ASSERT_EQ(floatBits(fast[j]), floatBits(soft[j]))
            << "half 0x" << std::hex << h[size_t(i + j)] << " run " << len;
    }
  std::vector<float> sample;
  for (uint64_t u = 0; u < (uint64_t(1) << 32); u += 99991)
    sample.push_back(bitsToFloat(uint32_t(u)));
  for (size_t len = 1; len < 8; ++len)
    for (size_t i = 0; i < sample.size(); i += len)
      expectSameHalves(std::vector<float>(
          sample.begin() + std::ptrdiff_t(i),
          sample.begin() + std::ptrdiff_t(std::min(sample.size(), i + len))));
  for (size_t len = 1; len < 8; ++len)
    for (size_t at = 0; at < len; ++at) {
      std::vector<float> run(len, 1.5f);
      run[at] = bitsToFloat(0x7f800001u);
      expectSameHalves(run);
      std::vector<uint16_t> half(len, 0x3c00);
      half[at] = 0x7c01;
      float fast[8], soft[8];
      cpu::halfToFloatN(half.data(), fast, int64_t(len));
      cpu::halfToFloatNSoftware(half.data(), soft, int64_t(len));
      for (size_t j = 0; j < len; ++j)
        ASSERT_EQ(floatBits(fast[j]), floatBits(soft[j])) << len << " " << at;
    }
}

// The bf16 run conversions give floatToBf16 / bf16ToFloat's bits: every
// bf16, and floats with every sign, exponent and kept mantissa combined
// with the dropped bits that decide rounding, plus NaNs and a sample of
// the whole range.
TEST(HalfBulk, Bf16RunsConvertLikeOneByOne) {
  std::vector<uint16_t> b(0x10000 + 5);
  for (size_t i = 0; i < b.size(); ++i)
    b[i] = uint16_t(i);
  // The dispatched path (AVX2 where the CPU has it) and the portable one.
  using Widen = void (*)(const uint16_t *, float *, int64_t);
  using Round = void (*)(const float *, uint16_t *, int64_t);
  const Widen widens[] = {cpu::bf16ToFloatN, cpu::bf16ToFloatNPortable};
  const Round rounds[] = {cpu::floatToBf16N, cpu::floatToBf16NPortable};
  std::vector<float> widened(b.size());
  for (Widen widen : widens) {
    widen(b.data(), widened.data(), int64_t(b.size()));
    for (size_t i = 0; i < b.size(); ++i)
      ASSERT_EQ(floatBits(widened[i]), floatBits(bf16ToFloat(b[i])))
          << "bf16 0x" << std::hex << b[i];
  }
  const uint32_t dropped[] = {0x0000, 0x0001, 0x7fff, 0x8000,
                              0x8001, 0xffff, 0x5a3c};
  std::vector<float> in;
  for (uint32_t top = 0; top < 0x10000u; ++top)
    for (uint32_t low : dropped)
      in.push_back(bitsToFloat((top << 16) | low));
  for (uint64_t u = 0; u < (uint64_t(1) << 32); u += 9973)
    in.push_back(bitsToFloat(uint32_t(u)));
  in.push_back(bitsToFloat(0x7f800001u)); // signalling NaN: comes out quiet
  in.push_back(bitsToFloat(0xffffffffu));
  std::vector<uint16_t> rounded(in.size() + 3); // + 3: odd lengths too
  for (Round round : rounds)
    for (int64_t tail : {0, 3}) {
      round(in.data(), rounded.data(), int64_t(in.size()) - tail);
      for (size_t i = 0; i + size_t(tail) < in.size(); ++i)
        ASSERT_EQ(rounded[i], floatToBf16(in[i]))
            << "float bits 0x" << std::hex << floatBits(in[i]);
    }
}

// floatToBf16N's vector paths work on blocks of 16 (8 with AVX2) and send a
// block holding a nonzero subnormal to the integer path (VCVTNEPS2BF16
// flushes subnormals): each special value in each lane of a block of normal
// values, every run length from 1 to 40, must still give floatToBf16's bits,
// and bf16ToFloatN bf16ToFloat's.
TEST(HalfBulk, Bf16SpecialsInEveryLaneAndRunLength) {
  const uint32_t specials[] = {
      0x00000001u, 0x80000001u, 0x007fffffu, 0x00008000u, 0x00018000u,
      0x807f8000u, 0x00000000u, 0x80000000u, 0x00800000u, 0x7f800000u,
      0xff800000u, 0x7f800001u, 0xffc00000u, 0x7fbfffffu, 0x7f7fffffu,
      0x7f7f8000u, 0x3f808000u, 0x3f818000u, 0x3f807fffu, 0xbf808001u};
  std::vector<float> in(40);
  std::vector<uint16_t> out(40);
  std::vector<float> widened(40);
  for (uint32_t special : specials)
    for (size_t lane = 0; lane < in.size(); ++lane)
      for (int64_t n = 1; n <= int64_t(in.size()); ++n) {
        for (size_t i = 0; i < in.size(); ++i) // normals with dropped bits
          in[i] = bitsToFloat(0x3f800000u + uint32_t(i) * 0x12345u);
        in[lane] = bitsToFloat(special);
        cpu::floatToBf16N(in.data(), out.data(), n);
        for (int64_t i = 0; i < n; ++i)
          ASSERT_EQ(out[size_t(i)], floatToBf16(in[size_t(i)]))
              << "float bits 0x" << std::hex << floatBits(in[size_t(i)])
              << " at " << std::dec << i << " of " << n;
        cpu::bf16ToFloatN(out.data(), widened.data(), n);
        for (int64_t i = 0; i < n; ++i)
          ASSERT_EQ(floatBits(widened[size_t(i)]),
                    floatBits(bf16ToFloat(out[size_t(i)])));
      }
}

TEST(HalfBulk, EveryFloatWhenAsked) {
  if (!std::getenv("MPC_HALF_EXHAUSTIVE"))
    GTEST_SKIP() << "set MPC_HALF_EXHAUSTIVE=1 to compare all 2^32 floats";
  std::vector<float> in(size_t(1) << 20);
  for (uint64_t base = 0; base < (uint64_t(1) << 32); base += in.size()) {
    for (size_t i = 0; i < in.size(); ++i)
      in[i] = bitsToFloat(uint32_t(base + i));
    expectSameHalves(in);
  }
}
