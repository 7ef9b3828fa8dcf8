// Overflow provenance: which node of a training step first produced inf/nan.
//
// findFirstOverflow re-runs a step on an Executor (same inputs, same state,
// same seed) with a node hook that scans every floating-point output, and
// reports the first node in execution order whose output holds an inf or a
// nan. Forward/backward rule: a node is "forward" when the loss value depends
// on it (it is an ancestor of the loss, or produces it); every other node
// (gradients autodiff created, loss scaling, unscale/check, optimizer) is
// "backward".
#pragma once

#include "runtime/executor.h"

#include <string>

namespace mpc {

struct OverflowReport {
  bool found = false; ///< some node's output held an inf or a nan
  std::string node;   ///< the first such node's name
  std::string op;     ///< its op type
  bool backward = false;
  double maxAbs = 0;    ///< largest finite |x| in its overflowing output
  int64_t infCount = 0; ///< infs in that output
  int64_t nanCount = 0; ///< nans in that output

  /// "step S overflowed first at node 'N' (Op, forward): max |x| = ...,
  /// I inf, M nan" (or "step S overflowed but no node output ...").
  std::string line(int64_t step) const;
};

/// Runs `exec` (whose graph is `graph`, inputs and state already bound) once
/// with `seed` and returns the first node with an inf/nan output. The hook is
/// removed afterwards. `lossName` decides forward vs backward.
OverflowReport findFirstOverflow(Executor &exec, const Graph &graph,
                                 const std::string &lossName, uint64_t seed);

} // namespace mpc
