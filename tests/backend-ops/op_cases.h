// The cases of tests/backend-ops: one node, its inputs, how to compare.
//
// Every op the CUDA backend runs with device code appears here in every
// dtype it takes (BackendOpsCoverage checks that against the backend's own
// list, so a new op cannot skip this test). Inputs are random, drawn per
// case and dtype from a fixed seed; both backends get the same tensors.
#pragma once

#include "ir/builder.h"
#include "ir/tensor.h"

#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace mpc {
namespace backend_ops {

enum class Compare {
  Exact,    ///< the same bytes (elementwise IEEE math, casts, optimizer)
  Tolerance ///< normalised error within the dtype's tolerance
};

/// An input of a case; nullopt is an omitted optional input.
using Inputs = std::vector<std::optional<Tensor>>;

struct OpCase {
  std::string name; ///< test name, letters, digits and '_' only
  std::string domain, op;
  Builder::Attrs attrs;
  size_t numOutputs = 1;
  /// The dtype the case is instantiated for (fp32, fp16, bf16) is passed
  /// to `make`; cases with a fixed dtype list only that one.
  std::vector<DType> dtypes;
  std::function<Inputs(DType, std::mt19937 &)> make;
  Compare compare = Compare::Exact;
};

/// All cases.
const std::vector<OpCase> &opCases();
/// GatherElements, NLL loss, extremum/slice gradients, ONNX optimizers.
void addGatherLossOptim(std::vector<OpCase> &cases);
/// Piecewise ops, Not, CastLike, Range, Trilu, CumSum, the random draws,
/// the 16-byte vector paths.
void addElementwiseMore(std::vector<OpCase> &cases);
/// TopK, ArgMax, ArgMin (op_cases_selection.cpp).
void addSelection(std::vector<OpCase> &cases);

/// The case's node in `g`, one graph input per given input (absent optional
/// inputs stay empty); `ptrs` gets the tensors in the node's input order.
Node *buildCaseNode(Graph &g, const OpCase &c, const Inputs &inputs,
                    std::vector<const Tensor *> &ptrs);

/// "Op" or "mpc.Op" of a case (what cudaDeviceOps() lists).
std::string caseOpName(const OpCase &c);

/// The source tree (models/): $MPC_SOURCE_DIR when set, so that a binary
/// built elsewhere runs on a GPU machine's copy of the tree
/// (tools/gpu-check.sh --prebuilt), else the tree it was built from.
std::string sourceDir();

// --- input helpers (also used by the other backend-ops tests)
// -----------------

/// Uniform values in [lo, hi) as a tensor of dtype t (rounded to it).
Tensor randomTensor(std::mt19937 &rng, DType t, std::vector<int64_t> dims,
                    float lo = -1, float hi = 1);
/// Integer labels uniform in [0, classes).
Tensor randomLabels(std::mt19937 &rng, std::vector<int64_t> dims,
                    int64_t classes);
Tensor boolScalar(bool v);
Tensor int64Scalar(int64_t v);
Tensor f32Scalar(float v);

} // namespace backend_ops
} // namespace mpc
