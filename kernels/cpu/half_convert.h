// Bulk fp16 <-> fp32 conversion of whole buffers on the host.
//
// The CPU kernels emulate fp16 as storage only: operands are widened to fp32,
// computed on, and rounded back (round-to-nearest-even). Doing that element by
// element in software (ir/half.h) made fp16 steps 2-3x slower
// than fp32 ones, so the kernels convert whole runs here instead. Where the
// CPU has F16C (checked once at run time) the conversions use it; the result
// is bit-identical to halfToFloat / floatToHalf for every input, NaNs
// included (NaN lanes take the software path, since F16C would keep float
// payloads that floatToHalf drops and quiet half sNaNs that halfToFloat
// keeps). Without F16C the software functions run. tests/unit/half_test.cpp
// compares both paths on every half and a dense set of floats. bf16 runs
// convert here too, in loops the compiler vectorises.
#pragma once

#include <cstdint>

namespace mpc {
namespace cpu {

/// dst[i] = halfToFloat(src[i]) for i < n.
void halfToFloatN(const uint16_t *src, float *dst, int64_t n);
/// dst[i] = floatToHalf(src[i]) for i < n.
void floatToHalfN(const float *src, uint16_t *dst, int64_t n);

/// dst[i] = bf16ToFloat(src[i]) for i < n.
void bf16ToFloatN(const uint16_t *src, float *dst, int64_t n);
/// dst[i] = floatToBf16(src[i]) for i < n: the same bits, branch-free, with
/// AVX2 where the CPU has it.
void floatToBf16N(const float *src, uint16_t *dst, int64_t n);

/// Whether the F16C paths are in use (the CPU has F16C and
/// MPC_NO_F16C is unset in the environment).
bool haveF16c();

/// The portable software loops, whatever the CPU (for the tests).
void halfToFloatNSoftware(const uint16_t *src, float *dst, int64_t n);
void floatToHalfNSoftware(const float *src, uint16_t *dst, int64_t n);
void bf16ToFloatNPortable(const uint16_t *src, float *dst, int64_t n);
void floatToBf16NPortable(const float *src, uint16_t *dst, int64_t n);

} // namespace cpu
} // namespace mpc
