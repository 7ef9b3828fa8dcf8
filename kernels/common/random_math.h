// The draws of ONNX's random ops (RandomUniform, RandomNormal, their *Like
// forms, Bernoulli), shared by the CPU kernels (kernels/cpu/random.cpp) and
// the CUDA kernel (kernels/cuda/random.cu), so both backends draw the same
// numbers.
//
// Element i of a node draws r = splitmix64(base + i), base = step seed ^
// the node's key, the counter-based scheme of Dropout (dropout_rng.h): no
// generator state, any thread draws any element, and a node draws anew at
// every step (the step seed changes) while a rerun with the same --seed
// draws the same. Uniform and Bernoulli use the top 24 bits of r as u in
// [0, 1) on a 2^-24 grid, exact in fp32, as PyTorch's fp32 uniform_ does.
// The normal draw is Box-Muller on two 24-bit halves of r, in double so
// that the CPU's libm and CUDA's device functions round to the same fp32
// in all but vanishingly rare cases.
#pragma once

#include "ir/host_device.h"
#include "kernels/common/dropout_rng.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

namespace mpc {

/// What the op draws; the per-element formulas below.
enum class RandomKind : int {
  Uniform,  ///< low + (high - low) * u
  Normal,   ///< mean + scale * z, z standard normal
  Bernoulli ///< 1 where u < p(i), else 0
};

/// A random node's key: FNV-1a of its name, mixed with the bits of its
/// float `seed` attribute when it has one (ONNX's seed is a float).
inline uint64_t randomOpKey(const std::string &nodeName, bool hasSeed,
                            float seed) {
  int32_t bits = 0;
  std::memcpy(&bits, &seed, sizeof bits);
  return dropoutKey(nodeName, hasSeed, int64_t(bits));
}

/// u(i) in [0, 1): the top 24 bits of the element's draw over 2^24.
MPC_HD float randomUnit(uint64_t base, int64_t i) {
  return float(splitmix64(base + uint64_t(i)) >> 40) * (1.0f / 16777216.0f);
}

/// low + (high - low) * u(i), rounded once to fp32 (a fused multiply-add
/// on both backends).
MPC_HD float randomUniformAt(uint64_t base, int64_t i, float low, float high) {
  return fmaf(high - low, randomUnit(base, i), low);
}

/// mean + scale * z(i): z = sqrt(-2 ln u1) cos(2 pi u2) with u1 in (0, 1]
/// (the top 24 bits plus one, over 2^24: never 0, so never infinite) and
/// u2 in [0, 1) (the next 24 bits), computed in double, rounded once.
MPC_HD float randomNormalAt(uint64_t base, int64_t i, float mean, float scale) {
  uint64_t r = splitmix64(base + uint64_t(i));
  double u1 = double((r >> 40) + 1) * (1.0 / 16777216.0);
  double u2 = double((r >> 16) & 0xffffffull) * (1.0 / 16777216.0);
  double z = sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
  return float(double(mean) + double(scale) * z);
}

/// 1 where u(i) < p, else 0: probability p (clamped to [0, 1] by the
/// comparison itself; NaN p draws 0).
MPC_HD float randomBernoulliAt(uint64_t base, int64_t i, float p) {
  return randomUnit(base, i) < p ? 1.0f : 0.0f;
}

} // namespace mpc
