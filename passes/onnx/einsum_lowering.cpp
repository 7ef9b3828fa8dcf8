// Einsum lowered to ReduceSum, Transpose, Reshape and MatMul
// (einsum_lowering.h).
#include "passes/onnx/einsum_lowering.h"

#include "passes/onnx/lowering_builder.h"
#include "support/diagnostics.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>

namespace mpc {
namespace {

/// An index: a letter's code, or kEllipsis + k for the k-th dim "..."
/// stands for.
constexpr int kEllipsis = 1000;

/// A value with its indices, one per dim, and their sizes.
struct Term {
  Value *v;
  std::vector<int> idx;
};

/// The indices of one side of the equation ("bij", "...ij", "").
std::vector<int> parseTerm(const Node &n, const std::string &t,
                           int64_t ellipsisDims) {
  std::vector<int> out;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t.compare(i, 3, "...") == 0) {
      for (int64_t k = 0; k < ellipsisDims; ++k)
        out.push_back(kEllipsis + int(k));
      i += 2;
    } else if (std::isalpha(static_cast<unsigned char>(t[i]))) {
      out.push_back(t[i]);
    } else {
      errorAt(n) << "equation term '" << t << "' has a character '" << t[i]
                 << "' that is not a letter or '...'";
    }
  }
  return out;
}

int64_t letterCount(const std::string &t) {
  return std::count_if(t.begin(), t.end(), [](char c) {
    return std::isalpha(static_cast<unsigned char>(c));
  });
}

class EinsumLowering {
public:
  EinsumLowering(Graph &g, Node *n, int64_t opset)
      : n_(*n), b_(g, n), opset_(opset) {}

  std::vector<Node *> run() {
    const Attribute *eq = n_.attr("equation");
    if (!eq)
      errorAt(n_) << "needs attribute 'equation'";
    std::string equation;
    for (char c : eq->s)
      if (c != ' ')
        equation += c;
    size_t arrow = equation.find("->");
    std::string lhs = equation.substr(0, arrow);
    std::vector<std::string> sides;
    for (size_t start = 0;;) {
      size_t comma = lhs.find(',', start);
      sides.push_back(lhs.substr(start, comma - start));
      if (comma == std::string::npos)
        break;
      start = comma + 1;
    }
    if (sides.size() != n_.numInputs())
      errorAt(n_) << "equation '" << eq->s << "' has " << sides.size()
                  << " operands, the node " << n_.numInputs() << " inputs";

    int64_t ellipsisDims = -1;
    std::vector<Term> terms;
    for (size_t i = 0; i < sides.size(); ++i) {
      Value *v = n_.input(i);
      if (!v || !v->hasShape)
        errorAt(n_) << "needs the rank of input " << i << " at import";
      if (v->dtype != n_.input(0)->dtype)
        errorAt(n_) << "inputs have different element types";
      int64_t dots = v->rank() - letterCount(sides[i]);
      bool hasDots = sides[i].find("...") != std::string::npos;
      if (!hasDots && dots != 0)
        errorAt(n_) << "term '" << sides[i] << "' has " << letterCount(sides[i])
                    << " indices for an input of rank " << v->rank();
      if (hasDots) {
        if (dots < 0 || (ellipsisDims >= 0 && dots != ellipsisDims))
          errorAt(n_) << "'...' must stand for the same number of dims in "
                         "every operand";
        ellipsisDims = dots;
      }
      Term t{v, parseTerm(n_, sides[i], hasDots ? dots : 0)};
      std::set<int> seen;
      for (size_t d = 0; d < t.idx.size(); ++d) {
        if (!seen.insert(t.idx[d]).second)
          errorAt(n_) << "index repeated within operand " << i
                      << " (a diagonal) is not supported";
        const Dim &dim = v->dims[d];
        if (!dim.isKnown())
          errorAt(n_) << "needs the dims of input " << i << " at import";
        auto [it, fresh] = size_.emplace(t.idx[d], dim.value);
        if (!fresh && it->second != dim.value)
          errorAt(n_) << "index '" << name(t.idx[d]) << "' has size "
                      << it->second << " in one operand and " << dim.value
                      << " in another";
      }
      terms.push_back(std::move(t));
    }

    std::vector<int> output;
    if (arrow != std::string::npos) {
      output = parseTerm(n_, equation.substr(arrow + 2),
                         std::max<int64_t>(ellipsisDims, 0));
      for (int i : output)
        if (!size_.count(i))
          errorAt(n_) << "output index '" << name(i) << "' is in no operand";
    } else {
      std::map<int, int> count;
      for (const Term &t : terms)
        for (int i : t.idx)
          ++count[i];
      for (int64_t k = 0; k < std::max<int64_t>(ellipsisDims, 0); ++k)
        output.push_back(kEllipsis + int(k));
      for (const auto &[i, c] : count) // letters sort by code
        if (c == 1 && i < kEllipsis)
          output.push_back(i);
    }

    Term acc = terms[0];
    for (size_t i = 1; i < terms.size(); ++i) {
      std::set<int> needed(output.begin(), output.end());
      for (size_t j = i + 1; j < terms.size(); ++j)
        needed.insert(terms[j].idx.begin(), terms[j].idx.end());
      acc = contract(acc, terms[i], needed);
    }
    acc = sumOut(acc, std::set<int>(output.begin(), output.end()), "sum");
    acc = transpose(acc, output, "out");
    if (acc.v == n_.input(0))
      acc.v = b_.op("Identity", {acc.v}, "same");
    return b_.replaceWith(acc.v);
  }

private:
  std::string name(int i) const {
    return i >= kEllipsis ? "...[" + std::to_string(i - kEllipsis) + "]"
                          : std::string(1, char(i));
  }

  std::string tag(const char *what) { return what + std::to_string(step_++); }

  /// t without the indices `keep` does not have, summed out.
  Term sumOut(const Term &t, const std::set<int> &keep, const char *what) {
    std::vector<int64_t> axes;
    Term out{t.v, {}};
    for (size_t d = 0; d < t.idx.size(); ++d)
      if (keep.count(t.idx[d]))
        out.idx.push_back(t.idx[d]);
      else
        axes.push_back(int64_t(d));
    if (axes.empty())
      return t;
    std::string name = tag(what);
    Builder::Attrs attrs = {{"keepdims", Attribute::ofInt(0)}};
    std::vector<Value *> ins = {t.v};
    if (opset_ >= 13)
      ins.push_back(b_.int64s(axes, name + "_axes"));
    else
      attrs.emplace_back("axes", Attribute::ofInts(axes));
    out.v = b_.op("ReduceSum", ins, name, attrs);
    return out;
  }

  /// t with its indices in the order `order` (a permutation of them).
  Term transpose(const Term &t, const std::vector<int> &order,
                 const char *what) {
    if (order == t.idx)
      return t;
    std::vector<int64_t> perm;
    for (int i : order)
      perm.push_back(std::find(t.idx.begin(), t.idx.end(), i) - t.idx.begin());
    return {b_.op("Transpose", {t.v}, tag(what),
                  {{"perm", Attribute::ofInts(perm)}}),
            order};
  }

  int64_t product(const std::vector<int> &idx) const {
    int64_t p = 1;
    for (int i : idx) {
      int64_t d = size_.at(i);
      if (d < 0 || (d > 0 && p > (int64_t(1) << 62) / d))
        errorAt(n_) << "operand dims multiply past 2^62";
      p *= d;
    }
    return p;
  }

  Value *reshape(Value *v, const std::vector<int64_t> &dims, const char *what) {
    if (v->hasShape && v->rank() == int64_t(dims.size())) {
      bool same = true;
      for (size_t d = 0; d < dims.size(); ++d)
        same &= v->dims[d].isKnown() && v->dims[d].value == dims[d];
      if (same)
        return v;
    }
    std::string name = tag(what);
    return b_.op("Reshape", {v, b_.int64s(dims, name + "_shape")}, name);
  }

  Term contract(const Term &a0, const Term &b0, const std::set<int> &needed) {
    std::set<int> inA(a0.idx.begin(), a0.idx.end()),
        inB(b0.idx.begin(), b0.idx.end());
    std::set<int> keepA = needed, keepB = needed;
    keepA.insert(inB.begin(), inB.end());
    keepB.insert(inA.begin(), inA.end());
    Term a = sumOut(a0, keepA, "sum_a"), b = sumOut(b0, keepB, "sum_b");
    std::vector<int> batch, contracted, ownA, ownB;
    for (int i : a.idx)
      if (!inB.count(i))
        ownA.push_back(i);
      else if (needed.count(i))
        batch.push_back(i);
      else
        contracted.push_back(i);
    for (int i : b.idx)
      if (!inA.count(i))
        ownB.push_back(i);
    auto cat = [](std::vector<int> x, const std::vector<int> &y,
                  const std::vector<int> &z) {
      x.insert(x.end(), y.begin(), y.end());
      x.insert(x.end(), z.begin(), z.end());
      return x;
    };
    a = transpose(a, cat(batch, ownA, contracted), "lhs");
    b = transpose(b, cat(batch, contracted, ownB), "rhs");
    int64_t nb = product(batch), m = product(ownA), k = product(contracted),
            n = product(ownB);
    Value *lhs = reshape(a.v, {nb, m, k}, "lhs_3d");
    Value *rhs = reshape(b.v, {nb, k, n}, "rhs_3d");
    Value *prod = b_.op("MatMul", {lhs, rhs}, tag("product"));
    std::vector<int> idx = cat(batch, ownA, ownB);
    std::vector<int64_t> dims;
    for (int i : idx)
      dims.push_back(size_.at(i));
    Value *out =
        b_.op("Reshape", {prod, b_.int64s(dims, tag("result") + "_shape")},
              tag("result"));
    return {out, idx};
  }

  const Node &n_;
  LoweringBuilder b_;
  int64_t opset_;
  std::map<int, int64_t> size_;
  int step_ = 0;
};

} // namespace

std::vector<Node *> lowerEinsum(Graph &g, Node *n, int64_t opset) {
  if (n->numInputs() < 1 || n->numOutputs() != 1 || !n->output(0))
    errorAt(*n) << "Einsum takes at least one input and has one output";
  for (size_t i = 0; i < n->numInputs(); ++i)
    if (!n->input(i) || !isFloating(n->input(i)->dtype))
      errorAt(*n) << "takes floating-point inputs";
  return EinsumLowering(g, n, opset).run();
}

} // namespace mpc
