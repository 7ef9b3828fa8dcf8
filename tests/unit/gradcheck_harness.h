// The float64 finite-difference gradient check, shared by the per-family
// gradcheck test files (tests/unit/gradcheck_<family>_test.cpp).
//
// A case is a tiny graph in ONNX text whose parameters are fp64
// initializers; unless the op is itself a loss, the loss is
// ReduceSum(op(...) * R) with a fixed random R (a non-trainable constant).
// infer-shapes and autodiff run on it, the training algorithm is executed
// on the CPU backend for the analytic gradients, and each parameter element
// is perturbed by +-h in the main graph for (L(p+h) - L(p-h)) / 2h. This is
// the procedure tests/unit/gradcheck_test.cpp uses to check the seed's
// rules; GradCheck.EveryRuleIsCovered there also accepts the ops a family
// file declares with coverGradientRules().
#pragma once

#include "ir/tensor.h"

#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace mpc {
namespace gradcheck {

/// A trainable fp64 initializer with values drawn uniformly from [lo, hi].
struct Param {
  std::string name;
  std::vector<int64_t> dims;
  double lo = -1.0, hi = 1.0;
};

/// Any other initializer (labels, frozen weights), written as given.
struct Data {
  std::string decl; ///< e.g. "int64[4] y = {0, 2, 1, 1}"
};

/// A graph input (for symbolic shapes) and the value it is run with.
struct Input {
  std::string decl; ///< e.g. "double[N,3] x"
  std::string name;
  Tensor value;
};

struct GradCase {
  std::string name;
  std::vector<Param> params;
  std::vector<Data> data;
  std::vector<Input> inputs;
  /// Nodes in ONNX text; they compute `y`.
  std::string body;
  /// y is the loss itself (a loss op with reduction); else ReduceSum(y * R).
  bool yIsLoss = false;
  int64_t opset = 17;
  /// --frozen regex: parameters that get no gradient.
  std::string frozen;
  /// Runs sync-batchnorm after autodiff (--data-parallel --sync-batchnorm,
  /// in a world of one rank).
  bool syncBatchNorm = false;
  double h = 1e-6;
  double tol = 1e-6;
};

/// Builds the case, runs autodiff and compares every gradient element with
/// its central finite difference (GoogleTest failures on mismatch).
void checkGradients(const GradCase &c);
void checkAll(const std::vector<GradCase> &cases);

/// "[2,3,4]".
std::string formatDims(const std::vector<int64_t> &dims);
/// A random fp64 tensor in [-1, 1] for a graph input, deterministic per seed.
Tensor randomTensor(std::vector<int64_t> dims, uint64_t seed);

/// One case: `body` over the fp64 parameters `params`, with constant `data`,
/// at default-domain `opset`.
GradCase one(const std::string &name, std::vector<Param> params,
             const std::string &body, std::vector<Data> data = {},
             int64_t opset = 17);

/// Declares ops whose gradient rules a family test file checks; call it from
/// a namespace-scope initializer (`const bool k = coverGradientRules(...)`).
bool coverGradientRules(const std::vector<std::string> &ops);
/// Every op declared through coverGradientRules.
const std::set<std::string> &familyCoveredGradientRules();

} // namespace gradcheck
} // namespace mpc
