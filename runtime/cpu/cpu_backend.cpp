// The CPU reference backend: one lookup per node into the CPU kernel table
// (kernels/cpu/kernel_table.h). `supports` and `run` consult only the table,
// so the ops the backend claims and the ops it runs cannot drift apart.
// MPC_CPU_PROFILE=1 times each node (runtime/cpu/op_profile.h) and prints
// the per-op table when the backend goes away.
#include "kernels/cpu/cpu_util.h"
#include "kernels/cpu/kernel_table.h"
#include "runtime/backend.h"
#include "runtime/cpu/op_profile.h"

#include <chrono>
#include <memory>
#include <string>

namespace mpc {

namespace {

class CpuBackend final : public Backend {
public:
  CpuBackend() {
    if (cpu::OpProfile::requested())
      profile_ = std::make_unique<cpu::OpProfile>();
  }
  ~CpuBackend() override {
    if (profile_)
      profile_->print(stderr);
  }

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
    if (!profile_) {
      (*k)(ctx);
      return;
    }
    auto start = std::chrono::steady_clock::now();
    (*k)(ctx);
    double ms = std::chrono::duration<double, std::milli>(
                    std::chrono::steady_clock::now() - start)
                    .count();
    size_t bytes = 0;
    for (const Tensor *t : ctx.inputs)
      bytes += t ? t->byteSize() : 0;
    for (const Tensor *t : ctx.outputs)
      bytes += t ? t->byteSize() : 0;
    profile_->add(ctx.node.name(), ctx.node.opType(), ms, bytes);
  }

private:
  std::unique_ptr<cpu::OpProfile> profile_;
};

} // namespace

std::unique_ptr<Backend> createCpuBackend() {
  return std::make_unique<CpuBackend>();
}

} // namespace mpc
