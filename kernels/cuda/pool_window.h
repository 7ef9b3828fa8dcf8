// The per-element math of the CUDA pooling kernels, MPC_HD so that the CPU
// tests walk every element exactly as a device thread does.
//
// A PoolWindow is the window of ir/window_geometry.h flattened into
// fixed arrays for a kernel argument, its spatial dims padded in front to
// kMaxPoolRank by dims of size 1 (which change no row-major index). Window
// positions are enumerated as windowIndexTable lays them out, computed on
// the fly instead of read from a table. The gradients gather: an input
// element walks the outputs whose windows read it in the order the CPU
// kernel (kernels/cpu/conv_pool.cpp) scatters into it (MaxPoolGrad: output
// position ascending; AveragePoolGrad: kernel offset ascending) and adds in
// fp32 from 0 as the CPU does: no atomics, the same bits.
#pragma once

#include "ir/host_device.h"
#include "ir/window_geometry.h"

#include <cmath>
#include <cstdint>

namespace mpc {
namespace cuda {

/// Spatial dims the pooling kernels take (1-D to 3-D pools).
constexpr int kMaxPoolRank = 3;

struct PoolWindow {
  int64_t in[kMaxPoolRank], out[kMaxPoolRank], kernel[kMaxPoolRank];
  int64_t strides[kMaxPoolRank], dilations[kMaxPoolRank];
  int64_t padBegin[kMaxPoolRank], padEnd[kMaxPoolRank];
  int64_t planes = 0;           ///< N * C
  int64_t inCount = 0;          ///< input elements per plane
  int64_t outCount = 0;         ///< output elements per plane
  int64_t kernelCount = 0;      ///< window positions
  bool countIncludePad = false; ///< AveragePool's divisor counts pads
  int storageOrder = 0;         ///< MaxPool Indices: 1 = column-major
  int rank = 0;                 ///< the real number of spatial dims
};

/// The window of geometry g (at most kMaxPoolRank dims) over `planes`
/// planes.
inline PoolWindow makePoolWindow(const WindowGeometry &g, int64_t planes) {
  PoolWindow w;
  size_t r = g.rank(), lead = size_t(kMaxPoolRank) - r;
  for (size_t d = 0; d < size_t(kMaxPoolRank); ++d) {
    bool real = d >= lead;
    size_t e = real ? d - lead : 0;
    w.in[d] = real ? g.in[e] : 1;
    w.out[d] = real ? g.out[e] : 1;
    w.kernel[d] = real ? g.kernel[e] : 1;
    w.strides[d] = real ? g.strides[e] : 1;
    w.dilations[d] = real ? g.dilations[e] : 1;
    w.padBegin[d] = real ? g.padBegin[e] : 0;
    w.padEnd[d] = real ? g.padEnd[e] : 0;
  }
  w.planes = planes;
  w.inCount = g.inCount();
  w.outCount = g.outCount();
  w.kernelCount = g.kernelCount();
  w.rank = int(r);
  return w;
}

/// Row-major coordinates of `flat` over kMaxPoolRank dims.
MPC_HD void poolUnflatten(int64_t flat, const int64_t *dims, int64_t *coord) {
  for (int d = kMaxPoolRank - 1; d >= 0; --d) {
    coord[d] = flat % dims[d];
    flat /= dims[d];
  }
}

/// The input element window position k of output position p reads (row-
/// major within the plane), or kInPadding / kBeyondPadding.
MPC_HD int64_t poolWindowIndex(const PoolWindow &w, int64_t k, int64_t p) {
  int64_t kc[kMaxPoolRank], oc[kMaxPoolRank];
  poolUnflatten(k, w.kernel, kc);
  poolUnflatten(p, w.out, oc);
  int64_t flat = 0;
  bool pad = false, beyond = false;
  for (int d = 0; d < kMaxPoolRank; ++d) {
    int64_t x = oc[d] * w.strides[d] - w.padBegin[d] + kc[d] * w.dilations[d];
    if (x < 0 || x >= w.in[d]) {
      pad = true;
      beyond |= x >= w.in[d] + w.padEnd[d];
    }
    flat = flat * w.in[d] + x;
  }
  return beyond ? kBeyondPadding : (pad ? kInPadding : flat);
}

/// MaxPool's pick for output p of a plane read through load(i) (fp32): the
/// first maximum in window order, the first NaN if any; -1 for a window
/// without an element.
template <typename Load>
MPC_HD int64_t poolArgmax(const PoolWindow &w, const Load &load, int64_t p) {
  int64_t best = -1;
  float bestValue = 0.0f;
  for (int64_t k = 0; k < w.kernelCount; ++k) {
    int64_t idx = poolWindowIndex(w, k, p);
    if (idx < 0)
      continue;
    float v = load(idx);
    if (v != v) // NaN
      return idx;
    if (best < 0 || v > bestValue) {
      best = idx;
      bestValue = v;
    }
  }
  return best;
}

/// MaxPool's Indices entry for pick idx of plane `plane`.
MPC_HD int64_t poolIndicesValue(const PoolWindow &w, int64_t plane,
                                int64_t idx) {
  if (idx < 0)
    return -1;
  int64_t local = idx;
  if (w.storageOrder == 1) {
    // Column-major over the spatial dims: the first varies fastest (the
    // leading padding dims have size 1 and change nothing).
    int64_t c[kMaxPoolRank];
    poolUnflatten(idx, w.in, c);
    local = 0;
    for (int d = kMaxPoolRank - 1; d >= 0; --d)
      local = local * w.in[d] + c[d];
  }
  return plane * w.inCount + local;
}

/// AveragePool's divisor of output p.
MPC_HD int64_t poolWindowCount(const PoolWindow &w, int64_t p) {
  int64_t n = 0;
  for (int64_t k = 0; k < w.kernelCount; ++k) {
    int64_t idx = poolWindowIndex(w, k, p);
    n += idx >= 0 || (w.countIncludePad && idx == kInPadding);
  }
  return n;
}

/// AveragePool's output p of a plane read through load(i).
template <typename Load>
MPC_HD float averagePoolValue(const PoolWindow &w, const Load &load,
                              int64_t p) {
  float sum = 0.0f;
  for (int64_t k = 0; k < w.kernelCount; ++k) {
    int64_t idx = poolWindowIndex(w, k, p);
    if (idx >= 0)
      sum += load(idx);
  }
  int64_t n = poolWindowCount(w, p);
  return n ? sum / float(n) : 0.0f;
}

/// Calls f(p) for every output position p whose window reads the input
/// element at coordinates xc, in ascending p (outputAscending) or
/// ascending kernel-offset order. For one input element each kernel offset
/// meets at most one p, and p falls as the offset grows, so the two orders
/// are each other's reverse.
template <typename F>
MPC_HD void poolForEachWindowOf(const PoolWindow &w, const int64_t *xc,
                                bool outputAscending, const F &f) {
  // Nested loops over the dims' kernel offsets, the last dim innermost;
  // step[d] counts dim d's offsets in the chosen direction.
  int64_t step[kMaxPoolRank] = {};
  for (;;) {
    bool valid = true;
    int64_t p = 0;
    for (int d = 0; d < kMaxPoolRank; ++d) {
      int64_t kd = outputAscending ? w.kernel[d] - 1 - step[d] : step[d];
      int64_t t = xc[d] + w.padBegin[d] - kd * w.dilations[d];
      int64_t o = t / w.strides[d];
      valid = valid && t >= 0 && t % w.strides[d] == 0 && o < w.out[d];
      p = p * w.out[d] + o;
    }
    if (valid)
      f(p);
    int d = kMaxPoolRank - 1;
    for (; d >= 0; --d) {
      if (++step[d] < w.kernel[d])
        break;
      step[d] = 0;
    }
    if (d < 0)
      return;
  }
}

/// MaxPoolGrad's dX at element s of a plane: the dY (read through
/// loadDy(p)) of every output whose pick (argmaxAt(p)) is s, added in
/// output order.
template <typename Argmax, typename LoadDy>
MPC_HD float maxPoolGradValue(const PoolWindow &w, const Argmax &argmaxAt,
                              const LoadDy &loadDy, int64_t s) {
  int64_t xc[kMaxPoolRank];
  poolUnflatten(s, w.in, xc);
  float sum = 0.0f;
  poolForEachWindowOf(w, xc, true, [&](int64_t p) {
    if (argmaxAt(p) == s)
      sum += loadDy(p);
  });
  return sum;
}

/// AveragePoolGrad's dX at element s of a plane: each window's dY over its
/// divisor, added in kernel-offset order.
template <typename LoadDy>
MPC_HD float averagePoolGradValue(const PoolWindow &w, const LoadDy &loadDy,
                                  int64_t s) {
  int64_t xc[kMaxPoolRank];
  poolUnflatten(s, w.in, xc);
  float sum = 0.0f;
  poolForEachWindowOf(w, xc, false, [&](int64_t p) {
    sum += loadDy(p) / float(poolWindowCount(w, p));
  });
  return sum;
}

} // namespace cuda
} // namespace mpc
