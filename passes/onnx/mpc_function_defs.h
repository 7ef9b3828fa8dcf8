// The table entries of mpc's function bodies (internal to passes/onnx).
//
// mpc_functions.cpp owns the table, its export and its inlining; the bodies
// of the layer gradients (convolution, pooling, normalisation, gather,
// activations) live in mpc_functions_layers.cpp and are added to the table
// through addLayerGradientFunctions. Both describe an entry the same way: the
// body's text, the kernels' attribute defaults, how omitted inputs are filled
// and, where the body needs attributes the node leaves implicit (auto_pad,
// a string flag), a completion that makes them explicit.
#pragma once

#include "ir/graph.h"

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace mpc {

/// How an omitted optional input is completed so that the fixed-arity body
/// computes what the kernel computes without it.
enum class Fill {
  FalseFlag,      ///< found_inf: a Constant false (never skip).
  SameAs,         ///< another input of the node (one the body then ignores).
  AxesFromAttr,   ///< ReduceGrad: the `axes` attribute as an int64 tensor.
  UnitWeights,    ///< loss gradients: ones [C] in the scores' dtype.
  ScalarFromAttr, ///< a scalar: the attribute `attr` if set, else `value`.
  /// Slice's axes / steps: 0..n-1 / n ones, n the (static) length of input
  /// `source` (starts), in its dtype.
  RangeOfLength,
  OnesOfLength,
};

struct InputFill {
  size_t index;
  Fill fill;
  /// SameAs: the input to repeat; UnitWeights: scores; *OfLength: the
  /// input whose length and dtype the fill takes.
  size_t source = 0;
  /// ScalarFromAttr: the attribute the opset-6 forms carry the value in
  /// (nullptr: none, always the default), the kernel's default, and the
  /// input whose dtype the scalar takes (kNoSource: fp32).
  const char *attr = nullptr;
  double value = 0;
  static constexpr size_t kNoSource = size_t(-1);
};

/// What a completion sees of an mpc node: its attributes (defaults already
/// applied), to check and complete, and the static dims of its values.
struct NodeView {
  /// "mpc.Op 'name'", for errors.
  std::string what;
  std::map<std::string, Attribute> attrs;
  /// Dims of input (output = false) or output `index`: -1 where unknown,
  /// empty when the rank is unknown or the value is absent.
  std::function<std::vector<int64_t>(bool output, size_t index)> dims;
};

struct FunctionDef {
  FunctionDef() = default;
  FunctionDef(std::string text,
              std::vector<std::pair<std::string, Attribute>> defaults,
              std::vector<InputFill> fills,
              std::function<void(NodeView &)> complete = {})
      : text(std::move(text)), defaults(std::move(defaults)),
        fills(std::move(fills)), complete(std::move(complete)) {}

  std::string text;
  /// The kernels' defaults of the attributes the body reads.
  std::vector<std::pair<std::string, Attribute>> defaults;
  std::vector<InputFill> fills;
  /// Makes implicit attributes explicit for the body; throws Error (naming
  /// the node and why) when the node cannot be written with this body.
  std::function<void(NodeView &)> complete;
  /// Oldest default-domain opset the body's ops need (ScatterElements'
  /// reduction is opset 16).
  int64_t minOpset = 15;
  /// Why a node that sets inputs beyond the body's formal inputs has no
  /// body (empty: the body takes every input the op has).
  std::string extraInputs;
};

/// Returns `s` with every `from` replaced by `to`.
std::string replaceAll(std::string s, const std::string &from,
                       const std::string &to);

/// The text every body starts with (domain and opset import).
const char *mpcFunctionHeader();

/// Adds the bodies of the layer gradients (mpc_functions_layers.cpp).
void addLayerGradientFunctions(std::map<std::string, FunctionDef> &table);

} // namespace mpc
