// The autocast precision policy: which ops run in fp16/bf16, which stay fp32.
//
// The policy is data: one table (autocast_policy.cpp) gives every op a class
// and a one-line reason, after PyTorch autocast's op lists, TensorFlow AMP's
// allow/deny/infer lists and TVM's ToMixedPrecision. AutocastPolicy adds the
// user's overrides (--fp32-ops, --fp16-ops, --fp32-nodes) on top of it; the
// autocast pass (passes/autocast.cpp) only asks it for a node's class.
#pragma once

#include "passes/pass.h"
#include "support/name_pattern.h"

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace mpc {

/// How autocast treats an op.
enum class PrecisionClass : uint8_t {
  /// Runs in the target precision (fp16/bf16): Tensor Core math with fp32
  /// accumulation, where the speed and memory of mixed precision come from.
  Lower,
  /// An fp32 island: its low-precision inputs are cast up, it runs in fp32.
  Fp32,
  /// Runs in the dtype of its float inputs (the widest when they differ), so
  /// data movement and element-wise ops never add casts of their own.
  Follow,
  /// Never touched: reads its inputs in the dtype they had before autocast
  /// (optimizer and loss-scale ops, ops of unknown domains).
  Keep,
  /// Never touched and reads any dtype: its float inputs are only looked at
  /// for their shape or converted explicitly (Shape, Size, Cast, Constant).
  AnyType,
};

/// "lower", "fp32", "follow", "keep", "any".
const char *precisionClassName(PrecisionClass c);

/// One row of the policy table.
struct PolicyEntry {
  const char *domain; ///< "" for ONNX, "mpc" for mpc's own ops
  const char *op;
  PrecisionClass cls;
  /// Bit i set: input i is never cast, because the op reads only its shape
  /// or it has a dtype of its own (Dropout's ratio, SumToShape's X).
  uint32_t uncastInputs;
  /// Why the op has this class (and which reference lists agree).
  const char *reason;
  /// A Cast commutes with the op bit for bit and the op never shrinks its
  /// input (data movement, Relu, Neg): casting its one float input instead
  /// of its output gives the same result, so autocast may run it in fp16
  /// when all its users want fp16 and share the input's Cast (the Transpose
  /// of a weight in a MatMul's backward reads the weight's one fp16 copy).
  bool castCommutes = false;

  /// Whether input i is never cast (its bit in uncastInputs).
  bool isUncastInput(size_t i) const {
    return i < 32 && (uncastInputs >> i & 1u);
  }
};

/// The built-in table, in a fixed order (for --help-like listings and tests).
const std::vector<PolicyEntry> &autocastPolicyTable();

/// The table row of an op, nullptr when the op is not in the table.
const PolicyEntry *findPolicyEntry(const std::string &domain,
                                   const std::string &op);

/// Which rule gave a node its class (mpc-opt --explain shows it).
enum class ClassSource : uint8_t {
  Table,      ///< the node's row in the policy table
  UnlistedOp, ///< not in the table: Fp32 (ONNX domain) or Keep (others)
  Fp32Nodes,  ///< --fp32-nodes matched the node name
  Fp16Ops,    ///< --fp16-ops named the op
  Fp32Ops,    ///< --fp32-ops named the op
  /// Part of a decomposed loss autocast runs in fp32 (passes/loss_islands.h)
  LossIsland,
};

struct LossIslandKind;

/// A node's class, where it came from, and what the table alone says.
struct Classification {
  PrecisionClass cls;
  ClassSource source;
  const PolicyEntry *entry; ///< the table row, nullptr for unlisted ops
  PrecisionClass tableCls;  ///< the class without the overrides
  /// The loss island the node belongs to (source LossIsland), else nullptr.
  const LossIslandKind *island = nullptr;
};

/// The table plus the user's overrides, ready to classify nodes.
class AutocastPolicy {
public:
  /// The built-in policy without overrides.
  AutocastPolicy() = default;

  /// Applies --fp32-ops, --fp16-ops and --fp32-nodes. Throws Error naming the
  /// flag for an op not in the table, an op that is never cast (Shape, Adam),
  /// an op given in both lists, or a malformed regular expression.
  static AutocastPolicy fromOptions(const CompileOptions &options);

  /// The class of node n with the overrides applied. --fp32-nodes (a regex
  /// searched in the node name) wins over --fp16-ops, which wins over
  /// --fp32-ops and the table. Ops not in the table: Fp32 in the ONNX domain
  /// (unknown numerics stay in full precision, as in TVM and TF AMP), Keep in
  /// any other domain.
  PrecisionClass classify(const Node &n) const { return explain(n).cls; }
  /// classify() with the rule that decided it.
  Classification explain(const Node &n) const;

  /// The --fp32-nodes regular expression as given ("" when none).
  const std::string &fp32NodesPattern() const {
    static const std::string kNone;
    return nodePattern_ ? nodePattern_->text() : kNone;
  }

  /// True when input i of n must keep its dtype whatever the node runs in.
  bool isUncastInput(const Node &n, size_t i) const;

  /// The table's castCommutes for n's op (false for ops not in the table).
  bool castCommutes(const Node &n) const;

private:
  std::set<std::string> fp32Ops_, fp16Ops_;
  std::optional<NamePattern> nodePattern_; ///< --fp32-nodes
};

} // namespace mpc
