// CUDA comparison and Where kernels: grid-stride loops over the broadcast
// output (broadcast_geometry.h, the index math the CPU tests check).
#include "kernels/cuda/compare.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_io.cuh"

namespace mpc {
namespace cuda {
namespace {

/// Element i of a numeric or bool buffer, widened for comparison: floats
/// to fp32 (exact), integers and bool to int64.
struct Widened {
  float f;
  int64_t i;
};

__device__ Widened widen(DType t, const void *p, int64_t k) {
  switch (t) {
  case DType::I64:
    return {0.0f, static_cast<const int64_t *>(p)[k]};
  case DType::I32:
    return {0.0f, static_cast<const int32_t *>(p)[k]};
  case DType::Bool:
    return {0.0f, static_cast<const uint8_t *>(p)[k] != 0};
  default:
    return {loadAs(t, p, k), 0};
  }
}

template <typename T> __device__ bool apply(CompareOp op, T a, T b) {
  switch (op) {
  case CompareOp::Equal:
    return a == b;
  case CompareOp::Less:
    return a < b;
  case CompareOp::Greater:
    return a > b;
  case CompareOp::LessOrEqual:
    return a <= b;
  case CompareOp::GreaterOrEqual:
    return a >= b;
  case CompareOp::And:
    return a != T(0) && b != T(0);
  case CompareOp::Or:
    return a != T(0) || b != T(0);
  default: // Xor
    return (a != T(0)) != (b != T(0));
  }
}

__global__ void compareKernel(CompareOp op, DType t, bool isFloat,
                              const void *__restrict__ a,
                              const void *__restrict__ b,
                              uint8_t *__restrict__ y, BroadcastGeometry<2> g) {
  for (int64_t i = globalIndex(); i < g.count; i += globalStride()) {
    int64_t off[2];
    g.offsets(i, off);
    Widened x = widen(t, a, off[0]), z = widen(t, b, off[1]);
    y[i] = (isFloat ? apply(op, x.f, z.f) : apply(op, x.i, z.i)) ? 1 : 0;
  }
}

template <typename T>
__global__ void whereKernel(const uint8_t *__restrict__ cond,
                            const T *__restrict__ a, const T *__restrict__ b,
                            T *__restrict__ y, BroadcastGeometry<3> g) {
  for (int64_t i = globalIndex(); i < g.count; i += globalStride()) {
    int64_t off[3];
    g.offsets(i, off);
    y[i] = cond[off[0]] ? a[off[1]] : b[off[2]];
  }
}

} // namespace

bool compareSupported(CompareOp op, DType t) {
  bool logical =
      op == CompareOp::And || op == CompareOp::Or || op == CompareOp::Xor;
  if (logical)
    return t == DType::Bool;
  switch (t) {
  case DType::F32:
  case DType::F16:
  case DType::BF16:
  case DType::I64:
  case DType::I32:
    return true;
  case DType::Bool:
    return op == CompareOp::Equal;
  default:
    return false;
  }
}

void launchCompare(CompareOp op, DType t, const void *a, const void *b,
                   uint8_t *y, const BroadcastGeometry<2> &g, cudaStream_t s) {
  if (g.count == 0)
    return;
  if (!compareSupported(op, t))
    throw Error(std::string("comparison: the cuda kernel does not take ") +
                dtypeName(t));
  bool isFloat = t == DType::F32 || t == DType::F16 || t == DType::BF16;
  compareKernel<<<gridFor(g.count), kBlock, 0, s>>>(op, t, isFloat, a, b, y, g);
  MPC_CUDA_CHECK_LAUNCH("compareKernel");
}

void launchWhere(size_t elementSize, const uint8_t *cond, const void *a,
                 const void *b, void *y, const BroadcastGeometry<3> &g,
                 cudaStream_t s) {
  if (g.count == 0)
    return;
  dispatchElementSize(elementSize, "Where", [&](auto e) {
    using T = decltype(e);
    whereKernel<<<gridFor(g.count), kBlock, 0, s>>>(
        cond, static_cast<const T *>(a), static_cast<const T *>(b),
        static_cast<T *>(y), g);
  });
  MPC_CUDA_CHECK_LAUNCH("whereKernel");
}

} // namespace cuda
} // namespace mpc
