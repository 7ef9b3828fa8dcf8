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
#include "kernels/cpu/cpu_util.h"
#include "kernels/cpu/node_geometry.h"
#include "kernels/cuda/gather.h"
#include "runtime/cuda/cuda_ops.h"
#include "runtime/cuda/node_staging.h"

namespace mpc {
namespace cuda {
namespace {

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

std::vector<CudaOpEntry> indexTupleOps() {
  return {
      {"", "GatherND", runGatherND,
       [](const Node &n) { return requireIndices(n, 1); }, 1u << 1},
      {"", "ScatterND", runScatterND, checkScatter, 1u << 1},
  };
}

} // namespace cuda
} // namespace mpc
