// The CPU reference backend's kernel table: one kernel per (domain, op type).
//
// The backend (runtime/cpu/cpu_backend.cpp) and fold-constants both look
// kernels up here, so a constant folded at compile time is computed by exactly
// the code that would have computed it at run time. Kernels live in
// kernels/cpu/, one family per file; each family contributes its entries to
// the table through the functions declared in kernels/cpu/cpu_util.h.
#pragma once

#include "runtime/backend.h"

#include <string>
#include <vector>

namespace mpc {

/// A CPU kernel: reads ctx.inputs, allocates and fills ctx.outputs, throws
/// mpc::Error (naming ctx.node) on bad runtime input.
using CpuKernel = void (*)(KernelContext &);

/// The kernel for (domain, op), or nullptr. Domain "" is the ONNX default
/// domain ("ai.onnx" is accepted as an alias); "mpc" holds mpc's custom ops.
const CpuKernel *findCpuKernel(const std::string &domain,
                               const std::string &op);

/// Every op in the table as "Op" (default domain) or "mpc.Op", sorted.
std::vector<std::string> cpuKernelOps();

/// Runs `node` on the given inputs (nullptr for an omitted optional input)
/// and returns its outputs in `outputs` (resized to node.numOutputs(); an
/// omitted optional output of the node stays an empty Tensor).
/// Throws mpc::Error if the op has no CPU kernel or the inputs are bad.
void runCpuNode(const Node &node, const std::vector<const Tensor *> &inputs,
                std::vector<Tensor> &outputs);

} // namespace mpc
