// The CPU reference backend: one lookup per node into the CPU kernel table
// (kernels/cpu/kernel_table.h). `supports` and `run` consult only the table,
// so the ops the backend claims and the ops it runs cannot drift apart.
#include "kernels/cpu/cpu_util.h"
#include "kernels/cpu/kernel_table.h"
#include "runtime/backend.h"

#include <string>

namespace mpc {

namespace {

class CpuBackend final : public Backend {
public:
  std::string name() const override { return "cpu"; }

  bool supports(const Node &node, std::string &why) const override {
    if (findCpuKernel(node.domain(), node.opType()))
      return true;
    why = "the cpu backend has no kernel for op " + kernelOpName(node);
    return false;
  }

  void run(KernelContext &ctx) override {
    // The executor's contexts outlive the step (KernelContext::backendCache),
    // so the table is searched once per node, not once per node and step.
    const auto *k = static_cast<const CpuKernel *>(ctx.backendCache);
    if (!k) {
      k = findCpuKernel(ctx.node.domain(), ctx.node.opType());
      if (!k)
        cpu::fail(ctx.node, "the cpu backend has no kernel for op ",
                  kernelOpName(ctx.node));
      ctx.backendCache = k; // the table's entries never move
    }
    checkKernelInputs(ctx);
    (*k)(ctx);
  }
};

} // namespace

std::unique_ptr<Backend> createCpuBackend() {
  return std::make_unique<CpuBackend>();
}

} // namespace mpc
