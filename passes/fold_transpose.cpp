// fold-transpose: matrix products read transposed operands through BLAS
// flags instead of a materialised Transpose.
//
// autodiff's MatMul rule writes dA = dY Transpose(B) and dB = Transpose(A) dY
// (the transposes swap the last two axes), and exports write a Linear as
// MatMul(x, Transpose(W)). Each Transpose is a full copy of its input. This
// pass rewrites, until nothing changes:
//  - MatMul / mpc.FusedMatMul whose operand is a Transpose that swaps the
//    last two axes: the product reads the Transpose's input with its
//    transA / transB flag toggled (mpc.FusedMatMul, ir/mpc_ops.h; a
//    product whose flags end up both 0 is a plain MatMul again);
//  - Gemm whose A or B is a 2-D Transpose: transA / transB toggled;
//  - a swap Transpose of a product that only the Transpose reads (a
//    weight gradient computed in the forward's layout): (op(A) op(B))^T =
//    op'(B) op'(A), the product with its operands exchanged and both flags
//    toggled (Gemm only without C, or with a single-element C).
// A Transpose that other nodes still read stays for them; one left without
// readers is removed. Products keep their node names (the precision map's
// records) and their output names; each rewrite changes a node in place (the
// product, or the Transpose the product moves to), so the pass makes no node
// and no value.
//
// Runs after autodiff and autocast (operands already have their dtypes;
// FusedMatMul computes in the dtype MatMul would), before recompute and
// plan-memory. On the CPU, fp16/bf16 products have the bits MatMul gives on
// the materialised transpose; fp32/fp64 ones may differ in the last bits
// where BLAS's kernel for the transposed layout sums in another order
// (tests/unit/fused_matmul_test.cpp).
#include "ir/mpc_ops.h"
#include "passes/pass.h"

#include <string>
#include <vector>

namespace mpc {
namespace {

/// The input of a Transpose producing v that swaps exactly the last two
/// axes of an operand of rank >= 2, else nullptr.
Value *swappedFrom(const Value *v) {
  const Node *t = v ? v->producer() : nullptr;
  if (!t || !t->isOp("", "Transpose") || !t->input(0))
    return nullptr;
  const Value *x = t->input(0);
  if (!x->hasShape || x->rank() < 2)
    return nullptr;
  int64_t r = x->rank();
  // No perm reverses every axis: a swap only for rank 2.
  const Attribute *permAttr = t->attr("perm");
  if (!permAttr)
    return r == 2 ? t->input(0) : nullptr;
  // The swap is (0, 1, ..., r-3, r-1, r-2).
  const std::vector<int64_t> &perm = permAttr->ints;
  if (permAttr->kind != Attribute::Kind::Ints ||
      static_cast<int64_t>(perm.size()) != r)
    return nullptr;
  for (int64_t i = 0; i < r - 2; ++i)
    if (perm[i] != i)
      return nullptr;
  return perm[r - 2] == r - 1 && perm[r - 1] == r - 2 ? t->input(0) : nullptr;
}

class TransposeFolder {
public:
  TransposeFolder(Graph &g, Statistics &stats) : g_(g), stats_(stats) {}

  void run() {
    bool changed = true;
    while (changed) {
      changed = false;
      // Every node a fold removes is a producer of one of the node at
      // hand's inputs (the Transpose it reads, the product a Transpose
      // reads): in topological order, before it in this list. So no node of
      // the list is removed before the loop reaches it, and the loop needs
      // no record of removed nodes. (The node at hand is rewritten in
      // place, never removed.)
      for (Node *n : g_.nodeList()) {
        if (isProduct(*n))
          changed |= foldOperands(n);
        else if (n->isOp("", "Gemm"))
          changed |= foldGemmOperands(*n);
        else if (n->isOp("", "Transpose"))
          changed |= foldIntoProducer(n);
      }
    }
  }

private:
  static bool isProduct(const Node &n) {
    return n.isOp("", "MatMul") || n.isOp(kMpcDomain, "FusedMatMul");
  }

  static bool ranked2(const Value *v) {
    return v && v->hasShape && v->rank() >= 2;
  }

  /// Makes n (a product, or the Transpose a product moves to) the product
  /// MatMul / FusedMatMul(a, b) with the given flags, in place: n keeps its
  /// place and its output value, so its readers, the output's name and id,
  /// and the graph outputs stay as they are (a new node and output value
  /// cost a value id that every per-id table after this pass would carry,
  /// and made verify re-infer the readers). The graph is the one a
  /// replacement node at n's place would give: the same name-table entries
  /// (reserveReplacementName), attributes, and use lists (setInput moves
  /// n's use of each operand to the end of the operand's list, where a new
  /// node's would be).
  void rewriteAsProduct(Node &n, const std::string &nodeName, Value *a,
                        Value *b, bool ta, bool tb) {
    bool fused = ta || tb;
    reserveReplacementName(nodeName, fused ? "FusedMatMul" : "MatMul");
    n.setOp(fused ? "FusedMatMul" : "MatMul", fused ? kMpcDomain : "");
    n.setInput(0, a);
    n.setInput(1, b);
    if (fused)
      setTransposeFlags(n, ta, tb);
  }

  /// Claims the node name a replacement node named `nodeName` (its op when
  /// empty) took, as the earlier new-node rewrite did: uniqueNodeName
  /// counts the names it gave per base, so a later pass that names a node
  /// after a folded product gets the name it got before.
  void reserveReplacementName(const std::string &nodeName, const char *op) {
    if (nodeName.empty())
      g_.uniqueNodeName(op);
    else
      g_.uniqueNodeName(nodeName);
  }

  /// Gives a product node its transA and transB (in that order), as one
  /// list: two setAttr calls grew the node's attribute list twice.
  static void setTransposeFlags(Node &n, bool transA, bool transB) {
    std::vector<std::pair<std::string, Attribute>> flags;
    flags.reserve(2);
    flags.emplace_back("transA", Attribute::ofInt(transA ? 1 : 0));
    flags.emplace_back("transB", Attribute::ofInt(transB ? 1 : 0));
    n.setAttrs(std::move(flags));
  }

  /// Removes each of `readFrom` that is a Transpose's output left unread.
  void removeUnreadTransposes(const Value *const (&readFrom)[2]) {
    for (const Value *v : readFrom) {
      // (A value read twice, MatMul(t, t), has no producer any more at its
      // second position: removeNode clears it.)
      Node *t = v ? v->producer() : nullptr;
      if (t && t->isOp("", "Transpose") && v->uses().empty() &&
          !v->isGraphOutput()) {
        g_.removeNode(t);
        ++stats_["transposes-removed"];
      }
    }
  }

  bool flag(const Node &n, const char *name) { return n.attrInt(name, 0) != 0; }

  /// MatMul / FusedMatMul reading a swap Transpose.
  bool foldOperands(Node *n) {
    Value *a = n->input(0), *b = n->input(1);
    if (!ranked2(a) || !ranked2(b))
      return false;
    bool ta = flag(*n, "transA"), tb = flag(*n, "transB");
    Value *fa = swappedFrom(a), *fb = swappedFrom(b);
    if (!fa && !fb)
      return false;
    const Value *readBefore[2] = {a, b};
    if (fa) {
      a = fa;
      ta = !ta;
    }
    if (fb) {
      b = fb;
      tb = !tb;
    }
    rewriteAsProduct(*n, n->name(), a, b, ta, tb);
    removeUnreadTransposes(readBefore);
    ++stats_["matmul-operands-folded"];
    return true;
  }

  /// Gemm reading a 2-D swap Transpose as A or B.
  bool foldGemmOperands(Node &n) {
    bool changed = false;
    const char *flags[2] = {"transA", "transB"};
    for (size_t i = 0; i < 2; ++i) {
      Value *in = n.input(i);
      Value *from = swappedFrom(in);
      if (!from || from->rank() != 2)
        continue;
      n.setInput(i, from);
      n.setAttr(flags[i], Attribute::ofInt(flag(n, flags[i]) ? 0 : 1));
      Node *t = in->producer();
      if (in->uses().empty() && !in->isGraphOutput()) {
        g_.removeNode(t);
        ++stats_["transposes-removed"];
      }
      ++stats_["gemm-operands-folded"];
      changed = true;
    }
    return changed;
  }

  /// A swap Transpose of a product only it reads: the product computes the
  /// transposed result itself. The Transpose node becomes that product (it
  /// is at the product's new place and already writes the output its
  /// readers read), under the product's name; the old product goes.
  bool foldIntoProducer(Node *t) {
    Value *y = t->input(0);
    if (!swappedFrom(t->output(0)) || !y || y->uses().size() != 1 ||
        y->isGraphOutput())
      return false;
    Node *p = y->producer();
    if (!p)
      return false;
    if (isProduct(*p)) {
      if (!ranked2(p->input(0)) || !ranked2(p->input(1)))
        return false;
      bool ta = flag(*p, "transA"), tb = flag(*p, "transB");
      Value *a = p->input(0), *b = p->input(1);
      std::string nodeName = p->name();
      // With both flags set they are both cleared: a plain MatMul, which
      // rewriteAsProduct makes. (The earlier rewrite made a FusedMatMul
      // first and then replaced it, claiming a name for each.)
      if (ta && tb)
        reserveReplacementName(nodeName, "FusedMatMul");
      rewriteAsProduct(*t, nodeName, b, a, !tb, !ta);
      finishProducerFold(t, p, std::move(nodeName));
      ++stats_["products-transposed"];
      return true;
    }
    if (!p->isOp("", "Gemm") || p->numOutputs() != 1)
      return false;
    Value *c = p->input(2);
    if (c && !(c->hasShape && allOnes(c->dims)))
      return false;
    std::string nodeName = p->name();
    reserveReplacementName(nodeName, "Gemm");
    t->setOp("Gemm", "");
    t->setInput(0, p->input(1));
    t->setInput(1, p->input(0));
    for (const auto &kv : p->attributes())
      t->setAttr(kv.first, kv.second);
    if (c)
      t->setInput(2, c);
    t->setAttr("transA", Attribute::ofInt(flag(*p, "transB") ? 0 : 1));
    t->setAttr("transB", Attribute::ofInt(flag(*p, "transA") ? 0 : 1));
    finishProducerFold(t, p, std::move(nodeName));
    ++stats_["products-transposed"];
    return true;
  }

  static bool allOnes(const Dims &dims) {
    for (const Dim &d : dims)
      if (d.value != 1)
        return false;
    return true;
  }

  /// t, now the product, no longer reads p's output: p goes, and t takes
  /// its name.
  void finishProducerFold(Node *t, Node *p, std::string nodeName) {
    g_.removeNode(p);
    t->setName(std::move(nodeName));
    ++stats_["transposes-removed"];
  }

  Graph &g_;
  Statistics &stats_;
};

} // namespace

void runFoldTranspose(Model &model, PassContext &ctx) {
  TransposeFolder(workingGraph(model), ctx.stats).run();
}

} // namespace mpc
