// Device runs of kernels/cuda/half_convert.cuh's conversions for
// half_convert_test.cpp (the kernels are in half_convert_nvcc.cu).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mpc {
namespace nvcc {

/// What the GPU's conversions gave: fromHalf[h] = fromHalfBits(h)'s fp32
/// bits for all 65536 patterns, toHalf[i]/toBf16[i] = toHalfBits/toBf16Bits
/// of the fp32 pattern floats[i]. False with `why` when no GPU is usable.
bool runHalfConversions(const std::vector<uint32_t> &floats,
                        std::vector<uint32_t> &fromHalf,
                        std::vector<uint16_t> &toHalf,
                        std::vector<uint16_t> &toBf16, std::string &why);

/// Every one of the 2^32 fp32 patterns through the GPU's conversions and,
/// in the same kernel, through the software routine (ir/half.h, whose device
/// build equals its host build: shared_math_test.cpp): the number of
/// patterns whose fp16 or bf16 bits differ, and the first (lowest) of them.
struct SweepResult {
  uint64_t halfMismatches = 0, bf16Mismatches = 0;
  uint32_t firstHalf = 0xffffffffu, firstBf16 = 0xffffffffu;
};
bool sweepAllFloats(SweepResult &r, std::string &why);

} // namespace nvcc
} // namespace mpc
