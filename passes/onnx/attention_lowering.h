// ONNX's Attention (opset 23), lowered at import to the ops mpc trains.
//
// torch's dynamo exporter writes scaled_dot_product_attention (and so
// nn.MultiheadAttention and transformers' default attention) as one
// Attention node at opset 23. It becomes the arithmetic of ONNX's
// reference:
//
//   Qs = Q * sqrt(scale), Ks = K * sqrt(scale)   (scale: 1/sqrt(head) unless
//   given) K, V heads repeated for grouped-query attention (kv head h serves
//   query
//     heads h * r .. h * r + r - 1: Unsqueeze, Expand, Reshape)
//   S  = MatMul(Qs, Transpose(Ks))
//   S  = Tanh(S / softcap) * softcap                      (softcap > 0)
//   S  = S + bias      (attn_mask: added, or a bool mask as 0 / -inf;
//   is_causal:
//                       a constant 0 / -inf lower-triangular mask, top-left)
//   P  = Softmax(S), rows whose bias is -inf everywhere set to 0
//   Y  = MatMul(P, V)
//
// with 3-D Q/K/V (q_num_heads, kv_num_heads) split into heads first and Y
// merged back. This is the training subset: no past_key/past_value (a KV
// cache is inference), no qk_matmul_output, the mask as long as the keys;
// the present_key/present_value outputs, which are K and V without a cache,
// are given them. What is outside it is a one-line error naming the node.
// The sequence lengths and head sizes must be known at compile time for
// the causal mask and the head reshapes.
#pragma once

#include "ir/graph.h"

#include <vector>

namespace mpc {

/// Replaces n, an Attention node whose input types are known, by its
/// lowering; returns the nodes it inserted, in order.
std::vector<Node *> lowerAttention(Graph &g, Node *n, int64_t opset);

} // namespace mpc
