// Convolutions with tiny output maps as one product (conv_as_product.h).
#include "kernels/cpu/conv_as_product.h"

#include "ir/half.h"
#include "support/saturating.h"

#include <cstring>
#include <vector>

namespace mpc {
namespace cpu {
namespace onednn {

namespace {

/// Output maps of at most this many positions take the product forms.
constexpr int64_t kMaxPositions = 16;
/// The most elements im2col's columns may hold (64 MiB of fp32).
constexpr int64_t kMaxColumnElements = int64_t(16) << 20;

/// The product's dimensions: P output positions, K window offsets, the
/// input map's size, and im2col's rows (N*P) and columns (C*K).
struct ProductShape {
  int64_t positions = 1, window = 1, inSize = 1, rows = 0, cols = 0;
  size_t bytes = 0; ///< an element's
};

ProductShape productShape(const ConvProblem &p) {
  ProductShape s;
  for (size_t d = 0; d < p.in.size(); ++d) {
    s.positions *= p.out[d];
    s.window *= p.kernel[d];
    s.inSize *= p.in[d];
  }
  s.rows = p.n * s.positions;
  s.cols = p.c * s.window;
  s.bytes = dtypeSize(p.dtype);
  return s;
}

/// Calls tap(position, window offset, input offset) for every window offset
/// of every output position that reads the input map (not its padding), in
/// that order.
template <typename Tap>
void forEachTap(const ConvProblem &p, const ProductShape &s, Tap tap) {
  const size_t rank = p.in.size();
  std::vector<int64_t> o(rank), k(rank);
  for (int64_t pos = 0; pos < s.positions; ++pos) {
    for (int64_t r = pos, d = int64_t(rank) - 1; d >= 0; --d) {
      o[size_t(d)] = r % p.out[size_t(d)];
      r /= p.out[size_t(d)];
    }
    for (int64_t kk = 0; kk < s.window; ++kk) {
      for (int64_t r = kk, d = int64_t(rank) - 1; d >= 0; --d) {
        k[size_t(d)] = r % p.kernel[size_t(d)];
        r /= p.kernel[size_t(d)];
      }
      // ONNX dilations: 1 is none.
      int64_t at = 0;
      bool inside = true;
      for (size_t d = 0; d < rank; ++d) {
        const int64_t i =
            o[d] * p.strides[d] - p.padBegin[d] + k[d] * p.dilations[d];
        inside = inside && i >= 0 && i < p.in[d];
        at = at * p.in[d] + i;
      }
      if (inside)
        tap(pos, kk, at);
    }
  }
}

/// im2col(X) as [N*P, C*K]: row (n, position), column (c, window offset);
/// zeros where the window reads padding.
std::vector<uint8_t> im2col(const ConvProblem &p, const ProductShape &s,
                            const void *x) {
  std::vector<uint8_t> col(size_t(s.rows * s.cols) * s.bytes, 0);
  const auto *px = static_cast<const uint8_t *>(x);
  forEachTap(p, s, [&](int64_t pos, int64_t kk, int64_t at) {
    for (int64_t n = 0; n < p.n; ++n)
      for (int64_t c = 0; c < p.c; ++c)
        std::memcpy(col.data() + size_t((n * s.positions + pos) * s.cols +
                                        c * s.window + kk) *
                                     s.bytes,
                    px + size_t((n * p.c + c) * s.inSize + at) * s.bytes,
                    s.bytes);
  });
  return col;
}

/// dY [N, M, P] as [M, N*P].
std::vector<uint8_t> channelsFirst(const ConvProblem &p, const ProductShape &s,
                                   const void *dy) {
  std::vector<uint8_t> a(size_t(p.m * s.rows) * s.bytes);
  const auto *pdy = static_cast<const uint8_t *>(dy);
  for (int64_t n = 0; n < p.n; ++n)
    for (int64_t m = 0; m < p.m; ++m)
      std::memcpy(a.data() + size_t(m * s.rows + n * s.positions) * s.bytes,
                  pdy + size_t((n * p.m + m) * s.positions) * s.bytes,
                  size_t(s.positions) * s.bytes);
  return a;
}

/// Whether `p` takes the product forms (conv_as_product.h).
bool takesProductForm(const ConvProblem &p) {
  if (p.groups != 1 || p.in.empty() ||
      (p.dtype != DType::F32 && p.dtype != DType::BF16))
    return false;
  int64_t positions = 1, window = 1;
  for (size_t d = 0; d < p.in.size(); ++d) {
    positions = saturatingMul(positions, p.out[d]);
    window = saturatingMul(window, p.kernel[d]);
  }
  // im2col's copy of X (and the data gradient's fp32 columns) stays small
  // beside the tensors themselves.
  const int64_t columns =
      saturatingMul(saturatingMul(p.n, positions), saturatingMul(p.c, window));
  return positions <= kMaxPositions && columns <= kMaxColumnElements;
}

} // namespace

bool convForwardAsProduct(const ConvProblem &p, const void *x, const void *w,
                          const void *bias, void *y) {
  if (!takesProductForm(p))
    return false;
  const ProductShape s = productShape(p);
  const std::vector<uint8_t> col = im2col(p, s, x);
  // Y^T [N*P, M] = col x W^T (W [M, C*K] is W^T stored transposed), the
  // bias added per column before the one rounding.
  std::vector<uint8_t> yt(size_t(s.rows * p.m) * s.bytes);
  if (!matmul(p.dtype, p.dtype, false, true, 1, s.rows, p.m, s.cols, 1.f, 0.f,
              col.data(), w, yt.data(), bias))
    return false;
  auto *py = static_cast<uint8_t *>(y);
  for (int64_t n = 0; n < p.n; ++n)
    for (int64_t pos = 0; pos < s.positions; ++pos)
      for (int64_t m = 0; m < p.m; ++m)
        std::memcpy(py + size_t((n * p.m + m) * s.positions + pos) * s.bytes,
                    yt.data() +
                        size_t((n * s.positions + pos) * p.m + m) * s.bytes,
                    s.bytes);
  return true;
}

bool convBackwardDataAsProduct(const ConvProblem &p, const void *dy,
                               const void *w, void *dx) {
  if (!takesProductForm(p))
    return false;
  const ProductShape s = productShape(p);
  const std::vector<uint8_t> a = channelsFirst(p, s, dy);
  // dCol [N*P, C*K] in fp32 = dY^T x W (dY^T stored as [M, N*P]).
  std::vector<float> dcol(size_t(s.rows * s.cols));
  if (!matmul(p.dtype, DType::F32, true, false, 1, s.rows, s.cols, p.m, 1.f,
              0.f, a.data(), w, dcol.data()))
    return false;
  // col2im in fp32, then one rounding.
  std::vector<float> acc(size_t(p.n * p.c * s.inSize), 0.f);
  forEachTap(p, s, [&](int64_t pos, int64_t kk, int64_t at) {
    for (int64_t n = 0; n < p.n; ++n)
      for (int64_t c = 0; c < p.c; ++c)
        acc[size_t((n * p.c + c) * s.inSize + at)] +=
            dcol[size_t((n * s.positions + pos) * s.cols + c * s.window + kk)];
  });
  if (p.dtype == DType::F32) {
    std::memcpy(dx, acc.data(), acc.size() * sizeof(float));
  } else {
    auto *out = static_cast<uint16_t *>(dx);
    for (size_t i = 0; i < acc.size(); ++i)
      out[i] = floatToBf16(acc[i]);
  }
  return true;
}

bool convBackwardWeightsAsProduct(const ConvProblem &p, const void *dy,
                                  const void *x, void *dw) {
  if (!takesProductForm(p))
    return false;
  const ProductShape s = productShape(p);
  const std::vector<uint8_t> a = channelsFirst(p, s, dy);
  const std::vector<uint8_t> col = im2col(p, s, x);
  // dW [M, C*K] = dY [M, N*P] x col [N*P, C*K].
  return matmul(p.dtype, p.dtype, false, false, 1, p.m, s.cols, s.rows, 1.f,
                0.f, a.data(), col.data(), dw);
}

} // namespace onednn
} // namespace cpu
} // namespace mpc
