// CUDA runners of Equal, Less, Greater, LessOrEqual, GreaterOrEqual, the
// logical And, Or, Xor, and Where.
//
// In the compiled steps of the models here fold-constants has already
// evaluated these (they build attention masks from shapes); they run on the
// device for graphs where they see data. Operand rules and messages are the
// CPU kernels' (kernels/cpu/elementwise.cpp).
#include "kernels/cpu/cpu_util.h"
#include "kernels/cuda/compare.h"
#include "runtime/cuda/cuda_ops.h"
#include "runtime/cuda/node_broadcast.h"
#include "runtime/cuda/node_staging.h"

#include <stdexcept>

namespace mpc {
namespace cuda {
namespace {

using cpu::fail;

constexpr bool isLogical(CompareOp op) {
  return op == CompareOp::And || op == CompareOp::Or || op == CompareOp::Xor;
}

template <CompareOp Op> void runCompare(NodeStaging &s) {
  const Node &node = s.node();
  const Tensor &a = s.in(0, "A"), &b = s.in(1, "B");
  if (a.dtype != b.dtype)
    fail(node, "operands have different element types (", dtypeName(a.dtype),
         " and ", dtypeName(b.dtype), ")");
  if (isLogical(Op) && a.dtype != DType::Bool)
    fail(node, "takes bool operands, got ", dtypeName(a.dtype));
  if (a.dtype == DType::Bool && Op != CompareOp::Equal && !isLogical(Op))
    fail(node, "does not support bool operands");
  if (!compareSupported(Op, a.dtype))
    fail(node,
         "the cuda backend compares fp32, fp16, bf16, int64 or int32, "
         "not ",
         dtypeName(a.dtype));
  std::vector<int64_t> dims = cpu::broadcastShapes(node, a.dims, b.dims);
  const std::vector<int64_t> shapes[2] = {a.dims, b.dims};
  BroadcastGeometry<2> g = nodeBroadcastGeometry<2>(node, dims, shapes);
  auto *y = static_cast<uint8_t *>(s.out(0, DType::Bool, dims));
  launchCompare(Op, a.dtype, s.device(0), s.device(1), y, g, s.stream());
}

template <CompareOp Op> std::string checkCompare(const Node &node) {
  const Value *a = node.input(0);
  if (!a || a->dtype == DType::Undefined || compareSupported(Op, a->dtype))
    return "";
  if (isLogical(Op))
    return std::string("it takes bool operands, not ") + dtypeName(a->dtype);
  return std::string("it compares fp32, fp16, bf16, int64 or int32, not ") +
         dtypeName(a->dtype);
}

void runWhere(NodeStaging &s) {
  const Node &node = s.node();
  const Tensor &c = s.in(0, "condition"), &a = s.in(1, "X"), &b = s.in(2, "Y");
  if (c.dtype != DType::Bool)
    fail(node, "condition must be bool, got ", dtypeName(c.dtype));
  if (a.dtype != b.dtype)
    fail(node, "X and Y have different element types (", dtypeName(a.dtype),
         " and ", dtypeName(b.dtype), ")");
  requireCopyable(node, a);
  std::vector<int64_t> dims = cpu::broadcastShapes(
      node, cpu::broadcastShapes(node, c.dims, a.dims), b.dims);
  const std::vector<int64_t> shapes[3] = {c.dims, a.dims, b.dims};
  BroadcastGeometry<3> g = nodeBroadcastGeometry<3>(node, dims, shapes);
  void *y = s.out(0, a.dtype, dims);
  launchWhere(dtypeSize(a.dtype), static_cast<const uint8_t *>(s.device(0)),
              s.device(1), s.device(2), y, g, s.stream());
}

} // namespace

std::vector<CudaOpEntry> compareOps() {
  return {
      {"", "Equal", runCompare<CompareOp::Equal>,
       checkCompare<CompareOp::Equal>},
      {"", "Less", runCompare<CompareOp::Less>, checkCompare<CompareOp::Less>},
      {"", "Greater", runCompare<CompareOp::Greater>,
       checkCompare<CompareOp::Greater>},
      {"", "LessOrEqual", runCompare<CompareOp::LessOrEqual>,
       checkCompare<CompareOp::LessOrEqual>},
      {"", "GreaterOrEqual", runCompare<CompareOp::GreaterOrEqual>,
       checkCompare<CompareOp::GreaterOrEqual>},
      {"", "And", runCompare<CompareOp::And>, checkCompare<CompareOp::And>},
      {"", "Or", runCompare<CompareOp::Or>, checkCompare<CompareOp::Or>},
      {"", "Xor", runCompare<CompareOp::Xor>, checkCompare<CompareOp::Xor>},
      {"", "Where", runWhere, noCheck},
  };
}

} // namespace cuda
} // namespace mpc
