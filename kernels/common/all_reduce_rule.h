// mpc.AllReduce's attribute and operand rules, shared by the CPU kernel
// (kernels/cpu/collective.cpp) and the CUDA runner (NCCL,
// runtime/cuda/nccl_world.cpp), so both refuse the same nodes with the same
// words (ir/mpc_ops.h has the op's contract).
#pragma once

#include "ir/graph.h"
#include "support/diagnostics.h"

#include <string>

namespace mpc {

enum class AllReduceOp { Mean, Sum, Max };

/// The node's `reduction` (default "mean"); an Error naming the node for
/// anything but mean, sum or max.
inline AllReduceOp allReduceOpOf(const Node &node) {
  std::string r = node.attrString("reduction", "mean");
  if (r == "mean")
    return AllReduceOp::Mean;
  if (r == "sum")
    return AllReduceOp::Sum;
  if (r == "max")
    return AllReduceOp::Max;
  ErrorBuilder b(node);
  b << "reduction '" << r << "' is not mean, sum or max";
  b.raise();
}

/// The index of the first reduced input: 1 when the node is gated (input 0
/// is the gate, a bool scalar), else 0. An Error naming the node unless
/// there is one output per reduced input and at least one of them.
inline size_t allReduceFirstValue(const Node &node, size_t numInputs,
                                  size_t numOutputs) {
  const size_t first = node.attrInt("gated", 0) ? 1 : 0;
  if (numInputs > first && numOutputs == numInputs - first)
    return first;
  ErrorBuilder b(node);
  b << "has " << numInputs << " inputs but " << numOutputs
    << " outputs (one per reduced input" << (first ? ", after the gate" : "")
    << ")";
  b.raise();
}

/// The node's `wire_dtype`: the type values cross ranks in (--grad-comm-
/// dtype; "bf16" or "fp16"), or Undefined without one (or "fp32": values
/// travel as they are). An Error naming the node for anything else.
inline DType allReduceWireOf(const Node &node) {
  std::string w = node.attrString("wire_dtype", "fp32");
  if (w == "fp32")
    return DType::Undefined;
  if (w == "bf16")
    return DType::BF16;
  if (w == "fp16")
    return DType::F16;
  ErrorBuilder b(node);
  b << "wire_dtype '" << w << "' is not fp32, bf16 or fp16";
  b.raise();
}

/// What a value of type t crosses ranks as under `wire` (allReduceWireOf):
/// the wire type for a wider floating-point value (fp32, fp64), else t
/// itself (fp16/bf16 values, integers and flags are never converted).
inline DType allReduceWireTypeFor(DType t, DType wire) {
  if (wire != DType::Undefined && isFloating(t) &&
      dtypeSize(t) > dtypeSize(wire))
    return wire;
  return t;
}

/// Input i's element type against the reduction: floating point takes all
/// three, integers sum and max, bool max (OR) only; an Error naming the node
/// otherwise.
inline void checkAllReduceType(const Node &node, size_t i, DType t,
                               AllReduceOp op) {
  bool integer = !isFloating(t) && t != DType::Bool && t != DType::Undefined;
  if (isFloating(t) || (t == DType::Bool && op == AllReduceOp::Max) ||
      (integer && op != AllReduceOp::Mean))
    return;
  ErrorBuilder b(node);
  b << "input " << i << " is " << dtypeName(t) << ", which reduction '"
    << node.attrString("reduction", "mean") << "' does not combine";
  b.raise();
}

} // namespace mpc
