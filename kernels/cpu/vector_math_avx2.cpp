// The AVX2 loops of vector_math.cpp, compiled with -mavx2 -mfma and
// -ffp-contract=off (CMakeLists.txt; chosen only where the CPU has both);
// erf as vector_erf.h describes, GELU as gelu_math.h's expressions.
// Only intrinsics here: an inline library function instantiated in this
// file could be the copy the linker keeps for the whole program, and run
// AVX2 instructions on a CPU without them.
#include "kernels/cpu/vector_math_wide.h"

#if defined(__x86_64__)
#include "kernels/cpu/vector_erf.h"
#include "kernels/cpu/vector_gelu.h"

#include <cmath>
#include <immintrin.h>
#include <sleef.h>

namespace mpc {
namespace cpu {
namespace {

/// erf of 8 floats; the large branch skipped when no lane takes it.
inline __m256 erf8(__m256 x) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  auto fma = [](__m256 a, __m256 b, __m256 c) {
    return _mm256_fmadd_ps(a, b, c);
  };
  auto splat = [](float f) { return _mm256_set1_ps(f); };
  __m256 ax = _mm256_andnot_ps(sign, x);
  __m256 small =
      fma(x, erfHorner(kErfSmall, _mm256_mul_ps(x, x), fma, splat), x);
  __m256 isSmall = _mm256_cmp_ps(ax, one, _CMP_LT_OQ);
  if (_mm256_movemask_ps(isSmall) == 0xff)
    return small;
  __m256 e = Sleef_expf8_u10(erfHorner(kErfLarge, ax, fma, splat));
  __m256 large =
      _mm256_blendv_ps(_mm256_sub_ps(one, e), one,
                       _mm256_cmp_ps(ax, splat(kErfSaturates), _CMP_GE_OQ));
  large = _mm256_or_ps(large, _mm256_and_ps(x, sign));
  return _mm256_blendv_ps(large, small, isSmall);
}

/// What vector_gelu.h's loops need, at this width.
struct Ops {
  static constexpr int kWidth = 8;
  static __m256 load(const float *p) { return _mm256_loadu_ps(p); }
  static void store(float *p, __m256 v) { _mm256_storeu_ps(p, v); }
  static __m256 mul(__m256 a, __m256 b) { return _mm256_mul_ps(a, b); }
  static __m256 add(__m256 a, __m256 b) { return _mm256_add_ps(a, b); }
  static __m256 splat(float f) { return _mm256_set1_ps(f); }
  static __m256 erf(__m256 x) { return erf8(x); }
  static __m256 exp(__m256 x) { return Sleef_expf8_u10(x); }
};

} // namespace

void erfInPlaceAvx2(float *v, int64_t n) {
  for (int64_t i = 0; i < n; i += 8)
    _mm256_storeu_ps(v + i, erf8(_mm256_loadu_ps(v + i)));
}

void expInPlaceAvx2(float *v, int64_t n) {
  for (int64_t i = 0; i < n; i += 8)
    _mm256_storeu_ps(v + i, Sleef_expf8_u10(_mm256_loadu_ps(v + i)));
}

void geluInPlaceAvx2(float *v, int64_t n) { geluLoop<Ops>(v, n); }

void geluGradInPlaceAvx2(float *g, const float *xs, int64_t n) {
  geluGradLoop<Ops>(g, xs, n);
}

} // namespace cpu
} // namespace mpc
#endif
