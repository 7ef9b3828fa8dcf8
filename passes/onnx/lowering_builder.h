// What the import-time lowerings (instance_norm_lowering.h,
// activation_lowering.h) build their replacements with: a Builder in front
// of the node being replaced that names each new node after it
// ("<node>/<part>"), remembers the nodes it made (the importer infers their
// types before the next node), and finally puts the replacement's output in
// place of the node's, under the same name.
#pragma once

#include "ir/builder.h"
#include "support/diagnostics.h"

#include <string>
#include <vector>

namespace mpc {

/// The element type of an elementwise lowering's input: n must read an
/// input and write one output, and the input must be floating point (its
/// constants take that type); else a one-line error naming the node.
inline DType floatInputType(const Node &n) {
  if (n.numInputs() < 1 || !n.input(0) || n.numOutputs() != 1 || !n.output(0))
    errorAt(n) << n.opType() << " takes an input and has one output";
  DType t = n.input(0)->dtype;
  if (t == DType::Undefined || !isFloating(t))
    errorAt(n) << "takes a floating-point input, got "
               << (t == DType::Undefined ? std::string("an unknown type")
                                         : dtypeName(t));
  return t;
}

class LoweringBuilder {
public:
  LoweringBuilder(Graph &g, Node *replaced)
      : g_(g), b_(g, replaced), replaced_(replaced), base_(replaced->name()) {}

  /// A single-output node named "<node>/<part>".
  Value *op(const std::string &type, const std::vector<Value *> &inputs,
            const std::string &part, const Builder::Attrs &attrs = {}) {
    return node(type, inputs, 1, part, attrs)->output(0);
  }
  /// A node of numOutputs outputs named "<node>/<part>".
  Node *node(const std::string &type, const std::vector<Value *> &inputs,
             size_t numOutputs, const std::string &part,
             const Builder::Attrs &attrs = {}) {
    Node *n = b_.node(type, inputs, numOutputs, attrs, base_ + "/" + part);
    made_.push_back(n);
    return n;
  }
  /// A constant initializer (not state) named "<node>/<part>".
  Value *constant(Tensor t, const std::string &part) {
    return b_.constant(std::move(t), base_ + "/" + part);
  }
  Value *int64s(const std::vector<int64_t> &v, const std::string &part) {
    return b_.int64s(v, base_ + "/" + part);
  }
  /// A rank-0 constant of dtype t named "<node>/<part>".
  Value *scalar(DType t, double v, const std::string &part) {
    return b_.scalar(t, v, base_ + "/" + part);
  }

  /// Replaces the node by y (its output's uses and name move to y) and
  /// returns the nodes made, in order.
  std::vector<Node *> replaceWith(Value *y) { return replaceOutputsWith({y}); }
  /// The same for a node of several outputs: ys[i] replaces output i (one
  /// per output the node has; nullptr only where the node omits it).
  std::vector<Node *> replaceOutputsWith(const std::vector<Value *> &ys) {
    std::vector<std::pair<Value *, std::string>> renames;
    for (size_t i = 0; i < ys.size() && i < replaced_->numOutputs(); ++i) {
      Value *out = replaced_->output(i);
      if (!out || !ys[i])
        continue;
      renames.emplace_back(ys[i], out->name());
      g_.replaceAllUsesWith(out, ys[i]);
    }
    g_.removeNode(replaced_);
    for (auto &[value, name] : renames)
      g_.renameValue(value, name);
    return std::move(made_);
  }

private:
  Graph &g_;
  Builder b_;
  Node *replaced_;
  std::string base_;
  std::vector<Node *> made_;
};

} // namespace mpc
