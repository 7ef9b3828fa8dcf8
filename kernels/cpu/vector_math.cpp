// erf, exp and the erf-form GELU and its derivative over float arrays, 4,
// 8 (AVX2 with FMA) or 16 (AVX-512) floats at a time, the widest the CPU
// has; tails padded to a vector. exp is SLEEF's variant of that width; erf
// is vector_erf.h's, whose 4-wide path evaluates its polynomials an element
// at a time with std::fmaf; GELU is gelu_math.h's expressions around them
// (the wide paths copy them operation for operation).
#include "kernels/cpu/vector_math.h"

#include "kernels/cpu/vector_math_wide.h"

#include "kernels/common/gelu_math.h"

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include "kernels/cpu/vector_erf.h"

#include <immintrin.h>
#include <sleef.h>
#endif

namespace mpc {
namespace cpu {
namespace {

enum class Fn { Erf, Exp, Gelu, GeluGrad };

#if defined(__x86_64__)
int widestWidth() {
  static const int width =
      __builtin_cpu_supports("avx512f")                                 ? 16
      : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? 8
                                                                        : 4;
  return width;
}

/// vector_erf.h's erf, 4 elements at a time: the polynomials per element
/// with std::fmaf (an FMA instruction or glibc's exact emulation: the same
/// bits as the vector paths' fused multiply-adds), exp by SLEEF's 4-wide
/// variant, the sign put on as the vector paths put it (an OR of x's sign
/// bit, which a NaN keeps too).
void erfSse2(float *v, int64_t n) {
  auto fma = [](float a, float b, float c) { return std::fmaf(a, b, c); };
  auto splat = [](float f) { return f; };
  for (int64_t i = 0; i < n; i += 4) {
    float small[4], q[4], e[4];
    for (int l = 0; l < 4; ++l) {
      float x = v[i + l];
      small[l] = fma(x, erfHorner(kErfSmall, x * x, fma, splat), x);
      q[l] = erfHorner(kErfLarge, std::fabs(x), fma, splat);
    }
    _mm_storeu_ps(e, Sleef_expf4_u10(_mm_loadu_ps(q)));
    for (int l = 0; l < 4; ++l) {
      float x = v[i + l], ax = std::fabs(x);
      float large = ax >= kErfSaturates ? 1.0f : 1.0f - e[l];
      uint32_t bits, xbits;
      std::memcpy(&bits, &large, 4);
      std::memcpy(&xbits, &x, 4);
      bits |= xbits & 0x80000000u;
      std::memcpy(&large, &bits, 4);
      v[i + l] = ax < 1.0f ? small[l] : large;
    }
  }
}

/// The GELU and its derivative 4 elements at a time: gelu_math.h's
/// expressions around erfSse2 and SLEEF's 4-wide exp.
void geluSse2(float *v, int64_t n) {
  for (int64_t i = 0; i < n; i += 4) {
    float e[4];
    for (int l = 0; l < 4; ++l)
      e[l] = geluErfArgument(v[i + l]);
    erfSse2(e, 4);
    for (int l = 0; l < 4; ++l)
      v[i + l] = geluFromErf(v[i + l], e[l]);
  }
}

void geluGradSse2(float *g, const float *x, int64_t n) {
  for (int64_t i = 0; i < n; i += 4) {
    float e[4], p[4];
    for (int l = 0; l < 4; ++l) {
      e[l] = geluErfArgument(x[i + l]);
      p[l] = geluExpArgument(x[i + l]);
    }
    erfSse2(e, 4);
    _mm_storeu_ps(p, Sleef_expf4_u10(_mm_loadu_ps(p)));
    for (int l = 0; l < 4; ++l)
      g[i + l] = g[i + l] * geluDerivativeFromErfExp(x[i + l], e[l], p[l]);
  }
}

/// n a multiple of 4 (SSE2 is in every x86-64 CPU).
void runSse2(Fn fn, float *v, const float *x, int64_t n) {
  switch (fn) {
  case Fn::Erf:
    erfSse2(v, n);
    return;
  case Fn::Exp:
    for (int64_t i = 0; i < n; i += 4)
      _mm_storeu_ps(v + i, Sleef_expf4_u10(_mm_loadu_ps(v + i)));
    return;
  case Fn::Gelu:
    geluSse2(v, n);
    return;
  case Fn::GeluGrad:
    geluGradSse2(v, x, n);
    return;
  }
}

/// One width's loops, in Fn's order.
struct WideLoops {
  void (*erf)(float *, int64_t);
  void (*exp)(float *, int64_t);
  void (*gelu)(float *, int64_t);
  void (*geluGrad)(float *, const float *, int64_t);
};
constexpr WideLoops kAvx512 = {erfInPlaceAvx512, expInPlaceAvx512,
                               geluInPlaceAvx512, geluGradInPlaceAvx512};
constexpr WideLoops kAvx2 = {erfInPlaceAvx2, expInPlaceAvx2, geluInPlaceAvx2,
                             geluGradInPlaceAvx2};

/// n a multiple of `width`; `x` is GeluGrad's input (v holds dY).
void runVectors(Fn fn, float *v, const float *x, int64_t n, int width) {
  if (width != 16 && width != 8)
    return runSse2(fn, v, x, n);
  const WideLoops &l = width == 16 ? kAvx512 : kAvx2;
  switch (fn) {
  case Fn::Erf:
    return l.erf(v, n);
  case Fn::Exp:
    return l.exp(v, n);
  case Fn::Gelu:
    return l.gelu(v, n);
  case Fn::GeluGrad:
    return l.geluGrad(v, x, n);
  }
}
#else
int widestWidth() { return 4; }

/// Elsewhere: the C library's scalar functions (no SLEEF build assumed).
void runVectors(Fn fn, float *v, const float *x, int64_t n, int) {
  for (int64_t i = 0; i < n; ++i) {
    switch (fn) {
    case Fn::Erf:
      v[i] = std::erf(v[i]);
      break;
    case Fn::Exp:
      v[i] = std::exp(v[i]);
      break;
    case Fn::Gelu:
      v[i] = geluForward(v[i], false);
      break;
    case Fn::GeluGrad:
      v[i] = v[i] * geluDerivative(x[i], false);
      break;
    }
  }
}
#endif

void run(Fn fn, float *v, const float *x, int64_t n, int width) {
  int64_t body = n / width * width;
  runVectors(fn, v, x, body, width);
  if (body == n)
    return;
  // The tail through the same vector code, padded with zeros.
  float tail[16] = {}, tailX[16] = {};
  std::memcpy(tail, v + body, size_t(n - body) * sizeof(float));
  if (x)
    std::memcpy(tailX, x + body, size_t(n - body) * sizeof(float));
  runVectors(fn, tail, tailX, width, width);
  std::memcpy(v + body, tail, size_t(n - body) * sizeof(float));
}

/// `width` if the CPU has it, else the widest it has below.
int usableWidth(int width) {
  int widest = widestWidth();
  return width >= 16 && widest >= 16 ? 16 : width >= 8 && widest >= 8 ? 8 : 4;
}

} // namespace

int vectorMathWidth() { return widestWidth(); }

void erfInPlace(float *v, int64_t n) {
  run(Fn::Erf, v, nullptr, n, widestWidth());
}
void expInPlace(float *v, int64_t n) {
  run(Fn::Exp, v, nullptr, n, widestWidth());
}
void geluInPlace(float *v, int64_t n) {
  run(Fn::Gelu, v, nullptr, n, widestWidth());
}
void geluGradInPlace(float *g, const float *x, int64_t n) {
  run(Fn::GeluGrad, g, x, n, widestWidth());
}

void erfInPlaceWidth(float *v, int64_t n, int width) {
  run(Fn::Erf, v, nullptr, n, usableWidth(width));
}
void expInPlaceWidth(float *v, int64_t n, int width) {
  run(Fn::Exp, v, nullptr, n, usableWidth(width));
}
void geluInPlaceWidth(float *v, int64_t n, int width) {
  run(Fn::Gelu, v, nullptr, n, usableWidth(width));
}
void geluGradInPlaceWidth(float *g, const float *x, int64_t n, int width) {
  run(Fn::GeluGrad, g, x, n, usableWidth(width));
}

} // namespace cpu
} // namespace mpc
