// int64 sums and products that stop at the largest int64 instead of
// overflowing: counts (FLOPs, bytes) over a model whose dims multiply past
// 2^63, which no plan accepts, must still get through to the message that
// refuses it. Operands are >= 0.
#pragma once

#include <cstdint>
#include <limits>

namespace mpc {

/// a + b, or the largest int64 where that overflows.
inline int64_t saturatingAdd(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_add_overflow(a, b, &r) ? std::numeric_limits<int64_t>::max()
                                          : r;
}

/// a * b, or the largest int64 where that overflows.
inline int64_t saturatingMul(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_mul_overflow(a, b, &r) ? std::numeric_limits<int64_t>::max()
                                          : r;
}

} // namespace mpc
