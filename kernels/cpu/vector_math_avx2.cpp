// The AVX2 loops of vector_math.cpp, compiled with -mavx2 -mfma
// (CMakeLists.txt; chosen only where the CPU has both); erf as vector_erf.h
// describes.
// Only intrinsics here: an inline library function instantiated in this
// file could be the copy the linker keeps for the whole program, and run
// AVX2 instructions on a CPU without them.
#include "kernels/cpu/vector_math_wide.h"

#if defined(__x86_64__)
#include "kernels/cpu/vector_erf.h"

#include <immintrin.h>
#include <sleef.h>

namespace mpc {
namespace cpu {

void erfInPlaceAvx2(float *v, int64_t n) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 saturates = _mm256_set1_ps(kErfSaturates);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  auto fma = [](__m256 a, __m256 b, __m256 c) {
    return _mm256_fmadd_ps(a, b, c);
  };
  auto splat = [](float f) { return _mm256_set1_ps(f); };
  for (int64_t i = 0; i < n; i += 8) {
    __m256 x = _mm256_loadu_ps(v + i);
    __m256 ax = _mm256_andnot_ps(sign, x);
    __m256 small =
        fma(x, erfHorner(kErfSmall, _mm256_mul_ps(x, x), fma, splat), x);
    __m256 e = Sleef_expf8_u10(erfHorner(kErfLarge, ax, fma, splat));
    __m256 large = _mm256_blendv_ps(_mm256_sub_ps(one, e), one,
                                    _mm256_cmp_ps(ax, saturates, _CMP_GE_OQ));
    large = _mm256_or_ps(large, _mm256_and_ps(x, sign));
    _mm256_storeu_ps(
        v + i,
        _mm256_blendv_ps(large, small, _mm256_cmp_ps(ax, one, _CMP_LT_OQ)));
  }
}

void expInPlaceAvx2(float *v, int64_t n) {
  for (int64_t i = 0; i < n; i += 8)
    _mm256_storeu_ps(v + i, Sleef_expf8_u10(_mm256_loadu_ps(v + i)));
}

} // namespace cpu
} // namespace mpc
#endif
