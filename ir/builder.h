// Builder: creates nodes at an insertion point with attributes in one call.
//
// Passes use it instead of raw Graph::createNode so that new nodes get
// readable names, their output types set when the caller knows them, and
// constants become small (non-state) initializers.
#pragma once

#include "ir/graph.h"

#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

namespace mpc {

/// The axes of a rank-`rank` tensor's every dim but 1 (the channel): 0, 2,
/// ..., rank - 1, over which per-channel sums (batch norm, a convolution's
/// bias gradient) reduce.
std::vector<int64_t> axesButChannel(int64_t rank);

class Builder {
public:
  /// Inserts before `before` (nullptr: at the end of the graph).
  explicit Builder(Graph &g, Node *before = nullptr) : g_(g), before_(before) {}

  Graph &graph() { return g_; }
  void setInsertionPoint(Node *before) { before_ = before; }
  Node *insertionPoint() const { return before_; }

  using Attrs = std::vector<std::pair<std::string, Attribute>>;

  /// A node with numOutputs outputs named "<nameHint>_out...".
  Node *node(const std::string &opType, const std::vector<Value *> &inputs,
             size_t numOutputs, const Attrs &attrs = {},
             const std::string &nameHint = "", const std::string &domain = "");
  /// A single-output node; returns its output.
  Value *op(const std::string &opType, const std::vector<Value *> &inputs,
            const Attrs &attrs = {}, const std::string &nameHint = "",
            const std::string &domain = "");
  /// A single-output mpc-domain node; returns its output.
  Value *mpcOp(const std::string &opType, const std::vector<Value *> &inputs,
               const Attrs &attrs = {}, const std::string &nameHint = "");

  /// Scalar (rank 0) constant initializer.
  Value *scalar(DType t, double v, const std::string &nameHint = "const");
  /// 1-D int64 constant initializer (shapes, axes).
  Value *int64s(const std::vector<int64_t> &v,
                const std::string &nameHint = "const");
  /// Constant initializer holding t.
  Value *constant(Tensor t, const std::string &nameHint = "const");

  /// Cast to t; output typed like x with dtype t.
  Value *cast(Value *x, DType t, const std::string &nameHint = "");

  /// ReduceSum's `axes` in the form `opset` takes them: an int64 constant
  /// (named nameHint) appended to `inputs` from opset 13, the `axes`
  /// attribute added to `attrs` before.
  void reduceSumAxes(int64_t opset, const std::vector<int64_t> &axes,
                     std::vector<Value *> &inputs, Attrs &attrs,
                     const std::string &nameHint);

private:
  Graph &g_;
  Node *before_;
};

} // namespace mpc
