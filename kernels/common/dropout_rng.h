// Dropout's counter-based random mask, shared by the CPU kernel
// (kernels/cpu/random.cpp) and the CUDA kernel (kernels/cuda/
// dropout.cu), so both backends drop the same elements.
//
// Element i of a Dropout node is kept when the top 24 bits of
// splitmix64(base + i) are >= ratio * 2^24, base = step seed ^ the node's
// key (mpc_ops.h). Each element depends on (base, i) alone, so any thread
// draws any element with no generator state; splitmix64's finaliser is a
// full-avalanche 64-bit mix, enough for a mask (this is the generator the
// CPU backend has always used, kept so existing masks do not change).
#pragma once

#include "ir/host_device.h"

#include <cmath>
#include <cstdint>
#include <string>

namespace mpc {

MPC_HD uint64_t splitmix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/// What makes two Dropout nodes of one step draw different masks: FNV-1a
/// of the node name, mixed with the node's seed attribute when it has one.
inline uint64_t dropoutKey(const std::string &nodeName, bool hasSeed,
                           int64_t seed) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char ch : nodeName)
    h = (h ^ ch) * 0x100000001b3ull;
  if (hasSeed)
    h = splitmix64(h ^ uint64_t(seed));
  return h;
}

/// The integer form of "u / 2^24 >= ratio" for the 24-bit draw u: u >=
/// ceil(ratio * 2^24), which is exact (ratio * 2^24 only shifts the
/// exponent). ratio must be in [0, 1]; 1 gives 2^24, which no draw reaches.
inline uint32_t dropoutThreshold(double ratio) {
  return uint32_t(std::ceil(ratio * double(1 << 24)));
}

/// Whether element i is kept.
MPC_HD bool dropoutKeep(uint64_t base, int64_t i, uint32_t threshold) {
  return uint32_t(splitmix64(base + uint64_t(i)) >> 40) >= threshold;
}

/// 1 / (1 - ratio) rounded to fp32, as PyTorch's scale; 0 for ratio 1.
inline float dropoutScale(double ratio) {
  return ratio == 1 ? 0.0f : float(1.0 / (1.0 - ratio));
}

} // namespace mpc
