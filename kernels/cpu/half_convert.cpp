// Bulk fp16 <-> fp32 conversion: F16C where the CPU has it, software else.
//
// The F16C functions are compiled for that instruction set alone (target
// attribute) and chosen once at run time, so the build stays portable. Both
// paths give the bits of ir/half.h: a block of 8 holding a NaN
// is converted in software (F16C's NaN results differ, see half_convert.h);
// every other value, subnormals and infinities included, converts the same
// with VCVTPS2PH in round-to-nearest-even mode and with VCVTPH2PS. A run's
// last 1-7 elements are converted as one zero-padded block, so short rows
// take the F16C path too. bf16 runs convert with AVX-512 where the CPU has
// AVX512-BF16 (VCVTNEPS2BF16: round to nearest even and NaN -> its top half
// with the quiet bit set, the bits of floatToBf16; it flushes subnormal
// inputs to zero, so a block of 16 holding a nonzero subnormal takes the
// integer path), else with AVX2 (a shift one way, a rounding add and a NaN
// select the other), else in the same arithmetic as plain loops that the
// compiler vectorises.
#include "kernels/cpu/half_convert.h"

#include "ir/half.h"

#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define MPC_HAVE_X86 1
#endif

namespace mpc {
namespace cpu {

void halfToFloatNSoftware(const uint16_t *src, float *dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    dst[i] = halfToFloat(src[i]);
}

void floatToHalfNSoftware(const float *src, uint16_t *dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    dst[i] = floatToHalf(src[i]);
}

void bf16ToFloatNPortable(const uint16_t *src, float *dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint32_t x = uint32_t(src[i]) << 16;
    std::memcpy(dst + i, &x, sizeof x);
  }
}

void floatToBf16NPortable(const float *src, uint16_t *dst, int64_t n) {
  // floatToBf16 (ir/half.h) with its NaN branch as a select:
  // both results are computed and the NaN test picks one. |x| fits in 31
  // bits, so the test may compare as signed (SSE2 has no unsigned compare).
  for (int64_t i = 0; i < n; ++i) {
    uint32_t x;
    std::memcpy(&x, src + i, sizeof x);
    uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
    uint32_t quiet = (x >> 16) | 0x40u;
    bool nan = int32_t(x & 0x7fffffffu) > int32_t(0x7f800000u);
    dst[i] = uint16_t(nan ? quiet : rounded);
  }
}

#ifdef MPC_HAVE_X86
namespace {

__attribute__((target("avx,f16c"))) void
halfToFloatNF16c(const uint16_t *src, float *dst, int64_t n) {
  const __m128i absMask = _mm_set1_epi16(0x7fff);
  const __m128i infBits = _mm_set1_epi16(0x7c00);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i *>(src + i));
    // |h| > inf as signed 16-bit (|h| <= 0x7fff): a NaN lane.
    __m128i nan = _mm_cmpgt_epi16(_mm_and_si128(h, absMask), infBits);
    if (_mm_movemask_epi8(nan) != 0) {
      halfToFloatNSoftware(src + i, dst + i, 8);
      continue;
    }
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
  }
  if (i == n)
    return;
  // The last 1-7 elements as a block padded with zeros (no NaN), so short
  // rows convert with F16C too; a NaN among them takes the software path.
  alignas(16) uint16_t tail[8] = {};
  alignas(32) float out[8];
  const int64_t r = n - i;
  for (int64_t j = 0; j < r; ++j)
    tail[j] = src[i + j];
  __m128i h = _mm_load_si128(reinterpret_cast<const __m128i *>(tail));
  __m128i nan = _mm_cmpgt_epi16(_mm_and_si128(h, absMask), infBits);
  if (_mm_movemask_epi8(nan) != 0) {
    halfToFloatNSoftware(src + i, dst + i, r);
    return;
  }
  _mm256_store_ps(out, _mm256_cvtph_ps(h));
  for (int64_t j = 0; j < r; ++j)
    dst[i + j] = out[j];
}

__attribute__((target("avx,f16c"))) void
floatToHalfNF16c(const float *src, uint16_t *dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 f = _mm256_loadu_ps(src + i);
    if (_mm256_movemask_ps(_mm256_cmp_ps(f, f, _CMP_UNORD_Q)) != 0) {
      floatToHalfNSoftware(src + i, dst + i, 8);
      continue;
    }
    __m128i h =
        _mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i *>(dst + i), h);
  }
  if (i == n)
    return;
  // The last 1-7 elements as a zero-padded block, as in halfToFloatNF16c.
  alignas(32) float tail[8] = {};
  alignas(16) uint16_t out[8];
  const int64_t r = n - i;
  for (int64_t j = 0; j < r; ++j)
    tail[j] = src[i + j];
  __m256 f = _mm256_load_ps(tail);
  if (_mm256_movemask_ps(_mm256_cmp_ps(f, f, _CMP_UNORD_Q)) != 0) {
    floatToHalfNSoftware(src + i, dst + i, r);
    return;
  }
  _mm_store_si128(
      reinterpret_cast<__m128i *>(out),
      _mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  for (int64_t j = 0; j < r; ++j)
    dst[i + j] = out[j];
}

__attribute__((target("avx2"))) void bf16ToFloatNAvx2(const uint16_t *src,
                                                      float *dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i *>(src + i));
    __m256i x = _mm256_slli_epi32(_mm256_cvtepu16_epi32(b), 16);
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(dst + i), x);
  }
  bf16ToFloatNPortable(src + i, dst + i, n - i);
}

/// floatToBf16NPortable eight lanes at a time: the same rounding add and NaN
/// select; every result fits in 16 bits, so the saturating pack is exact.
__attribute__((target("avx2"))) void
floatToBf16NAvx2(const float *src, uint16_t *dst, int64_t n) {
  const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7fff);
  const __m256i quietBit = _mm256_set1_epi32(0x40);
  const __m256i absMask = _mm256_set1_epi32(0x7fffffff);
  const __m256i infBits = _mm256_set1_epi32(0x7f800000);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(src + i));
    __m256i high = _mm256_srli_epi32(x, 16);
    __m256i rounded =
        _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(x, bias),
                                           _mm256_and_si256(high, one)),
                          16);
    __m256i quiet = _mm256_or_si256(high, quietBit);
    __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, absMask), infBits);
    __m256i r = _mm256_blendv_epi8(rounded, quiet, nan);
    // packus works within 128-bit halves: gather the two low quarters.
    __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
    _mm_storeu_si128(reinterpret_cast<__m128i *>(dst + i),
                     _mm256_castsi256_si128(packed));
  }
  floatToBf16NPortable(src + i, dst + i, n - i);
}

/// bf16ToFloatNAvx2 sixteen lanes at a time.
__attribute__((target("avx512f"))) void
bf16ToFloatNAvx512(const uint16_t *src, float *dst, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(src + i));
    _mm512_storeu_si512(dst + i,
                        _mm512_slli_epi32(_mm512_cvtepu16_epi32(b), 16));
  }
  bf16ToFloatNAvx2(src + i, dst + i, n - i);
}

/// floatToBf16NPortable with VCVTNEPS2BF16, sixteen lanes at a time. The
/// instruction rounds to nearest even and turns a NaN into its top half
/// with the quiet bit (0x40) set, as floatToBf16 does, but reads subnormal
/// inputs as zero: a block holding a nonzero subnormal (exponent bits zero,
/// mantissa not) is rounded by floatToBf16NAvx2's integer arithmetic.
__attribute__((target("avx512f,avx512bf16,avx512vl,avx2"))) void
floatToBf16NAvx512Bf16(const float *src, uint16_t *dst, int64_t n) {
  const __m512i expBits = _mm512_set1_epi32(0x7f800000);
  const __m512i absMask = _mm512_set1_epi32(0x7fffffff);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 f = _mm512_loadu_ps(src + i);
    __m512i x = _mm512_castps_si512(f);
    __mmask16 nonzero = _mm512_test_epi32_mask(x, absMask);
    __mmask16 subnormal = _mm512_mask_cmpeq_epi32_mask(
        nonzero, _mm512_and_si512(x, expBits), _mm512_setzero_si512());
    if (subnormal != 0) {
      floatToBf16NAvx2(src + i, dst + i, 16);
      continue;
    }
    __m256bh b = _mm512_cvtneps_pbh(f);
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(dst + i), (__m256i)b);
  }
  floatToBf16NAvx2(src + i, dst + i, n - i);
}

/// AVX512F and AVX512-BF16 (CPUID leaf 7: EBX bit 16, subleaf 1 EAX bit 5)
/// with an OS that saves the ZMM state (XCR0's SSE, AVX, opmask and ZMM
/// bits). By CPUID, as detectF16c, for the compilers that lack the name.
/// MPC_NO_AVX512_BF16 set keeps the AVX2 paths (for comparisons).
bool detectAvx512Bf16() {
  if (std::getenv("MPC_NO_AVX512_BF16"))
    return false;
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx) || !(ecx & bit_OSXSAVE))
    return false;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) || !(ebx & (1u << 16)) ||
      eax < 1)
    return false;
  if (!__get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) || !(eax & (1u << 5)))
    return false;
  unsigned xcr0Low = 0, xcr0High = 0;
  __asm__("xgetbv" : "=a"(xcr0Low), "=d"(xcr0High) : "c"(0));
  return (xcr0Low & 0xe6) == 0xe6;
}

bool detectAvx2() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2");
}

bool detectF16c() {
  if (std::getenv("MPC_NO_F16C"))
    return false;
  // CPUID leaf 1 for F16C and AVX, and OSXSAVE with XCR0's XMM and YMM bits
  // for an OS that saves the AVX state. (Not __builtin_cpu_supports: clang
  // 14, which builds make fuzz, does not know "f16c".)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx))
    return false;
  const unsigned need = bit_F16C | bit_AVX | bit_OSXSAVE;
  if ((ecx & need) != need)
    return false;
  unsigned xcr0Low = 0, xcr0High = 0;
  __asm__("xgetbv" : "=a"(xcr0Low), "=d"(xcr0High) : "c"(0));
  return (xcr0Low & 6) == 6;
}

} // namespace

bool haveF16c() {
  static const bool have = detectF16c();
  return have;
}

void halfToFloatN(const uint16_t *src, float *dst, int64_t n) {
  if (haveF16c())
    halfToFloatNF16c(src, dst, n);
  else
    halfToFloatNSoftware(src, dst, n);
}

void floatToHalfN(const float *src, uint16_t *dst, int64_t n) {
  if (haveF16c())
    floatToHalfNF16c(src, dst, n);
  else
    floatToHalfNSoftware(src, dst, n);
}

namespace {
bool haveAvx2() {
  static const bool have = detectAvx2();
  return have;
}
// Implies AVX2 on every CPU that has it (the paths finish with AVX2's).
bool haveAvx512Bf16() {
  static const bool have = detectAvx512Bf16() && haveAvx2();
  return have;
}
} // namespace

void bf16ToFloatN(const uint16_t *src, float *dst, int64_t n) {
  if (haveAvx512Bf16())
    bf16ToFloatNAvx512(src, dst, n);
  else if (haveAvx2())
    bf16ToFloatNAvx2(src, dst, n);
  else
    bf16ToFloatNPortable(src, dst, n);
}

void floatToBf16N(const float *src, uint16_t *dst, int64_t n) {
  if (haveAvx512Bf16())
    floatToBf16NAvx512Bf16(src, dst, n);
  else if (haveAvx2())
    floatToBf16NAvx2(src, dst, n);
  else
    floatToBf16NPortable(src, dst, n);
}

#else // not x86: the software loops only

bool haveF16c() { return false; }

void halfToFloatN(const uint16_t *src, float *dst, int64_t n) {
  halfToFloatNSoftware(src, dst, n);
}

void floatToHalfN(const float *src, uint16_t *dst, int64_t n) {
  floatToHalfNSoftware(src, dst, n);
}

void bf16ToFloatN(const uint16_t *src, float *dst, int64_t n) {
  bf16ToFloatNPortable(src, dst, n);
}

void floatToBf16N(const float *src, uint16_t *dst, int64_t n) {
  floatToBf16NPortable(src, dst, n);
}

#endif

} // namespace cpu
} // namespace mpc
