// CUDA runners of TopK, ArgMax and ArgMin (kernels/cuda/topk.h), with the
// CPU kernels' checks and messages (cpu::topkCount, cpu::normalizeAxis).
// TopK's K is read on the host: a constant once fold-constants has run,
// so a device-resident step keeps it.
#include "kernels/cpu/cpu_util.h"
#include "kernels/cuda/topk.h"
#include "runtime/cuda/cuda_ops.h"
#include "runtime/cuda/node_staging.h"

namespace mpc {
namespace cuda {
namespace {

using cpu::fail;

/// The input's dtype taken by the device kernels, and the node's axis.
int64_t selectAxis(const Node &node, const Tensor &x, int64_t dflt) {
  if (!selectSupported(x.dtype))
    fail(node,
         "the cuda backend selects over fp32, fp16, bf16, int64 or "
         "int32, not ",
         dtypeName(x.dtype));
  if (x.dims.empty())
    fail(node, "input must have rank >= 1, got a scalar");
  return cpu::normalizeAxis(node, node.attrInt("axis", dflt),
                            int64_t(x.dims.size()));
}

template <bool Max> void runArgExtremum(NodeStaging &s) {
  const Node &node = s.node();
  const Tensor &x = s.in(0, "data");
  int64_t a = selectAxis(node, x, 0);
  cpu::AxisSplit split = cpu::splitAt(x.dims, a);
  if (split.len == 0)
    fail(node, "axis ", a, " is empty: there is no arg ", Max ? "max" : "min",
         " of ", cpu::shapeString(x.dims));
  std::vector<int64_t> dims = x.dims;
  if (node.attrInt("keepdims", 1) != 0)
    dims[size_t(a)] = 1;
  else
    dims.erase(dims.begin() + a);
  auto *y = static_cast<int64_t *>(s.out(0, DType::I64, dims));
  launchArgExtremum(x.dtype, s.device(0), y, split.outer, split.len,
                    split.inner, Max, node.attrInt("select_last_index", 0) != 0,
                    s.stream());
}

void runTopK(NodeStaging &s) {
  const Node &node = s.node();
  const Tensor &x = s.in(0, "X");
  int64_t a = selectAxis(node, x, -1);
  cpu::AxisSplit split = cpu::splitAt(x.dims, a);
  int64_t k = cpu::topkCount(node, s.hostValue(1, "K"), split.len);
  std::vector<int64_t> dims = x.dims;
  dims[size_t(a)] = k;
  void *values = s.optionalOut(0, x.dtype, dims);
  auto *indices = static_cast<int64_t *>(s.optionalOut(1, DType::I64, dims));
  launchTopK(x.dtype, s.device(0), values, indices, split.outer, split.len,
             split.inner, k, node.attrInt("largest", 1) != 0, s.stream());
}

std::string checkSelect(const Node &node) {
  const Value *x = node.input(0);
  if (!x || x->dtype == DType::Undefined || selectSupported(x->dtype))
    return "";
  return std::string("it selects over fp32, fp16, bf16, int64 or int32, "
                     "not ") +
         dtypeName(x->dtype);
}

} // namespace

std::vector<CudaOpEntry> selectionOps() {
  return {
      {"", "TopK", runTopK, checkSelect, 1u << 1},
      {"", "ArgMax", runArgExtremum<true>, checkSelect},
      {"", "ArgMin", runArgExtremum<false>, checkSelect},
  };
}

} // namespace cuda
} // namespace mpc
