// Checked geometry that the CPU kernels and the CUDA runners both read off a
// node: Transpose's permutation, LayerNormalization's view of X, Gelu's
// approximation, Split's sizes, a batch norm's channels, where a
// GatherElements reads, which rows GatherND's and ScatterND's index tuples
// name, the operands of Max/Min/Sum and ExtremumGrad,
// Range's sequence, and a random op's dtype and key. One definition, so both
// backends accept the same nodes with the same messages.
#pragma once

#include "ir/graph.h"
#include "ir/tensor.h"
#include "kernels/common/scatter_math.h"
#include "kernels/kernel_context.h"

#include <cstdint>
#include <vector>

namespace mpc {
namespace cpu {

/// Transpose's `perm` for an input of rank `rank` (reversed axes when the
/// attribute is absent), normalised; an error on the node for a wrong length
/// or a repeated axis.
std::vector<int64_t> transposePerm(const Node &node, size_t rank);

/// The layer-norm geometry: X viewed as [outer, n] around `axis`.
struct LayerNormShape {
  int64_t axis = 0, outer = 1, n = 1;
  std::vector<int64_t> norm;  ///< X.dims[axis:]
  std::vector<int64_t> stats; ///< X.dims with 1s from axis on
};

/// The geometry of `node` (a LayerNormalization or its gradient) for X.
LayerNormShape layerNormShape(const Node &node, const Tensor &x);

/// Requires `t` (scale or bias of a layer norm) to broadcast onto the
/// normalised shape without adding axes of its own.
void requireBroadcastsTo(const Node &node, const Tensor &t,
                         const std::vector<int64_t> &norm, const char *what);

/// Whether Gelu (or its gradient) uses the tanh approximation: its
/// `approximate` attribute, "none" or "tanh"; anything else is an error.
/// mpc.GeluTanh is always the tanh form, mpc.Gelu never.
bool geluTanh(const Node &node);

/// The sizes Split cuts an axis of length `len` into, for `outs` outputs:
/// `given` (the opset-13 'split' input, nullptr when omitted) or the older
/// attribute, else num_outputs pieces of ceil(len / num_outputs) with a
/// smaller last one (opset 18), else equal pieces; an error on the node when
/// they do not fit.
std::vector<int64_t> splitSizes(const Node &node, const Tensor *given,
                                size_t outs, int64_t len);

/// X of a batch norm as [N, C, inner]: channel c of image n is the inner
/// elements at (n * C + c) * inner.
struct ChannelLayout {
  int64_t n = 0, c = 0, inner = 1;
  int64_t count() const { return n * inner; }
};

/// X's layout; an error on the node below rank 2.
ChannelLayout channelLayout(const Node &node, const Tensor &x);

/// Where GatherElements(data, indices) <axis> (and its gradient) reads:
/// index position i (row-major over the indices' dims) names the data
/// element at offset walk(i) + index * axisStride, where walk(i) is i's
/// offset over `walkStrides` (data's row-major strides with 0 on the axis,
/// whose coordinate the index supplies).
struct GatherElementsShape {
  int64_t axis = 0;
  int64_t len = 0;        ///< data's length along the axis
  int64_t axisStride = 0; ///< data's stride along the axis
  std::vector<int64_t> walkStrides;
};

/// Checks the indices' dtype (int64 or int32), rank and dims against data
/// of dims `data`; reads no index.
GatherElementsShape gatherElementsShape(const Node &node,
                                        const std::vector<int64_t> &data,
                                        const Tensor &idx);

/// The data offset of every index position; an index outside [-len, len)
/// is an error on the node (negative ones count from the end).
std::vector<int64_t> gatherElementsOffsets(const Node &node,
                                           const GatherElementsShape &shape,
                                           const Tensor &idx);

/// GatherND and ScatterND: data seen as rows of `slice` elements (the dims
/// after the batch dims and the k indexed ones), each index tuple naming
/// one row (within its batch).
struct IndexTupleRows {
  int64_t slice = 1;            ///< elements of a row: data.dims[b + k:]
  int64_t numRows = 1;          ///< rows of data: data.dims[:b + k]
  std::vector<int64_t> rows;    ///< the row of every tuple, in order
  std::vector<int64_t> outDims; ///< indices.dims[:-1] + data.dims[b + k:]
};

/// Checks int64 indices against data of dims `data` and `batchDims`
/// (GatherND's batch_dims; 0 for ScatterND) and resolves every tuple;
/// an error on the node for a bad geometry or an index out of range
/// (negative ones count from the end of their axis).
IndexTupleRows indexTupleRows(const Node &node,
                              const std::vector<int64_t> &data,
                              const Tensor &idx, int64_t batchDims);

/// ScatterND's and ScatterElements' `reduction` attribute; an error on the
/// node for a name other than none, add, mul, max, min.
ScatterReduction scatterReduction(const Node &node);

/// The shape every input of a variadic op (Max, Min, Sum) broadcasts to;
/// an error on the node for no inputs, a missing one or mixed dtypes.
std::vector<int64_t> variadicShape(const KernelContext &ctx);

/// ExtremumGrad(dY, Y, X0..Xn-1) <index>: checks that dY and Y have one
/// shape and every X broadcasts to it; returns `index`, an error on the
/// node unless it names one of the Xs.
int64_t extremumGradIndex(const KernelContext &ctx);

/// Range(start, limit, delta) read off its three scalar inputs (one dtype):
/// ceil((limit - start) / delta) elements, none when that is negative
/// (ONNX computes the count in the input type; doing it in double is exact
/// for every count that fits in memory). Element i is start + i * delta,
/// in int64 for integer dtypes, else in double, then stored in the dtype.
struct RangeSpec {
  DType dtype = DType::Undefined;
  int64_t count = 0;
  bool integer = false;
  double start = 0, delta = 0;        ///< floating dtypes
  int64_t startInt = 0, deltaInt = 0; ///< integer dtypes
};

/// The sequence; an error on the node for non-scalars, mixed dtypes, a zero
/// delta or an absurd count.
RangeSpec rangeSpec(const Node &node, const Tensor &start, const Tensor &limit,
                    const Tensor &delta);

/// Trilu's diagonal offset k: its optional input 1, an int64 scalar (0 when
/// omitted); an error on the node otherwise.
int64_t triluDiagonal(const Node &node, const Tensor *k);

/// A random op's output dtype: its `dtype` attribute, else `fallback` (the
/// input's, or float for RandomUniform/Normal); an error on the node for a
/// dtype mpc does not know.
DType randomOutputDType(const Node &node, DType fallback);

/// A random op's key (kernels/common/random_math.h): its name and its float
/// `seed` attribute when it has one.
uint64_t randomNodeKey(const Node &node);

} // namespace cpu
} // namespace mpc
