// fp16/bf16 <-> fp32 conversions for device code: the GPU's own conversion
// instructions where they give the shared software routine's bits
// (ir/half.h), that routine where they may not.
//
// cvt.rn.f16.f32 and cvt.rn.bf16.f32 round to nearest-even exactly as
// floatToHalf/floatToBf16 do, in one instruction instead of 15-20 integer
// operations; they differ only for NaN, where the hardware writes one
// canonical NaN and the software routine keeps the sign (fp16) or the upper
// payload bits (bf16). A NaN input therefore takes the software routine, so
// both backends store the same bits for every input (the backend-ops case
// BackendOps.HalfConversions checks all 65536 fp16 patterns and every fp32
// pattern). fp16 -> fp32 is exact in hardware for every finite value and
// infinity; NaN again takes the software routine (payload kept). bf16 ->
// fp32 is a shift either way. Host code (nvcc's host pass included) gets the
// software routine itself.
#pragma once

#include "ir/half.h"

#include <cstdint>

#ifdef __CUDACC__
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

namespace mpc {
namespace cuda {

#ifdef __CUDACC__
#define MPC_HALF_CONVERT __host__ __device__ __forceinline__
#else
#define MPC_HALF_CONVERT inline
#endif

/// fp32 -> fp16 bits, round to nearest-even; floatToHalf's bits.
MPC_HALF_CONVERT uint16_t toHalfBits(float f) {
#ifdef __CUDA_ARCH__
  if (f != f) // NaN: the software routine's quiet NaN, sign kept
    return floatToHalf(f);
  return __half_as_ushort(__float2half_rn(f));
#else
  return floatToHalf(f);
#endif
}

/// fp16 bits -> fp32 (exact); halfToFloat's bits.
MPC_HALF_CONVERT float fromHalfBits(uint16_t h) {
#ifdef __CUDA_ARCH__
  if ((h & 0x7c00u) == 0x7c00u) // inf and NaN: the payload as the CPU keeps it
    return halfToFloat(h);
  return __half2float(__ushort_as_half(h));
#else
  return halfToFloat(h);
#endif
}

/// fp32 -> bf16 bits, round to nearest-even; floatToBf16's bits.
MPC_HALF_CONVERT uint16_t toBf16Bits(float f) {
#ifdef __CUDA_ARCH__
  if (f != f) // NaN: quieted with its upper payload bits, as on the CPU
    return floatToBf16(f);
  return __bfloat16_as_ushort(__float2bfloat16_rn(f));
#else
  return floatToBf16(f);
#endif
}

/// bf16 bits -> fp32 (exact): a shift, the same code on both sides.
MPC_HALF_CONVERT float fromBf16Bits(uint16_t b) { return bf16ToFloat(b); }

#undef MPC_HALF_CONVERT

} // namespace cuda
} // namespace mpc
