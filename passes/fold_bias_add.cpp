// fold-bias-add: a Linear layer's bias is added by its matrix product.
//
// Exports write a Linear on [batch, seq, features] as
//   Y = MatMul(x, Transpose(W));  Z = Add(b, Y)
// (after fold-transpose: Y = mpc.FusedMatMul<transB = 1>(x, W)). The Add is a
// second pass over the product's output: it reads Y and writes Z, each as
// large as the layer's activations, for a vector of n elements. Gemm takes
// the bias as its C, which the CUDA backend adds in cuBLASLt's epilogue
// (runtime/cuda/gemm_bias_epilogue.h) as PyTorch's Linear does, and the CPU
// backend as part of the product; and since alpha*AB + C is rounded once,
// to the output dtype, the fp16 result is at least as close to the exact one
// as the two roundings of MatMul then Add were. So
//
//   Add(b, MatMul(x, W))        ->  Gemm(x, W, b)                  (x 2-D)
//   Add(b, MatMul(x, W))        ->  Reshape(Gemm(Reshape(x, [-1, k]), W, b),
//                                           Z's dims)          (x of rank > 2)
//
// (mpc.FusedMatMul likewise, its transA / transB becoming Gemm's; either
// Add operand order), when:
//  - the product is the Add's other operand's only reader (no graph output):
//    a product someone else reads stays as it is;
//  - the product is of floating-point values;
//  - W is 2-D, and x is 2-D or, not transposed, has a known last axis k and
//    a Z whose dims are all known, none 0 (the Reshapes' static shapes; a 0
//    in Reshape's shape would copy a dim); a batch of matrices times a batch
//    of matrices is no Linear;
//  - b has Y's dtype and is a row of n = Y's last dim ([n] or [1, n]), so
//    the Add broadcasts nothing into Z but the bias itself.
// The Reshapes cost nothing: the memory plan puts a Reshape's output on its
// input's bytes. Z keeps its value (name, id, readers); the Gemm takes the
// product's node name and precision-map record, the final Reshape the
// Add's node name.
//
// Runs after fold-transpose (which turns the Transpose of W into transB) and
// before cleanup, recompute and plan-memory. The backward is built already:
// the Add's gradient (the bias's: a sum of dZ) and the product's are
// unchanged, since neither reads Y.
#include "ir/mpc_ops.h"
#include "passes/pass.h"
#include "passes/precision_map.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mpc {
namespace {

bool isProduct(const Node &n) {
  return n.isOp("", "MatMul") || n.isOp(kMpcDomain, "FusedMatMul");
}

/// Every dim known and non-zero: a static shape Reshape can take as it is
/// (a 0 in Reshape's shape copies the input's dim instead).
bool allKnownNonZero(const Dims &dims) {
  for (const Dim &d : dims)
    if (!d.isKnown() || d.value == 0)
      return false;
  return true;
}

/// Whether c is a row of n elements of dtype t: [n] or [1, n].
bool isBiasRow(const Value *c, DType t, const Dim &n) {
  if (!c || c->dtype != t || !c->hasShape || !n.isKnown())
    return false;
  if (c->rank() == 1)
    return c->dims[0] == n;
  return c->rank() == 2 && c->dims[0] == Dim(1) && c->dims[1] == n;
}

/// What a foldable Add reads: the product node and the bias.
struct BiasAdd {
  Node *product;
  Value *bias;
};

class BiasAddFolder {
public:
  BiasAddFolder(Model &model, Graph &g, Statistics &stats)
      : model_(model), g_(g), stats_(stats) {}

  /// Folds every foldable Add; returns how many.
  int64_t run() {
    int64_t folded = 0;
    // A fold removes the product, which comes before its Add in the list:
    // the loop has passed it already.
    for (Node *n : g_.nodeList())
      if (n->isOp("", "Add"))
        if (std::optional<BiasAdd> f = foldable(*n)) {
          fold(n, *f);
          ++folded;
        }
    return folded;
  }

private:
  /// The product and bias of Add node n when it is foldable (see above).
  static std::optional<BiasAdd> foldable(const Node &n) {
    if (n.numInputs() != 2 || n.numOutputs() != 1 || !n.output(0))
      return std::nullopt;
    const Value *z = n.output(0);
    for (size_t yi = 0; yi < 2; ++yi) {
      Value *y = n.input(yi), *b = n.input(1 - yi);
      Node *p = y ? y->producer() : nullptr;
      if (!p || !isProduct(*p) || p->numOutputs() != 1 ||
          y->uses().size() != 1 || y->isGraphOutput() || y == b)
        continue;
      const Value *x = p->input(0), *w = p->input(1);
      if (!x || !w || !x->hasShape || !w->hasShape || !y->hasShape ||
          !z->hasShape || w->rank() != 2 || x->rank() < 2 ||
          z->dims != y->dims || z->dtype != y->dtype || !isFloating(y->dtype))
        continue;
      if (!isBiasRow(b, y->dtype, y->dims.back()))
        continue;
      if (x->rank() > 2 &&
          (p->attrInt("transA", 0) != 0 || !x->dims.back().isKnown() ||
           x->dims.back().value == 0 || !allKnownNonZero(z->dims)))
        continue;
      return BiasAdd{p, b};
    }
    return std::nullopt;
  }

  void fold(Node *add, const BiasAdd &f) {
    Node *p = f.product;
    Value *x = p->input(0), *w = p->input(1), *z = add->output(0);
    const bool ta = p->attrInt("transA", 0) != 0;
    const bool tb = p->attrInt("transB", 0) != 0;
    const std::string productName = p->name();
    std::optional<PrecisionRecord> prior = recordCopyOf(model_, g_, *p);
    std::vector<std::pair<std::string, Attribute>> flags = {
        {"transA", Attribute::ofInt(ta ? 1 : 0)},
        {"transB", Attribute::ofInt(tb ? 1 : 0)}};
    g_.removeNode(p);
    Node *gemm;
    if (x->rank() == 2) {
      // The Add becomes the Gemm, writing Z where the Add did.
      add->setOp("Gemm", "");
      add->setInput(0, x);
      add->setInput(1, w);
      add->addInput(f.bias);
      gemm = add;
    } else {
      // Z's dims are all known (foldable), and x's leading ones are Z's.
      const Dim &k = x->dims.back();
      std::vector<int64_t> zDims;
      int64_t rows = 1;
      bool rowsFit = true; // an absurd shape's rows may pass int64
      for (const Dim &d : z->dims)
        zDims.push_back(d.value);
      for (size_t i = 0; i + 1 < zDims.size(); ++i)
        rowsFit = rowsFit && !__builtin_mul_overflow(rows, zDims[i], &rows);
      Value *rowsShape =
          shapeConstant({-1, k.value}, productName + "_rows_shape");
      Node *flatten = g_.createNode("Reshape", {x, rowsShape}, 1,
                                    productName + "_rows", "", add);
      const Dim rowsDim = rowsFit ? Dim(rows) : Dim();
      flatten->output(0)->setType(x->dtype, {rowsDim, k});
      gemm = g_.createNode("Gemm", {flatten->output(0), w, f.bias}, 1,
                           productName + "_gemm", "", add);
      gemm->output(0)->setType(z->dtype, {rowsDim, z->dims.back()});
      Value *zShape = shapeConstant(zDims, add->name() + "_shape");
      // The Add becomes the Reshape back to Z's dims.
      add->setOp("Reshape", "");
      add->setInput(0, gemm->output(0));
      add->setInput(1, zShape);
      recordReshape(*flatten, "the rows of a Linear's input, for the Gemm "
                              "that adds its bias (a view, no copy)");
      recordReshape(*add, "the Gemm's rows back to the Linear's output dims "
                          "(a view, no copy)");
    }
    // The product's name was claimed when it was made; the Gemm takes it
    // over (as fold-transpose's rewrites do).
    gemm->setName(productName);
    gemm->setAttrs(std::move(flags));
    recordGemm(*gemm, prior, z->dtype);
    ++stats_["bias-adds-folded"];
  }

  /// An int64 initializer holding `dims`, one per distinct shape: the
  /// Linears of a layer share their input's rows and their output's dims.
  Value *shapeConstant(const std::vector<int64_t> &dims,
                       const std::string &name) {
    Value *&v = shapes_[dims];
    if (!v)
      v = g_.addInitializer(name,
                            Tensor::fromInt64s({int64_t(dims.size())}, dims));
    return v;
  }

  /// The Gemm runs in the product's dtype, by the product's rule (a user's
  /// override stays one), the fold added to its detail.
  void recordGemm(const Node &gemm, const std::optional<PrecisionRecord> &prior,
                  DType t) {
    PrecisionMap *m = precisionMapOf(model_, g_);
    if (!m)
      return;
    const std::string what =
        "fold-bias-add: the bias Add folded into the product as Gemm's C, "
        "added before the one rounding to " +
        std::string(dtypeName(t));
    if (prior)
      m->record(gemm,
                {t, prior->rule,
                 prior->detail.empty() ? what : prior->detail + "; " + what});
    else
      m->record(gemm, {t, "fold-bias-add", what});
  }

  void recordReshape(const Node &reshape, const char *what) {
    if (PrecisionMap *m = precisionMapOf(model_, g_))
      m->record(reshape, {reshape.output(0)->dtype, "fold-bias-add", what});
  }

  Model &model_;
  Graph &g_;
  Statistics &stats_;
  std::map<std::vector<int64_t>, Value *> shapes_;
};

} // namespace

void runFoldBiasAdd(Model &model, PassContext &ctx) {
  BiasAddFolder folder(model, workingGraph(model), ctx.stats);
  ctx.changedNothing = folder.run() == 0;
}

} // namespace mpc
