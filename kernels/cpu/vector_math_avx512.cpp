// The AVX-512 loops of vector_math.cpp, compiled with -mavx512f and
// -ffp-contract=off (CMakeLists.txt: a product and a sum written apart stay
// two roundings, as in the scalar expressions they copy); erf as
// vector_erf.h describes, GELU as gelu_math.h's expressions. Only
// intrinsics here, for the reason vector_math_avx2.cpp gives.
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

/// erf of 16 floats. The large branch (an exp) is skipped when every lane
/// takes the small one: the same bits, since the blend would drop it.
inline __m512 erf16(__m512 x) {
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512i sign = _mm512_set1_epi32(int32_t(0x80000000u));
  auto fma = [](__m512 a, __m512 b, __m512 c) {
    return _mm512_fmadd_ps(a, b, c);
  };
  auto splat = [](float f) { return _mm512_set1_ps(f); };
  __m512 ax = _mm512_abs_ps(x);
  __m512 small =
      fma(x, erfHorner(kErfSmall, _mm512_mul_ps(x, x), fma, splat), x);
  __mmask16 isSmall = _mm512_cmp_ps_mask(ax, one, _CMP_LT_OQ);
  if (isSmall == 0xffff)
    return small;
  __m512 e = Sleef_expf16_u10(erfHorner(kErfLarge, ax, fma, splat));
  __m512 large = _mm512_mask_blend_ps(
      _mm512_cmp_ps_mask(ax, splat(kErfSaturates), _CMP_GE_OQ),
      _mm512_sub_ps(one, e), one);
  large = _mm512_castsi512_ps(
      _mm512_or_si512(_mm512_castps_si512(large),
                      _mm512_and_si512(_mm512_castps_si512(x), sign)));
  return _mm512_mask_blend_ps(isSmall, large, small);
}

/// What vector_gelu.h's loops need, at this width.
struct Ops {
  static constexpr int kWidth = 16;
  static __m512 load(const float *p) { return _mm512_loadu_ps(p); }
  static void store(float *p, __m512 v) { _mm512_storeu_ps(p, v); }
  static __m512 mul(__m512 a, __m512 b) { return _mm512_mul_ps(a, b); }
  static __m512 add(__m512 a, __m512 b) { return _mm512_add_ps(a, b); }
  static __m512 splat(float f) { return _mm512_set1_ps(f); }
  static __m512 erf(__m512 x) { return erf16(x); }
  static __m512 exp(__m512 x) { return Sleef_expf16_u10(x); }
};

} // namespace

void erfInPlaceAvx512(float *v, int64_t n) {
  for (int64_t i = 0; i < n; i += 16)
    _mm512_storeu_ps(v + i, erf16(_mm512_loadu_ps(v + i)));
}

void expInPlaceAvx512(float *v, int64_t n) {
  for (int64_t i = 0; i < n; i += 16)
    _mm512_storeu_ps(v + i, Sleef_expf16_u10(_mm512_loadu_ps(v + i)));
}

void geluInPlaceAvx512(float *v, int64_t n) { geluLoop<Ops>(v, n); }

void geluGradInPlaceAvx512(float *g, const float *xs, int64_t n) {
  geluGradLoop<Ops>(g, xs, n);
}

} // namespace cpu
} // namespace mpc
#endif
