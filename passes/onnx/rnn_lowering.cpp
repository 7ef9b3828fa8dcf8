// LSTM, GRU and RNN unrolled into the ops mpc trains (rnn_lowering.h).
#include "passes/onnx/rnn_lowering.h"

#include "passes/onnx/import_constants.h"
#include "passes/onnx/lowering_builder.h"
#include "support/diagnostics.h"

#include <string>

namespace mpc {
namespace {

enum class Cell { Lstm, Gru, Rnn };

class Unroll {
public:
  Unroll(Graph &g, Node *n, int64_t opset) : n_(*n), b_(g, n), opset_(opset) {}

  std::vector<Node *> run() {
    const std::string &op = n_.opType();
    cell_ = op == "LSTM" ? Cell::Lstm : op == "GRU" ? Cell::Gru : Cell::Rnn;
    gates_ = cell_ == Cell::Lstm ? 4 : cell_ == Cell::Gru ? 3 : 1;
    checkAttributes();
    Value *x = input(0, "X");
    t_ = x->dtype;
    if (t_ == DType::Undefined || !isFloating(t_))
      errorAt(n_) << "takes a floating-point X";
    if (!x->hasShape || x->rank() != 3 || !x->dims[0].isKnown() ||
        !x->dims[1].isKnown())
      errorAt(n_) << "needs X's sequence length and batch at import (X is "
                  << x->typeString() << ")";
    layout_ = n_.attrInt("layout", 0);
    if (layout_ != 0 && layout_ != 1)
      errorAt(n_) << "layout must be 0 or 1, got " << layout_;
    steps_ = x->dims[layout_ ? 1 : 0].value;
    batch_ = x->dims[layout_ ? 0 : 1].value;
    hidden_ = n_.attrInt("hidden_size", 0);
    // Bounds no trained RNN reaches, which keep the zero initial states and
    // the shapes below from overflowing on a malformed model.
    if (hidden_ <= 0 || hidden_ > (int64_t(1) << 20))
      errorAt(n_) << "needs a hidden_size between 1 and 2^20, got " << hidden_;
    if (batch_ <= 0 || batch_ > (int64_t(1) << 20) ||
        batch_ * hidden_ > (int64_t(1) << 30))
      errorAt(n_) << "batch " << batch_ << " x hidden_size " << hidden_
                  << " is out of range";
    if (steps_ <= 0 || steps_ > 4096)
      errorAt(n_) << "unrolls sequences of 1 to 4096 steps, got " << steps_;
    checkSequenceLengths();
    if (layout_)
      x = b_.op("Transpose", {x}, "time_major",
                {{"perm", Attribute::ofInts({1, 0, 2})}});

    std::string dir = n_.attrString("direction", "forward");
    std::vector<bool> reverse;
    if (dir == "forward")
      reverse = {false};
    else if (dir == "reverse")
      reverse = {true};
    else if (dir == "bidirectional")
      reverse = {false, true};
    else
      errorAt(n_) << "direction '" << dir << "' is not forward, reverse or "
                  << "bidirectional";

    std::vector<Value *> ys, hs, cs;
    for (size_t d = 0; d < reverse.size(); ++d) {
      Direction out = direction(x, int64_t(d), reverse[d]);
      ys.push_back(out.y);
      hs.push_back(out.h);
      cs.push_back(out.c);
    }
    int64_t dirs = int64_t(reverse.size());
    Value *y = concat(ys, 1, "y");    // [T, D, B, H]
    Value *yh = concat(hs, 0, "y_h"); // [D, B, H]
    Value *yc = cell_ == Cell::Lstm ? concat(cs, 0, "y_c") : nullptr;
    (void)dirs;
    if (layout_) {
      y = b_.op("Transpose", {y}, "y_batch_major",
                {{"perm", Attribute::ofInts({2, 0, 1, 3})}});
      yh = b_.op("Transpose", {yh}, "y_h_batch_major",
                 {{"perm", Attribute::ofInts({1, 0, 2})}});
      if (yc)
        yc = b_.op("Transpose", {yc}, "y_c_batch_major",
                   {{"perm", Attribute::ofInts({1, 0, 2})}});
    }
    return b_.replaceOutputsWith({y, yh, yc});
  }

private:
  struct Direction {
    Value *y, *h, *c; ///< [T, 1, B, H], [1, B, H], [1, B, H] (c: LSTM)
  };

  Value *input(size_t i, const char *what) {
    Value *v = i < n_.numInputs() ? n_.input(i) : nullptr;
    if (!v)
      errorAt(n_) << "needs input " << what;
    return v;
  }
  Value *optional(size_t i) {
    return i < n_.numInputs() ? n_.input(i) : nullptr;
  }

  void checkAttributes() {
    if (n_.attr("clip"))
      errorAt(n_) << "clip is not supported";
    if (n_.attr("activations") || n_.attr("activation_alpha") ||
        n_.attr("activation_beta")) {
      // The defaults, spelled out, are fine.
      const Attribute *a = n_.attr("activations");
      std::vector<std::string> want =
          cell_ == Cell::Lstm
              ? std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"}
          : cell_ == Cell::Gru ? std::vector<std::string>{"Sigmoid", "Tanh"}
                               : std::vector<std::string>{"Tanh"};
      bool defaults =
          a && !n_.attr("activation_alpha") && !n_.attr("activation_beta");
      if (defaults)
        for (size_t i = 0; i < a->strings.size(); ++i)
          defaults &= a->strings[i] == want[i % want.size()];
      if (!defaults)
        errorAt(n_) << "activations other than the defaults are not supported";
    }
    if (n_.attrInt("input_forget", 0) != 0)
      errorAt(n_) << "input_forget is not supported";
  }

  void checkSequenceLengths() {
    Value *lens = optional(4);
    if (!lens)
      return;
    TensorPtr t = importTimeValue(*lens, opset_);
    bool full = t != nullptr;
    for (int64_t i = 0; full && i < t->numel(); ++i)
      full = int64_t(t->getAsDouble(i)) == steps_;
    if (!full)
      errorAt(n_) << "sequence_lens must be constant and all " << steps_
                  << " (variable-length sequences are not supported)";
  }

  std::string tag(const std::string &what) {
    return what + "_" + std::to_string(step_++);
  }

  Value *reshape(Value *v, std::vector<int64_t> dims, const std::string &what) {
    std::string name = tag(what);
    return b_.op("Reshape", {v, b_.int64s(dims, name + "_shape")}, name);
  }

  /// The d-th slice of a [D, ...] input (Gather drops the axis).
  Value *ofDirection(Value *v, int64_t d, const std::string &what) {
    std::string name = tag(what);
    return b_.op("Gather",
                 {v, b_.constant(Tensor::fromInt64s({}, {d}), name + "_index")},
                 name, {{"axis", Attribute::ofInt(0)}});
  }

  /// v split along `axis` into `parts` equal pieces.
  std::vector<Value *> split(Value *v, int64_t axis, int64_t parts,
                             int64_t size, const std::string &what) {
    std::string name = tag(what);
    std::vector<int64_t> sizes(size_t(parts), size);
    std::vector<Value *> ins = {v};
    Builder::Attrs attrs = {{"axis", Attribute::ofInt(axis)}};
    if (opset_ >= 13)
      ins.push_back(b_.int64s(sizes, name + "_sizes"));
    else
      attrs.emplace_back("split", Attribute::ofInts(sizes));
    Node *s = b_.node("Split", ins, size_t(parts), name, attrs);
    std::vector<Value *> outs;
    for (size_t i = 0; i < s->numOutputs(); ++i)
      outs.push_back(s->output(i));
    return outs;
  }

  Value *concat(const std::vector<Value *> &vs, int64_t axis,
                const std::string &what) {
    if (vs.size() == 1)
      return vs[0];
    return b_.op("Concat", vs, tag(what), {{"axis", Attribute::ofInt(axis)}});
  }

  Value *op(const char *type, std::vector<Value *> ins, const std::string &w) {
    return b_.op(type, ins, tag(w));
  }

  Value *zeros(const std::string &what) {
    return b_.constant(Tensor(t_, {batch_, hidden_}), tag(what));
  }

  Direction direction(Value *x, int64_t d, bool reverse) {
    const int64_t g = gates_, h = hidden_;
    Value *w = ofDirection(input(1, "W"), d, "w");   // [G*H, I]
    Value *r = ofDirection(input(2, "R"), d, "r");   // [G*H, H]
    Value *wt = b_.op("Transpose", {w}, tag("w_t")); // [I, G*H]
    Value *xw = op("MatMul", {x, wt}, "xw");         // [T, B, G*H]
    Value *bias = optional(3) ? ofDirection(optional(3), d, "b") : nullptr;
    Value *rb = nullptr;
    if (bias) {
      std::vector<Value *> halves = split(bias, 0, 2, g * h, "b_halves");
      xw = op("Add", {xw, halves[0]}, "xw_biased");
      rb = halves[1];
    }
    std::vector<Value *> xs = split(xw, 0, steps_, 1, "steps");

    Value *hPrev =
        optional(5) ? ofDirection(optional(5), d, "h0") : zeros("h0");
    Value *cPrev = nullptr;
    if (cell_ == Cell::Lstm)
      cPrev = optional(6) ? ofDirection(optional(6), d, "c0") : zeros("c0");
    std::vector<Value *> peep;
    if (cell_ == Cell::Lstm && optional(7))
      peep = split(ofDirection(optional(7), d, "p"), 0, 3, h, "p_parts");

    // GRU without linear_before_reset multiplies r * h by R_h alone.
    bool lbr = n_.attrInt("linear_before_reset", 0) != 0;
    Value *rzrT = nullptr, *rhT = nullptr, *rbzr = nullptr, *rbh = nullptr;
    Value *rt = b_.op("Transpose", {r}, tag("r_t")); // [H, G*H]
    if (cell_ == Cell::Gru && !lbr) {
      std::vector<Value *> cols = split(rt, 1, 3, h, "r_t_gates");
      rzrT = concat({cols[0], cols[1]}, 1, "r_zr_t");
      rhT = cols[2];
      if (rb) {
        std::vector<Value *> rbs = split(rb, 0, 3, h, "rb_gates");
        rbzr = concat({rbs[0], rbs[1]}, 0, "rb_zr");
        rbh = rbs[2];
      }
    }

    std::vector<Value *> hs(static_cast<size_t>(steps_), nullptr);
    for (int64_t s = 0; s < steps_; ++s) {
      int64_t t = reverse ? steps_ - 1 - s : s;
      Value *xt = reshape(xs[size_t(t)], {batch_, g * h}, "x_t"); // [B, G*H]
      if (cell_ == Cell::Lstm) {
        Value *gsum = op("Add", {xt, op("MatMul", {hPrev, rt}, "hr")}, "gates");
        if (rb)
          gsum = op("Add", {gsum, rb}, "gates_biased");
        std::vector<Value *> io = split(gsum, 1, 4, h, "iofc");
        Value *ig = io[0], *og = io[1], *fg = io[2], *cg = io[3];
        if (!peep.empty()) {
          ig = op("Add", {ig, op("Mul", {peep[0], cPrev}, "p_i_c")}, "i_peep");
          fg = op("Add", {fg, op("Mul", {peep[2], cPrev}, "p_f_c")}, "f_peep");
        }
        Value *i = op("Sigmoid", {ig}, "i");
        Value *f = op("Sigmoid", {fg}, "f");
        Value *c = op("Add",
                      {op("Mul", {f, cPrev}, "f_c"),
                       op("Mul", {i, op("Tanh", {cg}, "c_tilde")}, "i_c")},
                      "c");
        if (!peep.empty())
          og = op("Add", {og, op("Mul", {peep[1], c}, "p_o_c")}, "o_peep");
        Value *o = op("Sigmoid", {og}, "o");
        hPrev = op("Mul", {o, op("Tanh", {c}, "tanh_c")}, "h");
        cPrev = c;
      } else if (cell_ == Cell::Gru) {
        std::vector<Value *> xg = split(xt, 1, 3, h, "x_zrh");
        Value *zr, *hh;
        if (lbr) {
          Value *hr = op("MatMul", {hPrev, rt}, "hr"); // [B, 3H]
          if (rb)
            hr = op("Add", {hr, rb}, "hr_biased");
          std::vector<Value *> hg = split(hr, 1, 3, h, "h_zrh");
          Value *z = op("Sigmoid", {op("Add", {xg[0], hg[0]}, "z_in")}, "z");
          Value *rr = op("Sigmoid", {op("Add", {xg[1], hg[1]}, "r_in")}, "r");
          hh = op("Tanh",
                  {op("Add", {xg[2], op("Mul", {rr, hg[2]}, "r_h")}, "hh_in")},
                  "h_tilde");
          zr = z;
        } else {
          Value *hzr = op("MatMul", {hPrev, rzrT}, "h_zr"); // [B, 2H]
          if (rbzr)
            hzr = op("Add", {hzr, rbzr}, "h_zr_biased");
          std::vector<Value *> hg = split(hzr, 1, 2, h, "h_zr_parts");
          Value *z = op("Sigmoid", {op("Add", {xg[0], hg[0]}, "z_in")}, "z");
          Value *rr = op("Sigmoid", {op("Add", {xg[1], hg[1]}, "r_in")}, "r");
          Value *rh =
              op("MatMul", {op("Mul", {rr, hPrev}, "r_times_h"), rhT}, "rh_r");
          if (rbh)
            rh = op("Add", {rh, rbh}, "rh_biased");
          hh = op("Tanh", {op("Add", {xg[2], rh}, "hh_in")}, "h_tilde");
          zr = z;
        }
        // h = (1 - z) * h~ + z * h_prev = h~ + z * (h_prev - h~)
        Value *oneMinusZ =
            op("Sub", {b_.constant(Tensor::scalar(t_, 1.0), tag("one")), zr},
               "one_minus_z");
        hPrev = op("Add",
                   {op("Mul", {oneMinusZ, hh}, "keep_new"),
                    op("Mul", {zr, hPrev}, "keep_old")},
                   "h");
      } else {
        Value *a = op("Add", {xt, op("MatMul", {hPrev, rt}, "hr")}, "pre");
        if (rb)
          a = op("Add", {a, rb}, "pre_biased");
        hPrev = op("Tanh", {a}, "h");
      }
      hs[size_t(t)] = reshape(hPrev, {1, 1, batch_, h}, "h_step");
    }
    Direction out;
    out.y = concat(hs, 0, "y_dir"); // [T, 1, B, H]
    out.h = reshape(hPrev, {1, batch_, h}, "h_last");
    out.c = cPrev ? reshape(cPrev, {1, batch_, h}, "c_last") : nullptr;
    return out;
  }

  const Node &n_;
  LoweringBuilder b_;
  int64_t opset_;
  Cell cell_ = Cell::Lstm;
  int64_t gates_ = 4, layout_ = 0, steps_ = 0, batch_ = 0, hidden_ = 0;
  DType t_ = DType::Undefined;
  int step_ = 0;
};

} // namespace

std::vector<Node *> lowerRecurrent(Graph &g, Node *n, int64_t opset) {
  return Unroll(g, n, opset).run();
}

} // namespace mpc
