// Executor: runs a graph node by node on a backend.
//
// Values live in slots; a value is freed after its last use (so the measured
// peak reflects liveness). Initializers are bound from the graph at
// construction; inputs are set per run; outputs stay until the next run.
#pragma once

#include "runtime/backend.h"

#include <string>
#include <unordered_map>
#include <vector>

namespace mpc {

class Executor {
public:
  /// Checks every node is supported by the backend (throws Error if not).
  Executor(const Graph &graph, Backend &backend);

  /// Sets a graph input by name (throws Error on unknown name or a dtype
  /// mismatch). Shapes are checked by the kernels.
  void setInput(const std::string &name, Tensor value);
  /// Replaces an initializer's value (state updates between steps).
  void setInitializer(const std::string &name, Tensor value);
  /// Current value of an initializer.
  const Tensor &initializer(const std::string &name) const;

  /// Runs every node. `seed` is passed to random ops.
  void run(uint64_t seed = 0);

  /// Output i of the last run, or by name.
  const Tensor &output(size_t i) const;
  const Tensor &output(const std::string &name) const;
  size_t numOutputs() const { return graph_.outputs().size(); }

  /// Bytes of all live tensors at the worst point of the last run,
  /// initializers and inputs included.
  size_t peakBytes() const { return peakBytes_; }

  /// Optional hook called after each node (overflow provenance, tracing).
  using NodeHook = void (*)(void *user, const Node &, const KernelContext &);
  void setNodeHook(NodeHook hook, void *user) {
    hook_ = hook;
    hookUser_ = user;
  }

private:
  const Graph &graph_;
  Backend &backend_;
  std::unordered_map<const Value *, size_t> slotOf_;
  std::vector<Tensor> slots_;
  std::vector<bool> persistent_;
  /// For each node (in order), the slots whose last use it is.
  std::vector<std::vector<size_t>> freeAfter_;
  std::vector<size_t> outputSlots_;
  size_t peakBytes_ = 0;
  NodeHook hook_ = nullptr;
  void *hookUser_ = nullptr;
};

} // namespace mpc
