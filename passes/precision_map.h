// The precision map: why each node runs in fp16/bf16/fp32, and its printers.
//
// autocast (passes/autocast.cpp) records, for every node of the graph it
// rewrites, the dtype it chose and the rule that chose it: a policy-table
// row, an fp32 island, follow-the-inputs, a user override (--fp32-ops,
// --fp16-ops, --fp32-nodes), or why the node was left alone; every Cast it
// inserts is recorded with what it is for. Nodes that loss-scale,
// master-weights and optimizer add later are recorded as training support by
// recordNodesAddedBy(), which mpc-opt calls after every pass.
//
// The records live in a side table on the Model (Model::precisionMap), keyed
// by node name, so they survive every later pass and are never exported.
// mpc-opt --explain prints them as a table, --dot=F as a Graphviz graph.
#pragma once

#include "ir/graph.h"
#include "passes/autocast_policy.h"

#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace mpc {

/// Why one node runs in the precision it does.
struct PrecisionRecord {
  /// The dtype autocast runs the node in; Undefined when the node is
  /// untouched, then its precision is read off its values when printed.
  DType dtype = DType::Undefined;
  /// Short and stable: "policy:fp16-op", "island:Softmax", "follow-inputs",
  /// "override:--fp32-ops=Gemm", "cast-inserted", "training-support", ...
  std::string rule;
  /// One human sentence: the table's reason, what a Cast is for, ...
  std::string detail;
};

/// The records of the nodes of one graph (the one autocast rewrote).
class PrecisionMap {
public:
  explicit PrecisionMap(const Graph &g) : graph_(&g) {}

  /// The graph the records belong to.
  const Graph *graph() const { return graph_; }
  /// Records (or replaces) the record of n.
  void record(const Node &n, PrecisionRecord r);
  /// n's record; nullptr when n is of another graph or was not recorded.
  const PrecisionRecord *find(const Node &n) const;
  size_t size() const { return byName_.size(); }

private:
  using Entry = std::pair<const std::string, PrecisionRecord>;
  const Graph *graph_;
  std::unordered_map<std::string, PrecisionRecord> byName_;
  /// Where find() last found each node's record. mpc-opt asks for every node
  /// after every pass (recordNodesAddedBy); hashing a pointer and comparing
  /// the name is cheaper than hashing the name. A node renamed, or a new node
  /// at a freed one's address, fails the name check and is looked up again.
  /// Entries stay put: records are never erased, and unordered_map elements
  /// do not move when it grows.
  mutable std::unordered_map<const Node *, const Entry *> found_;
};

/// Starts a fresh map for graph g of the model (replacing any earlier one).
PrecisionMap &startPrecisionMap(Model &model, const Graph &g);

/// The model's map when it holds graph g's records (the graph autocast
/// rewrote), else nullptr: a pass after autocast records what it changes
/// there only.
PrecisionMap *precisionMapOf(const Model &model, const Graph &g);

/// n's record in that map, copied (nullopt when g has no map or n no
/// record): for a pass that rewrites n and keeps what the record said.
std::optional<PrecisionRecord> recordCopyOf(const Model &model, const Graph &g,
                                            const Node &n);

// --- the records autocast makes ---------------------------------------------

/// Why autocast leaves a node as it is.
enum class Untouched {
  AnyType,       ///< the table says it reads any dtype (Shape, Cast, ...)
  NoFloatInputs, ///< shape or index arithmetic: nothing to decide
  Fp64,          ///< it reads or writes fp64
  Keep,          ///< the table (or its domain) says never touch it
};

/// A node autocast left alone.
PrecisionRecord untouchedRecord(const Node &n, const Classification &how,
                                Untouched why);

/// A node autocast decided: `runsIn` is what it runs in (Undefined: a Follow
/// node reading only compile-time constants), `target` the --precision,
/// `promoted` the input dtypes a Follow node promoted, `paramsAdapted`
/// whether its parameters took the computed inputs' dtype.
PrecisionRecord decidedRecord(const Node &n, const Classification &how,
                              DType runsIn, DType target,
                              const std::string &fp32NodesPattern,
                              const std::vector<DType> &promoted,
                              bool paramsAdapted = false);

/// A cast-commuting Follow node moved to the target so that it reads its
/// input's shared low-precision copy (autocast's sinkCasts).
PrecisionRecord followUsersRecord(DType target);

/// A Constant node converted at compile time to the dtype its users want.
PrecisionRecord constantConvertedRecord(DType to);

/// A Cast autocast inserted, described by what it reads and who reads it
/// (call once the graph is final); `lossName` is mpc.loss or "".
PrecisionRecord insertedCastRecord(const Node &cast,
                                   const std::string &lossName);

/// --precision=fp32: records every node of g as running as it was.
void recordFullPrecision(Model &model, const Graph &g);

/// Records every node of the mapped graph that has no record yet as added
/// by `pass` (loss-scale, master-weights, optimizer run after autocast).
/// Does nothing before autocast has started a map.
void recordNodesAddedBy(const Model &model, const std::string &pass);

// --- printers ---------------------------------------------------------------

/// "fp16", "bf16", "fp32", "fp64", "int" (integer/bool only) or "-".
std::string nodePrecision(const Node &n, const PrecisionRecord *r);

/// mpc-opt --explain: one aligned line per node of the training step, then
/// of the main graph (node, op, precision, rule, detail), in graph order.
std::string explainPrecision(const Model &model);

/// mpc-opt --dot: the step graph (the mapped graph, else the working graph)
/// in Graphviz, nodes coloured by precision, Casts drawn as arrows, edges
/// labelled with dtype and shape, with a legend.
std::string precisionDot(const Model &model);

} // namespace mpc
