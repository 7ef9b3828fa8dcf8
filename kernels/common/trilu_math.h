// Trilu's rule (ONNX Trilu, torch.triu/tril): which columns of each row of
// the last two axes it keeps. Row i keeps columns j with j - i >= k
// (upper) or j - i <= k (lower); every other element becomes 0.
//
// The CPU kernel copies each row's kept run at once; the GPU kernel asks
// per element. Both ask this header, so the two agree on every k, negative
// and beyond the matrix included.
#pragma once

#include "ir/host_device.h"

#include <cstdint>

namespace mpc {

/// The kept columns of one row: [begin, end), within [0, cols).
struct TriluRun {
  int64_t begin, end;
};

MPC_HD TriluRun triluKeptColumns(int64_t row, int64_t cols, int64_t k,
                                 bool upper) {
  auto clamp = [cols](int64_t v) {
    return v < 0 ? int64_t(0) : v > cols ? cols : v;
  };
  // row + k overflows only for |k| near 2^63, which no matrix has rows or
  // columns to tell apart from 2^62.
  int64_t kk = k > (int64_t(1) << 62)    ? (int64_t(1) << 62)
               : k < -(int64_t(1) << 62) ? -(int64_t(1) << 62)
                                         : k;
  if (upper)
    return {clamp(row + kk), cols};
  return {0, clamp(row + kk + 1)};
}

} // namespace mpc
