// Writes mpc's variadic ops (UnscaleGradients, ClipGradNorm, ExtremumGrad,
// AllReduce)
// in standard ONNX ops, for the --emit=step model that any ONNX runtime must
// execute.
//
// The fixed-arity mpc ops travel as model-local functions
// (passes/onnx/mpc_functions.cpp), but a FunctionProto has a fixed list of
// formal inputs, so the variadic ops are expanded inline instead, one group
// of nodes per op (per gradient for the first two). The expansion follows
// ir/mpc_ops.h and the CPU kernels (kernels/cpu/optimizer.cpp,
// kernels/cpu/elementwise.cpp):
//  - UnscaleGradients: inv = float(1 / double(scale)); g' = float(g) * inv,
//    the kernel's single fp32 multiply, so the unscaled gradients are the
//    same bits. found_inf: g * 0 is +-0 for a finite element and NaN for an
//    inf or a NaN, so the sum over all gradients is NaN exactly when some
//    element is not finite; x != x tests NaN (no IsNaN: the CPU backend,
//    which tests the expansion, runs Equal and Not).
//  - ClipGradNorm: per gradient the fp32 sum of squares, its square root
//    squared back (as the kernel forms the total from per-tensor norms),
//    total = sqrt(sum), coef = min(1, max_norm * (1 / (total + 1e-6))),
//    g' = g * coef in fp32, rounded once to g's type. Only the order of the
//    fp32 sums may differ from the kernel's.
//  - ExtremumGrad(dY, Y, X0..Xn-1) <index>: in the kernel's compute type
//    (fp64 when dY or Y is, else fp32), ties = Sum of Cast(Equal(Xk, Y)),
//    dX = Where(Equal(X_index, Y), dY / ties, 0), rounded once to dY's type.
//    Equal broadcasts each Xk to Y's shape (which is dY's) as the kernel
//    does, is false for a NaN as the kernel's == is, and the counts are
//    small integers, exact in any order, so the result is the kernel's bits.
//    Where the Xs are converted, Y is the forward Max/Min taken again over
//    the converted Xs (see extremumToCompare: a runtime may hold an X more
//    precisely than the Y it rounded). The gradients of one Max/Min share
//    its comparisons and tie count.
//  - AllReduce: an Identity per value. A runtime that executes the step
//    model is one process, a data-parallel world of one rank, where the
//    reduction of a value is the value.
//  - BatchNormalizationGrad(dY, X, scale, mean, var): not variadic, but its
//    function body (mpc_functions_layers.cpp) is the 3-input training form,
//    and a body cannot test whether an input was given. With the
//    statistics given (an inference-mode batch norm, --sync-batchnorm's
//    global statistics) inv_std = 1 / sqrt(var + epsilon), dX = dY * scale *
//    inv_std, dScale = sum(dY * (X - mean) * inv_std), dBias = sum(dY) over
//    every axis but 1, in fp32 (fp64 when an operand is), rounded once to
//    each output's type. Only the order of the sums may differ from the
//    kernel's.
// The mpc-run training model keeps the fused ops: they read each gradient
// once, the expansion several times.
#include "passes/onnx/expand_variadic.h"

#include "ir/builder.h"
#include "ir/mpc_ops.h"
#include "ir/value_takeover.h"
#include "support/diagnostics.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace mpc {
namespace {

/// The expansion reads its operands' dtypes: an untyped or non-float
/// operand is an error naming the node.
void requireFloating(const Node &n, const Value *x) {
  if (!isFloating(x->dtype))
    throw Error("node '" + n.name() + "' (mpc." + n.opType() + "): input '" +
                x->name() +
                "' is not a typed floating-point tensor (run "
                "infer-shapes first)");
}

/// x in fp32 (fp64 stays fp64: gradient checks unscale in double).
Value *asComputeType(Builder &b, const Node &n, Value *x) {
  requireFloating(n, x);
  if (x->dtype == DType::F32 || x->dtype == DType::F64)
    return x;
  return b.cast(x, DType::F32);
}

/// A sum over all of x's elements, as a rank-0 value (keepdims 0).
Value *sumAll(Builder &b, Value *x, const std::string &hint) {
  return b.op("ReduceSum", {x}, {{"keepdims", Attribute::ofInt(0)}}, hint);
}

void expandUnscaleGradients(Graph &g, Node &n, ValueTakeovers &r) {
  if (n.numInputs() < 2)
    throw Error("node '" + n.name() +
                "' (mpc.UnscaleGradients): expects a scale and at least one "
                "gradient");
  Builder b(g, &n);
  const std::string p = n.name();
  Value *scale64 = b.cast(n.input(0), DType::F64, p + "_scale_f64");
  Value *inv64 = b.op("Div", {b.scalar(DType::F64, 1.0, p + "_one"), scale64},
                      {}, p + "_inv_f64");
  Value *inv = b.cast(inv64, DType::F32, p + "_inv");
  std::vector<Value *> sums;
  for (size_t i = 1; i < n.numInputs(); ++i) {
    Value *grad = n.input(i);
    Value *gc = asComputeType(b, n, grad);
    Value *scaleOfGrad =
        gc->dtype == DType::F64 ? b.cast(inv, DType::F64, p + "_inv64") : inv;
    if (Value *out = n.output(i))
      r.take(out, b.op("Mul", {gc, scaleOfGrad}, {}, p + "_unscaled"));
    Value *zeros = b.op("Mul", {gc, b.scalar(gc->dtype, 0.0, p + "_zero")}, {},
                        p + "_times_zero");
    Value *s = sumAll(b, zeros, p + "_nonfinite_sum");
    sums.push_back(s->dtype == DType::F64 ? b.cast(s, DType::F32) : s);
  }
  if (Value *found = n.output(0)) {
    Value *total =
        sums.size() == 1 ? sums[0] : b.op("Sum", sums, {}, p + "_all_sums");
    Value *same = b.op("Equal", {total, total}, {}, p + "_is_number");
    r.take(found, b.op("Not", {same}, {}, p + "_found_inf"));
  }
}

void expandAllReduce(Graph &g, Node &n, ValueTakeovers &r) {
  Builder b(g, &n);
  const size_t first = n.attrInt("gated", 0) ? 1 : 0; // input 0: the gate
  for (size_t i = first; i < n.numInputs(); ++i)
    if (Value *out = n.output(i - first))
      r.take(out, b.op("Identity", {n.input(i)}, {}, n.name() + "_one_rank"));
}

void expandClipGradNorm(Graph &g, Node &n, ValueTakeovers &r) {
  size_t count = n.numInputs();
  if (count == 0)
    throw Error("node '" + n.name() +
                "' (mpc.ClipGradNorm): expects at least one gradient");
  Builder b(g, &n);
  const std::string p = n.name();
  std::vector<Value *> normSquares;
  std::vector<Value *> computed;
  for (size_t i = 0; i < count; ++i) {
    Value *gc = asComputeType(b, n, n.input(i));
    if (gc->dtype != DType::F32)
      throw Error("node '" + n.name() +
                  "' (mpc.ClipGradNorm): fp64 gradients have no expansion");
    computed.push_back(gc);
    Value *sq = sumAll(b, b.op("Mul", {gc, gc}, {}, p + "_sq"), p + "_sum_sq");
    Value *norm = b.op("Sqrt", {sq}, {}, p + "_norm");
    normSquares.push_back(b.op("Mul", {norm, norm}, {}, p + "_norm_sq"));
  }
  Value *sumSq = normSquares.size() == 1
                     ? normSquares[0]
                     : b.op("Sum", normSquares, {}, p + "_sum_norm_sq");
  Value *total = b.op("Sqrt", {sumSq}, {}, p + "_total_norm");
  Value *denominator = b.op(
      "Add", {total, b.scalar(DType::F32, double(float(1e-6)), p + "_eps")}, {},
      p + "_denominator");
  Value *reciprocal =
      b.op("Div", {b.scalar(DType::F32, 1.0, p + "_one"), denominator}, {},
           p + "_reciprocal");
  float maxNorm = n.attrFloat("max_norm", 1.0f);
  Value *coef = b.op(
      "Min",
      {b.op("Mul",
            {b.scalar(DType::F32, double(maxNorm), p + "_max"), reciprocal}, {},
            p + "_ratio"),
       b.scalar(DType::F32, 1.0, p + "_one_cap")},
      {}, p + "_coef");
  for (size_t i = 0; i < count; ++i) {
    Value *out = n.output(i);
    if (!out)
      continue;
    Value *scaled = b.op("Mul", {computed[i], coef}, {}, p + "_clipped");
    if (n.input(i)->dtype != DType::F32)
      scaled = b.cast(scaled, n.input(i)->dtype, p + "_clipped_cast");
    r.take(out, scaled);
  }
  if (Value *norm = n.output(count))
    r.take(norm, total);
}

/// Which inputs of a Max/Min equal its output, and how many do: the same
/// for every gradient of one forward node, so the n gradients of a Max of n
/// inputs share one set of n comparisons (keyed by compute type, Y and Xs).
struct TieCount {
  std::vector<Value *> equal; ///< Equal(Xk, Y), bool, Y's shape
  Value *ties = nullptr;      ///< their count, in the compute type
};
using TieCounts =
    std::map<std::pair<DType, std::vector<const Value *>>, TieCount>;

/// Whether a and b hold the same bits by construction: one value, or Casts
/// of one value to one type (shrink-saved casts a saved value's copy again
/// in the backward, so the gradient may read a twin of the forward's input).
bool sameBits(const Value *a, const Value *b) {
  if (a == b)
    return true;
  const Node *ca = a ? a->producer() : nullptr;
  const Node *cb = b ? b->producer() : nullptr;
  return ca && cb && ca->isOp("", "Cast") && cb->isOp("", "Cast") &&
         ca->input(0) == cb->input(0) && a->dtype == b->dtype &&
         ca->attributes().size() == 1 && cb->attributes().size() == 1;
}

/// What ExtremumGrad's Xs (xs: in the compute type) are compared with.
/// Y itself when the Xs and Y already have the compute type. Otherwise,
/// when Y is the Max or Min of exactly these Xs (as the gradient rule emits
/// it), that Max/Min taken again over the converted Xs: the same values on
/// an exact runtime (the extremum commutes with the widening Cast and both
/// kernels let NaN win), and on a runtime that holds an fp16 X in fp32
/// still one of the Xs. ONNX Runtime's CPU runs an fp16 MatMul in fp32 and
/// drops the Cast pair that would round its result, so its X, compared with
/// the rounded Y, would equal no input and the whole gradient would be lost.
/// Any other Y is compared converted.
Value *extremumToCompare(Builder &b, const Node &n,
                         const std::vector<Value *> &xs, DType compute) {
  Value *y = n.input(1);
  bool converted = y->dtype != compute;
  for (size_t k = 0; k < xs.size(); ++k)
    converted = converted || xs[k] != n.input(2 + k);
  if (!converted)
    return y;
  const Node *fwd = y->producer();
  bool sameOperands =
      fwd && (fwd->isOp("", "Max") || fwd->isOp("", "Min")) &&
      std::equal(fwd->inputs().begin(), fwd->inputs().end(),
                 n.inputs().begin() + 2, n.inputs().end(), sameBits);
  if (sameOperands)
    return b.op(fwd->opType(), xs, {}, n.name() + "_extremum");
  return b.cast(y, compute, n.name() + "_y");
}

void expandExtremumGrad(Graph &g, Node &n, TieCounts &tieCounts,
                        ValueTakeovers &r) {
  if (n.numInputs() < 3)
    throw Error("node '" + n.name() +
                "' (mpc.ExtremumGrad): expects dY, Y and at least one input");
  size_t count = n.numInputs() - 2;
  int64_t index = n.attrInt("index", 0);
  if (index < 0 || size_t(index) >= count)
    throw Error("node '" + n.name() + "' (mpc.ExtremumGrad): index " +
                std::to_string(index) + " is out of range for " +
                std::to_string(count) + " inputs");
  for (size_t i = 0; i < n.numInputs(); ++i)
    requireFloating(n, n.input(i));
  Value *dY = n.input(0);
  // The kernel's withCompute looks at dY and Y only and converts every X
  // to that type (C(x): an fp64 X is rounded when dY and Y are not fp64).
  DType compute = dY->dtype == DType::F64 || n.input(1)->dtype == DType::F64
                      ? DType::F64
                      : DType::F32;
  Builder b(g, &n);
  const std::string p = n.name();
  auto inCompute = [&](Value *x, const std::string &hint) {
    return x->dtype == compute ? x : b.cast(x, compute, p + hint);
  };
  std::vector<const Value *> operands(n.inputs().begin() + 1, n.inputs().end());
  TieCount &tc = tieCounts[{compute, operands}];
  if (!tc.ties) {
    // Inserted before the first of the sibling gradients, so it dominates
    // the others, which come later in the (topologically ordered) list.
    std::vector<Value *> xs;
    for (size_t k = 0; k < count; ++k)
      xs.push_back(inCompute(n.input(2 + k), "_x"));
    Value *y = extremumToCompare(b, n, xs, compute);
    std::vector<Value *> hits;
    for (size_t k = 0; k < count; ++k) {
      tc.equal.push_back(b.op("Equal", {xs[k], y}, {}, p + "_is_extremum"));
      hits.push_back(b.cast(tc.equal.back(), compute, p + "_hit"));
    }
    tc.ties = hits.size() == 1 ? hits[0] : b.op("Sum", hits, {}, p + "_ties");
  }
  // Where this input is not the extremum the quotient (dY / 0 where no
  // input ties) is not selected; where it is, ties >= 1.
  Value *share = b.op("Div", {inCompute(dY, "_dy"), tc.ties}, {}, p + "_share");
  Value *dX = b.op(
      "Where",
      {tc.equal[size_t(index)], share, b.scalar(compute, 0.0, p + "_zero")}, {},
      p + "_dx");
  if (dY->dtype != compute)
    dX = b.cast(dX, dY->dtype, p + "_dx_cast");
  if (Value *out = n.output(0))
    r.take(out, dX);
}

void expandBatchNormalizationGradWithStatistics(Graph &g, Node &n,
                                                int64_t opset,
                                                ValueTakeovers &r) {
  Builder b(g, &n);
  const std::string p = n.name();
  Value *x = n.input(1);
  DType compute = DType::F32;
  for (size_t i = 0; i < 5; ++i) {
    requireFloating(n, n.input(i));
    if (n.input(i)->dtype == DType::F64)
      compute = DType::F64;
  }
  if (!x->hasShape || x->rank() < 2)
    throw Error("node '" + n.name() +
                "' (mpc.BatchNormalizationGrad): X needs a known rank of at "
                "least 2 (run infer-shapes first)");
  auto widen = [&](Value *v) {
    return v->dtype == compute ? v : b.cast(v, compute, v->name() + "_wide");
  };
  // Per-channel [C] values as [1, C, 1, ...], broadcasting over X.
  std::vector<int64_t> kept(size_t(x->rank()), 1);
  kept[1] = -1;
  Value *keptShape = b.int64s(kept, p + "_channel_shape");
  auto perChannel = [&](Value *v, const std::string &hint) {
    return b.op("Reshape", {v, keptShape}, {}, p + hint);
  };
  auto sumPerChannel = [&](Value *v, const std::string &hint) {
    Builder::Attrs attrs = {{"keepdims", Attribute::ofInt(0)}};
    std::vector<Value *> inputs = {v};
    b.reduceSumAxes(opset, axesButChannel(x->rank()), inputs, attrs,
                    p + "_axes");
    return b.op("ReduceSum", inputs, attrs, p + hint);
  };
  auto narrow = [&](Value *v, Value *out) {
    return out->dtype == compute ? v : b.cast(v, out->dtype, p + "_narrow");
  };
  Value *dY = widen(n.input(0));
  Value *invStd =
      b.op("Div",
           {b.scalar(compute, 1.0, p + "_one"),
            b.op("Sqrt",
                 {b.op("Add",
                       {widen(n.input(4)),
                        b.scalar(compute, double(n.attrFloat("epsilon", 1e-5f)),
                                 p + "_epsilon")},
                       {}, p + "_var_eps")},
                 {}, p + "_std")},
           {}, p + "_inv_std");
  if (Value *out = n.output(0))
    r.take(out,
           narrow(b.op("Mul",
                       {dY, perChannel(b.op("Mul", {widen(n.input(2)), invStd},
                                            {}, p + "_gain"),
                                       "_gain_kept")},
                       {}, p + "_dx"),
                  out));
  if (Value *out = n.output(1)) {
    Value *xhat = b.op(
        "Mul",
        {b.op("Sub", {widen(x), perChannel(widen(n.input(3)), "_mean_kept")},
              {}, p + "_centered"),
         perChannel(invStd, "_inv_std_kept")},
        {}, p + "_xhat");
    r.take(out,
           narrow(sumPerChannel(b.op("Mul", {dY, xhat}, {}, p + "_dy_xhat"),
                                "_dscale"),
                  out));
  }
  if (Value *out = n.output(2))
    r.take(out, narrow(sumPerChannel(dY, "_dbias"), out));
}

} // namespace

size_t expandVariadicMpcOps(Graph &g, int64_t opset) {
  size_t expanded = 0;
  TieCounts tieCounts;
  for (Node *n : g.nodeList()) {
    if (n->domain() != kMpcDomain)
      continue;
    ValueTakeovers renames(g);
    if (n->opType() == "UnscaleGradients")
      expandUnscaleGradients(g, *n, renames);
    else if (n->opType() == "ClipGradNorm")
      expandClipGradNorm(g, *n, renames);
    else if (n->opType() == "AllReduce")
      expandAllReduce(g, *n, renames);
    else if (n->opType() == "ReduceScatter" || n->opType() == "RankShard" ||
             n->opType() == "AllGather" || n->opType() == "ShardedClipGradNorm")
      // A rank's chunks of a sharded step mean nothing to one process.
      throw Error("node '" + n->name() + "' (mpc." + n->opType() +
                  "): a step compiled with --shard-optimizer runs on its "
                  "ranks under mpc-run; --emit=step writes a step for one "
                  "process (compile it without --shard-optimizer)");
    else if (n->opType() == "ExtremumGrad")
      expandExtremumGrad(g, *n, tieCounts, renames);
    else if (n->opType() == "BatchNormalizationGrad" && n->numInputs() > 3)
      expandBatchNormalizationGradWithStatistics(g, *n, opset, renames);
    else
      continue;
    g.removeNode(n);
    renames.finish();
    ++expanded;
  }
  return expanded;
}

} // namespace mpc
