// The CPU kernel table: built once from the op categories' kernel families
// (kernels/cpu/<category>.cpp, each listing its entries through a function
// declared in cpu_util.h) and keyed by (domain, op type).
#include "kernels/cpu/kernel_table.h"

#include "kernels/cpu/cpu_util.h"

#include <algorithm>
#include <map>
#include <string>

namespace mpc {

namespace {

using Key = std::pair<std::string, std::string>;

const std::map<Key, CpuKernel> &kernelTable() {
  static const std::map<Key, CpuKernel> table = [] {
    std::map<Key, CpuKernel> t;
    for (auto family :
         {cpu::elementwiseKernels, cpu::activationKernels,
          cpu::reductionKernels, cpu::matmulKernels, cpu::convPoolKernels,
          cpu::normalizationKernels, cpu::shapeOpsKernels,
          cpu::gatherScatterKernels, cpu::selectionKernels, cpu::lossKernels,
          cpu::optimizerKernels, cpu::collectiveKernels, cpu::randomKernels,
          cpu::fusedKernels})
      for (const cpu::KernelEntry &e : family())
        t.emplace(Key(e.domain, e.opType), e.kernel);
    return t;
  }();
  return table;
}

} // namespace

void checkKernelInputs(const KernelContext &ctx) {
  for (size_t i = 0; i < ctx.inputs.size(); ++i) {
    const Tensor *t = ctx.inputs[i];
    if (!t)
      continue;
    int64_t n = t->numel();
    if (n < 0 || t->dtype == DType::Undefined ||
        t->bytes.size() != size_t(n) * dtypeSize(t->dtype))
      cpu::fail(ctx.node, "input ", i, " is malformed (", dtypeName(t->dtype),
                " ", cpu::shapeString(t->dims), " with ", t->bytes.size(),
                " bytes)");
  }
}

std::string kernelOpName(const Node &node) {
  return node.domain().empty() ? node.opType()
                               : node.domain() + "." + node.opType();
}

const CpuKernel *findCpuKernel(const std::string &domain,
                               const std::string &op) {
  const auto &table = kernelTable();
  auto it = table.find(Key(domain == "ai.onnx" ? "" : domain, op));
  return it == table.end() ? nullptr : &it->second;
}

std::vector<std::string> cpuKernelOps() {
  std::vector<std::string> ops;
  for (const auto &kv : kernelTable())
    ops.push_back(kv.first.first.empty()
                      ? kv.first.second
                      : kv.first.first + "." + kv.first.second);
  std::sort(ops.begin(), ops.end());
  return ops;
}

void runCpuNode(const Node &node, const std::vector<const Tensor *> &inputs,
                std::vector<Tensor> &outputs) {
  const CpuKernel *k = findCpuKernel(node.domain(), node.opType());
  if (!k)
    cpu::fail(node, "the cpu backend has no kernel for op ",
              kernelOpName(node));
  outputs.assign(node.numOutputs(), Tensor());
  KernelContext ctx{node, inputs, {}, 0, {}};
  for (size_t i = 0; i < outputs.size(); ++i)
    ctx.outputs.push_back(node.output(i) ? &outputs[i] : nullptr);
  checkKernelInputs(ctx);
  (*k)(ctx);
}

} // namespace mpc
