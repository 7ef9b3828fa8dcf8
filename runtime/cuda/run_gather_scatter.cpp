// CUDA runners of Gather, GatherND, GatherElements, ScatterND,
// ScatterElements and the gradients mpc.GatherGrad and
// mpc.GatherElementsGrad.
//
// Gather and mpc.GatherGrad (the embedding gradient):
// Transpose and Gather copy elements as bytes, so they take any dtype.
// Staged, Gather's indices are validated on the host like the CPU kernel's
// (an index out of range is the same error) and uploaded non-negative, and
// GatherGrad's per-row position lists (a counting sort, gather.h) are built
// there too. In a device-resident step the indices never leave the device:
// the same normalisation and a stable sort by row run there (resident.h),
// and an index out of range is reported, naming the node, after the step.
//
// CUDA runners of GatherElements, its gradient mpc.GatherElementsGrad, and
// ScatterElements, which walks the gradient's per-element lists.
//
// Both reduce to the Gather kernels (kernels/cuda/gather.h) over data seen
// as one flat row per element: every index position resolves to a data
// offset (cpu::gatherElementsOffsets, the CPU kernel's own checks and
// messages), GatherElements copies data[offset[i]], and the gradient is
// GatherGrad's deterministic scatter-add with the offsets as rows: each
// data element sums, in fp32 and in increasing index position, the dY
// elements that read it, which is the order the CPU kernel adds them in, so
// both backends give the same bits and no atomics are needed. Staged, the
// offsets and their per-element position lists are made on the host; in a
// device-resident step the indices stay on the device (resident.h: the
// offsets, then the stable radix sort GatherGrad uses), and an index out of
// range sets the step's error word.
//
// CUDA runners of GatherND and ScatterND, the ops whose index tuples name
// rows of data (cpu::indexTupleRows: the CPU kernels' own checks, messages
// and row arithmetic).
//
// The tuples are resolved on the host, so the indices are a host input
// (CudaOpEntry::hostInputs): a device-resident step runs these nodes when
// the executor knows the indices before the step (constants, or index
// arithmetic it mirrors), and otherwise the step runs staged. GatherND is
// Gather's row copy; ScatterND walks, per data row, the tuples that name
// it in index order (GatherGrad's counting sort), as ScatterElements does,
// so with reduction none the last update wins and the reductions add in
// the CPU's order: the same bits, no atomics.
#include "ir/mpc_ops.h"
#include "kernels/cpu/cpu_util.h"
#include "kernels/cpu/node_geometry.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/gather.h"
#include "kernels/cuda/resident.h"
#include "runtime/cuda/cuda_ops.h"
#include "runtime/cuda/node_staging.h"

#include <algorithm>

namespace mpc {
namespace cuda {
namespace {

using cpu::fail;

/// The indices of a Gather or GatherGrad, checked against the axis length
/// and made non-negative (the CPU kernels' rule and message).
std::vector<int64_t> gatherRows(const Node &node, const Tensor &idx,
                                int64_t axis, int64_t len) {
  if (idx.dtype != DType::I64 && idx.dtype != DType::I32)
    fail(node, "indices must be int64 or int32, got ", dtypeName(idx.dtype));
  std::vector<int64_t> rows(size_t(idx.numel()));
  for (size_t j = 0; j < rows.size(); ++j) {
    int64_t v = cpu::loadInt(idx, int64_t(j));
    if (v < -len || v >= len)
      fail(node, "index ", v, " is out of range for axis ", axis, " of size ",
           len);
    rows[j] = v < 0 ? v + len : v;
  }
  return rows;
}

/// Device rows of a resident step: idx normalised into node scratch.
const int64_t *deviceRows(NodeStaging &s, const Tensor &idx, size_t at,
                          int64_t len) {
  if (idx.dtype != DType::I64 && idx.dtype != DType::I32)
    fail(s.node(), "indices must be int64 or int32, got ",
         dtypeName(idx.dtype));
  int64_t n = idx.numel();
  if (n == 0)
    return nullptr;
  auto *rows = static_cast<int64_t *>(s.scratch(size_t(n) * sizeof(int64_t)));
  launchNormalizeIndices(s.device(at), idx.dtype == DType::I64, n, len, rows,
                         s.errorWord(), s.errorCode(), s.stream());
  return rows;
}

void runGather(NodeStaging &s) {
  const Node &node = s.node();
  const Tensor &x = s.in(0, "data"), &idx = s.in(1, "indices");
  requireCopyable(node, x);
  int64_t r = int64_t(x.dims.size());
  if (r == 0)
    fail(node, "cannot gather from a scalar");
  int64_t axis = cpu::normalizeAxis(node, node.attrInt("axis", 0), r);
  cpu::AxisSplit a = cpu::splitAt(x.dims, axis);
  std::vector<int64_t> dims(x.dims.begin(), x.dims.begin() + axis);
  dims.insert(dims.end(), idx.dims.begin(), idx.dims.end());
  dims.insert(dims.end(), x.dims.begin() + axis + 1, x.dims.end());
  GatherShape shape{a.outer, a.len, a.inner, idx.numel()};
  if (s.resident()) {
    const int64_t *rows = deviceRows(s, idx, 1, a.len);
    void *y = s.out(0, x.dtype, dims);
    launchGather(dtypeSize(x.dtype), s.device(0), rows, y, shape, s.stream());
    return;
  }
  std::vector<int64_t> rows = gatherRows(node, idx, axis, a.len);
  void *y = s.out(0, x.dtype, dims);
  launchGather(dtypeSize(x.dtype), s.device(0), s.upload(rows), y, shape,
               s.stream());
}

void runGatherGrad(NodeStaging &s) {
  const Node &node = s.node();
  const Tensor &dy = s.in(0, "dY"), &idx = s.in(1, "indices"),
               &data = s.in(2, "data");
  requireDeviceFloat(node, dy, "dY");
  int64_t r = int64_t(data.dims.size());
  if (r == 0)
    fail(node, "data must have rank >= 1");
  int64_t axis = cpu::normalizeAxis(node, node.attrInt("axis", 0), r);
  std::vector<int64_t> want(data.dims.begin(), data.dims.begin() + axis);
  want.insert(want.end(), idx.dims.begin(), idx.dims.end());
  want.insert(want.end(), data.dims.begin() + axis + 1, data.dims.end());
  if (dy.dims != want)
    fail(node, "dY of shape ", cpu::shapeString(dy.dims), " is not the shape ",
         cpu::shapeString(want), " Gather produces from data ",
         cpu::shapeString(data.dims), " and indices ",
         cpu::shapeString(idx.dims));
  cpu::AxisSplit a = cpu::splitAt(data.dims, axis);
  GatherShape shape{a.outer, a.len, a.inner, idx.numel()};
  if (s.resident()) {
    const int64_t *rows = deviceRows(s, idx, 1, a.len);
    int64_t n = idx.numel();
    auto *start =
        static_cast<int64_t *>(s.scratch(size_t(a.len + 1) * sizeof(int64_t)));
    auto *positions = static_cast<int64_t *>(
        s.scratch(size_t(std::max<int64_t>(n, 1)) * sizeof(int64_t)));
    size_t tempBytes = gatherRowListsScratch(n, a.len);
    void *temp = s.scratch(tempBytes);
    launchGatherRowLists(rows, n, a.len, start, positions, temp, tempBytes,
                         s.stream());
    void *dd = s.out(0, dy.dtype, data.dims);
    launchGatherGrad(dy.dtype, s.device(0), start, positions, dd, shape,
                     s.stream());
    return;
  }
  std::vector<int64_t> rows = gatherRows(node, idx, axis, a.len);
  GatherRowLists lists = gatherRowLists(rows, a.len);
  void *dd = s.out(0, dy.dtype, data.dims);
  launchGatherGrad(dy.dtype, s.device(0), s.upload(lists.start),
                   s.upload(lists.positions), dd, shape, s.stream());
}

std::string checkGather(const Node &node) { return requireIndices(node, 1); }

std::string checkGatherGrad(const Node &node) {
  std::string why = requireDeviceFloat(node, {0});
  return why.empty() ? checkGather(node) : why;
}

using cpu::fail;

/// The resident step's offsets: the indices at input `at` resolved on the
/// device (nullptr when there are none).
const int64_t *residentOffsets(NodeStaging &s,
                               const cpu::GatherElementsShape &shape,
                               size_t at) {
  const Tensor &idx = s.in(at, "indices");
  int64_t n = idx.numel();
  if (n == 0)
    return nullptr;
  if (idx.dims.size() > size_t(kMaxKernelRank))
    fail(s.node(), "rank ", idx.dims.size(),
         " is above the cuda kernels' limit of ", kMaxKernelRank);
  auto *offsets =
      static_cast<int64_t *>(s.scratch(size_t(n) * sizeof(int64_t)));
  launchGatherElementsOffsets(
      s.device(at), idx.dtype == DType::I64,
      makeGatherElementsWalk(idx.dims, shape.walkStrides, shape.len,
                             shape.axisStride),
      offsets, s.errorWord(), s.errorCode(), s.stream());
  return offsets;
}

void runGatherElements(NodeStaging &s) {
  const Node &node = s.node();
  const Tensor &x = s.in(0, "data"), &idx = s.in(1, "indices");
  requireCopyable(node, x);
  size_t size = dtypeSize(x.dtype);
  cpu::GatherElementsShape shape = cpu::gatherElementsShape(node, x.dims, idx);
  const int64_t *offsets =
      s.resident() ? residentOffsets(s, shape, 1)
                   : s.upload(cpu::gatherElementsOffsets(node, shape, idx));
  void *y = s.out(0, x.dtype, idx.dims);
  GatherShape flat{1, x.numel(), 1, idx.numel()};
  launchGather(size, s.device(0), offsets, y, flat, s.stream());
}

/// For each data element, the index positions that name it, in increasing
/// order (GatherRowLists on the device): made on the host when staged, by
/// GatherGrad's stable device sort when resident. GatherElementsGrad sums
/// dY over them, ScatterElements applies its updates over them.
struct ElementLists {
  const int64_t *start = nullptr, *positions = nullptr;
};

ElementLists elementLists(NodeStaging &s, const cpu::GatherElementsShape &shape,
                          int64_t len) {
  const Node &node = s.node();
  const Tensor &idx = s.in(1, "indices");
  int64_t n = idx.numel();
  if (!s.resident()) {
    GatherRowLists lists =
        gatherRowLists(cpu::gatherElementsOffsets(node, shape, idx), len);
    return {s.upload(lists.start), s.upload(lists.positions)};
  }
  auto *start =
      static_cast<int64_t *>(s.scratch(size_t(len + 1) * sizeof(int64_t)));
  auto *positions = static_cast<int64_t *>(
      s.scratch(size_t(std::max<int64_t>(n, 1)) * sizeof(int64_t)));
  if (n == 0) {
    MPC_CUDA_CHECK(cudaMemsetAsync(start, 0, size_t(len + 1) * sizeof(int64_t),
                                   s.stream()));
    return {start, positions};
  }
  const int64_t *offsets = residentOffsets(s, shape, 1);
  size_t tempBytes = gatherRowListsScratch(n, len);
  void *temp = s.scratch(tempBytes);
  launchGatherRowLists(offsets, n, len, start, positions, temp, tempBytes,
                       s.stream());
  return {start, positions};
}

void runGatherElementsGrad(NodeStaging &s) {
  const Node &node = s.node();
  const Tensor &dy = s.in(0, "dY"), &idx = s.in(1, "indices"),
               &data = s.in(2, "data");
  if (dy.dims != idx.dims)
    fail(node, "dY of shape ", cpu::shapeString(dy.dims),
         " must have the shape of indices ", cpu::shapeString(idx.dims));
  requireDeviceFloat(node, dy, "dY");
  cpu::GatherElementsShape shape =
      cpu::gatherElementsShape(node, data.dims, idx);
  int64_t n = idx.numel(), len = data.numel();
  ElementLists lists = elementLists(s, shape, len);
  void *dd = s.out(0, dy.dtype, data.dims);
  launchGatherGrad(dy.dtype, s.device(0), lists.start, lists.positions, dd,
                   GatherShape{1, len, 1, n}, s.stream());
}

/// ScatterElements: updates applied per data element in index order (the
/// CPU kernel's), over the lists GatherElementsGrad uses.
void runScatterElements(NodeStaging &s) {
  const Node &node = s.node();
  const Tensor &data = s.in(0, "data"), &idx = s.in(1, "indices"),
               &upd = s.in(2, "updates");
  if (upd.dtype != data.dtype)
    fail(node, "updates (", dtypeName(upd.dtype), ") and data (",
         dtypeName(data.dtype), ") differ in element type");
  if (upd.dims != idx.dims)
    fail(node, "updates of shape ", cpu::shapeString(upd.dims),
         " must have the shape of indices ", cpu::shapeString(idx.dims));
  cpu::GatherElementsShape shape =
      cpu::gatherElementsShape(node, data.dims, idx);
  ElementLists lists = elementLists(s, shape, data.numel());
  void *out = s.out(0, data.dtype, data.dims);
  launchScatterRows(cpu::scatterReduction(node), data.dtype, s.device(0),
                    s.device(2), lists.start, lists.positions, out,
                    data.numel(), 1, s.stream());
}

std::string checkGatherElementsGrad(const Node &node) {
  std::string why = requireDeviceFloat(node, {0});
  return why.empty() ? requireIndices(node, 1) : why;
}

using cpu::fail;

void runGatherND(NodeStaging &s) {
  const Node &node = s.node();
  const Tensor &data = s.in(0, "data");
  requireCopyable(node, data);
  cpu::IndexTupleRows t =
      cpu::indexTupleRows(node, data.dims, s.hostValue(1, "indices"),
                          node.attrInt("batch_dims", 0));
  void *y = s.out(0, data.dtype, t.outDims);
  GatherShape flat{1, t.numRows, t.slice, int64_t(t.rows.size())};
  if (t.rows.empty() || t.slice == 0)
    return;
  launchGather(dtypeSize(data.dtype), s.device(0), s.upload(t.rows), y, flat,
               s.stream());
}

void runScatterND(NodeStaging &s) {
  const Node &node = s.node();
  const Tensor &data = s.in(0, "data"), &upd = s.in(2, "updates");
  if (upd.dtype != data.dtype)
    fail(node, "updates (", dtypeName(upd.dtype), ") and data (",
         dtypeName(data.dtype), ") differ in element type");
  cpu::IndexTupleRows t =
      cpu::indexTupleRows(node, data.dims, s.hostValue(1, "indices"), 0);
  if (upd.dims != t.outDims)
    fail(node, "updates must have shape ", cpu::shapeString(t.outDims),
         ", got ", cpu::shapeString(upd.dims));
  GatherRowLists lists = gatherRowLists(t.rows, t.numRows);
  void *out = s.out(0, data.dtype, data.dims);
  launchScatterRows(cpu::scatterReduction(node), data.dtype, s.device(0),
                    s.device(2), s.upload(lists.start),
                    s.upload(lists.positions), out, t.numRows, t.slice,
                    s.stream());
}

} // namespace

std::string checkScatter(const Node &node) {
  std::string why = requireIndices(node, 1);
  if (!why.empty())
    return why;
  std::string r = node.attrString("reduction", "none");
  if (r != "none" && r != "add" && r != "mul" && r != "max" && r != "min")
    return "reduction '" + r + "' is not one of none, add, mul, max, min";
  const Value *data = node.input(0);
  if (!data)
    return "";
  DType t = data->dtype;
  if (r == "none") {
    size_t size = dtypeSize(t);
    return size == 1 || size == 2 || size == 4 || size == 8
               ? ""
               : "the cuda backend copies elements of 1, 2, 4 or 8 bytes";
  }
  if (t == DType::F32 || t == DType::F16 || t == DType::BF16 ||
      t == DType::I32 || t == DType::I64)
    return "";
  return "reduction " + r +
         " runs in fp32, fp16, bf16, int32 or int64 on the cuda backend, "
         "not " +
         dtypeName(t);
}

std::vector<CudaOpEntry> gatherScatterOps() {
  return {
      {"", "Gather", runGather, checkGather},
      {kMpcDomain, "GatherGrad", runGatherGrad, checkGatherGrad},
      {"", "GatherElements", runGatherElements,
       [](const Node &n) { return requireIndices(n, 1); }},
      {kMpcDomain, "GatherElementsGrad", runGatherElementsGrad,
       checkGatherElementsGrad},
      {"", "ScatterElements", runScatterElements, checkScatter},
      {"", "GatherND", runGatherND,
       [](const Node &n) { return requireIndices(n, 1); }, 1u << 1},
      {"", "ScatterND", runScatterND, checkScatter, 1u << 1},
  };
}

} // namespace cuda
} // namespace mpc
