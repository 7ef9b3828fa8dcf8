// Fixed values at import time (import_constants.h).
#include "passes/onnx/import_constants.h"

#include "kernels/cpu/kernel_table.h"
#include "passes/shape_inference.h"

#include <algorithm>
#include <set>
#include <string>
#include <vector>

namespace mpc {
namespace {

/// Deep enough for every shape expression an exporter writes; bounds the
/// recursion on anything else.
constexpr int kMaxDepth = 16;

const std::set<std::string> kArithmetic = {"Concat",    "Slice",
                                           "Gather",    "Cast",
                                           "Unsqueeze", "Squeeze",
                                           "Add",       "Sub",
                                           "Mul",       "Div",
                                           "Mod",       "Reshape",
                                           "Transpose", "ConstantOfShape"};

/// The most elements a ConstantOfShape evaluated here may make: shape
/// arithmetic is small (F.pad builds its pads with one), anything larger is
/// data and waits for the run.
constexpr int64_t kMaxElements = 65536;

TensorPtr shapeOf(const Node &n, int64_t opset) {
  const Value *x = n.input(0);
  if (!x || !x->hasShape)
    return nullptr;
  int64_t r = x->rank(), start = 0, end = r;
  if (opset >= 15) {
    start = n.attrInt("start", 0);
    end = n.attrInt("end", r);
  }
  auto clampAxis = [r](int64_t a) {
    return std::clamp<int64_t>(a < 0 ? a + r : a, 0, r);
  };
  std::vector<int64_t> dims;
  for (int64_t i = clampAxis(start); i < clampAxis(end); ++i) {
    if (!x->dims[size_t(i)].isKnown())
      return nullptr;
    dims.push_back(x->dims[size_t(i)].value);
  }
  return std::make_shared<Tensor>(
      Tensor::fromInt64s({int64_t(dims.size())}, dims));
}

TensorPtr valueAt(const Value &v, int64_t opset, int depth) {
  if (v.isInitializer())
    return !v.isState || !isFloating(v.dtype) ? v.initializer() : nullptr;
  const Node *p = v.producer();
  if (!p || depth > kMaxDepth || !p->domain().empty() || p->numOutputs() != 1)
    return nullptr;
  if (p->opType() == "Constant")
    return constantNodeTensor(*p);
  if (p->opType() == "Shape")
    return shapeOf(*p, opset);
  if (!kArithmetic.count(p->opType()))
    return nullptr;
  std::vector<TensorPtr> held;
  std::vector<const Tensor *> inputs;
  for (const Value *in : p->inputs()) {
    if (!in) {
      inputs.push_back(nullptr);
      continue;
    }
    TensorPtr t = valueAt(*in, opset, depth + 1);
    if (!t)
      return nullptr;
    held.push_back(t);
    inputs.push_back(t.get());
  }
  if (p->opType() == "ConstantOfShape") {
    int64_t count = 1;
    for (int64_t d : inputs[0] ? inputs[0]->toInt64s() : std::vector<int64_t>{})
      if (d < 0 || (count *= std::max<int64_t>(d, 1)) > kMaxElements)
        return nullptr;
  }
  std::vector<Tensor> outputs;
  runCpuNode(*p, inputs, outputs);
  return outputs.size() == 1 ? std::make_shared<Tensor>(std::move(outputs[0]))
                             : nullptr;
}

} // namespace

TensorPtr importTimeValue(const Value &v, int64_t opset) {
  return valueAt(v, opset, 0);
}

TensorPtr fixedAtImport(const Value *v, int64_t opset) {
  if (!v)
    return nullptr;
  return v->isInitializer() ? v->initializer() : importTimeValue(*v, opset);
}

} // namespace mpc
