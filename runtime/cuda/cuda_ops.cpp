// The CUDA op table, built once from the families, and the shared checks.
#include "runtime/cuda/cuda_ops.h"

#include "ir/mpc_ops.h"
#include "kernels/cpu/cpu_util.h"
#include "runtime/cuda/cuda_backend.h"

#include <algorithm>
#include <map>
#include <optional>

namespace mpc {
namespace cuda {

namespace {

using Key = std::pair<std::string, std::string>;

const std::map<Key, CudaOpEntry> &opTable() {
  static const std::map<Key, CudaOpEntry> table = [] {
    std::map<Key, CudaOpEntry> t;
    for (auto family :
         {elementwiseOps, activationOps, reductionOps, matmulOps, convPoolOps,
          normalizationOps, shapeOps, gatherScatterOps, selectionOps, lossOps,
          optimizerOps, shardOps, randomOps, fusedOps, hostOps})
      for (const CudaOpEntry &e : family())
        t.emplace(Key(e.domain, e.opType), e);
    return t;
  }();
  return table;
}

std::vector<std::string> opNames(bool device) {
  std::vector<std::string> ops;
  for (const auto &kv : opTable())
    if ((kv.second.run != nullptr) == device)
      ops.push_back(kv.first.first.empty()
                        ? kv.first.second
                        : kv.first.first + "." + kv.first.second);
  std::sort(ops.begin(), ops.end());
  return ops;
}

} // namespace

const CudaOpEntry *findCudaOp(const std::string &domain,
                              const std::string &op) {
  const auto &table = opTable();
  auto it = table.find(Key(domain == "ai.onnx" ? "" : domain, op));
  return it == table.end() ? nullptr : &it->second;
}

std::string cudaOpName(const Node &node) {
  return node.domain().empty() ? node.opType()
                               : node.domain() + "." + node.opType();
}

bool isDeviceFloat(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16;
}

DType lowType(const Node &n) {
  std::optional<DType> l =
      fromOnnxDataType(int(n.attrInt("low", toOnnxDataType(DType::F16))));
  return l ? *l : DType::Undefined;
}

std::string requireDeviceFloat(const Node &node,
                               std::initializer_list<size_t> inputs) {
  for (size_t i : inputs) {
    const Value *v = node.input(i);
    if (v && v->dtype != DType::Undefined && !isDeviceFloat(v->dtype))
      return "its device kernel takes fp32, fp16 or bf16, input " +
             std::to_string(i) + " is " + dtypeName(v->dtype);
  }
  return "";
}

std::string requireDeviceFloatFrom(const Node &node, size_t first) {
  for (size_t i = first; i < node.numInputs(); ++i) {
    std::string why = requireDeviceFloat(node, {i});
    if (!why.empty())
      return why;
  }
  return "";
}

std::string requireIndices(const Node &node, size_t i) {
  const Value *idx = node.input(i);
  if (idx && idx->dtype != DType::Undefined && idx->dtype != DType::I64 &&
      idx->dtype != DType::I32)
    return std::string("its indices must be int64 or int32, got ") +
           dtypeName(idx->dtype);
  return "";
}

void requireCopyable(const Node &node, const Tensor &t) {
  size_t size = dtypeSize(t.dtype);
  if (size != 1 && size != 2 && size != 4 && size != 8)
    cpu::fail(node,
              "the cuda backend copies elements of 1, 2, 4 or 8 bytes, not ",
              dtypeName(t.dtype));
}

std::string checkInput0(const Node &n) { return requireDeviceFloat(n, {0}); }
std::string checkInputs01(const Node &n) {
  return requireDeviceFloat(n, {0, 1});
}

std::string noCheck(const Node &) { return ""; }

std::vector<CudaOpEntry> hostOps() {
  // Shapes and views: their outputs are shapes or the input's bytes under
  // another shape; the CPU kernel computes them where the data is.
  return {
      {"", "Shape", nullptr, noCheck},
      {"", "ConstantOfShape", nullptr, noCheck},
      {"", "Constant", nullptr, noCheck},
      {"", "Reshape", nullptr, noCheck},
      {"", "Flatten", nullptr, noCheck},
      {"", "Squeeze", nullptr, noCheck},
      {"", "Unsqueeze", nullptr, noCheck},
      {"", "Identity", nullptr, noCheck},
      // --shard-optimizer's clip (kernels/cpu/collective.cpp) runs on the
      // host in a staged step, over the run's host world: its global norm
      // sums squares in fp32 in element order across the ranks. A
      // device-resident step refuses it (supportsResident); the sharded
      // step's other collectives run on the device (run_shard.cpp).
      {kMpcDomain, "ShardedClipGradNorm", nullptr, noCheck},
  };
}

/// Whether the op is --shard-optimizer's host collective (the clip).
bool isShardCollective(const Node &node) {
  return node.isOp(kMpcDomain, "ShardedClipGradNorm");
}

bool supportsResident(const Node &node, const std::vector<bool> &hostKnown,
                      std::string &why) {
  const CudaOpEntry *e = findCudaOp(node.domain(), node.opType());
  if (!e) {
    why = "no kernel for op " + cudaOpName(node);
    return false;
  }
  if (isShardCollective(node)) {
    why = "--shard-optimizer's " + cudaOpName(node) +
          " (--max-grad-norm) runs on the host, over the host world";
    return false;
  }
  uint32_t mask = e->hostInputs;
  if (!e->run && node.domain().empty() && node.opType() == "ConstantOfShape")
    mask |= 1u; // its output's value comes from the shape's
  // Runners whose entries predate hostInputs and read a shape input on the
  // host (run_conv_pool.cpp): their x_shape.
  if (node.domain() == kMpcDomain && node.opType() == "ConvGradInput")
    mask |= 1u << 2;
  if (node.domain() == kMpcDomain && node.opType() == "AveragePoolGrad")
    mask |= 1u << 1;
  for (size_t i = 0; i < node.numInputs() && i < 32; ++i) {
    const Value *in = node.input(i);
    if (!(mask >> i & 1u) || !in)
      continue;
    if (i >= hostKnown.size() || !hostKnown[i]) {
      why = "its input " + std::to_string(i) + " ('" + in->name() +
            "') is read on the host, and here it is computed from data "
            "during the step (not a constant or a shape)";
      return false;
    }
  }
  return true;
}

void requireSameShape(const Node &node, const Tensor &dy, const Tensor &x) {
  if (dy.dims != x.dims)
    cpu::fail(node, "dY of shape ", cpu::shapeString(dy.dims),
              " does not match X of shape ", cpu::shapeString(x.dims));
}

void requireDeviceFloat(const Node &node, const Tensor &t, const char *what) {
  if (!isDeviceFloat(t.dtype))
    cpu::fail(node, what,
              " must be fp32, fp16 or bf16 on the cuda backend, "
              "got ",
              dtypeName(t.dtype));
}

} // namespace cuda

bool cudaBackendSupports(const Node &node, std::string &why) {
  const cuda::CudaOpEntry *e = cuda::findCudaOp(node.domain(), node.opType());
  if (!e) {
    why = "the cuda backend has no kernel for op " + cuda::cudaOpName(node) +
          " yet";
    return false;
  }
  std::string no = e->check(node);
  if (!no.empty()) {
    why = "the cuda backend cannot run this " + cuda::cudaOpName(node) + ": " +
          no;
    return false;
  }
  return true;
}

std::vector<std::string> cudaDeviceOps() { return cuda::opNames(true); }
std::vector<std::string> cudaHostOps() { return cuda::opNames(false); }

} // namespace mpc
