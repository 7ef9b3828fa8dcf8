// erf and exp over float arrays: SLEEF's SSE2 (4 floats), AVX2 (8 floats)
// or AVX-512 (16 floats) variants, the widest the CPU has; tails padded to
// a vector.
#include "kernels/cpu/vector_math.h"

#include "kernels/cpu/vector_math_wide.h"

#include <cmath>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#include <sleef.h>
#endif

namespace mpc {
namespace cpu {
namespace {

enum class Fn { Erf, Exp };

#if defined(__x86_64__)
int widestWidth() {
  static const int width = __builtin_cpu_supports("avx512f") ? 16
                           : __builtin_cpu_supports("avx2")  ? 8
                                                             : 4;
  return width;
}

/// n a multiple of 4 (SSE2 is in every x86-64 CPU).
void runSse2(Fn fn, float *v, int64_t n) {
  for (int64_t i = 0; i < n; i += 4) {
    __m128 x = _mm_loadu_ps(v + i);
    _mm_storeu_ps(v + i,
                  fn == Fn::Erf ? Sleef_erff4_u10(x) : Sleef_expf4_u10(x));
  }
}

/// n a multiple of `width`.
void runVectors(Fn fn, float *v, int64_t n, int width) {
  if (width == 16)
    fn == Fn::Erf ? erfInPlaceAvx512(v, n) : expInPlaceAvx512(v, n);
  else if (width == 8)
    fn == Fn::Erf ? erfInPlaceAvx2(v, n) : expInPlaceAvx2(v, n);
  else
    runSse2(fn, v, n);
}
#else
int widestWidth() { return 4; }

/// Elsewhere: the C library's scalar functions (no SLEEF build assumed).
void runVectors(Fn fn, float *v, int64_t n, int) {
  for (int64_t i = 0; i < n; ++i)
    v[i] = fn == Fn::Erf ? std::erf(v[i]) : std::exp(v[i]);
}
#endif

void run(Fn fn, float *v, int64_t n, int width) {
  int64_t body = n / width * width;
  runVectors(fn, v, body, width);
  if (body == n)
    return;
  // The tail through the same vector code, padded with zeros.
  float tail[16] = {};
  std::memcpy(tail, v + body, size_t(n - body) * sizeof(float));
  runVectors(fn, tail, width, width);
  std::memcpy(v + body, tail, size_t(n - body) * sizeof(float));
}

/// `width` if the CPU has it, else the widest it has below.
int usableWidth(int width) {
  int widest = widestWidth();
  return width >= 16 && widest >= 16 ? 16 : width >= 8 && widest >= 8 ? 8 : 4;
}

} // namespace

int vectorMathWidth() { return widestWidth(); }

void erfInPlace(float *v, int64_t n) { run(Fn::Erf, v, n, widestWidth()); }
void expInPlace(float *v, int64_t n) { run(Fn::Exp, v, n, widestWidth()); }

void erfInPlaceWidth(float *v, int64_t n, int width) {
  run(Fn::Erf, v, n, usableWidth(width));
}
void expInPlaceWidth(float *v, int64_t n, int width) {
  run(Fn::Exp, v, n, usableWidth(width));
}

} // namespace cpu
} // namespace mpc
