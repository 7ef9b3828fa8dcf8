// allZero, with an AVX2 loop where the CPU has AVX2 (see all_zero.h).
#include "support/all_zero.h"

#include <cstring>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define MPC_ALL_ZERO_AVX2 1
#endif

namespace mpc {
namespace {

/// Byte i equals byte i + 1 for all i, and the first is zero.
bool allZeroPortable(const uint8_t *p, size_t size) {
  return size == 0 || (p[0] == 0 && std::memcmp(p, p + 1, size - 1) == 0);
}

#ifdef MPC_ALL_ZERO_AVX2
/// The first 1024-byte step at or after p that holds a non-zero byte, or
/// where fewer than 1024 bytes are left before `end`.
///
/// Ors each step into four accumulators and tests once: the accumulators
/// are zero whenever the loop goes on, so they carry over and each 32
/// bytes cost one or (with its load), where or-ing 512 bytes into a fresh
/// register took a load and an or per pair and a loop step per 512 (~30
/// instructions a 512 bytes, now ~21). Non-zero data (weights) stops at its
/// first 1024 bytes.
__attribute__((target("avx2"), always_inline)) inline const uint8_t *
firstNonZeroStep(const uint8_t *p, const uint8_t *end) {
  __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
  for (; size_t(end - p) >= kZeroStep; p += kZeroStep) {
    const __m256i *v = reinterpret_cast<const __m256i *>(p);
    for (int i = 0; i < 32; i += 4) {
      a = _mm256_or_si256(a, _mm256_loadu_si256(v + i));
      b = _mm256_or_si256(b, _mm256_loadu_si256(v + i + 1));
      c = _mm256_or_si256(c, _mm256_loadu_si256(v + i + 2));
      d = _mm256_or_si256(d, _mm256_loadu_si256(v + i + 3));
      // Keeps the chains as written: GCC otherwise re-associates the ors
      // into a tree of loads and ors, the cost this loop avoids.
      asm("" : "+x"(a), "+x"(b), "+x"(c), "+x"(d));
    }
    __m256i any = _mm256_or_si256(_mm256_or_si256(a, b), _mm256_or_si256(c, d));
    if (!_mm256_testz_si256(any, any))
      break;
  }
  return p;
}

__attribute__((target("avx2"))) size_t zeroStepsAvx2(const uint8_t *p,
                                                     size_t size) {
  return size_t(firstNonZeroStep(p, p + size) - p);
}

__attribute__((target("avx2"))) bool allZeroAvx2(const uint8_t *p,
                                                 size_t size) {
  const uint8_t *end = p + size;
  p = firstNonZeroStep(p, end);
  if (size_t(end - p) >= kZeroStep)
    return false;
  for (; end - p >= 32; p += 32) {
    __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p));
    if (!_mm256_testz_si256(v, v))
      return false;
  }
  for (; p < end; ++p)
    if (*p)
      return false;
  return true;
}

/// Asked once per process.
bool hasAvx2() {
  static const bool avx2 = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2");
  }();
  return avx2;
}
#endif

} // namespace

size_t zeroSteps(const uint8_t *p, size_t size) {
#ifdef MPC_ALL_ZERO_AVX2
  if (hasAvx2())
    return zeroStepsAvx2(p, size);
#endif
  size_t zeros = 0;
  while (size - zeros >= kZeroStep && allZeroPortable(p + zeros, kZeroStep))
    zeros += kZeroStep;
  return zeros;
}

bool allZero(const uint8_t *p, size_t size) {
#ifdef MPC_ALL_ZERO_AVX2
  if (hasAvx2())
    return allZeroAvx2(p, size);
#endif
  return allZeroPortable(p, size);
}

} // namespace mpc
