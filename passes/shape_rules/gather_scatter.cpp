// Shape rules of the indexing ops: Gather, GatherND, GatherElements,
// ScatterND, ScatterElements, and the mpc backward ops GatherGrad and
// GatherElementsGrad. For the *Elements ops the output has the indices'
// shape; data and indices share their rank and, away from the axis, no
// index dim may exceed data's (torch.gather's and ONNX Runtime's rule; the
// spec leaves it implicit).
#include "passes/shape_rules/rule_support.h"

#include "ir/mpc_ops.h"

namespace mpc::shape_rules {

namespace {

void inferGather(Ctx &c) {
  Value *data = c.req(0);
  Value *indices = c.req(1);
  c.requireIndex(1, "indices");
  int64_t axis = c.intAttr("axis", 0);
  if (!data->hasShape || !indices->hasShape) {
    if (data->hasShape)
      c.axis(axis, data->rank());
    c.set(0, unranked(data->dtype));
    return;
  }
  if (data->rank() == 0)
    fail([&] {
      errorAt(c.n) << "data (" << c.inputText(0) << ") must have rank >= 1";
    });
  int64_t a = c.axis(axis, data->rank());
  const Dim &size = data->dims[size_t(a)];
  if (TensorPtr idx = constantValue(*indices); idx && size.isKnown()) {
    for (int64_t i : idx->toInt64s())
      if (i < -size.value || i >= size.value)
        fail([&] {
          errorAt(c.n) << "index " << i << " is out of range for axis " << a
                       << " of size " << size.value << " (input "
                       << typeText(data) << ")";
        });
  }
  Dims out(data->dims.begin(), data->dims.begin() + a);
  out.insert(out.end(), indices->dims.begin(), indices->dims.end());
  out.insert(out.end(), data->dims.begin() + a + 1, data->dims.end());
  c.set(0, shaped(data->dtype, std::move(out)));
}

void inferGatherGrad(Ctx &c) {
  Value *dy = c.req(0);
  Value *indices = c.req(1);
  Value *data = c.req(2);
  c.requireFloat(0);
  c.requireIndex(1, "indices");
  if (data->hasShape) {
    if (data->rank() == 0)
      fail([&] {
        errorAt(c.n) << "data (" << c.inputText(2) << ") must have rank >= 1";
      });
    int64_t a = c.axis(c.intAttr("axis", 0), data->rank());
    if (dy->hasShape && indices->hasShape &&
        dy->rank() != data->rank() - 1 + indices->rank())
      fail([&] {
        errorAt(c.n) << "dY " << typeText(dy) << " is not the shape Gather "
                     << "makes from data " << typeText(data) << " and indices "
                     << typeText(indices) << " along axis " << a;
      });
  }
  c.setShapeOf(0, dy->dtype, data);
}

/// The scatter ops' `reduction` attribute: none (the default), add, mul,
/// max or min.
void checkScatterReduction(Ctx &c) {
  std::string r = c.stringAttr("reduction", "none");
  if (r != "none" && r != "add" && r != "mul" && r != "max" && r != "min")
    fail([&] {
      errorAt(c.n) << "reduction '" << r
                   << "' is not one of none, add, mul, max, min";
    });
}

/// GatherND: indices.shape[:-1] + data.shape[batch_dims + k:], k the last
/// dim of indices (known here, or the output is left unranked).
void inferGatherND(Ctx &c) {
  Value *data = c.req(0);
  const Value *idx = c.req(1);
  c.requireDType(1, DType::I64);
  int64_t b = c.intAttr("batch_dims", 0);
  if (idx->hasShape && idx->rank() < 1)
    fail([&] {
      errorAt(c.n) << "indices must have rank >= 1, got " << typeText(idx);
    });
  if (!data->hasShape || !idx->hasShape || !idx->dims.back().isKnown()) {
    c.setUnranked(0, data->dtype);
    return;
  }
  int64_t r = data->rank(), q = idx->rank(), k = idx->dims.back().value;
  if (q < 1 || b < 0 || b >= std::min(r, q) || k < 1 || b + k > r)
    fail([&] {
      errorAt(c.n) << "indices " << typeText(idx) << " with batch_dims " << b
                   << " do not address data " << typeText(data);
    });
  Dims dims(idx->dims.begin(), idx->dims.end() - 1);
  dims.insert(dims.end(), data->dims.begin() + b + k, data->dims.end());
  c.setShaped(0, data->dtype, dims.data(), dims.size());
}

/// ScatterND: data's type; indices int64 of rank >= 1 whose last dim k is
/// at most data's rank; updates of data's dtype (their shape, indices'
/// leading dims then data's from k on, is checked where all are known).
void inferScatterND(Ctx &c) {
  Value *data = c.req(0);
  const Value *idx = c.req(1), *upd = c.req(2);
  c.requireDType(1, DType::I64);
  c.sameDType({0, 2});
  if (idx->hasShape && data->hasShape) {
    if (idx->rank() < 1)
      fail([&] { errorAt(c.n) << "indices must have rank >= 1"; });
    const Dim &k = idx->dims.back();
    if (k.isKnown() && (k.value < 1 || k.value > int64_t(data->rank())))
      fail([&] {
        errorAt(c.n) << "the last dim of indices (" << k.value
                     << ") must be in [1, " << data->rank() << "], data's rank";
      });
    int64_t want = int64_t(idx->rank()) - 1 + int64_t(data->rank()) -
                   (k.isKnown() ? k.value : 0);
    if (k.isKnown() && upd->hasShape && int64_t(upd->rank()) != want)
      fail([&] {
        errorAt(c.n) << "updates must have rank " << want << ", got "
                     << typeText(upd);
      });
  }
  checkScatterReduction(c);
  c.setLike(0, data);
}

/// Checks data (input `dataIdx`) against indices (input `idxIdx`): same
/// rank >= 1, axis in range, indices no larger than data off the axis.
void requireElementsGeometry(Ctx &c, size_t dataIdx, size_t idxIdx) {
  const Value *data = c.n.input(dataIdx), *indices = c.n.input(idxIdx);
  c.requireIndex(idxIdx, "indices");
  int64_t axis = c.intAttr("axis", 0);
  if (!data->hasShape)
    return;
  if (data->rank() == 0)
    fail([&] {
      errorAt(c.n) << "data (" << c.inputText(dataIdx)
                   << ") must have rank >= 1";
    });
  int64_t a = c.axis(axis, data->rank());
  if (!indices->hasShape)
    return;
  if (indices->rank() != data->rank())
    fail([&] {
      errorAt(c.n) << "indices " << typeText(indices)
                   << " must have the rank of data " << typeText(data);
    });
  for (size_t d = 0; d < data->dims.size(); ++d) {
    const Dim &id = indices->dims[d], &dd = data->dims[d];
    if (int64_t(d) != a && id.isKnown() && dd.isKnown() && id.value > dd.value)
      fail([&] {
        errorAt(c.n) << "indices " << typeText(indices) << " exceed data "
                     << typeText(data) << " in dim " << d << " (only axis " << a
                     << " may differ)";
      });
  }
}

void inferGatherElements(Ctx &c) {
  Value *data = c.req(0);
  Value *indices = c.req(1);
  if (c.opset < 11)
    fail([&] {
      errorAt(c.n) << "GatherElements is an ONNX op from opset 11; the model "
                      "imports opset "
                   << c.opset;
    });
  requireElementsGeometry(c, 0, 1);
  c.setShapeOf(0, data->dtype, indices);
}

/// ScatterElements(data, indices, updates): data's type and shape; updates
/// typed like data and shaped like indices.
void inferScatterElements(Ctx &c) {
  Value *data = c.req(0);
  c.req(1);
  c.req(2);
  if (c.opset < 11)
    fail([&] {
      errorAt(c.n) << "ScatterElements is an ONNX op from opset 11; the model "
                      "imports opset "
                   << c.opset;
    });
  c.sameDType({0, 2});
  requireSameShape(c, 1, 2);
  requireElementsGeometry(c, 0, 1);
  checkScatterReduction(c);
  c.setLike(0, data);
}

/// GatherElementsGrad(dY, indices, data): dData, typed like dY, shaped like
/// data.
void inferGatherElementsGrad(Ctx &c) {
  Value *dy = c.req(0);
  c.req(1);
  Value *data = c.req(2);
  c.requireFloat(0);
  requireSameShape(c, 0, 1);
  requireElementsGeometry(c, 2, 1);
  c.setShapeOf(0, dy->dtype, data);
}

const OpRule kRules[] = {
    {"", "Gather", 2, 2, 1, 1, inferGather},
    {"", "GatherND", 2, 2, 1, 1, inferGatherND},
    {"", "ScatterND", 3, 3, 1, 1, inferScatterND},
    {"", "GatherElements", 2, 2, 1, 1, inferGatherElements},
    {"", "ScatterElements", 3, 3, 1, 1, inferScatterElements},
    {kMpcDomain, "GatherGrad", 3, 3, 1, 1, inferGatherGrad},
    {kMpcDomain, "GatherElementsGrad", 3, 3, 1, 1, inferGatherElementsGrad},
};

} // namespace

RuleRows gatherScatterRules() { return RuleRows(kRules); }

} // namespace mpc::shape_rules
