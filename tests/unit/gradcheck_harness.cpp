// The float64 finite-difference gradient check shared by the per-family
// gradcheck tests (see gradcheck_harness.h) and by
// tests/unit/gradcheck_test.cpp.
#include "tests/unit/gradcheck_harness.h"

#include "passes/onnx/onnx_io.h"
#include "passes/pass.h"
#include "passes/shape_inference.h"
#include "runtime/executor.h"
#include "support/diagnostics.h"
#include "support/name_pattern.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <sstream>

namespace mpc {
namespace gradcheck {
namespace {

std::set<std::string> &coveredOps() {
  static std::set<std::string> ops;
  return ops;
}

std::string caseText(const GradCase &c, std::mt19937_64 &rng) {
  std::ostringstream os;
  os << "<ir_version: 8, opset_import: [\"\" : " << c.opset << "]>\n"
     << "gradcheck (";
  for (size_t i = 0; i < c.inputs.size(); ++i)
    os << (i ? ", " : "") << c.inputs[i].decl;
  os << ") => (double y)\n  <";
  bool first = true;
  char buf[40];
  for (const Param &p : c.params) {
    // A rank-0 initializer is written without brackets ("double c = {v}").
    os << (first ? "" : ",\n   ") << "double"
       << (p.dims.empty() ? "" : formatDims(p.dims)) << " " << p.name << " = {";
    first = false;
    std::uniform_real_distribution<double> dist(p.lo, p.hi);
    int64_t n = elementCount(p.dims);
    for (int64_t i = 0; i < n; ++i) {
      std::snprintf(buf, sizeof buf, "%.17g", dist(rng));
      os << (i ? ", " : "") << buf;
    }
    os << "}";
  }
  for (const Data &d : c.data) {
    os << (first ? "" : ",\n   ") << d.decl;
    first = false;
  }
  os << ">\n{\n" << c.body << "\n}\n";
  return os.str();
}

/// Appends loss = ReduceSum(y * R) with a random non-state R shaped like y.
void wrapInWeightedSum(Graph &g, int64_t opset, std::mt19937_64 &rng) {
  Value *y = g.outputs().at(0);
  auto dims = concreteDims(y->dims);
  ASSERT_TRUE(dims.has_value()) << "y has no static shape";
  Tensor r(DType::F64, *dims);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  for (int64_t i = 0; i < r.numel(); ++i)
    r.setFromDouble(i, dist(rng));
  Value *rv = g.addInitializer("R", std::move(r));
  Node *mul = g.createNode("Mul", {y, rv}, 1, "weight_by_R");
  Node *sum = g.createNode("ReduceSum", {mul->output(0)}, 1, "loss_sum");
  sum->setAttr("keepdims", Attribute::ofInt(0));
  inferNode(*mul, opset);
  inferNode(*sum, opset);
  g.setOutput(0, sum->output(0));
}

double scalarOf(const Tensor &t) { return t.getAsDouble(0); }

/// Builds the case, runs autodiff and compares every gradient element.
} // namespace

void checkGradients(const GradCase &c) {
  SCOPED_TRACE(c.name);
  std::mt19937_64 rng(std::hash<std::string>{}(c.name));
  std::string text = caseText(c, rng);
  SCOPED_TRACE(text);
  std::unique_ptr<Model> model;
  try {
    model = parseModelText(text, c.name);
    CompileOptions opts;
    opts.frozen = c.frozen;
    opts.dataParallel = opts.syncBatchNorm = c.syncBatchNorm;
    PassContext ctx{opts, {}, {}};
    runInferShapes(*model, ctx);
    if (!c.yIsLoss) {
      wrapInWeightedSum(*model->graph, c.opset, rng);
      if (testing::Test::HasFatalFailure())
        return;
    }
    runAutodiff(*model, ctx);
    runSyncBatchNorm(*model, ctx);
  } catch (const Error &e) {
    FAIL() << "compile failed: " << e.what();
  }

  std::vector<std::string> params = splitList(*model->meta("mpc.params"));
  std::vector<std::string> expected;
  for (const Param &p : c.params)
    if (c.frozen.empty() ||
        !compileNamePattern(c.frozen, "frozen")->search(p.name))
      expected.push_back(p.name);
  EXPECT_EQ(params, expected) << "parameters that received a gradient";

  auto backend = createCpuBackend();
  try {
    Executor step(*model->training->algorithm, *backend);
    Executor forward(*model->graph, *backend);
    for (const Input &in : c.inputs) {
      step.setInput(in.name, in.value);
      forward.setInput(in.name, in.value);
    }
    step.run();
    forward.run();
    EXPECT_NEAR(scalarOf(step.output(0)), scalarOf(forward.output(0)), 1e-12)
        << "the step's loss differs from the forward graph's";

    for (size_t k = 0; k < params.size(); ++k) {
      const std::string &p = params[k];
      const Tensor &grad = step.output(1 + k);
      const Tensor base = *model->graph->findValue(p)->initializer();
      ASSERT_EQ(grad.dims, base.dims) << "gradient shape of " << p;
      ASSERT_EQ(grad.dtype, DType::F64) << "gradient dtype of " << p;
      int bad = 0;
      for (int64_t j = 0; j < base.numel(); ++j) {
        Tensor t = base;
        t.setFromDouble(j, base.getAsDouble(j) + c.h);
        forward.setInitializer(p, t);
        forward.run();
        double plus = scalarOf(forward.output(0));
        t.setFromDouble(j, base.getAsDouble(j) - c.h);
        forward.setInitializer(p, t);
        forward.run();
        double minus = scalarOf(forward.output(0));
        double fd = (plus - minus) / (2 * c.h);
        double an = grad.getAsDouble(j);
        double allowed = c.tol * (1.0 + std::abs(fd) + std::abs(an));
        // Written so that a NaN on either side fails: NaN > x is false.
        if (!(std::abs(fd - an) <= allowed) && bad++ < 5)
          ADD_FAILURE() << "d loss / d " << p << "[" << j << "]: autodiff "
                        << an << ", finite difference " << fd;
      }
      forward.setInitializer(p, base);
    }
  } catch (const Error &e) {
    FAIL() << "execution failed: " << e.what();
  }
}

void checkAll(const std::vector<GradCase> &cases) {
  for (const GradCase &c : cases)
    checkGradients(c);
}

std::string formatDims(const std::vector<int64_t> &dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i)
    s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

Tensor randomTensor(std::vector<int64_t> dims, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  Tensor t(DType::F64, std::move(dims));
  for (int64_t i = 0; i < t.numel(); ++i)
    t.setFromDouble(i, dist(rng));
  return t;
}

bool coverGradientRules(const std::vector<std::string> &ops) {
  coveredOps().insert(ops.begin(), ops.end());
  return true;
}

GradCase one(const std::string &name, std::vector<Param> params,
             const std::string &body, std::vector<Data> data, int64_t opset) {
  GradCase c;
  c.name = name;
  c.params = std::move(params);
  c.body = body;
  c.data = std::move(data);
  c.opset = opset;
  return c;
}

const std::set<std::string> &familyCoveredGradientRules() {
  return coveredOps();
}

} // namespace gradcheck
} // namespace mpc
