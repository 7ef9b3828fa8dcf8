// CUDA runners of the shape ops with device code: Transpose, Expand, Slice,
// its gradient mpc.SliceGrad, Concat and Split, and Range.
//
// Transpose copies elements as bytes (launchBroadcastCopy with a transposed
// geometry), so it takes any dtype.
//
//
// They move elements as bytes, so they take any dtype of 1, 2, 4 or 8
// bytes. Expand and Slice are strided copies (launchBroadcastCopy with a
// broadcast or a stepped geometry), SliceGrad the same stepped geometry
// scattered into zeros (launchScatterCopy); Concat and Split copy one
// contiguous block per outer index with cudaMemcpy2DAsync, which a CUDA graph
// captures like a kernel. Their output shapes depend on values (Expand's shape,
// Slice's and SliceGrad's starts/ends/axes/steps, Split's sizes): staged, those
// are read on the host as the CPU kernels read them; in a device-resident step
// the outputs come bound with the plan's static dims, so Expand and Split read
// nothing, and Slice and SliceGrad read their parameters from the executor's
// host mirrors (they are constants in every exported model; the op table lists
// them, so a Slice whose parameters are data is refused before the step
// starts).
// Range's three scalars decide its length, so they are read on the host in
// both modes (listed in the op table the same way); the kernel writes the
// sequence.
#include "ir/mpc_ops.h"
#include "kernels/cpu/cpu_util.h"
#include "kernels/cpu/node_geometry.h"
#include "kernels/cuda/broadcast_geometry.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/range.h"
#include "kernels/cuda/scatter_copy.h"
#include "runtime/cuda/cuda_ops.h"
#include "runtime/cuda/node_staging.h"

#include <algorithm>

namespace mpc {
namespace cuda {
namespace {

using cpu::fail;

void requireRank(const Node &node, size_t rank) {
  if (rank > size_t(kMaxKernelRank))
    fail(node, "rank ", rank, " is above the cuda kernels' limit of ",
         kMaxKernelRank);
}

/// The dims the plan bound output i to (resident steps).
const std::vector<int64_t> &plannedDims(NodeStaging &s, size_t i) {
  if (!s.ctx().hasOutput(i))
    fail(s.node(), "missing output ", i);
  return s.ctx().outputs[i]->dims;
}

void runExpand(NodeStaging &s) {
  const Node &node = s.node();
  const Tensor &x = s.in(0, "input");
  requireCopyable(node, x);
  std::vector<int64_t> dims =
      s.resident()
          ? plannedDims(s, 0)
          : cpu::broadcastShapes(
                node, x.dims, cpu::readInts(node, s.in(1, "shape"), "shape"));
  if (dims.size() < x.dims.size())
    fail(node, "cannot expand ", cpu::shapeString(x.dims), " to ",
         cpu::shapeString(dims));
  requireRank(node, dims.size());
  void *y = s.out(0, x.dtype, dims);
  const std::vector<int64_t> from[1] = {x.dims};
  BroadcastGeometry<1> g = makeBroadcastGeometry<1>(dims, from);
  if (g.count)
    launchBroadcastCopy(dtypeSize(x.dtype), s.device(0), y, g, s.stream());
}

/// Where a Slice of data of dims `in` reads: the geometry of its output
/// over data (strides stepped) and the element offset of its first element.
BroadcastGeometry<1> sliceWalk(const std::vector<int64_t> &in,
                               const cpu::SliceGeometry &sg, int64_t &base) {
  std::vector<int64_t> inStrides = cpu::rowMajorStrides(in);
  BroadcastGeometry<1> g;
  g.rank = int(sg.dims.size());
  g.simple = false;
  g.count = 1;
  base = 0;
  for (size_t a = 0; a < sg.dims.size(); ++a) {
    g.dims[a] = sg.dims[a];
    g.strides[0][a] = inStrides[a] * sg.step[a];
    g.count *= sg.dims[a];
    base += sg.first[a] * inStrides[a];
  }
  return g;
}

void runSlice(NodeStaging &s) {
  const Node &node = s.node();
  const Tensor &x = s.in(0, "data");
  requireCopyable(node, x);
  requireRank(node, x.dims.size());
  // Reads inputs 1..4 (host mirrors in a resident step, see the op entry).
  cpu::SliceGeometry sg = cpu::sliceGeometry(s.ctx(), x.dims, 1);
  void *y = s.out(0, x.dtype, sg.dims);
  int64_t base = 0;
  BroadcastGeometry<1> g = sliceWalk(x.dims, sg, base);
  if (g.count == 0)
    return;
  const auto *src = static_cast<const uint8_t *>(s.device(0)) +
                    base * int64_t(dtypeSize(x.dtype));
  launchBroadcastCopy(dtypeSize(x.dtype), src, y, g, s.stream());
}

/// SliceGrad(dY, data, starts, ends [, axes, steps]): zeros of data's
/// shape with dY written where the Slice read (each position at most once,
/// so a byte copy: any dtype, exact).
void runSliceGrad(NodeStaging &s) {
  const Node &node = s.node();
  const Tensor &dy = s.in(0, "dY"), &data = s.in(1, "data");
  requireCopyable(node, dy);
  requireRank(node, data.dims.size());
  // Reads inputs 2..5 (host mirrors in a resident step, see the op entry).
  cpu::SliceGeometry sg = cpu::sliceGeometry(s.ctx(), data.dims, 2);
  if (dy.dims != sg.dims)
    fail(node, "dY of shape ", cpu::shapeString(dy.dims), " is not the shape ",
         cpu::shapeString(sg.dims), " the slice of data ",
         cpu::shapeString(data.dims), " has");
  auto *dx = static_cast<uint8_t *>(s.out(0, dy.dtype, data.dims));
  size_t es = dtypeSize(dy.dtype);
  if (data.numel() == 0)
    return;
  MPC_CUDA_CHECK(cudaMemsetAsync(dx, 0, size_t(data.numel()) * es, s.stream()));
  int64_t base = 0;
  BroadcastGeometry<1> g = sliceWalk(data.dims, sg, base);
  launchScatterCopy(es, s.device(0), dx + base * int64_t(es), g, s.stream());
}

void runConcat(NodeStaging &s) {
  const Node &node = s.node();
  size_t n = s.ctx().inputs.size();
  if (n == 0)
    fail(node, "expects at least one input");
  if (!node.hasAttr("axis"))
    fail(node, "requires attribute 'axis'");
  const Tensor &first = s.in(0, "inputs");
  requireCopyable(node, first);
  int64_t r = int64_t(first.dims.size());
  if (r == 0)
    fail(node, "cannot concatenate scalars");
  int64_t axis = cpu::normalizeAxis(node, node.attrInt("axis", 0), r);
  std::vector<int64_t> dims = first.dims;
  dims[size_t(axis)] = 0;
  for (size_t i = 0; i < n; ++i) {
    const Tensor &t = s.in(i, "inputs");
    if (t.dtype != first.dtype)
      fail(node, "input ", i, " is ", dtypeName(t.dtype), ", input 0 is ",
           dtypeName(first.dtype));
    bool ok = int64_t(t.dims.size()) == r;
    for (int64_t d = 0; ok && d < r; ++d)
      ok = d == axis || t.dims[size_t(d)] == first.dims[size_t(d)];
    if (!ok)
      fail(node, "input ", i, " of shape ", cpu::shapeString(t.dims),
           " does not match input 0 of shape ", cpu::shapeString(first.dims),
           " outside axis ", axis);
    dims[size_t(axis)] += t.dims[size_t(axis)];
  }
  auto *y = static_cast<uint8_t *>(s.out(0, first.dtype, dims));
  cpu::AxisSplit out = cpu::splitAt(dims, axis);
  size_t es = dtypeSize(first.dtype);
  size_t rowBytes = size_t(out.len * out.inner) * es, offset = 0;
  for (size_t i = 0; i < n; ++i) {
    const Tensor &t = s.in(i, "inputs");
    size_t chunk = size_t(t.dims[size_t(axis)] * out.inner) * es;
    if (chunk && out.outer)
      MPC_CUDA_CHECK(cudaMemcpy2DAsync(y + offset, rowBytes, s.device(i), chunk,
                                       chunk, size_t(out.outer),
                                       cudaMemcpyDeviceToDevice, s.stream()));
    offset += chunk;
  }
}

void runSplit(NodeStaging &s) {
  const Node &node = s.node();
  const Tensor &x = s.in(0, "input");
  requireCopyable(node, x);
  int64_t rank = int64_t(x.dims.size());
  if (rank == 0)
    fail(node, "cannot split a scalar");
  int64_t axis = cpu::normalizeAxis(node, node.attrInt("axis", 0), rank);
  cpu::AxisSplit in = cpu::splitAt(x.dims, axis);
  std::vector<int64_t> sizes;
  if (s.resident()) {
    // The plan's output dims say the sizes; an omitted output would hide
    // one, so every output must be there.
    int64_t total = 0;
    for (size_t k = 0; k < s.ctx().outputs.size(); ++k) {
      if (!s.ctx().hasOutput(k))
        fail(node, "omits output ", k,
             "; the device-resident step takes Split's sizes from its "
             "outputs' planned shapes");
      const std::vector<int64_t> &d = plannedDims(s, k);
      if (int64_t(d.size()) != rank)
        fail(node, "output ", k, " is planned as ", cpu::shapeString(d));
      sizes.push_back(d[size_t(axis)]);
      total += sizes.back();
    }
    if (total != in.len)
      fail(node, "planned outputs ", cpu::shapeString(sizes),
           " do not add up to the axis length ", in.len);
  } else {
    sizes = cpu::splitSizes(s.node(), s.optionalIn(1), s.ctx().outputs.size(),
                            in.len);
  }
  size_t es = dtypeSize(x.dtype);
  size_t rowBytes = size_t(in.len * in.inner) * es, offset = 0;
  const auto *src = static_cast<const uint8_t *>(s.device(0));
  for (size_t k = 0; k < sizes.size(); ++k) {
    std::vector<int64_t> dims = x.dims;
    dims[size_t(axis)] = sizes[k];
    size_t chunk = size_t(sizes[k] * in.inner) * es;
    void *y = s.optionalOut(k, x.dtype, dims);
    if (y && chunk && in.outer)
      MPC_CUDA_CHECK(cudaMemcpy2DAsync(y, chunk, src + offset, rowBytes, chunk,
                                       size_t(in.outer),
                                       cudaMemcpyDeviceToDevice, s.stream()));
    offset += chunk;
  }
}

void runRange(NodeStaging &s) {
  cpu::RangeSpec r =
      cpu::rangeSpec(s.node(), s.hostValue(0, "start"), s.hostValue(1, "limit"),
                     s.hostValue(2, "delta"));
  if (!rangeSupported(r.dtype))
    fail(s.node(),
         "the cuda backend writes Range in int64, int32, fp64, fp32, fp16 "
         "or bf16, not ",
         dtypeName(r.dtype));
  void *y = s.out(0, r.dtype, {r.count});
  launchRange(r.dtype, y, r.count, r.start, r.delta, r.startInt, r.deltaInt,
              s.stream());
}

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

std::string checkRange(const Node &node) {
  const Value *start = node.input(0);
  if (!start || start->dtype == DType::Undefined ||
      rangeSupported(start->dtype))
    return "";
  return std::string("it writes int64, int32, fp64, fp32, fp16 or bf16, "
                     "not ") +
         dtypeName(start->dtype);
}

} // namespace

std::vector<CudaOpEntry> shapeOps() {
  return {
      {"", "Transpose", runTranspose, noCheck},
      {"", "Expand", runExpand, noCheck},
      // starts, ends, axes, steps: read on the host.
      {"", "Slice", runSlice, noCheck,
       (1u << 1) | (1u << 2) | (1u << 3) | (1u << 4)},
      // dY, data, then starts, ends, axes, steps: read on the host.
      {kMpcDomain, "SliceGrad", runSliceGrad, noCheck,
       (1u << 2) | (1u << 3) | (1u << 4) | (1u << 5)},
      {"", "Concat", runConcat, noCheck},
      {"", "Split", runSplit, noCheck},
      // start, limit, delta: read on the host.
      {"", "Range", runRange, checkRange, (1u << 0) | (1u << 1) | (1u << 2)},
  };
}

} // namespace cuda
} // namespace mpc
