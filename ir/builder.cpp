// Builder implementation.
#include "ir/builder.h"

namespace mpc {

Node *Builder::node(const std::string &opType,
                    const std::vector<Value *> &inputs, size_t numOutputs,
                    const Attrs &attrs, const std::string &nameHint,
                    const std::string &domain) {
  Node *n =
      g_.createNode(opType, inputs, numOutputs, nameHint, domain, before_);
  for (const auto &kv : attrs)
    n->setAttr(kv.first, kv.second);
  return n;
}

Value *Builder::op(const std::string &opType,
                   const std::vector<Value *> &inputs, const Attrs &attrs,
                   const std::string &nameHint, const std::string &domain) {
  return node(opType, inputs, 1, attrs, nameHint, domain)->output(0);
}

Value *Builder::mpcOp(const std::string &opType,
                      const std::vector<Value *> &inputs, const Attrs &attrs,
                      const std::string &nameHint) {
  return op(opType, inputs, attrs, nameHint, "mpc");
}

Value *Builder::scalar(DType t, double v, const std::string &nameHint) {
  return g_.addInitializer(nameHint, Tensor::scalar(t, v));
}

Value *Builder::int64s(const std::vector<int64_t> &v,
                       const std::string &nameHint) {
  return g_.addInitializer(nameHint,
                           Tensor::fromInt64s({int64_t(v.size())}, v));
}

Value *Builder::constant(Tensor t, const std::string &nameHint) {
  return g_.addInitializer(nameHint, std::move(t));
}

Value *Builder::cast(Value *x, DType t, const std::string &nameHint) {
  std::string hint =
      nameHint.empty() ? x->name() + "_" + dtypeName(t) : nameHint;
  Node *n =
      node("Cast", {x}, 1, {{"to", Attribute::ofInt(toOnnxDataType(t))}}, hint);
  Value *y = n->output(0);
  y->copyTypeFrom(*x);
  y->dtype = t;
  return y;
}

void Builder::reduceSumAxes(int64_t opset, const std::vector<int64_t> &axes,
                            std::vector<Value *> &inputs, Attrs &attrs,
                            const std::string &nameHint) {
  if (opset >= 13)
    inputs.push_back(int64s(axes, nameHint));
  else
    attrs.emplace_back("axes", Attribute::ofInts(axes));
}

std::vector<int64_t> axesButChannel(int64_t rank) {
  std::vector<int64_t> axes = {0};
  for (int64_t d = 2; d < rank; ++d)
    axes.push_back(d);
  return axes;
}

} // namespace mpc
