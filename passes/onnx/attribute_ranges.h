// The ranges of the integer attributes that size or index things (Conv and
// pool pads, strides, dilations, kernel_shape, group, axis, ...), checked
// once as the importer reads each node, so that a value no model could mean
// (a pad of 2^40, an axis of 2^62) is one line naming the node and the
// attribute instead of an overflow in shape arithmetic or an allocation of
// that size later.
#pragma once

#include <string_view>

namespace mpc {

class Node;
struct Attribute;

/// Throws "node 'X' (Conv): attribute pads value V out of range [lo, hi]"
/// when `a`, attribute `name` of ONNX-domain node `n`, is one of the
/// checked attributes and holds a value outside its range; anything else
/// passes (the ops' own rules check the values inside the range).
void checkAttributeRange(const Node &n, std::string_view name,
                         const Attribute &a);

} // namespace mpc
