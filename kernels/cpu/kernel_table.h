// The CPU kernel table: one kernel per (domain, op type).
//
// The CPU reference backend (runtime/cpu/cpu_backend.cpp), fold-constants and
// the import's training_info initialization all look kernels up here, so a
// constant folded at compile time is computed by exactly the code that would
// have computed it at run time. Kernels live in kernels/cpu/, one family per
// file; each family contributes its entries to the table through the functions
// declared in kernels/cpu/cpu_util.h.
#pragma once

#include "kernels/kernel_context.h"

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

/// Checks that every input of ctx holds as many bytes as its dtype and dims
/// say (an Error naming the node otherwise), so kernels may index input data
/// without re-checking. Run before every kernel call.
void checkKernelInputs(const KernelContext &ctx);

/// "Op" for the default domain, "domain.Op" otherwise.
std::string kernelOpName(const Node &node);

/// Every op in the table as "Op" (default domain) or "mpc.Op", sorted.
std::vector<std::string> cpuKernelOps();

/// Runs `node` on the given inputs (nullptr for an omitted optional input)
/// and returns its outputs in `outputs` (resized to node.numOutputs(); an
/// omitted optional output of the node stays an empty Tensor).
/// Throws mpc::Error if the op has no CPU kernel or the inputs are bad.
void runCpuNode(const Node &node, const std::vector<const Tensor *> &inputs,
                std::vector<Tensor> &outputs);

} // namespace mpc
