// Values an import-time lowering needs before fold-constants has run: a
// Resize's scales or sizes arrive as Concat(Constant, Constant), or as
// Concat(Slice(Shape(x)), Cast(Constant)), which only fold-constants would
// otherwise turn into constants.
//
// importTimeValue(v) is v's value when it is fixed for the model's life: a
// Constant node's, an initializer's that no training rewrites (integer
// initializers and non-state ones), Shape of a value whose dims the import
// has inferred, and the shape-arithmetic ops (Concat, Slice, Gather, Cast,
// Unsqueeze, Squeeze, Add, Sub, Mul, Div, Mod, Reshape, Transpose, small
// ConstantOfShape) over such values, run with their
// CPU kernels. nullptr when v depends on data or on state.
#pragma once

#include "ir/graph.h"

namespace mpc {

TensorPtr importTimeValue(const Value &v, int64_t opset);

/// A lowering's parameter input (Resize's scales, Pad's pads): an
/// initializer taken as it is, state or not (no gradient reaches these
/// inputs, so nothing trains them), else importTimeValue; nullptr for an
/// omitted input or one computed from data.
TensorPtr fixedAtImport(const Value *v, int64_t opset);

} // namespace mpc
