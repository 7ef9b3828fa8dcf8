// The optimizer kernels' operand checks and moment dispatch, shared by the
// CPU kernels (kernels/cpu/optimizer.cpp) and the CUDA runners
// (runtime/cuda/run_optimizer.cpp), so both refuse the same operands with
// the same line.
#pragma once

#include "kernels/cpu/compute_support.h"
#include "kernels/cpu/cpu_util.h"

namespace mpc {
namespace cpu {

/// Checks that an optimizer operand has the parameter's shape.
inline void requireParamShape(const Node &node, const Tensor &t,
                              const Tensor &p, const char *what) {
  if (t.dims != p.dims)
    fail(node, what, " of shape ", shapeString(t.dims),
         " does not match the parameter's shape ", shapeString(p.dims));
}

/// Checks that an optimizer operand is fp32 with the parameter's shape.
inline void requireLikeParam(const Node &node, const Tensor &t, const Tensor &p,
                             const char *what) {
  if (t.dtype != DType::F32)
    fail(node, what, " must be fp32 (master weights), got ",
         dtypeName(t.dtype));
  requireParamShape(node, t, p, what);
}

/// Checks an SGD/Adam gradient: the parameter's shape, fp32, or fp16/bf16
/// (fold-widening-casts: widened exactly as it is read).
inline void requireGradient(const Node &node, const Tensor &g,
                            const Tensor &p) {
  if (!isFloat32Compute(g.dtype))
    fail(node, "gradient must be fp32, fp16 or bf16, got ", dtypeName(g.dtype));
  requireParamShape(node, g, p, "gradient");
}

/// Checks an optimizer moment: the parameter's shape, fp32 or bf16
/// (--optimizer-state-dtype=bf16).
inline void requireMoment(const Node &node, const Tensor &t, const Tensor &p,
                          const char *what) {
  if (t.dtype != DType::F32 && t.dtype != DType::BF16)
    fail(node, what, " must be fp32 or bf16 (optimizer state), got ",
         dtypeName(t.dtype));
  requireParamShape(node, t, p, what);
}

/// Calls f(float{}) or f(uint16_t{}) (bf16 bits) for a moment's storage.
template <typename F> void dispatchMoment(DType t, F &&f) {
  if (t == DType::BF16)
    f(uint16_t{});
  else
    f(float{});
}

} // namespace cpu
} // namespace mpc
