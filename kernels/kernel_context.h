// KernelContext: the inputs and outputs of one node as a kernel sees them.
//
// The executor (runtime/executor.h) makes one per node and hands it to a
// backend, which hands it to a kernel; constant folding and the compiler's
// evaluation of an initialization graph make one per call through the CPU
// kernel table (kernels/cpu/kernel_table.h). It lives here, below both the
// runtime and the compiler, so that kernels need neither.
#pragma once

#include "ir/graph.h"
#include "kernels/collective.h"

#include <cstdint>
#include <vector>

namespace mpc {

/// Inputs and outputs of one node as the backend sees them.
struct KernelContext {
  /// The usual brace form {node, inputs, outputs, seed, inPlace}; a
  /// constructor (not an aggregate) so the resident fields below need not
  /// be spelled out where a context is made.
  KernelContext(const Node &node, std::vector<const Tensor *> inputs = {},
                std::vector<Tensor *> outputs = {}, uint64_t seed = 0,
                std::vector<bool> inPlace = {})
      : node(node), inputs(std::move(inputs)), outputs(std::move(outputs)),
        seed(seed), inPlace(std::move(inPlace)) {}

  const Node &node;
  /// One per node input; nullptr where an optional input is omitted.
  std::vector<const Tensor *> inputs;
  /// One per node output; nullptr where an optional output is omitted.
  /// The kernel sets dtype and dims (Tensor(dtype, dims)) and fills bytes.
  std::vector<Tensor *> outputs;
  /// Seed for ops that draw random numbers (dropout), fixed per step.
  uint64_t seed = 0;
  /// The data-parallel world mpc.AllReduce combines across (nullptr: a
  /// world of one rank, where the reduction of a value is the value).
  Collective *collective = nullptr;
  /// Per output: true when the memory plan put it in place over an input
  /// (out() then keeps the bytes: the input is still being read).
  std::vector<bool> inPlace;
  /// Device-resident steps only (empty otherwise): per input, the address
  /// of its bytes in the backend's arena (nullptr where omitted or empty).
  /// inputs[i] is then either a host mirror of a value the executor knows
  /// before the step (a constant, a shape), whose bytes the host may read,
  /// or a tensor whose bytes are the device address: dtype and dims only.
  /// Outputs arrive bound to their planned place with the plan's dtype and
  /// dims; a kernel must produce exactly those.
  std::vector<const void *> deviceInputs;
  /// Device-resident steps only: per input, whether inputs[i] is a host
  /// mirror (its bytes readable on the host).
  std::vector<bool> hostKnown;

  /// True in a device-resident step (then the two vectors above are sized).
  bool resident = false;

  /// Optional: where the backend may keep what it looked up for this node
  /// (the CPU backend: its kernel). The executor keeps one context per node
  /// for as long as it runs the graph, so the lookup is made once per node
  /// rather than once per step; a context made for one call starts at
  /// nullptr and the backend looks the node up again.
  const void *backendCache = nullptr;

  bool hasInput(size_t i) const {
    return i < inputs.size() && inputs[i] != nullptr;
  }
  const Tensor &in(size_t i) const { return *inputs.at(i); }
  bool hasOutput(size_t i) const {
    return i < outputs.size() && outputs[i] != nullptr;
  }
  /// Allocates output i with the given type and returns it, zeroed. Where
  /// the executor bound the output to its planned place in the arena, a
  /// fitting request is served there; otherwise the tensor owns its bytes.
  Tensor &out(size_t i, DType t, const std::vector<int64_t> &dims) const {
    Tensor &o = *outputs.at(i);
    o.allocate(t, dims, !(i < inPlace.size() && inPlace[i]));
    return o;
  }
};

} // namespace mpc
