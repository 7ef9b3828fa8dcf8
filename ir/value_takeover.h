// Replacing a node's outputs under their names.
//
// A rewrite that computes a value anew (an expansion into standard ops, a
// synchronised batch norm) must leave the rest of the step reading the new
// value, and under the old name: metadata, update bindings and graph
// outputs name values. The old producer still holds the name until it is
// removed, so the rename waits: take() moves every use (graph outputs too)
// and the type, finish() renames once the old producers are gone.
#pragma once

#include "ir/graph.h"

#include <string>
#include <utility>
#include <vector>

namespace mpc {

class ValueTakeovers {
public:
  explicit ValueTakeovers(Graph &g) : g_(g) {}

  /// `fresh` takes every use and the type of `old` (nothing when old is
  /// nullptr: an omitted output), and old's name at finish().
  void take(Value *old, Value *fresh) {
    if (!old)
      return;
    fresh->copyTypeFrom(*old);
    g_.replaceAllUsesWith(old, fresh);
    pending_.emplace_back(fresh, old->name());
  }

  /// Renames every fresh value after the one it replaced; call it once
  /// their producers are removed.
  void finish() {
    for (auto &[value, name] : pending_)
      g_.renameValue(value, name);
    pending_.clear();
  }

private:
  Graph &g_;
  std::vector<std::pair<Value *, std::string>> pending_;
};

} // namespace mpc
