// The AVX2 loops of vector_math.cpp, compiled with -mavx2 (CMakeLists.txt).
// Only intrinsics here: an inline library function instantiated in this
// file could be the copy the linker keeps for the whole program, and run
// AVX2 instructions on a CPU without them.
#include "kernels/cpu/vector_math_wide.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include <sleef.h>

namespace mpc {
namespace cpu {

void erfInPlaceAvx2(float *v, int64_t n) {
  for (int64_t i = 0; i < n; i += 8)
    _mm256_storeu_ps(v + i, Sleef_erff8_u10(_mm256_loadu_ps(v + i)));
}

void expInPlaceAvx2(float *v, int64_t n) {
  for (int64_t i = 0; i < n; i += 8)
    _mm256_storeu_ps(v + i, Sleef_expf8_u10(_mm256_loadu_ps(v + i)));
}

} // namespace cpu
} // namespace mpc
#endif
