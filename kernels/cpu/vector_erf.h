// The CPU's erf for float arrays: two polynomials and one exp, the same
// operations at every vector width.
//
// SLEEF's 1-ulp erf (Sleef_erff*_u10) carries double-float arithmetic
// through its whole evaluation; in the fp32 CPU step of a transformer stack
// the erf-form GELU's two erfs per element were a tenth of the time, more
// than PyTorch's whole GELU forward and backward. This erf is within 2 ulp
// of the exact value, the bound CUDA documents for its erff (the GPU's GELU
// uses that), at a fraction of the cost:
//  - |x| < 1:        erf(x) = x + x * P(x^2), P(s) ~ erf(sqrt s)/sqrt s - 1,
//                    so P's rounding errors enter scaled by |P| <= 0.16;
//  - 1 <= |x| < 3.92: erf(|x|) = 1 - exp(Q(|x|)), Q(a) ~ log(erfc(a)),
//                    fitted with erfc(a) as weight (Q's error enters scaled
//                    by erfc(a) <= 0.16), exp from SLEEF (1 ulp);
//  - |x| >= 3.92:    +-1 (erfc(3.92) is below half an ulp of 1);
// the sign restored from x (-0 stays -0, NaN stays NaN). The coefficients
// are weighted least-squares fits (Lawson iterations towards minimax) of
// degree 7 in x^2 and 9 in |x|, on Chebyshev nodes of [0, 1] and [1, 3.92],
// rounded to float: fit errors 7e-9 and 4e-9 (absolute, weighted), about a
// tenth of an ulp. tests/unit/vector_math_test.cpp checks the 2-ulp bound
// on every 64th float of [2^-30, 4] and the special values.
//
// Every path evaluates the polynomials with fused multiply-adds (std::fmaf
// where the vector unit has none) and takes exp from SLEEF at its own
// width, whose widths agree bit for bit: the result of an element does not
// depend on the CPU or on where the element sits.
//
// Internal linkage on purpose: each file that includes this is compiled for
// its own instruction set (vector_math_avx2.cpp, vector_math_avx512.cpp),
// and a shared inline copy could run one file's instructions in another's.
#pragma once

namespace mpc {
namespace cpu {
namespace {

/// P(s), lowest degree first.
constexpr float kErfSmall[] = {
    1.283791661e-01f, -3.761263788e-01f, 1.128378287e-01f, -2.686544508e-02f,
    5.221074913e-03f, -8.484711288e-04f, 1.127054493e-04f, -9.680136827e-06f};
/// Q(a), lowest degree first.
constexpr float kErfLarge[] = {
    1.252929214e-04f,  -1.129203796e+00f, -6.341961622e-01f, -1.069614813e-01f,
    2.383649722e-02f,  -3.360261442e-03f, 1.017565810e-04f,  6.434242096e-05f,
    -1.245292697e-05f, 7.845299592e-07f};
/// Where erf rounds to 1 in float.
constexpr float kErfSaturates = 3.92f;

/// c[0] + t (c[1] + t (c[2] + ...)) with `fma(a, b, c)` = a b + c rounded
/// once and `splat` making a vector of one float.
template <typename V, int N, typename Fma, typename Splat>
inline V erfHorner(const float (&c)[N], V t, Fma fma, Splat splat) {
  V r = splat(c[N - 1]);
  for (int k = N - 2; k >= 0; --k)
    r = fma(r, t, splat(c[k]));
  return r;
}

} // namespace
} // namespace cpu
} // namespace mpc
