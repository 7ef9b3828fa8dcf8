// Gradient rules of the matrix products: Gemm (every alpha/beta/transA/transB
// and a broadcast C) and MatMul (numpy semantics: 1-D operands, batches and
// batch broadcasting).
//
// Gemm's gradients are Gemms again, with the transposes folded into their
// transA/transB flags rather than materialised. MatMul's gradients are
// MatMuls with a Transpose of the last two axes, summed back over broadcast
// batch axes with mpc.SumToShape.
#include "passes/gradients/gradient_rules.h"

#include "support/diagnostics.h"

#include <algorithm>

namespace mpc {
namespace {

/// Output dims of MatMul(a, b) for operands of rank >= 2: the batch axes
/// broadcast as broadcastDims does, then [M, N]. Built in one vector (the
/// batch parts are not copied out first: autodiff asks this per MatMul).
Dims matmulDims(const Value &a, const Value &b) {
  const size_t ba = a.dims.size() - 2, bb = b.dims.size() - 2;
  const size_t r = std::max(ba, bb);
  Dims out;
  out.reserve(r + 2);
  for (size_t i = 0; i < r; ++i) {
    // Align trailing batch axes; a missing axis acts as size 1.
    Dim da = i + ba >= r ? a.dims[i + ba - r] : Dim(1);
    Dim db = i + bb >= r ? b.dims[i + bb - r] : Dim(1);
    out.push_back(broadcastDim(da, db));
  }
  out.push_back(a.dims[ba]);
  out.push_back(b.dims.back());
  return out;
}

/// The product of all but the last dim (unknown unless all are static and
/// it fits in int64).
Dim rowCount(const Value &v) {
  int64_t rows = 1;
  for (size_t i = 0; i + 1 < v.dims.size(); ++i) {
    if (!v.dims[i].isKnown() ||
        __builtin_mul_overflow(rows, v.dims[i].value, &rows))
      return Dim(); // unknown, or past int64
  }
  return Dim(rows);
}

/// MatMul(a, b) typed with `dims` (matmulDims(a, b), which the caller has
/// usually computed already to choose the name).
Value *matmul(GradientContext &ctx, Value *a, Value *b, Dims dims,
              std::string nameHint) {
  return ctx.emit("MatMul", {a, b}, {}, a->dtype, std::move(dims),
                  std::move(nameHint));
}

Value *matmul(GradientContext &ctx, Value *a, Value *b, std::string nameHint) {
  return matmul(ctx, a, b, matmulDims(*a, *b), std::move(nameHint));
}

} // namespace

void gradGemm(GradientContext &ctx) {
  // Y = alpha * A' * B' + beta * C with A' = transA ? A^T : A (B' alike).
  Node &n = ctx.node();
  float alpha = n.attrFloat("alpha", 1.0f);
  float beta = n.attrFloat("beta", 1.0f);
  bool transA = n.attrInt("transA", 0) != 0;
  bool transB = n.attrInt("transB", 0) != 0;
  Value *dY = ctx.outGrad(0);
  Value *a = ctx.in(0);
  Value *b = ctx.in(1);

  auto gemm = [&](Value *x, Value *y, bool tx, bool ty, size_t input) {
    GradientContext::Attrs attrs;
    if (alpha != 1.0f)
      attrs.push_back({"alpha", Attribute::ofFloat(alpha)});
    if (tx)
      attrs.push_back({"transA", Attribute::ofInt(1)});
    if (ty)
      attrs.push_back({"transB", Attribute::ofInt(1)});
    return ctx.emitLike("Gemm", {x, y}, attrs, *ctx.in(input),
                        ctx.gradName(input));
  };

  // dA' = alpha dY B'^T, dB' = alpha A'^T dY; each case writes dA (dB)
  // directly in A's (B's) layout.
  if (ctx.wants(0)) {
    Value *dA = !transA ? (transB ? gemm(dY, b, false, false, 0)
                                  : gemm(dY, b, false, true, 0))
                        : (transB ? gemm(b, dY, true, true, 0)
                                  : gemm(b, dY, false, true, 0));
    ctx.setInputGrad(0, dA);
  }
  if (ctx.wants(1)) {
    Value *dB = !transB ? (transA ? gemm(a, dY, false, false, 1)
                                  : gemm(a, dY, true, false, 1))
                        : (transA ? gemm(dY, a, true, true, 1)
                                  : gemm(dY, a, true, false, 1));
    ctx.setInputGrad(1, dB);
  }
  if (ctx.wants(2)) {
    Value *c = ctx.in(2);
    bool scaled = beta != 1.0f;
    Value *s =
        ctx.sumToShape(dY, c, scaled ? ctx.tempName("c_sum") : ctx.gradName(2));
    if (scaled)
      s = ctx.mul(s, ctx.scalarConstant(c->dtype, beta, "beta"),
                  ctx.gradName(2));
    ctx.setInputGrad(2, s);
  }
}

void gradMatMul(GradientContext &ctx) {
  Value *dY = ctx.outGrad(0);
  Value *a = ctx.in(0);
  Value *b = ctx.in(1);
  int64_t ra = ctx.rankOf(*a);
  int64_t rb = ctx.rankOf(*b);
  if (ra == 0 || rb == 0)
    errorAt(ctx.node()) << "MatMul operands must have rank >= 1, got "
                        << a->typeString() << " and " << b->typeString();

  if (ra == 1 && rb == 1) {
    // A dot product: Y is a scalar.
    if (ctx.wants(0))
      ctx.setInputGrad(0, ctx.mul(dY, b, ctx.gradName(0)));
    if (ctx.wants(1))
      ctx.setInputGrad(1, ctx.mul(dY, a, ctx.gradName(1)));
    return;
  }

  if (ra == 1) {
    // A [K] is a row [1,K] whose axis is dropped: Y [...,N].
    if (ctx.wants(0)) {
      Value *dA = nullptr;
      if (rb == 2) {
        dA = ctx.emitLike("MatMul", {b, dY}, {}, *a, ctx.gradName(0));
      } else {
        Value *dYRow = ctx.unsqueeze(dY, {rb - 2}, ctx.tempName("dy_row"));
        Value *bT = ctx.transposeLastTwo(b, ctx.tempName("b_t"));
        Value *full = matmul(ctx, dYRow, bT, ctx.tempName("0_full"));
        dA = ctx.sumToInputShape(full, 0);
      }
      ctx.setInputGrad(0, dA);
    }
    if (ctx.wants(1)) {
      Value *aCol = ctx.unsqueeze(a, {1}, ctx.tempName("a_col"));
      Value *dYRow = ctx.unsqueeze(dY, {rb - 2}, ctx.tempName("dy_row"));
      Value *full = matmul(ctx, aCol, dYRow,
                           ctx.preSumName(1, matmulDims(*aCol, *dYRow)));
      ctx.setInputGrad(1, ctx.sumToInputShape(full, 1));
    }
    return;
  }

  if (rb == 1) {
    // B [K] is a column [K,1] whose axis is dropped: Y [...,M].
    if (ctx.wants(0)) {
      Value *dYCol = ctx.unsqueeze(dY, {ra - 1}, ctx.tempName("dy_col"));
      Value *bRow = ctx.unsqueeze(b, {0}, ctx.tempName("b_row"));
      Value *full = matmul(ctx, dYCol, bRow,
                           ctx.preSumName(0, matmulDims(*dYCol, *bRow)));
      ctx.setInputGrad(0, ctx.sumToInputShape(full, 0));
    }
    if (ctx.wants(1)) {
      Value *dB = nullptr;
      if (ra == 2) {
        dB = ctx.emitLike("MatMul", {dY, a}, {}, *b, ctx.gradName(1));
      } else {
        Value *dYRow = ctx.unsqueeze(dY, {ra - 2}, ctx.tempName("dy_row"));
        Value *full = matmul(ctx, dYRow, a, ctx.tempName("1_full"));
        dB = ctx.sumToInputShape(full, 1);
      }
      ctx.setInputGrad(1, dB);
    }
    return;
  }

  // Both operands are (batches of) matrices.
  if (ctx.wants(0)) {
    Value *bT = ctx.transposeLastTwo(b, ctx.tempName("b_t"));
    Dims fullDims = matmulDims(*dY, *bT);
    std::string name = ctx.preSumName(0, fullDims);
    Value *full = matmul(ctx, dY, bT, std::move(fullDims), std::move(name));
    ctx.setInputGrad(0, ctx.sumToInputShape(full, 0));
  }
  if (ctx.wants(1)) {
    const Dim &k = a->dims.back();
    const Dim &nDim = dY->dims.back();
    if (rb == 2 && ra > 2 && k.isKnown() && nDim.isKnown()) {
      // A batch of rows times one matrix (a Linear layer on [B,S,K]): fold
      // the batch into the rows and take one Gemm instead of a batched
      // product summed over the batch.
      Dim rows = rowCount(*a);
      Value *a2 = ctx.emit(
          "Reshape", {a, ctx.int64Constant({-1, k.value}, "a_rows_shape")}, {},
          a->dtype, {rows, k}, ctx.tempName("a_rows"));
      Value *dY2 = ctx.emit(
          "Reshape", {dY, ctx.int64Constant({-1, nDim.value}, "dy_rows_shape")},
          {}, dY->dtype, {rows, nDim}, ctx.tempName("dy_rows"));
      ctx.setInputGrad(1,
                       ctx.emitLike("Gemm", {a2, dY2},
                                    singleAttr("transA", Attribute::ofInt(1)),
                                    *b, ctx.gradName(1)));
    } else {
      Value *aT = ctx.transposeLastTwo(a, ctx.tempName("a_t"));
      Dims fullDims = matmulDims(*aT, *dY);
      std::string name = ctx.preSumName(1, fullDims);
      Value *full = matmul(ctx, aT, dY, std::move(fullDims), std::move(name));
      ctx.setInputGrad(1, ctx.sumToInputShape(full, 1));
    }
  }
}

} // namespace mpc
