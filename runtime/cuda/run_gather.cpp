// CUDA runners of the data-movement ops with device code: Transpose,
// Gather and mpc.GatherGrad (the embedding gradient).
//
// Transpose and Gather copy elements as bytes, so they take any dtype.
// Staged, Gather's indices are validated on the host like the CPU kernel's
// (an index out of range is the same error) and uploaded non-negative, and
// GatherGrad's per-row position lists (a counting sort, gather.h) are built
// there too. In a device-resident step the indices never leave the device:
// the same normalisation and a stable sort by row run there (resident.h),
// and an index out of range is reported, naming the node, after the step.
#include "ir/mpc_ops.h"
#include "kernels/cpu/cpu_util.h"
#include "kernels/cpu/node_geometry.h"
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

void runTranspose(NodeStaging &s) {
  const Node &node = s.node();
  const Tensor &x = s.in(0, "data");
  requireCopyable(node, x);
  size_t r = x.dims.size();
  std::vector<int64_t> perm = cpu::transposePerm(node, r);
  if (r > size_t(kMaxKernelRank))
    fail(node, "rank ", r, " is above the cuda kernels' limit of ",
         kMaxKernelRank);
  std::vector<int64_t> dims(r);
  for (size_t i = 0; i < r; ++i)
    dims[i] = x.dims[size_t(perm[i])];
  void *y = s.out(0, x.dtype, dims);
  launchBroadcastCopy(dtypeSize(x.dtype), s.device(0), y,
                      makeTransposeGeometry(x.dims, perm), s.stream());
}

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

} // namespace

std::vector<CudaOpEntry> gatherOps() {
  return {
      {"", "Transpose", runTranspose, noCheck},
      {"", "Gather", runGather, checkGather},
      {kMpcDomain, "GatherGrad", runGatherGrad, checkGatherGrad},
  };
}

} // namespace cuda
} // namespace mpc
