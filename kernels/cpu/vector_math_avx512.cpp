// The AVX-512 loops of vector_math.cpp, compiled with -mavx512f
// (CMakeLists.txt). Only intrinsics here, for the reason
// vector_math_avx2.cpp gives.
#include "kernels/cpu/vector_math_wide.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include <sleef.h>

namespace mpc {
namespace cpu {

void erfInPlaceAvx512(float *v, int64_t n) {
  for (int64_t i = 0; i < n; i += 16)
    _mm512_storeu_ps(v + i, Sleef_erff16_u10(_mm512_loadu_ps(v + i)));
}

void expInPlaceAvx512(float *v, int64_t n) {
  for (int64_t i = 0; i < n; i += 16)
    _mm512_storeu_ps(v + i, Sleef_expf16_u10(_mm512_loadu_ps(v + i)));
}

} // namespace cpu
} // namespace mpc
#endif
