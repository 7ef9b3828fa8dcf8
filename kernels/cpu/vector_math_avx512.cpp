// The AVX-512 loops of vector_math.cpp, compiled with -mavx512f
// (CMakeLists.txt); erf as vector_erf.h describes. Only intrinsics here, for
// the reason vector_math_avx2.cpp gives.
#include "kernels/cpu/vector_math_wide.h"

#if defined(__x86_64__)
#include "kernels/cpu/vector_erf.h"

#include <immintrin.h>
#include <sleef.h>

namespace mpc {
namespace cpu {

void erfInPlaceAvx512(float *v, int64_t n) {
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 saturates = _mm512_set1_ps(kErfSaturates);
  const __m512i sign = _mm512_set1_epi32(int32_t(0x80000000u));
  auto fma = [](__m512 a, __m512 b, __m512 c) {
    return _mm512_fmadd_ps(a, b, c);
  };
  auto splat = [](float f) { return _mm512_set1_ps(f); };
  for (int64_t i = 0; i < n; i += 16) {
    __m512 x = _mm512_loadu_ps(v + i);
    __m512 ax = _mm512_abs_ps(x);
    __m512 small =
        fma(x, erfHorner(kErfSmall, _mm512_mul_ps(x, x), fma, splat), x);
    __m512 e = Sleef_expf16_u10(erfHorner(kErfLarge, ax, fma, splat));
    __m512 large =
        _mm512_mask_blend_ps(_mm512_cmp_ps_mask(ax, saturates, _CMP_GE_OQ),
                             _mm512_sub_ps(one, e), one);
    large = _mm512_castsi512_ps(
        _mm512_or_si512(_mm512_castps_si512(large),
                        _mm512_and_si512(_mm512_castps_si512(x), sign)));
    _mm512_storeu_ps(
        v + i, _mm512_mask_blend_ps(_mm512_cmp_ps_mask(ax, one, _CMP_LT_OQ),
                                    large, small));
  }
}

void expInPlaceAvx512(float *v, int64_t n) {
  for (int64_t i = 0; i < n; i += 16)
    _mm512_storeu_ps(v + i, Sleef_expf16_u10(_mm512_loadu_ps(v + i)));
}

} // namespace cpu
} // namespace mpc
#endif
