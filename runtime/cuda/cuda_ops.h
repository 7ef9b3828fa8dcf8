// The CUDA backend's op table: one entry per (domain, op type).
//
// Each op category's file (run_elementwise.cpp, run_activation.cpp,
// run_reduction.cpp, run_matmul.cpp, run_conv_pool.cpp,
// run_normalization.cpp, run_shape_ops.cpp, run_gather_scatter.cpp,
// run_selection.cpp, run_loss.cpp, run_optimizer.cpp, run_random.cpp,
// run_fused.cpp: the categories of passes/shape_rules/) lists its entries,
// like the CPU kernel families; runners two categories' tables list are
// named in shared_runners.h. The backend's supports() and run()
// read only this table (cuda_ops.cpp), so what it claims and what it runs
// cannot drift apart. An entry's check looks at what the graph already says
// (dtypes, attributes) and refuses, with why, nodes the device code does not
// take; an entry without a runner is a shape or view op the backend runs on the
// host with the CPU kernel.
#pragma once

#include "ir/graph.h"

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace mpc {
namespace cuda {

class NodeStaging;

/// Runs one node: reads inputs, allocates outputs, launches device code.
using CudaRunner = void (*)(NodeStaging &);
/// "" when the node can run on the GPU, else why not (one clause).
using CudaCheck = std::string (*)(const Node &);

struct CudaOpEntry {
  const char *domain;
  const char *opType;
  CudaRunner run; ///< nullptr: runs on the host (shape/view ops)
  CudaCheck check;
  /// Bit i: the runner reads input i's value on the host (an axes list, a
  /// ratio). A device-resident step runs the node only when the executor
  /// knows that value before the step (cudaBackendSupportsResident).
  uint32_t hostInputs = 0;
};

std::vector<CudaOpEntry> elementwiseOps();
std::vector<CudaOpEntry> activationOps();
std::vector<CudaOpEntry> reductionOps();
std::vector<CudaOpEntry> matmulOps();
std::vector<CudaOpEntry> convPoolOps();
std::vector<CudaOpEntry> normalizationOps();
std::vector<CudaOpEntry> shapeOps();
std::vector<CudaOpEntry> gatherScatterOps();
/// TopK, ArgMax, ArgMin (runtime/cuda/run_selection.cpp).
std::vector<CudaOpEntry> selectionOps();
std::vector<CudaOpEntry> lossOps();
std::vector<CudaOpEntry> optimizerOps();
/// --shard-optimizer's RankShard, ReduceScatter (NCCL) and AllGather (NCCL)
/// (runtime/cuda/run_shard.cpp).
std::vector<CudaOpEntry> shardOps();
std::vector<CudaOpEntry> randomOps();
std::vector<CudaOpEntry> fusedOps();
std::vector<CudaOpEntry> hostOps();

/// Whether a device-resident step can run `node` when the executor knows
/// the values of its inputs where hostKnown[i] (the op table's hostInputs;
/// host ops: ConstantOfShape needs its shape).
bool supportsResident(const Node &node, const std::vector<bool> &hostKnown,
                      std::string &why);

/// The entry for (domain, op), or nullptr ("ai.onnx" is the default domain).
const CudaOpEntry *findCudaOp(const std::string &domain, const std::string &op);

/// "Op" or "mpc.Op".
std::string cudaOpName(const Node &node);

// --- checks shared by the families
// --------------------------------------------

/// True for the dtypes the device kernels take (fp32, fp16, bf16).
bool isDeviceFloat(DType t);
/// The dtype an op's 16-bit copy output is written in (its `low`
/// attribute, default fp16: SoftmaxTo, AddTo, the norms' To forms);
/// Undefined when the attribute names no type.
DType lowType(const Node &n);
/// "" unless one of the listed inputs has a known dtype the kernels do not
/// take.
std::string requireDeviceFloat(const Node &node,
                               std::initializer_list<size_t> inputs);
/// The same for inputs first..end of the node.
std::string requireDeviceFloatFrom(const Node &node, size_t first);
/// "" unless input i has a known dtype other than int64 or int32 (indices).
std::string requireIndices(const Node &node, size_t i);
/// ScatterND's and ScatterElements' indices, reduction and data dtype:
/// reduction none moves any 1-8 byte element, the others compute in fp32,
/// fp16, bf16, int32 or int64 (run_gather_scatter.cpp).
std::string checkScatter(const Node &node);
/// "" unless input 0 has a known dtype the float kernels do not take.
std::string checkInput0(const Node &n);
/// The same for inputs 0 and 1.
std::string checkInputs01(const Node &n);
/// Always "" (ops whose operands are checked when they run).
std::string noCheck(const Node &node);

/// Throws mpc::Error naming the node unless t's elements are 1, 2, 4 or 8
/// bytes: what the kernels that move elements as raw bytes take.
void requireCopyable(const Node &node, const Tensor &t);

/// Throws naming the node unless dY and X have one shape (unaryGrad's rule).
void requireSameShape(const Node &node, const Tensor &dy, const Tensor &x);

/// Throws mpc::Error naming the node unless t is fp32, fp16 or bf16.
void requireDeviceFloat(const Node &node, const Tensor &t, const char *what);

} // namespace cuda
} // namespace mpc
