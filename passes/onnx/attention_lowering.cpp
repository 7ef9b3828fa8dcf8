// Attention lowered to MatMul/Softmax arithmetic (attention_lowering.h).
#include "passes/onnx/attention_lowering.h"

#include "passes/onnx/lowering_builder.h"
#include "support/diagnostics.h"

#include <cmath>
#include <limits>

namespace mpc {
namespace {

/// A dim that must be known at compile time.
int64_t knownDim(const Node &n, const Value &v, size_t axis, const char *what) {
  if (!v.hasShape || axis >= v.dims.size() || !v.dims[axis].isKnown())
    errorAt(n) << "needs " << what << " (axis " << axis << " of '" << v.name()
               << "') at compile time";
  return v.dims[axis].value;
}

/// [B, S, heads * head] -> [B, heads, S, head].
Value *splitHeads(LoweringBuilder &lb, Value *x, int64_t heads, int64_t head,
                  const std::string &what) {
  Value *split = lb.op(
      "Reshape", {x, lb.int64s({0, 0, heads, head}, what + "_heads_shape")},
      what + "_heads");
  return lb.op("Transpose", {split}, what + "_by_head",
               {{"perm", Attribute::ofInts({0, 2, 1, 3})}});
}

/// K or V of [B, heads, seq, head] with each head repeated `reps` times in
/// place, so that kv head h serves query heads h * reps .. h * reps + reps - 1.
Value *repeatHeads(LoweringBuilder &lb, Value *x, int64_t heads, int64_t reps,
                   int64_t seq, int64_t head, const std::string &what) {
  Value *unit = lb.op("Unsqueeze", {x, lb.int64s({2}, what + "_unit_axis")},
                      what + "_unit");
  Value *copies =
      lb.op("Expand", {unit, lb.int64s({1, 1, reps, 1, 1}, what + "_reps")},
            what + "_copies");
  return lb.op(
      "Reshape",
      {copies, lb.int64s({0, heads * reps, seq, head}, what + "_heads_shape")},
      what + "_repeated");
}

} // namespace

std::vector<Node *> lowerAttention(Graph &g, Node *n, int64_t) {
  if (n->numInputs() < 3 || !n->input(0) || !n->input(1) || !n->input(2) ||
      n->numOutputs() < 1 || !n->output(0))
    errorAt(*n) << "Attention takes Q, K and V and has an output Y";
  for (size_t i = 4; i < n->numInputs(); ++i)
    if (n->input(i))
      errorAt(*n) << "input " << i
                  << " (a key/value cache or sequence lengths) is not "
                     "supported: mpc trains without a cache";
  if (n->numOutputs() > 3 && n->output(3) &&
      (!n->output(3)->uses().empty() || n->output(3)->isGraphOutput()))
    errorAt(*n) << "output qk_matmul_output is not supported";
  if (n->attrInt("qk_matmul_output_mode", 0) != 0)
    errorAt(*n) << "qk_matmul_output_mode is not supported";
  Value *q = n->input(0), *k = n->input(1), *v = n->input(2);
  Value *mask = n->numInputs() > 3 ? n->input(3) : nullptr;
  DType t = q->dtype;
  if (!isFloating(t))
    errorAt(*n) << "takes floating-point Q, K and V";
  if (!q->hasShape || !k->hasShape || !v->hasShape || q->rank() != k->rank() ||
      q->rank() != v->rank() || (q->rank() != 3 && q->rank() != 4))
    errorAt(*n) << "takes Q, K and V of one rank, 3 or 4";

  // The geometry, from the inputs as given (the nodes made below are typed
  // only after the lowering).
  bool threeD = q->rank() == 3;
  int64_t qHeads, kvHeads, head, vHead;
  int64_t qLen = knownDim(*n, *q, threeD ? 1 : 2, "the query length");
  int64_t kvLen = knownDim(*n, *k, threeD ? 1 : 2, "the key/value length");
  if (threeD) {
    qHeads = n->attrInt("q_num_heads", 0);
    kvHeads = n->attrInt("kv_num_heads", 0);
    if (qHeads <= 0 || kvHeads <= 0)
      errorAt(*n) << "3-D Q, K and V need q_num_heads and kv_num_heads";
    int64_t qHidden = knownDim(*n, *q, 2, "the query hidden size");
    int64_t kHidden = knownDim(*n, *k, 2, "the key hidden size");
    int64_t vHidden = knownDim(*n, *v, 2, "the value hidden size");
    if (qHidden % qHeads || kHidden % kvHeads || vHidden % kvHeads)
      errorAt(*n) << "hidden sizes " << qHidden << ", " << kHidden << ", "
                  << vHidden << " are not multiples of " << qHeads << ", "
                  << kvHeads << ", " << kvHeads << " heads";
    head = qHidden / qHeads;
    vHead = vHidden / kvHeads;
    if (kHidden / kvHeads != head)
      errorAt(*n) << "Q's and K's head sizes differ";
  } else {
    qHeads = knownDim(*n, *q, 1, "the query heads");
    kvHeads = knownDim(*n, *k, 1, "the key/value heads");
    head = knownDim(*n, *q, 3, "the head size");
    vHead = knownDim(*n, *v, 3, "the value head size");
  }

  LoweringBuilder lb(g, n);
  if (threeD) {
    q = splitHeads(lb, q, qHeads, head, "q");
    k = splitHeads(lb, k, kvHeads, head, "k");
    v = splitHeads(lb, v, kvHeads, vHead, "v");
  }
  // The present_key/present_value outputs: K and V without a cache.
  Value *present[2] = {k, v};

  double scale = n->hasAttr("scale") ? n->attrFloat("scale", 1.0f)
                                     : 1.0 / std::sqrt(double(head));
  Value *root = lb.scalar(t, std::sqrt(scale), "scale_root");
  Value *qs = lb.op("Mul", {q, root}, "q_scaled");
  Value *ks = lb.op("Mul", {k, root}, "k_scaled");
  if (qHeads != kvHeads) {
    if (kvHeads <= 0 || qHeads % kvHeads)
      errorAt(*n) << qHeads << " query heads are not a multiple of " << kvHeads
                  << " key/value heads";
    int64_t reps = qHeads / kvHeads;
    ks = repeatHeads(lb, ks, kvHeads, reps, kvLen, head, "k");
    v = repeatHeads(lb, v, kvHeads, reps, kvLen, vHead, "v");
  }
  Value *kt = lb.op("Transpose", {ks}, "k_transposed",
                    {{"perm", Attribute::ofInts({0, 1, 3, 2})}});
  Value *scores = lb.op("MatMul", {qs, kt}, "scores");
  float softcap = n->attrFloat("softcap", 0.0f);
  if (softcap > 0) {
    Value *cap = lb.scalar(t, softcap, "softcap");
    scores = lb.op(
        "Mul",
        {lb.op("Tanh", {lb.op("Div", {scores, cap}, "capped_in")}, "capped"),
         cap},
        "scores_capped");
  }

  // The additive bias: the mask's (a bool mask as 0 / -inf), plus the causal
  // mask's constant 0 / -inf.
  Value *bias = nullptr;
  const double inf = std::numeric_limits<double>::infinity();
  if (mask) {
    if (!mask->hasShape || mask->rank() < 1 || !mask->dims.back().isKnown() ||
        mask->dims.back().value != kvLen)
      errorAt(*n) << "takes an attn_mask as long as the keys (" << kvLen
                  << ") in its last dim";
    if (mask->dtype == DType::Bool)
      bias = lb.op(
          "Where",
          {mask, lb.scalar(t, 0.0, "attend"), lb.scalar(t, -inf, "masked")},
          "mask_bias");
    else
      bias = mask;
  }
  if (n->attrInt("is_causal", 0)) {
    Tensor causal(t, {qLen, kvLen});
    for (int64_t i = 0; i < qLen; ++i)
      for (int64_t j = 0; j < kvLen; ++j)
        causal.setFromDouble(i * kvLen + j, j <= i ? 0.0 : -inf);
    Value *c = lb.constant(std::move(causal), "causal_bias");
    bias = bias ? lb.op("Add", {bias, c}, "bias") : c;
  }
  if (bias)
    scores = lb.op("Add", {scores, bias}, "scores_biased");
  Value *p = lb.op("Softmax", {scores}, "probabilities",
                   {{"axis", Attribute::ofInt(-1)}});
  if (mask) {
    // Rows no key may be attended: 0, not Softmax's NaN (the reference's
    // guard, decided on the bias).
    Value *rowMax = lb.op("ReduceMax", {bias, lb.int64s({-1}, "row_axis")},
                          "bias_row_max", {{"keepdims", Attribute::ofInt(1)}});
    Value *none = lb.op("IsInf", {rowMax}, "row_masked",
                        {{"detect_positive", Attribute::ofInt(0)}});
    p = lb.op("Where", {none, lb.scalar(t, 0.0, "zero"), p},
              "probabilities_guarded");
  }
  Value *y = lb.op("MatMul", {p, v}, "attended");
  if (threeD)
    y = lb.op("Reshape",
              {lb.op("Transpose", {y}, "by_position",
                     {{"perm", Attribute::ofInts({0, 2, 1, 3})}}),
               lb.int64s({0, 0, -1}, "merged_shape")},
              "merged");
  std::vector<Value *> outs = {y};
  for (size_t i = 1; i < 3 && i < n->numOutputs(); ++i)
    outs.push_back(n->output(i)
                       ? lb.op("Identity", {present[i - 1]},
                               i == 1 ? "present_key" : "present_value")
                       : nullptr);
  return lb.replaceOutputsWith(outs);
}

} // namespace mpc
