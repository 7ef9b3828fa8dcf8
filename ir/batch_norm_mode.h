// When a BatchNormalization node normalises with batch statistics.
//
// From opset 14 the attribute training_mode says so; BatchNormalization-9
// (opsets 9-13) has no such attribute and is in training mode exactly when
// it produces its running-statistics outputs. Shape inference, autodiff and
// the CPU kernel (which cannot see the opset) all decide with this one test,
// which is right for every opset because shape inference rejects
// running-statistics outputs on a node with training_mode = 0.
#pragma once

#include "ir/graph.h"

namespace mpc {

/// True when BatchNormalization node n uses batch statistics (and updates
/// its running statistics) rather than its mean and var inputs.
inline bool isBatchNormTraining(const Node &n) {
  if (n.attrInt("training_mode", 0) == 1)
    return true;
  for (size_t i = 1; i < n.numOutputs(); ++i)
    if (n.output(i))
      return true;
  return false;
}

} // namespace mpc
