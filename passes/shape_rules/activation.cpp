// Shape rules of the activations: Relu, LeakyRelu, Sigmoid, Tanh, Gelu,
// mpc.LogSigmoid, Softmax and LogSoftmax, and the mpc backward ops of each
// (ReluGrad, LeakyReluGrad, GeluGrad, LogSigmoidGrad, SoftmaxGrad,
// LogSoftmaxGrad). The fused softmax forms (mpc.SoftmaxTo, ...) are in
// fused.cpp.
#include "passes/shape_rules/rule_support.h"

#include "ir/mpc_ops.h"

namespace mpc::shape_rules {

namespace {

/// Gelu's approximate attribute: "none" or "tanh".
void checkGeluApproximate(Ctx &c) {
  std::string a = c.stringAttr("approximate", "none");
  if (a != "none" && a != "tanh")
    fail([&] {
      errorAt(c.n) << "attribute 'approximate' must be \"none\" or \"tanh\", "
                      "got \""
                   << a << "\"";
    });
}

void inferGelu(Ctx &c) {
  if (c.opset < 20)
    fail([&] {
      errorAt(c.n) << "Gelu is an ONNX op from opset 20; the model imports "
                      "opset "
                   << c.opset
                   << " (older exports write GELU as Erf arithmetic)";
    });
  checkGeluApproximate(c);
  inferUnaryFloat(c);
}

void inferLeakyRelu(Ctx &c) {
  c.floatAttr("alpha", 0.01f);
  inferUnaryFloat(c);
}

void inferSoftmax(Ctx &c) {
  Value *x = c.req(0);
  c.requireFloat(0);
  int64_t axis = c.intAttr("axis", c.opset >= 13 ? -1 : 1);
  if (x->hasShape)
    c.axis(axis, x->rank());
  c.setLike(0, x);
}

void inferGeluGrad(Ctx &c) {
  checkGeluApproximate(c);
  inferElementwiseGrad(c);
}

const OpRule kRules[] = {
    {"", "Relu", 1, 1, 1, 1, inferUnaryNumeric},
    {"", "Sigmoid", 1, 1, 1, 1, inferUnaryFloat},
    {"", "Tanh", 1, 1, 1, 1, inferUnaryFloat},
    {"", "Gelu", 1, 1, 1, 1, inferGelu},
    {"", "LeakyRelu", 1, 1, 1, 1, inferLeakyRelu},
    {kMpcDomain, "LogSigmoid", 1, 1, 1, 1, inferUnaryFloat},
    {"", "Softmax", 1, 1, 1, 1, inferSoftmax},
    {"", "LogSoftmax", 1, 1, 1, 1, inferSoftmax},
    {kMpcDomain, "ReluGrad", 2, 2, 1, 1, inferElementwiseGrad},
    {kMpcDomain, "LeakyReluGrad", 2, 2, 1, 1, inferElementwiseGrad},
    {kMpcDomain, "GeluGrad", 2, 2, 1, 1, inferGeluGrad},
    {kMpcDomain, "LogSigmoidGrad", 2, 2, 1, 1, inferElementwiseGrad},
    {kMpcDomain, "SoftmaxGrad", 2, 2, 1, 1, inferElementwiseGrad},
    {kMpcDomain, "LogSoftmaxGrad", 2, 2, 1, 1, inferElementwiseGrad},
};

} // namespace

RuleRows activationRules() { return RuleRows(kRules); }

} // namespace mpc::shape_rules
