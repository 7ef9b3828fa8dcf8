// erf, exp and the erf-form GELU over arrays of floats, a vector at a time.
//
// glibc's erff is scalar (tens of ns an element), and the erf-form GELU takes
// it once forward and once more, with an exp, in its backward: a fifth of the
// CPU step of a transformer went there. exp is SLEEF's 1-ulp vector variant
// (u10); erf is vector_erf.h's two polynomials and one SLEEF exp, within
// 2 ulp (CUDA's erff bound) at about a third of SLEEF's 1-ulp erf's cost.
// What the kernels need from them besides speed is determinism: every
// element goes through the vector code (a tail is padded to a full vector),
// so its result does not depend on where it sits or how long the array is,
// and the 4-, 8- and 16-wide paths return the same bits
// (tests/unit/vector_math_test.cpp checks them), so neither does it depend
// on the CPU. The results may differ from glibc's in the last ulps; the
// GPU's erff/expf may too (gelu_math.h).
#pragma once

#include <cstdint>

namespace mpc {
namespace cpu {

/// v[i] := erf(v[i]) for i < n.
void erfInPlace(float *v, int64_t n);
/// v[i] := exp(v[i]) for i < n.
void expInPlace(float *v, int64_t n);
/// v[i] := GELU(v[i]), the erf form: gelu_math.h's
/// geluFromErf(x, erf(geluErfArgument(x))) with the erf above, in one pass.
void geluInPlace(float *v, int64_t n);
/// g[i] := g[i] * GELU'(x[i]), the erf form: gelu_math.h's
/// geluDerivativeFromErfExp with the erf and exp above, in one pass.
void geluGradInPlace(float *g, const float *x, int64_t n);

/// The vector width in floats the functions above use on this CPU (16
/// with AVX-512, 8 with AVX2, else 4), and the same with a width forced (4,
/// 8 or 16; a width the CPU lacks runs as the widest below it), for the
/// tests that hold the widths to the same bits.
int vectorMathWidth();
void erfInPlaceWidth(float *v, int64_t n, int width);
void expInPlaceWidth(float *v, int64_t n, int width);
void geluInPlaceWidth(float *v, int64_t n, int width);
void geluGradInPlaceWidth(float *g, const float *x, int64_t n, int width);

} // namespace cpu
} // namespace mpc
