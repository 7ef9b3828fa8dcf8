// Convolutions with tiny output maps as one product (conv_as_product.h).
#include "kernels/cpu/conv_as_product.h"

#include "ir/half.h"
#include "kernels/cpu/parallel.h"
#include "support/saturating.h"

#include <algorithm>
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

/// One tap of forEachTap: output position, window offset, input offset.
struct Tap {
  int64_t pos, kk, at;
};

std::vector<Tap> tapsOf(const ConvProblem &p, const ProductShape &s) {
  std::vector<Tap> taps;
  forEachTap(p, s, [&](int64_t pos, int64_t kk, int64_t at) {
    taps.push_back({pos, kk, at});
  });
  return taps;
}

/// A buffer of this thread's, reused by later calls: made for each call, the
/// columns were fresh pages the kernel mapped and zeroed every time. One
/// past kKeepBytes is given back after its call.
class Scratch {
public:
  explicit Scratch(std::vector<uint8_t> &buffer, size_t bytes)
      : buffer_(buffer) {
    if (buffer_.size() < bytes)
      buffer_.resize(bytes);
  }
  ~Scratch() {
    if (buffer_.capacity() > kKeepBytes)
      std::vector<uint8_t>().swap(buffer_);
  }
  template <typename T> T *as() {
    return reinterpret_cast<T *>(buffer_.data());
  }

private:
  static constexpr size_t kKeepBytes = size_t(16) << 20;
  std::vector<uint8_t> &buffer_;
};

/// This thread's buffers, one per use within a call.
std::vector<uint8_t> &buffer(int which) {
  thread_local std::vector<uint8_t> buffers[3];
  return buffers[which];
}

/// Calls f(E{}) with E the unsigned integer of an element's size (2 or 4
/// bytes): the copies below move elements, not bytes.
template <typename F> void withElement(const ProductShape &s, F &&f) {
  if (s.bytes == 2)
    f(uint16_t{});
  else
    f(uint32_t{});
}

/// im2col(X) as [N*P, C*K] into col: row (n, position), column (c, window
/// offset); zeros where the window reads padding. Each n's rows on one
/// thread.
void im2col(const ConvProblem &p, const ProductShape &s,
            const std::vector<Tap> &taps, const void *x, void *col) {
  withElement(s, [&](auto e) {
    using E = decltype(e);
    const E *px = static_cast<const E *>(x);
    E *pc = static_cast<E *>(col);
    const int64_t perImage = s.positions * s.cols;
    parallelFor(p.n, grainFor(perImage), [&](int64_t n0, int64_t n1) {
      for (int64_t n = n0; n < n1; ++n) {
        E *rows = pc + n * perImage;
        std::fill(rows, rows + perImage, E(0));
        const E *image = px + n * p.c * s.inSize;
        for (const Tap &t : taps) {
          E *dst = rows + t.pos * s.cols + t.kk;
          const E *src = image + t.at;
          for (int64_t c = 0; c < p.c; ++c)
            dst[c * s.window] = src[c * s.inSize];
        }
      }
    });
  });
}

/// dY [N, M, P] as [M, N*P] into a.
void channelsFirst(const ConvProblem &p, const ProductShape &s, const void *dy,
                   void *a) {
  withElement(s, [&](auto e) {
    using E = decltype(e);
    const E *pdy = static_cast<const E *>(dy);
    E *pa = static_cast<E *>(a);
    parallelFor(p.m, grainFor(s.rows), [&](int64_t m0, int64_t m1) {
      for (int64_t m = m0; m < m1; ++m)
        for (int64_t n = 0; n < p.n; ++n)
          std::copy_n(pdy + (n * p.m + m) * s.positions, s.positions,
                      pa + m * s.rows + n * s.positions);
    });
  });
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
  Scratch col(buffer(0), size_t(s.rows * s.cols) * s.bytes);
  im2col(p, s, tapsOf(p, s), x, col.as<void>());
  // Y^T [N*P, M] = col x W^T (W [M, C*K] is W^T stored transposed), the
  // bias added per column before the one rounding.
  Scratch yt(buffer(1), size_t(s.rows * p.m) * s.bytes);
  if (!matmul(p.dtype, p.dtype, false, true, 1, s.rows, p.m, s.cols, 1.f, 0.f,
              col.as<void>(), w, yt.as<void>(), bias))
    return false;
  withElement(s, [&](auto e) {
    using E = decltype(e);
    const E *pt = yt.as<E>();
    E *py = static_cast<E *>(y);
    const int64_t perImage = p.m * s.positions;
    parallelFor(p.n, grainFor(perImage), [&](int64_t n0, int64_t n1) {
      for (int64_t n = n0; n < n1; ++n)
        for (int64_t pos = 0; pos < s.positions; ++pos)
          for (int64_t m = 0; m < p.m; ++m)
            py[(n * p.m + m) * s.positions + pos] =
                pt[(n * s.positions + pos) * p.m + m];
    });
  });
  return true;
}

bool convBackwardDataAsProduct(const ConvProblem &p, const void *dy,
                               const void *w, void *dx) {
  if (!takesProductForm(p))
    return false;
  const ProductShape s = productShape(p);
  Scratch a(buffer(0), size_t(p.m * s.rows) * s.bytes);
  channelsFirst(p, s, dy, a.as<void>());
  // dCol [N*P, C*K] in fp32 = dY^T x W (dY^T stored as [M, N*P]).
  Scratch dcol(buffer(1), size_t(s.rows * s.cols) * sizeof(float));
  if (!matmul(p.dtype, DType::F32, true, false, 1, s.rows, s.cols, p.m, 1.f,
              0.f, a.as<void>(), w, dcol.as<float>()))
    return false;
  // col2im in fp32, each image on one thread and its taps in forEachTap's
  // order (the same sums on any thread count), then one rounding. An fp32
  // dX is summed in place.
  const std::vector<Tap> taps = tapsOf(p, s);
  const int64_t perImage = p.c * s.inSize;
  const bool wide = p.dtype == DType::F32;
  Scratch acc(buffer(2), wide ? 0 : size_t(p.n * perImage) * sizeof(float));
  float *sums = wide ? static_cast<float *>(dx) : acc.as<float>();
  const float *pd = dcol.as<float>();
  parallelFor(p.n, grainFor(s.positions * s.cols), [&](int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n) {
      float *image = sums + n * perImage;
      std::fill(image, image + perImage, 0.f);
      const float *rows = pd + n * s.positions * s.cols;
      for (const Tap &t : taps) {
        const float *src = rows + t.pos * s.cols + t.kk;
        float *dst = image + t.at;
        for (int64_t c = 0; c < p.c; ++c)
          dst[c * s.inSize] += src[c * s.window];
      }
      if (!wide) {
        auto *out = static_cast<uint16_t *>(dx) + n * perImage;
        for (int64_t i = 0; i < perImage; ++i)
          out[i] = floatToBf16(image[i]);
      }
    }
  });
  return true;
}

bool convBackwardWeightsAsProduct(const ConvProblem &p, const void *dy,
                                  const void *x, void *dw) {
  if (!takesProductForm(p))
    return false;
  const ProductShape s = productShape(p);
  Scratch a(buffer(0), size_t(p.m * s.rows) * s.bytes);
  channelsFirst(p, s, dy, a.as<void>());
  Scratch col(buffer(1), size_t(s.rows * s.cols) * s.bytes);
  im2col(p, s, tapsOf(p, s), x, col.as<void>());
  // dW [M, C*K] = dY [M, N*P] x col [N*P, C*K].
  return matmul(p.dtype, p.dtype, false, false, 1, p.m, s.cols, s.rows, 1.f,
                0.f, a.as<void>(), col.as<void>(), dw);
}

} // namespace onednn
} // namespace cpu
} // namespace mpc
