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
#include "ir/mpc_ops.h"
#include "kernels/cpu/cpu_util.h"
#include "kernels/cpu/node_geometry.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/gather.h"
#include "kernels/cuda/resident.h"
#include "runtime/cuda/cuda_ops.h"
#include "runtime/cuda/node_staging.h"

#include <algorithm>

namespace mpc {
namespace cuda {
namespace {

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

} // namespace

std::vector<CudaOpEntry> gatherElementsOps() {
  return {
      {"", "GatherElements", runGatherElements,
       [](const Node &n) { return requireIndices(n, 1); }},
      {kMpcDomain, "GatherElementsGrad", runGatherElementsGrad,
       checkGatherElementsGrad},
      {"", "ScatterElements", runScatterElements, checkScatter},
  };
}

} // namespace cuda
} // namespace mpc
