// Element access of the CUDA kernels: fp16/bf16 are storage types only.
//
// Each element is loaded into fp32, computed on and rounded to nearest-even
// on store with the conversions of half_convert.cuh (the GPU's conversion
// instructions, bit-exact with the shared routine of ir/half.h), exactly as
// the CPU backend's F32Io/F16Io/BF16Io do (kernels/cpu/cpu_util.h), so an
// elementwise kernel built from the same fp32 operations gives the same bits
// on both backends. The dispatch helper turns a dtype the GPU kernels do not
// take into an mpc::Error (the backend checks dtypes first; reaching it is a
// bug or an unsupported model the backend let through).
#pragma once

#include "ir/types.h"
#include "kernels/cuda/half_convert.cuh"
#include "support/diagnostics.h"

#include <cstdint>
#include <string>

namespace mpc {
namespace cuda {

struct F32Dev {
  using Storage = float;
  static constexpr DType dtype = DType::F32;
  __device__ static float toFloat(float s) { return s; }
  __device__ static float fromFloat(float v) { return v; }
};

struct F16Dev {
  using Storage = uint16_t;
  static constexpr DType dtype = DType::F16;
  __device__ static float toFloat(uint16_t s) { return fromHalfBits(s); }
  __device__ static uint16_t fromFloat(float v) { return toHalfBits(v); }
};

struct BF16Dev {
  using Storage = uint16_t;
  static constexpr DType dtype = DType::BF16;
  __device__ static float toFloat(uint16_t s) { return fromBf16Bits(s); }
  __device__ static uint16_t fromFloat(float v) { return toBf16Bits(v); }
};

/// Element i of an fp32, fp16 or bf16 buffer as fp32, the dtype chosen at
/// run time: for kernels whose operands may differ in precision (autocast
/// can meet an fp32 gradient with an fp16 activation). The switch is the
/// same for every thread, so it does not diverge.
__device__ inline float loadAs(DType t, const void *p, int64_t i) {
  switch (t) {
  case DType::F16:
    return fromHalfBits(static_cast<const uint16_t *>(p)[i]);
  case DType::BF16:
    return fromBf16Bits(static_cast<const uint16_t *>(p)[i]);
  default:
    return static_cast<const float *>(p)[i];
  }
}

/// Stores v rounded once to dtype t (fp32, fp16 or bf16).
__device__ inline void storeAs(DType t, void *p, int64_t i, float v) {
  switch (t) {
  case DType::F16:
    static_cast<uint16_t *>(p)[i] = toHalfBits(v);
    break;
  case DType::BF16:
    static_cast<uint16_t *>(p)[i] = toBf16Bits(v);
    break;
  default:
    static_cast<float *>(p)[i] = v;
    break;
  }
}

/// Throws mpc::Error unless t is fp32, fp16 or bf16 (for kernels that
/// take the dtype at run time).
inline void requireDeviceFloat(DType t, const char *what) {
  if (t != DType::F32 && t != DType::F16 && t != DType::BF16)
    throw Error(std::string(what) +
                ": the cuda kernels take fp32, fp16 or bf16, got " +
                dtypeName(t));
}

/// Calls f(F32Dev{}), f(F16Dev{}) or f(BF16Dev{}) on the host.
template <typename F>
void dispatchDeviceFloat(DType t, const char *what, F &&f) {
  switch (t) {
  case DType::F32:
    return f(F32Dev{});
  case DType::F16:
    return f(F16Dev{});
  case DType::BF16:
    return f(BF16Dev{});
  default:
    throw Error(std::string(what) +
                ": the cuda kernels take fp32, fp16 or "
                "bf16, got " +
                dtypeName(t));
  }
}

/// Calls f(T{}) with T the unsigned integer of `elementSize` bytes (1, 2, 4
/// or 8) on the host: kernels that move elements as raw bytes (gather,
/// Where, transposes and broadcast copies, scatter copies).
template <typename F>
void dispatchElementSize(size_t elementSize, const char *what, F &&f) {
  switch (elementSize) {
  case 1:
    return f(uint8_t{});
  case 2:
    return f(uint16_t{});
  case 4:
    return f(uint32_t{});
  case 8:
    return f(uint64_t{});
  default:
    throw Error(std::string(what) + ": element size " +
                std::to_string(elementSize) + " is not 1, 2, 4 or 8");
  }
}

/// Grid size of a grid-stride loop over `work` items with 256 threads a
/// block: enough blocks to fill any current GPU, never more than needed.
inline unsigned gridFor(int64_t work) {
  int64_t blocks = (work + 255) / 256;
  return unsigned(blocks < 1 ? 1 : blocks > 8192 ? 8192 : blocks);
}
constexpr unsigned kBlock = 256;

/// The global index and stride of a grid-stride loop.
__device__ inline int64_t globalIndex() {
  return int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline int64_t globalStride() {
  return int64_t(gridDim.x) * blockDim.x;
}

} // namespace cuda
} // namespace mpc
