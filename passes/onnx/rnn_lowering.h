// ONNX's recurrent ops (LSTM, GRU, RNN), lowered at import by unrolling the
// sequence into the ops mpc trains: one MatMul for the input projection of
// every step at once, then per step a MatMul with the recurrent weights,
// the gates' Sigmoid and Tanh, and their products. The gradient is
// backpropagation through time by autodiff's own rules, and autocast runs
// the products in fp16 as PyTorch AMP runs cuDNN's RNNs.
//
// Per direction d (forward, reverse, or both for bidirectional), with
// xw = X W_d^T + Wb_d computed for all steps and split into steps:
//   LSTM (gates i, o, f, c): i = s(xw_i + h R_i^T + Rb_i + P_i * C),
//        f = s(... + P_f * C), c~ = tanh(...), C = f * C + i * c~,
//        o = s(... + P_o * C_new), h = o * tanh(C)
//   GRU (gates z, r, h): z, r = s(xw + h R^T + Rb), then with
//        linear_before_reset h~ = tanh(xw_h + r * (h R_h^T + Rb_h)), else
//        h~ = tanh(xw_h + (r * h) R_h^T + Rb_h); h = (1 - z) * h~ + z * h
//   RNN: h = tanh(xw + h R^T + Rb)
// Y stacks every step's h ([T, D, B, H], or [B, T, D, H] with layout 1);
// Y_h and Y_c are the last step's. Taken: layout 0 and 1, every direction,
// initial_h/initial_c, peepholes, sequence_lens that are constant and all
// the full length. Refused, naming the node: other activations, clip,
// input_forget, variable sequence lengths, and a sequence length or batch
// unknown at import.
#pragma once

#include "ir/graph.h"

#include <vector>

namespace mpc {

/// Replaces n, an LSTM, GRU or RNN node whose input types are known, in a
/// graph of a model that imports `opset`, by its unrolled lowering; returns
/// the nodes it inserted, in order.
std::vector<Node *> lowerRecurrent(Graph &g, Node *n, int64_t opset);

} // namespace mpc
