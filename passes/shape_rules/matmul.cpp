// Shape rules of the matrix products: Gemm (2-D, optional transposes and a
// C that broadcasts one way) and MatMul (numpy batch broadcasting, 1-D
// operands). mpc.FusedMatMul, MatMul with folded transposes, is in
// fused.cpp.
#include "passes/shape_rules/rule_support.h"

namespace mpc::shape_rules {

namespace {

void inferGemm(Ctx &c) {
  Value *a = c.req(0);
  Value *b = c.req(1);
  c.sameDType({0, 1, 2});
  c.requireNumeric(0);
  bool transA = c.flagAttr("transA", false);
  bool transB = c.flagAttr("transB", false);
  c.floatAttr("alpha", 1.0f);
  c.floatAttr("beta", 1.0f);
  c.requireRank(0, 2);
  c.requireRank(1, 2);
  if (!a->hasShape || !b->hasShape) {
    Dim out[2];
    if (a->hasShape)
      out[0] = a->dims[transA ? 1 : 0];
    if (b->hasShape)
      out[1] = b->dims[transB ? 0 : 1];
    c.setShaped(0, a->dtype, out, 2);
    return;
  }
  Dim m = a->dims[transA ? 1 : 0], ka = a->dims[transA ? 0 : 1];
  Dim kb = b->dims[transB ? 1 : 0], nn = b->dims[transB ? 0 : 1];
  if (dimsConflict(ka, kb))
    fail([&] {
      errorAt(c.n) << "inner dimensions differ: A is " << typeText(a)
                   << (transA ? " (transposed)" : "") << ", B is "
                   << typeText(b) << (transB ? " (transposed)" : "") << " ("
                   << ka.value << " vs " << kb.value << ")";
    });
  const Dim out[2] = {m, nn};
  if (const Value *cv = c.opt(2)) {
    if (cv->hasShape) {
      if (cv->rank() > 2)
        fail([&] {
          errorAt(c.n) << "C (" << c.inputText(2)
                       << ") must have rank <= 2, got " << typeText(cv);
        });
      // C broadcasts one way onto [M, N].
      for (size_t i = 0; i < cv->dims.size(); ++i) {
        const Dim &d = cv->dims[i];
        const Dim &target = out[2 - cv->dims.size() + i];
        if (d.isKnown() && d.value != 1 && dimsConflict(d, target))
          fail([&] {
            errorAt(c.n) << "C (" << typeText(cv)
                         << ") does not broadcast to the product's shape "
                         << dimsToString(Dims(out, out + 2));
          });
      }
    }
  }
  c.setShaped(0, a->dtype, out, 2);
}

void inferMatMul(Ctx &c) {
  Value *a = c.req(0);
  Value *b = c.req(1);
  c.sameDType({0, 1});
  c.requireNumeric(0);
  if ((a->hasShape && a->rank() == 0) || (b->hasShape && b->rank() == 0))
    fail([&] {
      errorAt(c.n) << "inputs must have rank >= 1, got " << typeText(a)
                   << " and " << typeText(b);
    });
  if (!a->hasShape || !b->hasShape) {
    c.set(0, unranked(a->dtype));
    return;
  }
  // A 1-D a is [1, K] and a 1-D b is [K, 1] for the product (their extra
  // dim is dropped again), so neither has batch dims. Read in place: verify
  // re-infers every MatMul a pass touched.
  const Dims &ad = a->dims, &bd = b->dims;
  bool aVec = ad.size() == 1, bVec = bd.size() == 1;
  const Dim &ka = ad.back(), &kb = bVec ? bd[0] : bd[bd.size() - 2];
  if (dimsConflict(ka, kb))
    fail([&] {
      errorAt(c.n) << "inner dimensions differ: " << typeText(a) << " x "
                   << typeText(b) << " (" << ka.value << " vs " << kb.value
                   << ")";
    });
  InlineDims batch;
  c.broadcastInto(ad.data(), aVec ? 0 : ad.size() - 2, bd.data(),
                  bVec ? 0 : bd.size() - 2, batch);
  if (!aVec)
    batch.push_back(ad[ad.size() - 2]);
  if (!bVec)
    batch.push_back(bd.back());
  c.setShaped(0, a->dtype, batch);
}

const OpRule kRules[] = {
    {"", "Gemm", 2, 3, 1, 1, inferGemm},
    {"", "MatMul", 2, 2, 1, 1, inferMatMul},
};

} // namespace

RuleRows matmulRules() { return RuleRows(kRules); }

} // namespace mpc::shape_rules
