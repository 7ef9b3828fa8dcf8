// The erf-form GELU and its derivative over float arrays, a vector at a
// time: gelu_math.h's expressions operation for operation (its files build
// with -ffp-contract=off, so a product and a sum stay two roundings), the
// vector width and its intrinsics given by the including file's `Ops`:
//   V load(const float *), void store(float *, V), V mul(V, V), V add(V, V),
//   V splat(float), V erf(V), V exp(V), and int kWidth.
// One source for both wide widths (vector_math_avx2.cpp,
// vector_math_avx512.cpp), so they cannot drift apart.
//
// Internal linkage on purpose, as vector_erf.h: each including file is
// compiled for its own instruction set.
#pragma once

#include <cmath>
#include <cstdint>

namespace mpc {
namespace cpu {
namespace {

/// v[i] := x Phi(x) for x = v[i], i < n (n a multiple of Ops::kWidth).
template <typename Ops> inline void geluLoop(float *v, int64_t n) {
  const auto rootHalf = Ops::splat(float(M_SQRT1_2));
  const auto half = Ops::splat(0.5f), one = Ops::splat(1.0f);
  for (int64_t i = 0; i < n; i += Ops::kWidth) {
    auto x = Ops::load(v + i);
    auto e = Ops::erf(Ops::mul(x, rootHalf));
    Ops::store(v + i, Ops::mul(Ops::mul(x, half), Ops::add(one, e)));
  }
}

/// g[i] := g[i] (Phi(x) + x phi(x)) for x = xs[i], i < n.
template <typename Ops>
inline void geluGradLoop(float *g, const float *xs, int64_t n) {
  const auto rootHalf = Ops::splat(float(M_SQRT1_2));
  const auto half = Ops::splat(0.5f), one = Ops::splat(1.0f);
  const auto minusHalf = Ops::splat(-0.5f);
  const auto pdfScale = Ops::splat(float(M_2_SQRTPI * M_SQRT1_2 * 0.5));
  for (int64_t i = 0; i < n; i += Ops::kWidth) {
    auto x = Ops::load(xs + i);
    auto e = Ops::erf(Ops::mul(x, rootHalf));
    auto p = Ops::exp(Ops::mul(Ops::mul(minusHalf, x), x));
    auto cdf = Ops::mul(half, Ops::add(one, e));
    auto pdf = Ops::mul(pdfScale, p);
    auto d = Ops::add(cdf, Ops::mul(x, pdf));
    Ops::store(g + i, Ops::mul(Ops::load(g + i), d));
  }
}

} // namespace
} // namespace cpu
} // namespace mpc
