// allZero, with an AVX2 loop where the CPU has AVX2 (see all_zero.h).
#include "passes/support/all_zero.h"

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
/// Ors 512 bytes at a time and tests once: non-zero data (weights) stops
/// at its first 512 bytes, zero data costs ~21 instructions a 512 bytes.
__attribute__((target("avx2"))) bool allZeroAvx2(const uint8_t *p,
                                                 size_t size) {
  const uint8_t *end = p + size;
  for (; end - p >= 512; p += 512) {
    const __m256i *v = reinterpret_cast<const __m256i *>(p);
    __m256i acc = _mm256_loadu_si256(v);
    for (int i = 1; i < 16; ++i)
      acc = _mm256_or_si256(acc, _mm256_loadu_si256(v + i));
    if (!_mm256_testz_si256(acc, acc))
      return false;
  }
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

bool hasAvx2() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2");
}
#endif

} // namespace

bool allZero(const uint8_t *p, size_t size) {
#ifdef MPC_ALL_ZERO_AVX2
  static const bool avx2 = hasAvx2();
  if (avx2)
    return allZeroAvx2(p, size);
#endif
  return allZeroPortable(p, size);
}

} // namespace mpc
