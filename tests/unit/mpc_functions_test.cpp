// Tests of the model-local functions of mpc's ops
// (passes/onnx/mpc_functions.cpp): every body parses, computes what the op's
// CPU kernel computes, and makes compiled models that ONNX's checker accepts.
//
// Correctness: each case builds one mpc node, runs its kernel (runCpuNode)
// and its inlined body (inlineMpcFunction + Executor on the CPU backend) on
// the same random inputs, and compares: 1e-5 relative for fp32 (fp64:
// 1e-12, fp16/bf16: two ulps of the result), exactly for selections
// (ReluGrad), UpdateLossScale, IncrementStep and the skipped step of SGD and
// Adam. Standard ops a body uses that the CPU backend has no kernel for are
// run by a small reference here (kTestFallbackOps); the test that lists
// them fails when a body needs any other.
//
// Models: models/mlp_seed.onnx through the full pipeline (sgd, momentum,
// adam, adamw, clipping; fp16/bf16/fp32), exported with exportModel and
// exportStepModel, must pass onnx::checker::check_model plus strict type
// inference (what onnx.checker.check_model(full_check=True) runs), and the
// written model must train exactly as the compiled one, and the step lowered
// to standard ops (inlineMpcFunctions) closely.
#include "ir/mpc_ops.h"
#include "kernels/cpu/kernel_table.h"
#include "passes/onnx/mpc_functions.h"
#include "passes/onnx/onnx_io.h"
#include "passes/pipeline.h"
#include "runtime/executor.h"
#include "runtime/trainer.h"
#include "support/diagnostics.h"

#include "onnx/checker.h"
#include "onnx/onnx_pb.h"
#include "onnx/shape_inference/implementation.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

using namespace mpc;

namespace {

// --- a CPU backend plus references for standard ops it may lack -------------

/// Standard ops the bodies use that kernels/cpu may not have (yet). Each is
/// run here only while the CPU backend does not support it.
const std::set<std::string> kTestFallbackOps = {"Range", "CastLike",
                                                "ScatterElements", "Pad"};

class CpuWithFallbacks final : public Backend {
public:
  CpuWithFallbacks() : cpu_(createCpuBackend()) {}

  std::string name() const override { return "cpu"; }

  bool supports(const Node &node, std::string &why) const override {
    return cpu_->supports(node, why) ||
           (node.domain().empty() && kTestFallbackOps.count(node.opType()));
  }

  void run(KernelContext &ctx) override {
    std::string why;
    if (cpu_->supports(ctx.node, why))
      return cpu_->run(ctx);
    if (ctx.node.opType() == "Range")
      return runRange(ctx);
    if (ctx.node.opType() == "ScatterElements")
      return runScatterAdd(ctx);
    if (ctx.node.opType() == "Pad")
      return runPad(ctx);
    runCastLike(ctx);
  }

private:
  /// Range(start, limit, delta): ceil((limit - start) / delta) elements.
  static void runRange(KernelContext &ctx) {
    const Tensor &start = ctx.in(0), &limit = ctx.in(1), &delta = ctx.in(2);
    double s = start.getAsDouble(0), d = delta.getAsDouble(0);
    double count = std::ceil((limit.getAsDouble(0) - s) / d);
    int64_t n = count > 0 ? int64_t(count) : 0;
    Tensor &y = ctx.out(0, start.dtype, {n});
    for (int64_t i = 0; i < n; ++i)
      y.setFromDouble(i, s + double(i) * d);
  }

  /// ScatterElements <axis = 0> on 1-D data, the only form the bodies use:
  /// out = data, out[indices[i]] = (or += for reduction "add") updates[i].
  static void runScatterAdd(KernelContext &ctx) {
    const Tensor &data = ctx.in(0), &idx = ctx.in(1), &upd = ctx.in(2);
    std::string reduction = ctx.node.attrString("reduction", "none");
    if (data.dims.size() != 1 || ctx.node.attrInt("axis", 0) != 0 ||
        (reduction != "add" && reduction != "none") ||
        idx.numel() != upd.numel())
      throw Error("test ScatterElements: only 1-D, reduction none or add");
    bool add = reduction == "add";
    Tensor &out = ctx.out(0, data.dtype, data.dims);
    out.bytes = data.bytes;
    for (int64_t i = 0; i < idx.numel(); ++i) {
      int64_t at = int64_t(idx.getAsDouble(i));
      if (at < 0)
        at += data.dims[0];
      out.setFromDouble(at,
                        (add ? out.getAsDouble(at) : 0.0) + upd.getAsDouble(i));
    }
  }

  /// Pad (mode constant, value 0) with non-negative pads.
  static void runPad(KernelContext &ctx) {
    const Tensor &x = ctx.in(0), &pads = ctx.in(1);
    size_t r = x.dims.size();
    std::vector<int64_t> dims = x.dims, begin(r);
    for (size_t d = 0; d < r; ++d) {
      begin[d] = int64_t(pads.getAsDouble(int64_t(d)));
      int64_t end = int64_t(pads.getAsDouble(int64_t(d + r)));
      if (begin[d] < 0 || end < 0)
        throw Error("test Pad: only non-negative pads");
      dims[d] += begin[d] + end;
    }
    Tensor &y = ctx.out(0, x.dtype, dims);
    std::fill(y.bytes.begin(), y.bytes.end(), uint8_t(0));
    for (int64_t i = 0; i < x.numel(); ++i) {
      int64_t rest = i, at = 0, stride = 1;
      for (size_t d = r; d-- > 0;) {
        at += (rest % x.dims[d] + begin[d]) * stride;
        rest /= x.dims[d];
        stride *= dims[d];
      }
      y.setFromDouble(at, x.getAsDouble(i));
    }
  }

  /// CastLike(x, like) is Cast<to = like's type>(x): run the CPU's Cast.
  static void runCastLike(KernelContext &ctx) {
    Graph g;
    Value *x = g.addInput("x", ctx.in(0).dtype, toDims(ctx.in(0).dims));
    Node *cast = g.createNode("Cast", {x}, 1);
    cast->setAttr("to", Attribute::ofInt(toOnnxDataType(ctx.in(1).dtype)));
    std::vector<Tensor> out;
    runCpuNode(*cast, {&ctx.in(0)}, out);
    *ctx.outputs.at(0) = std::move(out.at(0));
  }

  std::unique_ptr<Backend> cpu_;
};

// --- tensors -----------------------------------------------------------------

/// The test data's generator, seeded afresh for each test: a test draws the
/// same data whether ctest runs it alone or the whole binary runs it after
/// others (a shared stream made ConvGradWeight's data, and so its rounding,
/// depend on which tests ran before it).
std::mt19937 &rng() {
  static std::mt19937 r;
  static const ::testing::TestInfo *seededFor = nullptr;
  const ::testing::TestInfo *test =
      ::testing::UnitTest::GetInstance()->current_test_info();
  if (test != seededFor) {
    seededFor = test;
    r.seed(1234);
  }
  return r;
}

/// Uniform in [lo, hi), drawn in double and rounded to the dtype.
Tensor uniform(DType t, std::vector<int64_t> dims, double lo, double hi) {
  Tensor d(DType::F64, dims);
  std::uniform_real_distribution<double> u(lo, hi);
  for (int64_t i = 0; i < d.numel(); ++i)
    d.data<double>()[i] = u(rng());
  return t == DType::F64 ? d : d.castTo(t);
}

Tensor integers(DType t, std::vector<int64_t> dims, int64_t lo, int64_t hi) {
  Tensor r(t, dims);
  std::uniform_int_distribution<int64_t> u(lo, hi - 1);
  for (int64_t i = 0; i < r.numel(); ++i)
    r.setFromDouble(i, double(u(rng())));
  return r;
}

Tensor scalarOf(DType t, double v) { return Tensor::scalar(t, v); }
Tensor flag(bool v) { return Tensor::scalar(DType::Bool, v ? 1 : 0); }

/// How close a body's result must be to the kernel's.
struct Tol {
  bool exact = false;
  double rel = 0;
  static Tol bits() { return {true, 0}; }
  static Tol relative(double r) { return {false, r}; }
  /// 1e-5 for fp32, 1e-12 for fp64, two ulps for fp16 (2^-10) and bf16.
  static Tol forType(DType t) {
    switch (t) {
    case DType::F64:
      return relative(1e-12);
    case DType::F16:
      return relative(2e-3);
    case DType::BF16:
      return relative(1.6e-2);
    default:
      return relative(1e-5);
    }
  }
};

/// Elements are within tol.rel of the kernel's, relative to the element and
/// (so cancellation in a sum is not held to the element) to a hundredth of
/// the tensor's largest magnitude; NaN matches NaN, infinities match exactly.
void expectMatches(const Tensor &got, const Tensor &want, Tol tol,
                   const std::string &what) {
  ASSERT_EQ(dtypeName(got.dtype), dtypeName(want.dtype)) << what;
  ASSERT_EQ(got.dims, want.dims) << what;
  if (tol.exact) {
    for (int64_t i = 0; i < want.numel(); ++i) {
      size_t size = dtypeSize(want.dtype);
      if (std::memcmp(got.bytes.data() + i * size, want.bytes.data() + i * size,
                      size) != 0) {
        ADD_FAILURE() << what << ": element " << i << " is "
                      << got.getAsDouble(i) << ", the kernel's is "
                      << want.getAsDouble(i) << " (bits differ)";
        return;
      }
    }
    return;
  }
  double maxAbs = 0;
  for (int64_t i = 0; i < want.numel(); ++i)
    if (std::isfinite(want.getAsDouble(i)))
      maxAbs = std::max(maxAbs, std::fabs(want.getAsDouble(i)));
  for (int64_t i = 0; i < want.numel(); ++i) {
    double a = got.getAsDouble(i), b = want.getAsDouble(i);
    if (std::isnan(a) && std::isnan(b))
      continue;
    if (std::isinf(b) || std::isnan(b)) {
      if (a != b) {
        ADD_FAILURE() << what << ": element " << i << " is " << a
                      << ", the kernel's is " << b;
        return;
      }
      continue;
    }
    double bound = tol.rel * (std::fabs(b) + 1e-2 * maxAbs);
    if (!(std::fabs(a - b) <= bound)) {
      ADD_FAILURE() << what << ": element " << i << " is " << a
                    << ", the kernel's is " << b << " (|diff| "
                    << std::fabs(a - b) << " > " << bound << ")";
      return;
    }
  }
}

// --- one node: kernel vs inlined body ----------------------------------------

struct Case {
  using Inputs = std::vector<std::pair<std::string, std::optional<Tensor>>>;
  using Attrs = std::vector<std::pair<std::string, Attribute>>;
  using Tols = std::vector<std::optional<Tol>>;

  Case() = default;
  Case(std::string label, std::string op, Inputs inputs, Attrs attrs = {},
       size_t numOutputs = 1, Tols tols = {})
      : label(std::move(label)), op(std::move(op)), inputs(std::move(inputs)),
        attrs(std::move(attrs)), numOutputs(numOutputs), tols(std::move(tols)) {
  }

  std::string label;
  std::string op;
  /// (name, value); nullopt: omitted (an inner optional input).
  Inputs inputs;
  Attrs attrs;
  size_t numOutputs = 1;
  /// Per output; missing entries use Tol::forType of the kernel's result.
  Tols tols;
};

void runCase(const Case &c) {
  SCOPED_TRACE(c.label);
  Graph g("case");
  std::vector<Value *> ins;
  std::vector<const Tensor *> tensors;
  std::map<std::string, const Tensor *> byName;
  for (const auto &[name, t] : c.inputs) {
    if (!t) {
      ins.push_back(nullptr);
      tensors.push_back(nullptr);
      continue;
    }
    ins.push_back(g.addInput(name, t->dtype, toDims(t->dims)));
    tensors.push_back(&*t);
    byName[name] = &*t;
  }
  Node *n = g.createNode(c.op, ins, c.numOutputs, c.op, kMpcDomain);
  for (const auto &[name, a] : c.attrs)
    n->setAttr(name, a);

  std::vector<Tensor> want;
  ASSERT_NO_THROW(runCpuNode(*n, tensors, want));
  // As in a compiled graph, the outputs have their inferred types (the
  // window completions read X's sizes from ConvGradInput's dX).
  for (size_t j = 0; j < want.size() && j < n->numOutputs(); ++j)
    n->output(j)->setType(want[j].dtype, toDims(want[j].dims));

  std::unique_ptr<Graph> body;
  ASSERT_NO_THROW(body = inlineMpcFunction(*n));
  ASSERT_EQ(body->outputs().size(), c.numOutputs);
  CpuWithFallbacks backend;
  std::unique_ptr<Executor> exec;
  try {
    exec = std::make_unique<Executor>(*body, backend);
    for (Value *in : body->inputs())
      exec->setInput(in->name(), *byName.at(in->name()));
    exec->run();
  } catch (const std::exception &e) {
    FAIL() << "the body of mpc." << c.op << " failed to run: " << e.what();
  }
  for (size_t j = 0; j < c.numOutputs; ++j) {
    Tol tol = j < c.tols.size() && c.tols[j] ? *c.tols[j]
                                             : Tol::forType(want[j].dtype);
    expectMatches(exec->output(n->output(j)->name()), want[j], tol,
                  c.label + " output " + std::to_string(j));
  }
}

void runCases(const std::vector<Case> &cases) {
  for (const Case &c : cases)
    runCase(c);
}

using A = Attribute;

// --- parsing and coverage ----------------------------------------------------

TEST(MpcFunctions, EveryFixedArityOpHasABodyThatParses) {
  const std::vector<std::string> expected = {
      "Adam",
      "AddTo",
      "AveragePoolGrad",
      "BatchNormalizationGrad",
      "ClipGrad",
      "ConvGradInput",
      "ConvGradWeight",
      "DivSoftmaxTo",
      "DropoutGrad",
      "ErfGrad",
      "FusedMatMul",
      "GatherElementsGrad",
      "GatherGrad",
      "Gelu",
      "GeluGrad",
      "GeluTanh",
      "IncrementStep",
      "LayerNormalizationGrad",
      "LayerNormalizationTo",
      "LeakyReluGrad",
      "LearningRate",
      "LogSigmoid",
      "LogSigmoidGrad",
      "LogSoftmaxGrad",
      "MaxPoolGrad",
      "NegativeLogLikelihoodLossGrad",
      "RMSNormalization",
      "RMSNormalizationGrad",
      "RMSNormalizationTo",
      "ReduceExtremumGrad",
      "ReduceGrad",
      "ReluGrad",
      "SGD",
      "SliceGrad",
      "SoftmaxCrossEntropyLossGrad",
      "SoftmaxGrad",
      "SoftmaxGradAs",
      "SoftmaxGradDiv",
      "SoftmaxTo",
      "SumToShape",
      "SumToShapeAs",
      "UpdateLossScale",
  };
  EXPECT_EQ(mpcOpsWithFunctions(), expected);
  for (const std::string &op : mpcOpsWithFunctions()) {
    SCOPED_TRACE(op);
    ASSERT_NE(mpcFunctionText(op), nullptr);
    onnx::FunctionProto fn;
    ASSERT_NO_THROW(parseMpcFunction(op, fn));
    EXPECT_EQ(fn.name(), op);
    EXPECT_EQ(fn.domain(), kMpcDomain);
    ASSERT_EQ(fn.opset_import_size(), 1);
    EXPECT_EQ(fn.opset_import(0).domain(), "");
    EXPECT_EQ(fn.opset_import(0).version(), 17);
    EXPECT_GT(fn.node_size(), 0);
    // Every attribute reference names a declared attribute and has a type
    // (ONNX 1.12 checks a reference's type against the caller's attribute).
    std::set<std::string> declared(fn.attribute().begin(),
                                   fn.attribute().end());
    for (const auto &n : fn.node())
      for (const auto &a : n.attribute())
        if (!a.ref_attr_name().empty()) {
          EXPECT_TRUE(declared.count(a.ref_attr_name())) << a.ref_attr_name();
          EXPECT_NE(a.type(), onnx::AttributeProto::UNDEFINED) << a.name();
        }
  }
  // Variadic ops cannot be FunctionProtos.
  EXPECT_EQ(mpcFunctionText("UnscaleGradients"), nullptr);
  EXPECT_EQ(mpcFunctionText("ClipGradNorm"), nullptr);
  EXPECT_EQ(mpcFunctionText("ExtremumGrad"), nullptr);
  EXPECT_THROW(
      {
        onnx::FunctionProto fn;
        parseMpcFunction("ClipGradNorm", fn);
      },
      Error);
}

TEST(MpcFunctions, BodiesUseOnlyOpsTheTestCanRun) {
  std::set<std::string> missing;
  for (const std::string &op : mpcOpsWithFunctions()) {
    onnx::FunctionProto fn;
    parseMpcFunction(op, fn);
    for (const auto &n : fn.node()) {
      EXPECT_EQ(n.domain(), "")
          << op << " uses " << n.domain() << "." << n.op_type();
      if (!findCpuKernel("", n.op_type()))
        missing.insert(n.op_type());
    }
  }
  for (const std::string &op : missing)
    EXPECT_TRUE(kTestFallbackOps.count(op))
        << "a body uses " << op
        << ", which neither the CPU backend nor this test can run";
  std::string list;
  for (const std::string &op : missing)
    list += (list.empty() ? "" : ", ") + op;
  RecordProperty("cpu_backend_lacks", list);
  if (!missing.empty())
    std::cout << "[ note     ] standard ops the bodies use that the CPU "
                 "backend has no kernel for (run by the test's reference): "
              << list << "\n";
}

// --- backward ops ------------------------------------------------------------

TEST(MpcFunctions, ReluGradMatchesKernel) {
  std::vector<Case> cases;
  for (auto [g, f] :
       {std::pair(DType::F32, DType::F32), std::pair(DType::F16, DType::F16),
        std::pair(DType::BF16, DType::BF16), std::pair(DType::F32, DType::F16),
        std::pair(DType::F64, DType::F64)}) {
    Tensor y = uniform(f, {4, 6}, -1, 1);
    y.setFromDouble(0, 0.0);
    y.setFromDouble(1, -0.0);
    cases.push_back({std::string("relu ") + dtypeName(g) + "/" + dtypeName(f),
                     "ReluGrad",
                     {{"dY", uniform(g, {4, 6}, -2, 2)}, {"Y", y}},
                     {},
                     1,
                     {Tol::bits()}});
  }
  runCases(cases);
}

TEST(MpcFunctions, SoftmaxGradAndLogSoftmaxGradMatchKernel) {
  std::vector<Case> cases;
  for (const char *op : {"SoftmaxGrad", "LogSoftmaxGrad"}) {
    bool log = std::string(op) == "LogSoftmaxGrad";
    for (auto [g, f] :
         {std::pair(DType::F32, DType::F32), std::pair(DType::F16, DType::F16),
          std::pair(DType::F32, DType::F16), std::pair(DType::F16, DType::F32),
          std::pair(DType::F64, DType::F64)})
      for (int64_t axis : {-1, 0, 1}) {
        Tensor y = log ? uniform(f, {2, 3, 5}, -4, -0.05)
                       : uniform(f, {2, 3, 5}, 0.01, 1);
        cases.push_back({std::string(op) + " " + dtypeName(g) + "/" +
                             dtypeName(f) + " axis " + std::to_string(axis),
                         op,
                         {{"dY", uniform(g, {2, 3, 5}, -1, 1)}, {"Y", y}},
                         {{"axis", A::ofInt(axis)}}});
      }
    // The default axis (-1) when the node has none.
    cases.push_back({std::string(op) + " default axis",
                     op,
                     {{"dY", uniform(DType::F32, {3, 4}, -1, 1)},
                      {"Y", uniform(DType::F32, {3, 4}, -2, -0.1)}},
                     {}});
  }
  runCases(cases);
}

// fold-widening-casts' softmax ops: X (or dY) as stored, computed and
// written in the wider type.
TEST(MpcFunctions, SoftmaxFoldOpsMatchKernel) {
  std::vector<Case> cases;
  for (auto [from, to] :
       {std::pair(DType::F16, DType::F32), std::pair(DType::BF16, DType::F32),
        std::pair(DType::F32, DType::F32), std::pair(DType::F32, DType::F64)})
    for (int64_t axis : {-1, 0, 1}) {
      std::string types = std::string(dtypeName(from)) + "->" + dtypeName(to) +
                          " axis " + std::to_string(axis);
      cases.push_back(
          {"SoftmaxTo " + types,
           "SoftmaxTo",
           {{"X", uniform(from, {2, 3, 5}, -4, 4)}},
           {{"axis", A::ofInt(axis)}, {"to", A::ofInt(toOnnxDataType(to))}}});
      cases.push_back(
          {"DivSoftmaxTo " + types,
           "DivSoftmaxTo",
           {{"X", uniform(from, {2, 3, 5}, -9, 9)},
            {"D", uniform(from, {}, 2, 4)}},
           {{"axis", A::ofInt(axis)}, {"to", A::ofInt(toOnnxDataType(to))}}});
      // With the Cast down (Ylow) as the second output.
      if (to == DType::F32)
        for (DType low : {DType::F16, DType::BF16})
          cases.push_back(
              {"DivSoftmaxTo " + types + " + Ylow " + dtypeName(low),
               "DivSoftmaxTo",
               {{"X", uniform(from, {2, 3, 5}, -9, 9)},
                {"D", uniform(from, {}, 2, 4)}},
               {{"axis", A::ofInt(axis)},
                {"to", A::ofInt(toOnnxDataType(to))},
                {"low", A::ofInt(toOnnxDataType(low))}},
               2});
      cases.push_back({"SoftmaxGradAs " + types,
                       "SoftmaxGradAs",
                       {{"dY", uniform(from, {2, 3, 5}, -1, 1)},
                        {"Y", uniform(to, {2, 3, 5}, 0.01, 1)}},
                       {{"axis", A::ofInt(axis)}}});
      for (DType out : {DType::F16, to})
        cases.push_back({"SoftmaxGradDiv " + types + " -> " + dtypeName(out),
                         "SoftmaxGradDiv",
                         {{"dY", uniform(from, {2, 3, 5}, -1, 1)},
                          {"Y", uniform(to, {2, 3, 5}, 0.01, 1)},
                          {"D", uniform(to, {}, 2, 9)}},
                         {{"axis", A::ofInt(axis)},
                          {"to", A::ofInt(toOnnxDataType(out))}}});
    }
  runCases(cases);
}

/// Loss-gradient cases over reductions, weights, ignore_index, ranks and
/// label types, for either op (scores: log-probabilities or NLL input).
std::vector<Case> lossCases(const std::string &op) {
  std::vector<Case> cases;
  struct Shape {
    std::vector<int64_t> scores, positions;
  };
  for (const Shape &s : {Shape{{6, 4}, {6}}, Shape{{3, 5, 2}, {3, 2}}})
    for (const char *reduction : {"mean", "sum", "none"})
      for (bool weights : {false, true})
        for (std::optional<int64_t> ignore :
             {std::optional<int64_t>(), std::optional<int64_t>(1),
              std::optional<int64_t>(-100)}) {
          int64_t c = s.scores[1];
          Tensor labels = integers(DType::I64, s.positions, 0, c);
          if (ignore == -100)
            for (int64_t i = 0; i < labels.numel(); i += 3)
              labels.setFromDouble(i, -100);
          bool none = std::string(reduction) == "none";
          Case k;
          k.label = op + " " + reduction + (weights ? " weighted" : "") +
                    (ignore ? " ignore " + std::to_string(*ignore) : "") +
                    " rank " + std::to_string(s.scores.size());
          k.op = op;
          k.inputs = {{"dL", none ? uniform(DType::F32, s.positions, -2, 2)
                                  : scalarOf(DType::F32, 0.75)},
                      {"scores", uniform(DType::F32, s.scores, -4, -0.05)},
                      {"labels", labels}};
          if (weights)
            k.inputs.push_back({"weights", uniform(DType::F32, {c}, 0.2, 2)});
          k.attrs = {{"reduction", A::ofString(reduction)}};
          if (ignore)
            k.attrs.push_back({"ignore_index", A::ofInt(*ignore)});
          cases.push_back(k);
        }
  // int32 labels, fp16 scores (weights share the scores' type), an fp16 dL.
  cases.push_back({op + " fp16 int32 labels",
                   op,
                   {{"dL", scalarOf(DType::F16, 1.5)},
                    {"scores", uniform(DType::F16, {5, 3}, -3, -0.1)},
                    {"labels", integers(DType::I32, {5}, 0, 3)},
                    {"weights", uniform(DType::F16, {3}, 0.5, 1.5)}},
                   {{"reduction", A::ofString("sum")}}});
  // No reduction attribute: "mean".
  cases.push_back({op + " default reduction",
                   op,
                   {{"dL", scalarOf(DType::F32, 1.0)},
                    {"scores", uniform(DType::F32, {4, 3}, -3, -0.1)},
                    {"labels", integers(DType::I64, {4}, 0, 3)}},
                   {}});
  // Every position ignored under "mean": the kernel's 0 / 0 gives zeros.
  cases.push_back(
      {op + " all ignored",
       op,
       {{"dL", scalarOf(DType::F32, 1.0)},
        {"scores", uniform(DType::F32, {3, 2}, -3, -0.1)},
        {"labels", Tensor::fromInt64s({3}, {0, 0, 0})}},
       {{"reduction", A::ofString("mean")}, {"ignore_index", A::ofInt(0)}}});
  // A class of weight 0, and ignore_index among the real classes.
  cases.push_back(
      {op + " zero weight",
       op,
       {{"dL", scalarOf(DType::F32, 2.0)},
        {"scores", uniform(DType::F32, {6, 3}, -3, -0.1)},
        {"labels", Tensor::fromInt64s({6}, {0, 1, 2, 0, 1, 2})},
        {"weights", Tensor::fromFloats({3}, {0.0f, 1.5f, 0.5f})}},
       {{"reduction", A::ofString("mean")}, {"ignore_index", A::ofInt(2)}}});
  return cases;
}

TEST(MpcFunctions, SoftmaxCrossEntropyLossGradMatchesKernel) {
  runCases(lossCases("SoftmaxCrossEntropyLossGrad"));
}

TEST(MpcFunctions, NegativeLogLikelihoodLossGradMatchesKernel) {
  runCases(lossCases("NegativeLogLikelihoodLossGrad"));
}

TEST(MpcFunctions, SumToShapeMatchesKernel) {
  struct Shapes {
    std::vector<int64_t> dy, x;
  };
  std::vector<Case> cases;
  for (const Shapes &s :
       {Shapes{{4, 3}, {3}}, Shapes{{4, 3}, {1, 3}}, Shapes{{4, 3}, {4, 1}},
        Shapes{{4, 3}, {}}, Shapes{{4, 3}, {4, 3}}, Shapes{{2, 3, 4}, {3, 1}},
        Shapes{{2, 3, 4}, {2, 1, 4}}, Shapes{{2, 3, 4}, {1}},
        Shapes{{4, 1, 3}, {1, 1, 3}}, Shapes{{}, {}}})
    for (DType t : {DType::F32, DType::F16, DType::F64})
      cases.push_back({"SumToShape " + dimsToString(s.dy) + " to " +
                           dimsToString(s.x) + " " + dtypeName(t),
                       "SumToShape",
                       {{"dY", uniform(t, s.dy, -1, 1)},
                        {"X", uniform(DType::F32, s.x, -1, 1)}}});
  runCases(cases);
}

TEST(MpcFunctions, SumToShapeAsMatchesKernel) {
  std::vector<Case> cases;
  for (DType t : {DType::F16, DType::BF16, DType::F32})
    for (auto to : {std::vector<int64_t>{4}, std::vector<int64_t>{2, 1, 4},
                    std::vector<int64_t>{}})
      cases.push_back({"SumToShapeAs 2x3x4 " + std::string(dtypeName(t)) +
                           " to fp32 " + dimsToString(to),
                       "SumToShapeAs",
                       {{"dY", uniform(t, {2, 3, 4}, -1, 1)},
                        {"X", uniform(DType::F32, to, -1, 1)}}});
  runCases(cases);
}

TEST(MpcFunctions, ReduceGradMatchesKernel) {
  std::vector<Case> cases;
  Tensor x = uniform(DType::F32, {2, 3, 4}, -1, 1);
  for (int64_t mean : {0, 1}) {
    std::string m = mean ? " mean" : " sum";
    auto attrs = [&](std::vector<std::pair<std::string, Attribute>> a) {
      a.push_back({"mean", A::ofInt(mean)});
      return a;
    };
    cases.push_back({"axes attr [1] keepdims" + m,
                     "ReduceGrad",
                     {{"dY", uniform(DType::F32, {2, 1, 4}, -1, 1)}, {"X", x}},
                     attrs({{"axes", A::ofInts({1})}})});
    cases.push_back(
        {"axes attr [0,2] no keepdims" + m,
         "ReduceGrad",
         {{"dY", uniform(DType::F32, {3}, -1, 1)}, {"X", x}},
         attrs({{"axes", A::ofInts({0, 2})}, {"keepdims", A::ofInt(0)}})});
    cases.push_back({"axes input [-1] no keepdims" + m,
                     "ReduceGrad",
                     {{"dY", uniform(DType::F32, {2, 3}, -1, 1)},
                      {"X", x},
                      {"axes", Tensor::fromInt64s({1}, {-1})}},
                     attrs({{"keepdims", A::ofInt(0)}})});
    cases.push_back({"no axes: all, no keepdims" + m,
                     "ReduceGrad",
                     {{"dY", uniform(DType::F32, {}, -1, 1)}, {"X", x}},
                     attrs({{"keepdims", A::ofInt(0)}})});
    cases.push_back({"empty axes input, noop" + m,
                     "ReduceGrad",
                     {{"dY", uniform(DType::F32, {2, 3, 4}, -1, 1)},
                      {"X", x},
                      {"axes", Tensor::fromInt64s({0}, {})}},
                     attrs({{"noop_with_empty_axes", A::ofInt(1)}})});
    cases.push_back({"no axes, noop" + m,
                     "ReduceGrad",
                     {{"dY", uniform(DType::F32, {2, 3, 4}, -1, 1)}, {"X", x}},
                     attrs({{"noop_with_empty_axes", A::ofInt(1)}})});
    cases.push_back({"fp16 axes attr [0,1]" + m,
                     "ReduceGrad",
                     {{"dY", uniform(DType::F16, {1, 1, 4}, -1, 1)},
                      {"X", x.castTo(DType::F16)}},
                     attrs({{"axes", A::ofInts({0, 1})}})});
  }
  runCases(cases);
}

// --- loss scaling and optimizers
// -----------------------------------------------

TEST(MpcFunctions, UpdateLossScaleMatchesKernelExactly) {
  std::vector<Case> cases;
  struct S {
    float scale;
    int64_t tracker;
    bool found;
  };
  const std::vector<std::pair<std::string, Attribute>> attrs = {
      {"growth_factor", A::ofFloat(2.0f)},
      {"backoff_factor", A::ofFloat(0.5f)},
      {"growth_interval", A::ofInt(2000)}};
  for (const S &s :
       {S{65536.0f, 0, false}, S{65536.0f, 1998, false},
        S{65536.0f, 1999, false}, S{65536.0f, 1999, true},
        S{3.0e38f, 1999, false}, S{1.1f, 17, true}, S{1.0e-30f, 5, false}})
    cases.push_back(
        {"scale " + std::to_string(s.scale) + " tracker " +
             std::to_string(s.tracker) + (s.found ? " inf" : " finite"),
         "UpdateLossScale",
         {{"scale", scalarOf(DType::F32, s.scale)},
          {"growth_tracker", scalarOf(DType::I64, double(s.tracker))},
          {"found_inf", flag(s.found)}},
         attrs,
         2,
         {Tol::bits(), Tol::bits()}});
  // Odd factors (float * double rounding) and the defaults.
  cases.push_back({"odd factors",
                   "UpdateLossScale",
                   {{"scale", scalarOf(DType::F32, 3.3f)},
                    {"growth_tracker", scalarOf(DType::I64, 2)},
                    {"found_inf", flag(false)}},
                   {{"growth_factor", A::ofFloat(1.7f)},
                    {"backoff_factor", A::ofFloat(0.3f)},
                    {"growth_interval", A::ofInt(3)}},
                   2,
                   {Tol::bits(), Tol::bits()}});
  cases.push_back({"defaults",
                   "UpdateLossScale",
                   {{"scale", scalarOf(DType::F32, 1024)},
                    {"growth_tracker", scalarOf(DType::I64, 1999)},
                    {"found_inf", flag(false)}},
                   {},
                   2,
                   {Tol::bits(), Tol::bits()}});
  runCases(cases);
}

TEST(MpcFunctions, SGDMatchesKernel) {
  std::vector<Case> cases;
  const std::vector<int64_t> dims = {3, 5};
  struct SgdConfig {
    std::string label;
    float momentum, dampening, weightDecay;
    int64_t nesterov;
  };
  for (const SgdConfig &cfg :
       {SgdConfig{"plain", 0, 0, 0, 0},
        SgdConfig{"weight decay", 0, 0, 0.01f, 0},
        SgdConfig{"momentum", 0.9f, 0, 0, 0},
        SgdConfig{"momentum dampening wd", 0.8f, 0.1f, 0.02f, 0},
        SgdConfig{"nesterov", 0.9f, 0, 0.01f, 1}})
    for (int64_t step : {0, 4})
      for (int found : {-1, 0, 1}) { // -1: found_inf omitted
        bool buffer = cfg.momentum != 0;
        Case k;
        k.label = "SGD " + cfg.label + " step " + std::to_string(step) +
                  (found < 0 ? " no found_inf"
                   : found   ? " skipped"
                             : " finite");
        k.op = "SGD";
        k.inputs = {{"found_inf",
                     found < 0 ? std::optional<Tensor>() : flag(found == 1)},
                    {"step", scalarOf(DType::I64, double(step))},
                    {"param", uniform(DType::F32, dims, -1, 1)},
                    {"grad", uniform(DType::F32, dims, -0.5, 0.5)}};
        if (buffer)
          k.inputs.push_back(
              {"momentum_buffer", uniform(DType::F32, dims, -0.2, 0.2)});
        k.attrs = {{"lr", A::ofFloat(0.1f)},
                   {"momentum", A::ofFloat(cfg.momentum)},
                   {"dampening", A::ofFloat(cfg.dampening)},
                   {"weight_decay", A::ofFloat(cfg.weightDecay)},
                   {"nesterov", A::ofInt(cfg.nesterov)}};
        k.numOutputs = buffer ? 2 : 1;
        k.tols = {Tol::bits(), Tol::bits()};
        cases.push_back(k);
      }
  // --lr-schedule's rate as an fp64 input: -lr rounded once to fp32 (0.1 is
  // no float: float(-0.1) differs from -float(0.1f) in no bit, but 0.3's
  // neighbours show a double's rounding through the body's Cast).
  for (bool buffer : {false, true}) {
    Case k;
    k.label = std::string("SGD lr input") + (buffer ? " momentum" : "");
    k.op = "SGD";
    k.inputs = {{"found_inf", flag(false)},
                {"step", scalarOf(DType::I64, 3)},
                {"param", uniform(DType::F32, dims, -1, 1)},
                {"grad", uniform(DType::F32, dims, -0.5, 0.5)}};
    k.inputs.push_back(
        {"momentum_buffer",
         buffer ? std::optional<Tensor>(uniform(DType::F32, dims, -0.2, 0.2))
                : std::optional<Tensor>()});
    k.inputs.push_back({"lr", scalarOf(DType::F64, 0.30000000000000004)});
    k.attrs = {{"momentum", A::ofFloat(buffer ? 0.9f : 0.0f)}};
    k.numOutputs = buffer ? 2 : 1;
    k.tols = {Tol::bits(), Tol::bits()};
    cases.push_back(k);
  }
  // --optimizer-state-dtype=bf16: a bf16 buffer, widened, updated in fp32 and
  // stored rounded (the kernel's sgdUpdateStored; CastLike in the body).
  for (int64_t step : {0, 3})
    for (bool skipped : {false, true}) {
      Case k;
      k.label = "SGD bf16 momentum step " + std::to_string(step) +
                (skipped ? " skipped" : "");
      k.op = "SGD";
      k.inputs = {{"found_inf", flag(skipped)},
                  {"step", scalarOf(DType::I64, double(step))},
                  {"param", uniform(DType::F32, dims, -1, 1)},
                  {"grad", uniform(DType::F32, dims, -0.5, 0.5)},
                  {"momentum_buffer", uniform(DType::BF16, dims, -0.2, 0.2)}};
      k.attrs = {{"lr", A::ofFloat(0.1f)},
                 {"momentum", A::ofFloat(0.9f)},
                 {"weight_decay", A::ofFloat(0.01f)}};
      k.numOutputs = 2;
      k.tols = {Tol::bits(), Tol::bits()};
      cases.push_back(k);
    }
  // fold-widening-casts: an fp16/bf16 gradient, widened by the body's
  // CastLike as the kernel widens it.
  for (DType t : {DType::BF16, DType::F16})
    for (bool buffer : {false, true}) {
      Case k;
      k.label = std::string("SGD ") + dtypeName(t) + " gradient" +
                (buffer ? " momentum" : "");
      k.op = "SGD";
      k.inputs = {{"found_inf", flag(false)},
                  {"step", scalarOf(DType::I64, 3)},
                  {"param", uniform(DType::F32, dims, -1, 1)},
                  {"grad", uniform(t, dims, -0.5, 0.5)}};
      if (buffer)
        k.inputs.push_back(
            {"momentum_buffer", uniform(DType::F32, dims, -0.2, 0.2)});
      k.attrs = {{"lr", A::ofFloat(0.1f)},
                 {"momentum", A::ofFloat(buffer ? 0.9f : 0.0f)},
                 {"weight_decay", A::ofFloat(0.01f)}};
      k.numOutputs = buffer ? 2 : 1;
      k.tols = {Tol::bits(), Tol::bits()};
      cases.push_back(k);
    }
  // fold-unscale: the loss-scaled gradient and the scale (grad_scale after
  // an omitted lr), unscaled by the body as the kernel unscales it.
  for (DType t : {DType::F32, DType::BF16}) {
    Case k;
    k.label =
        std::string("SGD momentum ") + dtypeName(t) + " gradient grad_scale";
    k.op = "SGD";
    k.inputs = {{"found_inf", flag(false)},
                {"step", scalarOf(DType::I64, 3)},
                {"param", uniform(DType::F32, dims, -1, 1)},
                {"grad", uniform(t, dims, -1500, 1500)},
                {"momentum_buffer", uniform(DType::F32, dims, -0.2, 0.2)},
                {"lr", std::optional<Tensor>()},
                {"grad_scale", scalarOf(DType::F32, 3000)}};
    k.attrs = {{"lr", A::ofFloat(0.1f)}, {"momentum", A::ofFloat(0.9f)}};
    k.numOutputs = 2;
    k.tols = {Tol::bits(), Tol::bits()};
    cases.push_back(k);
  }
  // The working copy of the new master (`low`, passes/weight_copies.h):
  // the body's Cast of new_param, the kernel's as it updates (or, skipped,
  // of the parameter as it stays).
  for (DType low : {DType::F16, DType::BF16})
    for (bool skipped : {false, true}) {
      Case k;
      k.label = std::string("SGD momentum ") + dtypeName(low) +
                " working copy" + (skipped ? " skipped" : "");
      k.op = "SGD";
      k.inputs = {{"found_inf", flag(skipped)},
                  {"step", scalarOf(DType::I64, 3)},
                  {"param", uniform(DType::F32, dims, -1, 1)},
                  {"grad", uniform(DType::F32, dims, -0.5, 0.5)},
                  {"momentum_buffer", uniform(DType::F32, dims, -0.2, 0.2)}};
      k.attrs = {{"lr", A::ofFloat(0.1f)},
                 {"momentum", A::ofFloat(0.9f)},
                 {"low", A::ofInt(toOnnxDataType(low))}};
      k.numOutputs = 3;
      k.tols = {Tol::bits(), Tol::bits(), Tol::bits()};
      cases.push_back(k);
    }
  cases.push_back({"SGD defaults",
                   "SGD",
                   {{"found_inf", flag(false)},
                    {"step", scalarOf(DType::I64, 3)},
                    {"param", uniform(DType::F32, dims, -1, 1)},
                    {"grad", uniform(DType::F32, dims, -1, 1)}},
                   {}});
  runCases(cases);
}

// mpc.AddTo: the body's Casts and fp32 Add against the kernel, mixed input
// types, `to` fp32/fp16/bf16 and Clow.
TEST(MpcFunctions, AddToMatchesKernel) {
  std::vector<Case> cases;
  const std::vector<int64_t> dims = {4, 5};
  for (DType ta : {DType::F32, DType::F16})
    for (DType tb : {DType::F16, DType::BF16, DType::F32})
      for (DType to : {DType::F32, DType::F16, DType::BF16}) {
        Case k;
        k.label = std::string("AddTo ") + dtypeName(ta) + "+" + dtypeName(tb) +
                  "->" + dtypeName(to);
        k.op = "AddTo";
        k.inputs = {{"A", uniform(ta, dims, -2, 2)},
                    {"B", uniform(tb, dims, -2, 2)}};
        k.attrs = {{"to", A::ofInt(toOnnxDataType(to))},
                   {"low", A::ofInt(toOnnxDataType(DType::BF16))}};
        k.numOutputs = 2;
        k.tols = {Tol::bits(), Tol::bits()};
        cases.push_back(k);
      }
  runCases(cases);
}

TEST(MpcFunctions, AdamMatchesKernel) {
  std::vector<Case> cases;
  const std::vector<int64_t> dims = {4, 3};
  struct AdamConfig {
    std::string label;
    float beta1, weightDecay;
    int64_t decoupled;
  };
  for (const AdamConfig &cfg :
       {AdamConfig{"adam", 0.9f, 0, 0}, AdamConfig{"adam wd", 0.9f, 0.01f, 0},
        AdamConfig{"adamw", 0.9f, 0.01f, 1},
        AdamConfig{"beta1 0.3 (lerp's other formula)", 0.3f, 0, 0}})
    for (int64_t step : {0, 1, 2, 7}) // t = 2, 3: Pow's squaring, cubing
      for (int found : {-1, 0, 1}) {
        Case k;
        k.label = "Adam " + cfg.label + " step " + std::to_string(step) +
                  (found < 0 ? " no found_inf"
                   : found   ? " skipped"
                             : " finite");
        k.op = "Adam";
        k.inputs = {{"found_inf",
                     found < 0 ? std::optional<Tensor>() : flag(found == 1)},
                    {"step", scalarOf(DType::I64, double(step))},
                    {"param", uniform(DType::F32, dims, -1, 1)},
                    {"grad", uniform(DType::F32, dims, -0.5, 0.5)},
                    {"exp_avg", uniform(DType::F32, dims, -0.1, 0.1)},
                    {"exp_avg_sq", uniform(DType::F32, dims, 0, 0.05)}};
        k.attrs = {{"lr", A::ofFloat(1e-2f)},
                   {"beta1", A::ofFloat(cfg.beta1)},
                   {"beta2", A::ofFloat(0.999f)},
                   {"epsilon", A::ofFloat(1e-8f)},
                   {"weight_decay", A::ofFloat(cfg.weightDecay)},
                   {"decoupled", A::ofInt(cfg.decoupled)}};
        k.numOutputs = 3;
        k.tols = {Tol::bits(), Tol::bits(), Tol::bits()};
        cases.push_back(k);
      }
  for (DType lrType : {DType::F64, DType::F32}) {
    Case k;
    k.label = std::string("Adam lr input ") + dtypeName(lrType);
    k.op = "Adam";
    k.inputs = {{"found_inf", flag(false)},
                {"step", scalarOf(DType::I64, 5)},
                {"param", uniform(DType::F32, dims, -1, 1)},
                {"grad", uniform(DType::F32, dims, -0.5, 0.5)},
                {"exp_avg", uniform(DType::F32, dims, -0.1, 0.1)},
                {"exp_avg_sq", uniform(DType::F32, dims, 0, 0.05)},
                {"lr", scalarOf(lrType, 0.0030000000000000001)}};
    k.attrs = {{"weight_decay", A::ofFloat(0.01f)}, {"decoupled", A::ofInt(1)}};
    k.numOutputs = 3;
    k.tols = {Tol::bits(), Tol::bits(), Tol::bits()};
    cases.push_back(k);
  }
  // --optimizer-state-dtype=bf16: bf16 moments; the parameter moves by the
  // fp32 new moments, which are then stored rounded (adamUpdateStored).
  for (int64_t step : {0, 6})
    for (bool skipped : {false, true}) {
      Case k;
      k.label = "AdamW bf16 moments step " + std::to_string(step) +
                (skipped ? " skipped" : "");
      k.op = "Adam";
      k.inputs = {{"found_inf", flag(skipped)},
                  {"step", scalarOf(DType::I64, double(step))},
                  {"param", uniform(DType::F32, dims, -1, 1)},
                  {"grad", uniform(DType::F32, dims, -0.5, 0.5)},
                  {"exp_avg", uniform(DType::BF16, dims, -0.1, 0.1)},
                  {"exp_avg_sq", uniform(DType::BF16, dims, 0, 0.05)}};
      k.attrs = {{"lr", A::ofFloat(1e-2f)},
                 {"weight_decay", A::ofFloat(0.01f)},
                 {"decoupled", A::ofInt(1)}};
      k.numOutputs = 3;
      k.tols = {Tol::bits(), Tol::bits(), Tol::bits()};
      cases.push_back(k);
    }
  // fold-widening-casts: an fp16/bf16 gradient, widened by the body's
  // CastLike as the kernel widens it.
  for (DType t : {DType::BF16, DType::F16})
    for (bool skipped : {false, true}) {
      Case k;
      k.label = std::string("AdamW ") + dtypeName(t) + " gradient" +
                (skipped ? " skipped" : "");
      k.op = "Adam";
      k.inputs = {{"found_inf", flag(skipped)},
                  {"step", scalarOf(DType::I64, 3)},
                  {"param", uniform(DType::F32, dims, -1, 1)},
                  {"grad", uniform(t, dims, -0.5, 0.5)},
                  {"exp_avg", uniform(DType::F32, dims, -0.1, 0.1)},
                  {"exp_avg_sq", uniform(DType::F32, dims, 0, 0.05)}};
      k.attrs = {{"lr", A::ofFloat(1e-2f)},
                 {"weight_decay", A::ofFloat(0.01f)},
                 {"decoupled", A::ofInt(1)}};
      k.numOutputs = 3;
      k.tols = {Tol::bits(), Tol::bits(), Tol::bits()};
      cases.push_back(k);
    }
  // fold-unscale: the loss-scaled gradient and the scale (grad_scale after
  // an omitted lr, and after a given one), unscaled by the body's Mul by
  // float(1 / double(scale)) as the kernel unscales it.
  for (DType t : {DType::F32, DType::F16})
    for (bool withLr : {false, true}) {
      Case k;
      k.label = std::string("AdamW ") + dtypeName(t) + " gradient grad_scale" +
                (withLr ? " lr" : "");
      k.op = "Adam";
      k.inputs = {
          {"found_inf", flag(false)},
          {"step", scalarOf(DType::I64, 3)},
          {"param", uniform(DType::F32, dims, -1, 1)},
          {"grad", uniform(t, dims, -1500, 1500)},
          {"exp_avg", uniform(DType::F32, dims, -0.1, 0.1)},
          {"exp_avg_sq", uniform(DType::F32, dims, 0, 0.05)},
          {"lr", withLr ? std::optional<Tensor>(scalarOf(DType::F64, 0.003))
                        : std::optional<Tensor>()},
          {"grad_scale", scalarOf(DType::F32, 3000)}};
      k.attrs = {{"lr", A::ofFloat(1e-2f)},
                 {"weight_decay", A::ofFloat(0.01f)},
                 {"decoupled", A::ofInt(1)}};
      k.numOutputs = 3;
      k.tols = {Tol::bits(), Tol::bits(), Tol::bits()};
      cases.push_back(k);
    }
  // The working copy of the new master (`low`): the body's Cast of
  // new_param; bf16 moments too.
  for (DType low : {DType::F16, DType::BF16})
    for (bool skipped : {false, true}) {
      Case k;
      k.label = std::string("AdamW ") + dtypeName(low) + " working copy" +
                (skipped ? " skipped" : "");
      k.op = "Adam";
      k.inputs = {
          {"found_inf", flag(skipped)},
          {"step", scalarOf(DType::I64, 3)},
          {"param", uniform(DType::F32, dims, -1, 1)},
          {"grad", uniform(DType::F32, dims, -0.5, 0.5)},
          {"exp_avg", uniform(low == DType::BF16 ? DType::BF16 : DType::F32,
                              dims, -0.1, 0.1)},
          {"exp_avg_sq", uniform(low == DType::BF16 ? DType::BF16 : DType::F32,
                                 dims, 0, 0.05)}};
      k.attrs = {{"lr", A::ofFloat(1e-2f)},
                 {"weight_decay", A::ofFloat(0.01f)},
                 {"decoupled", A::ofInt(1)},
                 {"low", A::ofInt(toOnnxDataType(low))}};
      k.numOutputs = 4;
      k.tols = {Tol::bits(), Tol::bits(), Tol::bits(), Tol::bits()};
      cases.push_back(k);
    }
  cases.push_back({"Adam defaults",
                   "Adam",
                   {{"found_inf", flag(false)},
                    {"step", scalarOf(DType::I64, 2)},
                    {"param", uniform(DType::F32, dims, -1, 1)},
                    {"grad", uniform(DType::F32, dims, -1, 1)},
                    {"exp_avg", uniform(DType::F32, dims, -0.1, 0.1)},
                    {"exp_avg_sq", uniform(DType::F32, dims, 0, 0.05)}},
                   {},
                   3});
  runCases(cases);
}

TEST(MpcFunctions, IncrementStepMatchesKernelExactly) {
  std::vector<Case> cases;
  for (int found : {-1, 0, 1}) {
    Case k;
    k.label = found < 0 ? "no found_inf" : found ? "skipped" : "finite";
    k.op = "IncrementStep";
    k.inputs = {{"step", scalarOf(DType::I64, 41)}};
    if (found >= 0)
      k.inputs.push_back({"found_inf", flag(found == 1)});
    k.tols = {Tol::bits()};
    cases.push_back(k);
  }
  runCases(cases);
}

// Every schedule at the steps where its formula changes: inside and at the
// end of the warmup, mid-decay, at and past total_steps, and across a
// step decay's boundary; fp64 outputs equal to the bit.
TEST(MpcFunctions, LearningRateMatchesKernelExactly) {
  std::vector<Case> cases;
  const std::vector<std::pair<std::string, Case::Attrs>> schedules = {
      {"constant", {{"schedule", A::ofString("constant")}}},
      {"constant warmup",
       {{"schedule", A::ofString("constant")}, {"warmup_steps", A::ofInt(4)}}},
      {"linear",
       {{"schedule", A::ofString("linear")},
        {"base_lr", A::ofFloat(0.05f)},
        {"warmup_steps", A::ofInt(3)},
        {"total_steps", A::ofInt(13)}}},
      {"cosine",
       {{"schedule", A::ofString("cosine")},
        {"base_lr", A::ofFloat(3e-4f)},
        {"warmup_steps", A::ofInt(2)},
        {"total_steps", A::ofInt(11)}}},
      {"cosine min",
       {{"schedule", A::ofString("cosine")},
        {"total_steps", A::ofInt(9)},
        {"min_lr_ratio", A::ofFloat(0.1f)}}},
      {"step",
       {{"schedule", A::ofString("step")},
        {"step_size", A::ofInt(3)},
        {"gamma", A::ofFloat(0.5f)}}},
      {"exponential warmup",
       {{"schedule", A::ofString("exponential")},
        {"warmup_steps", A::ofInt(2)},
        {"gamma", A::ofFloat(0.9f)}}},
      {"restarts",
       {{"schedule", A::ofString("cosine_with_restarts")},
        {"warmup_steps", A::ofInt(1)},
        {"total_steps", A::ofInt(13)},
        {"cycles", A::ofInt(3)}}},
      {"polynomial",
       {{"schedule", A::ofString("polynomial")},
        {"base_lr", A::ofFloat(0.5f)},
        {"warmup_steps", A::ofInt(2)},
        {"total_steps", A::ofInt(11)},
        {"lr_end", A::ofFloat(0.01f)},
        {"power", A::ofFloat(2.0f)}}},
      {"inverse_sqrt",
       {{"schedule", A::ofString("inverse_sqrt")},
        {"warmup_steps", A::ofInt(3)}}},
      {"inverse_sqrt timescale",
       {{"schedule", A::ofString("inverse_sqrt")}, {"timescale", A::ofInt(7)}}},
      {"warmup_stable_decay",
       {{"schedule", A::ofString("warmup_stable_decay")},
        {"warmup_steps", A::ofInt(3)},
        {"stable_steps", A::ofInt(2)},
        {"decay_steps", A::ofInt(8)},
        {"min_lr_ratio", A::ofFloat(0.25f)}}},
      {"warmup_stable_decay shapes",
       {{"schedule", A::ofString("warmup_stable_decay")},
        {"warmup_steps", A::ofInt(5)},
        {"total_steps", A::ofInt(12)},
        {"decay_steps", A::ofInt(4)},
        {"warmup_type", A::ofString("1-sqrt")},
        {"decay_type", A::ofString("1-sqrt")}}},
      {"warmup_stable_decay cosine warmup",
       {{"schedule", A::ofString("warmup_stable_decay")},
        {"warmup_steps", A::ofInt(4)},
        {"stable_steps", A::ofInt(0)},
        {"decay_steps", A::ofInt(9)},
        {"warmup_type", A::ofString("cosine")},
        {"decay_type", A::ofString("linear")}}},
  };
  for (const auto &[label, attrs] : schedules)
    for (int64_t step : {0, 1, 2, 3, 5, 8, 11, 13, 20}) {
      Case k;
      k.label = "LearningRate " + label + " step " + std::to_string(step);
      k.op = "LearningRate";
      k.inputs = {{"step", scalarOf(DType::I64, double(step))}};
      k.attrs = attrs;
      k.tols = {Tol::bits()};
      cases.push_back(k);
    }
  runCases(cases);
}

// --- inlining a whole graph --------------------------------------------------

// --- fused forward ops
// ---------------------------------------------------------

TEST(MpcFunctions, GeluAndGeluTanhMatchKernel) {
  std::vector<Case> cases;
  for (const char *op : {"Gelu", "GeluTanh"})
    for (DType t : {DType::F32, DType::F16, DType::BF16, DType::F64}) {
      // Gelu's body takes erf in fp32 (ONNX Runtime has no double Erf).
      Case::Tols tols;
      if (t == DType::F64 && std::string(op) == "Gelu")
        tols = {Tol::forType(DType::F32)}; // as precise as an fp32 GELU
      cases.push_back({std::string(op) + " " + dtypeName(t),
                       op,
                       {{"X", uniform(t, {3, 17}, -6, 6)}},
                       {},
                       1,
                       tols});
    }
  runCases(cases);
}

// fuse-log-sigmoid's op and its gradient, saturated logits included (where
// the body's log1p must not round exp(-|x|) away).
TEST(MpcFunctions, LogSigmoidAndLogSigmoidGradMatchKernel) {
  std::vector<Case> cases;
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::F64}) {
    Tensor x = uniform(t, {3, 17}, -30, 30);
    for (auto [i, v] :
         {std::pair(0, 0.0), std::pair(1, 100.0), std::pair(2, -100.0),
          std::pair(3, 40.0), std::pair(4, -40.0), std::pair(5, 1e-4)})
      x.setFromDouble(i, v);
    cases.push_back(
        {std::string("LogSigmoid ") + dtypeName(t), "LogSigmoid", {{"X", x}}});
  }
  for (auto [g, f] :
       {std::pair(DType::F32, DType::F32), std::pair(DType::F16, DType::F16),
        std::pair(DType::BF16, DType::BF16), std::pair(DType::F32, DType::F16),
        std::pair(DType::F64, DType::F64)}) {
    Tensor x = uniform(f, {3, 17}, -30, 30);
    x.setFromDouble(0, 0.0);
    x.setFromDouble(1, 60.0);
    x.setFromDouble(2, -60.0);
    cases.push_back(
        {std::string("LogSigmoidGrad ") + dtypeName(g) + "/" + dtypeName(f),
         "LogSigmoidGrad",
         {{"dY", uniform(g, {3, 17}, -2, 2)}, {"X", x}}});
  }
  runCases(cases);
}

TEST(MpcFunctions, FusedMatMulMatchesKernel) {
  struct Shapes {
    std::vector<int64_t> a, b;
    int64_t ta, tb;
  };
  std::vector<Case> cases;
  for (const Shapes &s :
       {Shapes{{5, 4}, {4, 3}, 0, 0}, Shapes{{4, 5}, {4, 3}, 1, 0},
        Shapes{{5, 4}, {3, 4}, 0, 1}, Shapes{{2, 4, 5}, {3, 4}, 1, 1},
        Shapes{{2, 1, 5, 4}, {3, 6, 4}, 0, 1},
        Shapes{{6, 4, 5}, {6, 4, 2}, 1, 0}})
    for (DType t : {DType::F32, DType::F16, DType::BF16, DType::F64})
      cases.push_back(
          {std::string("FusedMatMul ") + dtypeName(t) + " transA=" +
               std::to_string(s.ta) + " transB=" + std::to_string(s.tb),
           "FusedMatMul",
           {{"A", uniform(t, s.a, -1, 1)}, {"B", uniform(t, s.b, -1, 1)}},
           {{"transA", A::ofInt(s.ta)}, {"transB", A::ofInt(s.tb)}}});
  runCases(cases);
}

// --- layer gradients
// -----------------------------------------------------------

TEST(MpcFunctions, ElementwiseGradsMatchKernel) {
  std::vector<Case> cases;
  for (auto [g, f] :
       {std::pair(DType::F32, DType::F32), std::pair(DType::F16, DType::F16),
        std::pair(DType::BF16, DType::BF16), std::pair(DType::F32, DType::F16),
        std::pair(DType::F64, DType::F64)}) {
    std::string types = std::string(dtypeName(g)) + "/" + dtypeName(f);
    Tensor x = uniform(f, {3, 11}, -4, 4);
    x.setFromDouble(0, 0.0);
    Tensor dy = uniform(g, {3, 11}, -2, 2);
    cases.push_back({"ErfGrad " + types, "ErfGrad", {{"dY", dy}, {"X", x}}});
    cases.push_back({"LeakyReluGrad default " + types,
                     "LeakyReluGrad",
                     {{"dY", dy}, {"X", x}}});
    cases.push_back({"LeakyReluGrad alpha 0.2 " + types,
                     "LeakyReluGrad",
                     {{"dY", dy}, {"X", x}},
                     {{"alpha", A::ofFloat(0.2f)}}});
    // GeluGrad "none" takes erf in fp32, like Gelu's body. The kernel's
    // fp32 "tanh" derivative cancels for x < -2 (0.5 (1 + t) with t near
    // -1 against the sech^2 term): the double body is the closer one there.
    Case::Tols erfTols, tanhTols;
    if (g == DType::F64)
      erfTols.push_back(Tol::forType(DType::F32));
    if (g == DType::F32)
      tanhTols.push_back(Tol::relative(1e-4));
    for (const char *form : {"none", "tanh"})
      cases.push_back({std::string("GeluGrad ") + form + " " + types,
                       "GeluGrad",
                       {{"dY", dy}, {"X", x}},
                       {{"approximate", A::ofString(form)}},
                       1,
                       std::string(form) == "none" ? erfTols : tanhTols});
    // ClipGrad selects dY: bits. Bounds at existing values test <= and >=.
    Tensor lo = scalarOf(f, x.getAsDouble(1)),
           hi = scalarOf(f, x.getAsDouble(2));
    if (lo.getAsDouble(0) > hi.getAsDouble(0))
      std::swap(lo, hi);
    cases.push_back({"ClipGrad both " + types,
                     "ClipGrad",
                     {{"dY", dy}, {"X", x}, {"min", lo}, {"max", hi}},
                     {},
                     1,
                     {Tol::bits()}});
    cases.push_back({"ClipGrad min only " + types,
                     "ClipGrad",
                     {{"dY", dy}, {"X", x}, {"min", lo}},
                     {},
                     1,
                     {Tol::bits()}});
    cases.push_back({"ClipGrad max only " + types,
                     "ClipGrad",
                     {{"dY", dy}, {"X", x}, {"min", std::nullopt}, {"max", hi}},
                     {},
                     1,
                     {Tol::bits()}});
    cases.push_back({"ClipGrad unbounded " + types,
                     "ClipGrad",
                     {{"dY", dy}, {"X", x}},
                     {},
                     1,
                     {Tol::bits()}});
  }
  // The opset-6 form: bounds as attributes.
  cases.push_back({"ClipGrad attribute bounds",
                   "ClipGrad",
                   {{"dY", uniform(DType::F32, {4, 5}, -1, 1)},
                    {"X", uniform(DType::F32, {4, 5}, -2, 2)}},
                   {{"min", A::ofFloat(-0.5f)}, {"max", A::ofFloat(1.0f)}},
                   1,
                   {Tol::bits()}});
  runCases(cases);
}

TEST(MpcFunctions, DropoutGradMatchesKernel) {
  std::vector<Case> cases;
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::F64}) {
    Tensor dy = uniform(t, {4, 7}, -2, 2);
    Tensor mask = integers(DType::Bool, {4, 7}, 0, 2);
    std::string type = dtypeName(t);
    for (double ratio : {0.0, 0.3, 1.0})
      for (bool training : {false, true})
        cases.push_back({"DropoutGrad " + type + " ratio " +
                             std::to_string(ratio) +
                             (training ? " training" : " inference"),
                         "DropoutGrad",
                         {{"dY", dy},
                          {"mask", mask},
                          {"ratio", scalarOf(DType::F32, ratio)},
                          {"training_mode", flag(training)}}});
    cases.push_back({"DropoutGrad " + type + " default ratio",
                     "DropoutGrad",
                     {{"dY", dy},
                      {"mask", mask},
                      {"ratio", std::nullopt},
                      {"training_mode", flag(true)}}});
    cases.push_back({"DropoutGrad " + type + " attribute ratio",
                     "DropoutGrad",
                     {{"dY", dy},
                      {"mask", mask},
                      {"ratio", std::nullopt},
                      {"training_mode", flag(true)}},
                     {{"ratio", A::ofFloat(0.25f)}}});
    cases.push_back({"DropoutGrad " + type + " no training_mode",
                     "DropoutGrad",
                     {{"dY", dy}, {"mask", mask}}});
  }
  runCases(cases);
}

TEST(MpcFunctions, GatherGradAndGatherElementsGradMatchKernel) {
  std::vector<Case> cases;
  for (DType t : {DType::F32, DType::F16, DType::F64})
    for (DType it : {DType::I64, DType::I32})
      for (int64_t axis : {0, 1, -1}) {
        std::string label = std::string(dtypeName(t)) + " " + dtypeName(it) +
                            " axis " + std::to_string(axis);
        std::vector<int64_t> data = {5, 4, 3};
        int64_t a = axis < 0 ? axis + 3 : axis;
        // Repeated and negative indices: both accumulate.
        Tensor idx = integers(it, {2, 3}, -data[size_t(a)], data[size_t(a)]);
        idx.setFromDouble(1, idx.getAsDouble(0));
        std::vector<int64_t> dy(data.begin(), data.begin() + a);
        dy.insert(dy.end(), {2, 3});
        dy.insert(dy.end(), data.begin() + a + 1, data.end());
        cases.push_back({"GatherGrad " + label,
                         "GatherGrad",
                         {{"dY", uniform(t, dy, -1, 1)},
                          {"indices", idx},
                          {"data", uniform(t, data, -1, 1)}},
                         {{"axis", A::ofInt(axis)}}});
        std::vector<int64_t> shape = {4, 3, 2};
        shape[size_t(a)] = 6;
        Tensor eidx = integers(it, shape, -data[size_t(a)], data[size_t(a)]);
        cases.push_back({"GatherElementsGrad " + label,
                         "GatherElementsGrad",
                         {{"dY", uniform(t, shape, -1, 1)},
                          {"indices", eidx},
                          {"data", uniform(t, {5, 4, 3}, -1, 1)}},
                         {{"axis", A::ofInt(axis)}}});
      }
  // The default axis (0).
  cases.push_back({"GatherGrad default axis",
                   "GatherGrad",
                   {{"dY", uniform(DType::F32, {3, 4}, -1, 1)},
                    {"indices", integers(DType::I64, {3}, 0, 6)},
                    {"data", uniform(DType::F32, {6, 4}, -1, 1)}}});
  runCases(cases);
}

TEST(MpcFunctions, LayerNormalizationGradMatchesKernel) {
  std::vector<Case> cases;
  for (auto [g, f] :
       {std::pair(DType::F32, DType::F32), std::pair(DType::F16, DType::F16),
        // An autocast island's fp16/bf16 dY beside its fp32 X (results in
        // X's dtype).
        std::pair(DType::F16, DType::F32), std::pair(DType::BF16, DType::F32),
        std::pair(DType::F64, DType::F64)})
    for (int64_t axis : {-1, 1, 0, 2}) {
      std::vector<int64_t> x = {3, 4, 5};
      int64_t a = axis < 0 ? axis + 3 : axis;
      std::vector<int64_t> norm(x.begin() + a, x.end()), stats = x;
      for (int64_t d = a; d < 3; ++d)
        stats[size_t(d)] = 1;
      DType statType = f == DType::F64 ? DType::F64 : DType::F32;
      cases.push_back({std::string("LayerNormalizationGrad ") + dtypeName(g) +
                           "/" + dtypeName(f) + " axis " + std::to_string(axis),
                       "LayerNormalizationGrad",
                       {{"dY", uniform(g, x, -1, 1)},
                        {"X", uniform(f, x, -2, 2)},
                        {"scale", uniform(f, norm, 0.5, 1.5)},
                        {"mean", uniform(statType, stats, -0.2, 0.2)},
                        {"inv_std", uniform(statType, stats, 0.5, 2)}},
                       {{"axis", A::ofInt(axis)}},
                       3});
    }
  // The default axis (-1), scale broadcast from fewer dims.
  cases.push_back({"LayerNormalizationGrad default axis",
                   "LayerNormalizationGrad",
                   {{"dY", uniform(DType::F32, {2, 6}, -1, 1)},
                    {"X", uniform(DType::F32, {2, 6}, -1, 1)},
                    {"scale", uniform(DType::F32, {6}, 0.5, 1.5)},
                    {"mean", uniform(DType::F32, {2, 1}, -0.1, 0.1)},
                    {"inv_std", uniform(DType::F32, {2, 1}, 0.5, 2)}},
                   {},
                   3});
  runCases(cases);
}

TEST(MpcFunctions, NormalizationToMatchesKernel) {
  // The folded layer-norm island: Y in `to` (fp16/bf16 alone, or fp32 with
  // the fp16/bf16 copy as Ylow), over axes and an fp32 or narrower X.
  std::vector<Case> cases;
  for (DType x : {DType::F32, DType::F16})
    for (int64_t axis : {-1, 1})
      for (auto [to, low] :
           {std::pair(DType::F16, std::optional<DType>()),
            std::pair(DType::BF16, std::optional<DType>()),
            std::pair(DType::F32, std::optional<DType>(DType::F16)),
            std::pair(DType::F32, std::optional<DType>(DType::BF16))}) {
        std::vector<int64_t> dims = {3, 4, 6};
        std::vector<int64_t> norm(dims.begin() + (axis < 0 ? 2 : axis),
                                  dims.end());
        Case::Attrs attrs = {{"axis", A::ofInt(axis)},
                             {"epsilon", A::ofFloat(1e-5f)},
                             {"to", A::ofInt(toOnnxDataType(to))}};
        if (low)
          attrs.push_back({"low", A::ofInt(toOnnxDataType(*low))});
        cases.push_back({std::string("LayerNormalizationTo ") + dtypeName(x) +
                             " -> " + dtypeName(to) +
                             (low ? std::string(" + Ylow ") + dtypeName(*low)
                                  : std::string()) +
                             " axis " + std::to_string(axis),
                         "LayerNormalizationTo",
                         {{"X", uniform(x, dims, -2, 2)},
                          {"Scale", uniform(x, norm, 0.5, 1.5)},
                          {"B", uniform(x, norm, -0.5, 0.5)}},
                         attrs,
                         low ? 4u : 3u});
        cases.push_back({std::string("RMSNormalizationTo ") + dtypeName(x) +
                             " -> " + dtypeName(to) +
                             (low ? std::string(" + Ylow ") + dtypeName(*low)
                                  : std::string()) +
                             " axis " + std::to_string(axis),
                         "RMSNormalizationTo",
                         {{"X", uniform(x, dims, -2, 2)},
                          {"Scale", uniform(x, norm, 0.5, 1.5)}},
                         attrs,
                         low ? 2u : 1u});
      }
  runCases(cases);
}

TEST(MpcFunctions, BatchNormalizationGradMatchesKernel) {
  std::vector<Case> cases;
  for (auto [x, p] :
       {std::pair(DType::F32, DType::F32), std::pair(DType::F16, DType::F32),
        std::pair(DType::F16, DType::F16), std::pair(DType::F64, DType::F64)})
    for (const std::vector<int64_t> &dims :
         {std::vector<int64_t>{4, 3, 5, 2}, std::vector<int64_t>{6, 3},
          std::vector<int64_t>{2, 3, 7}})
      for (float eps : {1e-5f, 0.1f}) {
        Tensor xt = uniform(x, dims, -2, 3);
        cases.push_back({std::string("BatchNormalizationGrad ") + dtypeName(x) +
                             "/" + dtypeName(p) + " rank " +
                             std::to_string(dims.size()) + " eps " +
                             std::to_string(eps),
                         "BatchNormalizationGrad",
                         {{"dY", uniform(x, dims, -1, 1)},
                          {"X", xt},
                          {"scale", uniform(p, {3}, 0.5, 1.5)}},
                         {{"epsilon", A::ofFloat(eps)}},
                         3});
      }
  runCases(cases);
}

struct WindowCase {
  std::string label;
  std::vector<int64_t> x = {}, kernel = {}, strides = {}, dilations = {},
                       pads = {};
  int64_t group = 1;
  std::string autoPad = "NOTSET";
  int64_t ceil = 0;
};

/// The attributes of a window case, as the gradient rules copy them.
Case::Attrs windowAttrs(const WindowCase &w, bool conv) {
  Case::Attrs attrs = {{"kernel_shape", A::ofInts(w.kernel)}};
  if (!w.strides.empty())
    attrs.push_back({"strides", A::ofInts(w.strides)});
  if (!w.dilations.empty())
    attrs.push_back({"dilations", A::ofInts(w.dilations)});
  if (!w.pads.empty())
    attrs.push_back({"pads", A::ofInts(w.pads)});
  if (w.autoPad != "NOTSET")
    attrs.push_back({"auto_pad", A::ofString(w.autoPad)});
  if (conv && w.group != 1)
    attrs.push_back({"group", A::ofInt(w.group)});
  if (!conv && w.ceil)
    attrs.push_back({"ceil_mode", A::ofInt(w.ceil)});
  return attrs;
}

/// The output dims of a window case (SAME_*: ceil(in / stride)).
std::vector<int64_t> windowOut(const WindowCase &w, int64_t channels) {
  std::vector<int64_t> out = {w.x[0], channels};
  size_t r = w.kernel.size();
  for (size_t d = 0; d < r; ++d) {
    int64_t s = w.strides.empty() ? 1 : w.strides[d];
    int64_t dil = w.dilations.empty() ? 1 : w.dilations[d];
    int64_t in = w.x[d + 2];
    if (w.autoPad == "SAME_UPPER" || w.autoPad == "SAME_LOWER") {
      out.push_back((in + s - 1) / s);
      continue;
    }
    int64_t pads = w.pads.empty() ? 0 : w.pads[d] + w.pads[d + r];
    int64_t span = in + pads - dil * (w.kernel[d] - 1) - 1;
    int64_t o = (w.ceil ? (span + s - 1) / s : span / s) + 1;
    // PyTorch's rule: the last window starts inside X or its left pad.
    if (w.ceil && (o - 1) * s >= in + (w.pads.empty() ? 0 : w.pads[d]))
      --o;
    out.push_back(o);
  }
  return out;
}

const std::vector<WindowCase> &convCases() {
  static const std::vector<WindowCase> cases = {
      {"3x3 pad 1", {2, 4, 7, 6}, {3, 3}, {}, {}, {1, 1, 1, 1}},
      {"3x3 stride 2 pad 1 group 2",
       {2, 4, 7, 6},
       {3, 3},
       {2, 2},
       {},
       {1, 1, 1, 1},
       2},
      {"stride 3 uneven pads (unread tail)",
       {2, 2, 9, 7},
       {2, 3},
       {3, 2},
       {},
       {0, 1, 1, 0}},
      {"dilation 2 stride 2",
       {1, 3, 9, 8},
       {3, 2},
       {2, 1},
       {2, 3},
       {1, 0, 2, 1}},
      {"depthwise group 4", {2, 4, 5, 5}, {3, 3}, {1, 1}, {}, {1, 1, 1, 1}, 4},
      {"1-D stride 2", {3, 2, 11}, {4}, {2}, {}, {1, 2}},
      {"3-D", {1, 2, 4, 5, 3}, {2, 3, 2}, {1, 2, 1}, {}, {0, 1, 1, 1, 0, 0}},
      {"SAME_UPPER stride 2",
       {2, 3, 7, 6},
       {3, 2},
       {2, 2},
       {},
       {},
       1,
       "SAME_UPPER"},
      {"SAME_LOWER", {1, 2, 5, 6}, {4, 3}, {1, 1}, {}, {}, 1, "SAME_LOWER"},
      {"VALID stride 2", {1, 2, 7, 6}, {3, 3}, {2, 2}, {}, {}, 1, "VALID"},
  };
  return cases;
}

TEST(MpcFunctions, ConvGradInputAndConvGradWeightMatchKernel) {
  std::vector<Case> cases;
  for (const WindowCase &w : convCases())
    for (DType t : {DType::F32, DType::F16, DType::F64}) {
      // The convolution bodies compute in fp32 (ONNX Runtime's CPU Conv has
      // no double kernel): an fp64 one is as precise as an fp32 one.
      Case::Tols tols;
      if (t == DType::F64)
        tols.push_back(Tol::forType(DType::F32));
      int64_t m = w.group == 4 ? 8 : 6;
      std::vector<int64_t> wDims = {m, w.x[1] / w.group};
      wDims.insert(wDims.end(), w.kernel.begin(), w.kernel.end());
      std::vector<int64_t> yDims = windowOut(w, m);
      std::string label = w.label + " " + dtypeName(t);
      cases.push_back(
          {"ConvGradInput " + label,
           "ConvGradInput",
           {{"dY", uniform(t, yDims, -1, 1)},
            {"W", uniform(t, wDims, -1, 1)},
            {"x_shape", Tensor::fromInt64s({int64_t(w.x.size())}, w.x)}},
           windowAttrs(w, true),
           1,
           tols});
      cases.push_back(
          {"ConvGradWeight " + label,
           "ConvGradWeight",
           {{"dY", uniform(t, yDims, -1, 1)}, {"X", uniform(t, w.x, -1, 1)}},
           windowAttrs(w, true),
           1,
           tols});
    }
  runCases(cases);
}

const std::vector<WindowCase> &poolCases() {
  static const std::vector<WindowCase> pools = {
      {"2x2 stride 2", {2, 3, 6, 6}, {2, 2}, {2, 2}},
      {"3x3 stride 2 pad 1 overlapping",
       {2, 2, 7, 6},
       {3, 3},
       {2, 2},
       {},
       {1, 1, 1, 1}},
      {"dilation 2", {1, 2, 8, 7}, {2, 3}, {1, 2}, {2, 1}, {1, 0, 0, 1}},
      {"ceil_mode",
       {2, 2, 7, 8},
       {3, 2},
       {2, 3},
       {},
       {1, 0, 1, 1},
       1,
       "NOTSET",
       1},
      {"ceil_mode, last window dropped",
       {1, 1, 5, 5},
       {2, 2},
       {2, 2},
       {},
       {1, 1, 1, 1},
       1,
       "NOTSET",
       1},
      {"1-D", {2, 3, 10}, {3}, {2}, {}, {1, 1}},
      {"3-D", {1, 2, 4, 5, 4}, {2, 2, 2}, {2, 2, 1}},
      {"SAME_UPPER", {2, 2, 7, 5}, {3, 2}, {2, 2}, {}, {}, 1, "SAME_UPPER"},
      {"SAME_LOWER", {1, 2, 6, 5}, {2, 3}, {1, 2}, {}, {}, 1, "SAME_LOWER"},
  };
  return pools;
}

TEST(MpcFunctions, MaxPoolGradMatchesKernel) {
  std::vector<Case> cases;
  for (const WindowCase &w : poolCases())
    for (auto [g, f] :
         {std::pair(DType::F32, DType::F32), std::pair(DType::F16, DType::F16),
          std::pair(DType::F32, DType::F16), std::pair(DType::F64, DType::F64)})
      for (bool ties : {false, true}) {
        // Small integers make ties: the first maximum takes the gradient.
        Tensor x = ties ? integers(f, w.x, -2, 3) : uniform(f, w.x, -1, 1);
        cases.push_back(
            {"MaxPoolGrad " + w.label + " " + dtypeName(g) + "/" +
                 dtypeName(f) + (ties ? " ties" : ""),
             "MaxPoolGrad",
             {{"dY", uniform(g, windowOut(w, w.x[1]), -1, 1)}, {"X", x}},
             windowAttrs(w, false)});
      }
  runCases(cases);
}

TEST(MpcFunctions, AveragePoolGradMatchesKernel) {
  std::vector<Case> cases;
  for (const WindowCase &w : poolCases())
    for (DType t : {DType::F32, DType::F16, DType::F64})
      for (int64_t includePad : {0, 1}) {
        // The body spreads in fp32, as the convolutions.
        Case::Tols tols;
        if (t == DType::F64)
          tols.push_back(Tol::forType(DType::F32));
        Case::Attrs attrs = windowAttrs(w, false);
        attrs.push_back({"count_include_pad", A::ofInt(includePad)});
        cases.push_back(
            {"AveragePoolGrad " + w.label + " " + dtypeName(t) +
                 (includePad ? " count_include_pad" : ""),
             "AveragePoolGrad",
             {{"dY", uniform(t, windowOut(w, w.x[1]), -1, 1)},
              {"x_shape", Tensor::fromInt64s({int64_t(w.x.size())}, w.x)}},
             attrs,
             1,
             tols});
      }
  runCases(cases);
}

TEST(MpcFunctions, ReduceExtremumGradMatchesKernel) {
  std::vector<Case> cases;
  for (DType t : {DType::F32, DType::F16, DType::F64})
    for (bool keep : {true, false})
      for (const std::vector<int64_t> &axes :
           {std::vector<int64_t>{1}, std::vector<int64_t>{0, 2},
            std::vector<int64_t>{-1}, std::vector<int64_t>{}})
        for (bool asInput : {false, true}) {
          // Small integers make ties; Y is the max over the axes.
          std::vector<int64_t> dims = {3, 4, 2};
          Tensor x = integers(t, dims, -2, 3);
          std::vector<bool> reduced(3, axes.empty());
          for (int64_t a : axes)
            reduced[size_t(a < 0 ? a + 3 : a)] = true;
          std::vector<int64_t> kept = dims, out;
          for (size_t d = 0; d < 3; ++d) {
            if (reduced[d])
              kept[d] = 1;
            else
              out.push_back(dims[d]);
          }
          if (keep)
            out = kept;
          Tensor y(t, out);
          std::vector<double> best(size_t(elementCount(kept)), -1e9);
          for (int64_t i = 0; i < x.numel(); ++i) {
            int64_t rest = i, at = 0, stride = 1;
            for (size_t d = 3; d-- > 0;) {
              at += (reduced[d] ? 0 : rest % dims[d]) * stride;
              rest /= dims[d];
              stride *= kept[d];
            }
            best[size_t(at)] = std::max(best[size_t(at)], x.getAsDouble(i));
          }
          for (int64_t i = 0; i < y.numel(); ++i)
            y.setFromDouble(i, best[size_t(i)]);
          Case c;
          c.label = std::string("ReduceExtremumGrad ") + dtypeName(t) +
                    (keep ? " keepdims" : "") + " axes " +
                    std::to_string(axes.size()) +
                    (asInput ? " input" : " attribute");
          c.op = "ReduceExtremumGrad";
          c.inputs = {{"dY", uniform(t, out, -1, 1)}, {"X", x}, {"Y", y}};
          if (asInput && !axes.empty())
            c.inputs.push_back(
                {"axes", Tensor::fromInt64s({int64_t(axes.size())}, axes)});
          else if (!axes.empty())
            c.attrs.push_back({"axes", A::ofInts(axes)});
          c.attrs.push_back({"keepdims", A::ofInt(keep ? 1 : 0)});
          cases.push_back(c);
        }
  runCases(cases);
}

TEST(MpcFunctions, SliceGradMatchesKernelExactly) {
  struct SliceCase {
    std::string label;
    std::vector<int64_t> starts, ends;
    std::optional<std::vector<int64_t>> axes, steps;
  };
  const std::vector<SliceCase> slices = {
      {"all axes", {1, 0, 2}, {4, 3, 5}, std::nullopt, std::nullopt},
      {"one axis", {1}, {3}, std::vector<int64_t>{1}, std::nullopt},
      {"negative axis and bounds, clamped",
       {-4, 0},
       {100, -1},
       std::vector<int64_t>{-1, 0},
       std::nullopt},
      {"steps",
       {0, 4},
       {5, 0},
       std::vector<int64_t>{0, 2},
       std::vector<int64_t>{2, -2}},
      {"negative step from the end",
       {-1},
       {-100},
       std::vector<int64_t>{1},
       std::vector<int64_t>{-1}},
  };
  std::vector<Case> cases;
  for (const SliceCase &sc : slices)
    for (DType t : {DType::F32, DType::F16, DType::BF16})
      for (DType it : {DType::I64, DType::I32}) {
        std::vector<int64_t> data = {5, 4, 6};
        auto ints = [&](const std::vector<int64_t> &v) {
          Tensor r(it, {int64_t(v.size())});
          for (size_t i = 0; i < v.size(); ++i)
            r.setFromDouble(int64_t(i), double(v[i]));
          return r;
        };
        Case c;
        c.label =
            "SliceGrad " + sc.label + " " + dtypeName(t) + " " + dtypeName(it);
        c.op = "SliceGrad";
        c.inputs = {{"dY", std::nullopt},
                    {"data", uniform(t, data, -1, 1)},
                    {"starts", ints(sc.starts)},
                    {"ends", ints(sc.ends)}};
        if (sc.axes || sc.steps)
          c.inputs.push_back(
              {"axes",
               sc.axes ? std::optional<Tensor>(ints(*sc.axes)) : std::nullopt});
        if (sc.steps)
          c.inputs.push_back({"steps", ints(*sc.steps)});
        // dY has the slice's shape: run Slice on data to get it.
        Graph sg("slice");
        std::vector<Value *> ins;
        std::vector<const Tensor *> ts;
        for (size_t i = 1; i < c.inputs.size(); ++i) {
          const auto &[name, v] = c.inputs[i];
          ins.push_back(v ? sg.addInput(name, v->dtype, toDims(v->dims))
                          : nullptr);
          ts.push_back(v ? &*v : nullptr);
        }
        Node *slice = sg.createNode("Slice", ins, 1, "slice");
        std::vector<Tensor> out;
        runCpuNode(*slice, ts, out);
        c.inputs[0].second = uniform(t, out.at(0).dims, -1, 1);
        c.tols.push_back(Tol::bits());
        cases.push_back(c);
      }
  runCases(cases);
}

TEST(MpcFunctions, LayerBodiesRejectWhatTheyCannotExpress) {
  Graph g("g");
  Value *dy = g.addInput("dy", DType::F32, toDims({4, 3, 2}));
  Value *x = g.addInput("x", DType::F32, toDims({4, 3, 2}));
  Value *scale = g.addInput("scale", DType::F32, toDims({3}));
  Value *stats = g.addInput("stats", DType::F32, toDims({3}));
  // Running statistics (inference-mode batch norm): another dX rule.
  Node *bn =
      g.createNode("BatchNormalizationGrad", {dy, x, scale, stats, stats}, 3,
                   "bn_grad", kMpcDomain);
  try {
    inlineMpcFunction(*bn);
    ADD_FAILURE() << "BatchNormalizationGrad with mean/var was inlined";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("bn_grad"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("inference-mode"), std::string::npos);
  }
  // SAME_UPPER without static sizes: no explicit pads to write.
  Value *dynX = g.addInput("dyn_x", DType::F32, {});
  Node *pool =
      g.createNode("MaxPoolGrad", {dy, dynX}, 1, "pool_grad", kMpcDomain);
  pool->setAttr("kernel_shape", A::ofInts({2}));
  pool->setAttr("auto_pad", A::ofString("SAME_UPPER"));
  try {
    inlineMpcFunction(*pool);
    ADD_FAILURE() << "MaxPoolGrad with SAME_UPPER of unknown sizes was inlined";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("pool_grad"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("SAME_UPPER"), std::string::npos);
  }
}

TEST(MpcFunctions, InlineMpcFunctionsKeepsNamesAndReplacesOnlyOpsWithBodies) {
  Graph g("g");
  Value *scale = g.addInput("scale", DType::F32, {});
  Value *grad = g.addInput("grad", DType::F16, toDims({2, 3}));
  Value *y = g.addInput("y", DType::F16, toDims({2, 3}));
  Node *relu = g.createNode("ReluGrad", {grad, y}, 1, "relu_grad", kMpcDomain);
  relu->output(0)->setType(DType::F16, toDims({2, 3}));
  Node *unscale = g.createNode("UnscaleGradients", {scale, relu->output(0)}, 2,
                               "unscale", kMpcDomain);
  g.addOutput(unscale->output(0));
  g.addOutput(relu->output(0));
  std::string reluOut = relu->output(0)->name();
  EXPECT_EQ(inlineMpcFunctions(g), 1u);
  for (const auto &n : g.nodes())
    EXPECT_NE(n->opType(), "ReluGrad");
  ASSERT_NE(g.findValue(reluOut), nullptr);
  EXPECT_EQ(g.outputs()[1]->name(), reluOut);
  EXPECT_EQ(g.outputs()[1]->dtype, DType::F16);
  EXPECT_EQ(g.findValue(reluOut)->uses().size(), 1u);
  EXPECT_EQ(g.findValue(reluOut)->uses()[0].user->opType(), "UnscaleGradients");
  EXPECT_TRUE(g.topologicalSort());

  CpuWithFallbacks backend;
  Executor exec(g, backend);
  Tensor gt = uniform(DType::F16, {2, 3}, -1, 1),
         yt = uniform(DType::F16, {2, 3}, -1, 1);
  exec.setInput("scale", scalarOf(DType::F32, 1));
  exec.setInput("grad", gt);
  exec.setInput("y", yt);
  exec.run();
  const Tensor &out = exec.output(reluOut);
  for (int64_t i = 0; i < 6; ++i)
    EXPECT_EQ(out.getAsDouble(i),
              yt.getAsDouble(i) > 0 ? gt.getAsDouble(i) : 0);
}

TEST(MpcFunctions, InlineRejectsOpsWithoutBodies) {
  Graph g("g");
  Value *a = g.addInput("a", DType::F32, toDims({2}));
  Node *clip = g.createNode("ClipGradNorm", {a}, 2, "clip", kMpcDomain);
  EXPECT_THROW(inlineMpcFunction(*clip), Error);
  Node *relu = g.createNode("Relu", {a}, 1, "relu");
  EXPECT_THROW(inlineMpcFunction(*relu), Error);
}

// --- compiled models ---------------------------------------------------------

struct Config {
  std::string label;
  std::string optimizer;
  DType precision;
  double momentum = 0;
  bool nesterov = false;
  double weightDecay = 0;
  double maxGradNorm = 0;
  /// --lr-schedule with --warmup-steps=1 and --total-steps=3 (linear,
  /// cosine) or --lr-step-size=1 (step): the three steps run cross the
  /// warmup and the decay.
  std::string lrSchedule = "constant";
};

void PrintTo(const Config &c, std::ostream *os) { *os << c.label; }

std::unique_ptr<Model> compileSeed(const Config &c) {
  auto model = loadModel(std::string(MPC_SOURCE_DIR) + "/models/mlp_seed.onnx");
  CompileOptions opts;
  opts.optimizer = c.optimizer;
  opts.precision = c.precision;
  opts.momentum = c.momentum;
  opts.nesterov = c.nesterov;
  if (c.weightDecay != 0) {
    opts.weightDecay = c.weightDecay;
    opts.weightDecaySet = true;
  }
  opts.maxGradNorm = c.maxGradNorm;
  if (c.lrSchedule != "constant") {
    opts.lrSchedule = c.lrSchedule;
    opts.warmupSteps = 1;
    if (c.lrSchedule == "linear" || c.lrSchedule == "cosine")
      opts.totalSteps = 3;
    else if (c.lrSchedule == "step")
      opts.lrStepSize = 1;
  }
  Statistics stats;
  runPipeline(*model, defaultPipeline(), opts, PipelineConfig{}, stats);
  return model;
}

/// What onnx.checker.check_model(model, full_check=True) runs in ONNX 1.12:
/// the checker, then type and shape inference with type checks, strict.
void fullCheck(const onnx::ModelProto &proto) {
  onnx::checker::check_model(proto);
  onnx::ModelProto inferred = proto;
  onnx::shape_inference::InferShapes(inferred,
                                     onnx::OpSchemaRegistry::Instance(),
                                     onnx::ShapeInferenceOptions(true, 1));
}

/// Every mpc node of a written graph carries all its function's formal
/// inputs and declared attributes (ignore_index is optional).
void expectComplete(const onnx::GraphProto &g,
                    const std::map<std::string, onnx::FunctionProto> &fns,
                    std::set<std::string> &seen) {
  for (const auto &n : g.node()) {
    if (n.domain() != kMpcDomain)
      continue;
    auto it = fns.find(n.op_type());
    if (it == fns.end()) {
      EXPECT_EQ(mpcFunctionText(n.op_type()), nullptr)
          << "mpc." << n.op_type() << " has a body but no function";
      continue;
    }
    seen.insert(n.op_type());
    const onnx::FunctionProto &fn = it->second;
    ASSERT_EQ(n.input_size(), fn.input_size()) << n.op_type();
    for (const auto &in : n.input())
      EXPECT_FALSE(in.empty()) << n.op_type() << " has an omitted input";
    ASSERT_EQ(n.output_size(), fn.output_size()) << n.op_type();
    for (const auto &out : n.output())
      EXPECT_FALSE(out.empty()) << n.op_type() << " has an omitted output";
    std::set<std::string> attrs;
    for (const auto &a : n.attribute())
      attrs.insert(a.name());
    for (const auto &a : fn.attribute())
      if (a != "ignore_index") {
        EXPECT_TRUE(attrs.count(a)) << n.op_type() << " lacks " << a;
      }
  }
}

/// A fixed batch for the seed MLP (x [64, 10], y [64] in {0, 1}).
std::vector<std::pair<std::string, Tensor>> seedBatch(int i) {
  std::mt19937 r(100 + i);
  std::normal_distribution<double> n(0, 1);
  Tensor x(DType::F32, {64, 10});
  for (int64_t k = 0; k < x.numel(); ++k)
    x.data<float>()[k] = float(n(r));
  Tensor y(DType::I64, {64});
  for (int64_t k = 0; k < 64; ++k)
    y.data<int64_t>()[k] = int64_t(r() % 2);
  return {{"x", x}, {"y", y}};
}

class CompiledModels : public ::testing::TestWithParam<Config> {};

TEST_P(CompiledModels, WrittenModelPassesCheckerAndTrainsLikeTheKernels) {
  const Config &c = GetParam();
  std::unique_ptr<Model> model;
  ASSERT_NO_THROW(model = compileSeed(c));
  ASSERT_TRUE(model->training);

  onnx::ModelProto proto;
  exportModel(*model, proto);
  std::map<std::string, onnx::FunctionProto> fns;
  for (const auto &f : proto.functions()) {
    EXPECT_EQ(f.domain(), kMpcDomain);
    fns[f.name()] = f;
  }
  std::set<std::string> seen;
  ASSERT_EQ(proto.training_info_size(), 1);
  expectComplete(proto.training_info(0).algorithm(), fns, seen);
  // Every op with a body used by the step got its function, and the seed
  // MLP's backward and optimizer ops are among them.
  for (const auto &kv : fns)
    EXPECT_TRUE(seen.count(kv.first)) << kv.first << " written but unused";
  for (const char *op : {"ReluGrad", "SumToShape", "IncrementStep",
                         "SoftmaxCrossEntropyLossGrad"})
    EXPECT_TRUE(fns.count(op)) << op;
  EXPECT_TRUE(fns.count(c.optimizer == "sgd" ? "SGD" : "Adam"));
  if (c.precision == DType::F16) {
    EXPECT_TRUE(fns.count("UpdateLossScale"));
  }
  try {
    fullCheck(proto);
  } catch (const std::exception &e) {
    FAIL() << "exportModel: " << e.what();
  }
  // --emit=text shows the same functions.
  std::string text = printModelText(*model);
  for (const auto &kv : fns)
    EXPECT_NE(text.find("// function mpc." + kv.first + "\n"),
              std::string::npos)
        << kv.first;

  // The step as a plain model: its mpc nodes are in the main graph, so the
  // strict inference type-checks every body against the real operand types.
  onnx::ModelProto step;
  exportStepModel(*model, step);
  std::set<std::string> stepSeen;
  expectComplete(step.graph(), fns, stepSeen);
  EXPECT_EQ(stepSeen, seen);
  try {
    fullCheck(step);
  } catch (const std::exception &e) {
    FAIL() << "exportStepModel: " << e.what();
  }

  // The written model (its nodes completed) trains bit for bit like the
  // compiled one; the step lowered to standard ops trains like it closely.
  std::unique_ptr<Model> written = importModel(proto, "written.onnx", ".");
  std::unique_ptr<Model> lowered = compileSeed(c);
  size_t inlined = inlineMpcFunctions(*lowered->training->algorithm);
  EXPECT_EQ(inlined, [&] {
    size_t n = 0;
    for (const auto &node : model->training->algorithm->nodes())
      n += node->domain() == kMpcDomain && mpcFunctionText(node->opType());
    return n;
  }());
  CpuWithFallbacks backend;
  std::vector<std::string> state;
  for (const auto &kv : model->training->updateBinding)
    state.push_back(kv.first);
  Trainer reference(std::move(model), backend);
  Trainer fromFile(std::move(written), backend);
  Trainer throughBodies(std::move(lowered), backend);
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE("step " + std::to_string(i + 1));
    auto batch = seedBatch(i);
    StepRecord want = reference.step(batch);
    StepRecord got = fromFile.step(batch);
    StepRecord low = throughBodies.step(batch);
    EXPECT_EQ(got.loss, want.loss);
    EXPECT_EQ(got.skipped, want.skipped);
    EXPECT_EQ(low.skipped, want.skipped);
    EXPECT_NEAR(low.loss, want.loss, 1e-5 * std::fabs(want.loss));
    for (const std::string &name : state) {
      expectMatches(fromFile.state(name), reference.state(name), Tol::bits(),
                    "written model, state " + name);
      // The bodies' backward computes in double: the gradients, and so the
      // updated state, may differ in the last bits (fp16: a rounding).
      expectMatches(throughBodies.state(name), reference.state(name),
                    Tol::relative(1e-4), "lowered step, state " + name);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Seed, CompiledModels,
    ::testing::Values(
        Config{"sgd_fp16", "sgd", DType::F16},
        Config{"sgd_fp32", "sgd", DType::F32},
        Config{"sgd_momentum_fp16", "sgd", DType::F16, 0.9},
        Config{"sgd_momentum_fp32", "sgd", DType::F32, 0.9},
        Config{"sgd_nesterov_wd_fp32", "sgd", DType::F32, 0.9, true, 1e-2},
        Config{"adam_fp16", "adam", DType::F16},
        Config{"adam_fp32", "adam", DType::F32},
        Config{"adamw_bf16", "adamw", DType::BF16},
        Config{"adam_clip_fp16", "adam", DType::F16, 0, false, 0, 1.0},
        // The rate an input (SGD's after an omitted momentum buffer).
        Config{"sgd_cosine_fp16", "sgd", DType::F16, 0, false, 0, 0, "cosine"},
        Config{"adamw_linear_fp32", "adamw", DType::F32, 0, false, 0, 0,
               "linear"},
        Config{"sgd_momentum_step_fp32", "sgd", DType::F32, 0.9, false, 0, 0,
               "step"}),
    [](const auto &info) { return info.param.label; });

/// The transformer's and the CNN's steps (gather, GELU, layer-norm, conv,
/// pool and batch-norm gradients): every mpc node of the --emit=step model
/// has its function, the model passes the checker with strict type
/// inference (every body type-checked against the real operand types), and
/// the written training model reads back.
TEST(MpcFunctions, TransformerAndCnnStepsNeedOnlyTheirFunctions) {
  for (const char *name : {"transformer", "cnn"})
    for (DType precision : {DType::F32, DType::F16}) {
      SCOPED_TRACE(std::string(name) + " " + dtypeName(precision));
      auto model =
          loadModel(std::string(MPC_SOURCE_DIR) + "/models/" + name + ".onnx");
      CompileOptions opts;
      opts.optimizer = "adam";
      opts.precision = precision;
      Statistics stats;
      runPipeline(*model, defaultPipeline(), opts, PipelineConfig{}, stats);
      onnx::ModelProto step;
      exportStepModel(*model, step);
      std::map<std::string, onnx::FunctionProto> fns;
      for (const auto &f : step.functions())
        fns[f.name()] = f;
      for (const auto &n : step.graph().node())
        if (n.domain() == kMpcDomain) {
          EXPECT_TRUE(fns.count(n.op_type()))
              << "mpc." << n.op_type() << " has no function";
        }
      std::set<std::string> seen;
      expectComplete(step.graph(), fns, seen);
      for (const char *op :
           std::string(name) == "cnn"
               ? std::vector<const char *>{"ConvGradInput", "ConvGradWeight",
                                           "MaxPoolGrad",
                                           "BatchNormalizationGrad"}
               : std::vector<const char *>{"GatherGrad", "GeluGrad",
                                           "LayerNormalizationGrad"})
        EXPECT_TRUE(seen.count(op)) << op;
      try {
        fullCheck(step);
      } catch (const std::exception &e) {
        FAIL() << "exportStepModel: " << e.what();
      }
      onnx::ModelProto written;
      exportModel(*model, written);
      EXPECT_NO_THROW(importModel(written, "written.onnx", "."));
    }
}

TEST(MpcFunctions, Opset15IsRaisedFor16BodiesUnlessAMeaningChanges) {
  Model model;
  model.setOpsetVersion("", 15);
  onnx::ModelProto proto;
  proto.add_opset_import()->set_version(15);
  proto.mutable_graph()->add_node()->set_op_type("Relu");
  appendMpcFunctions({"GatherGrad", "ReluGrad"}, model, proto);
  EXPECT_EQ(proto.opset_import(0).version(), 16);
  ASSERT_EQ(proto.functions_size(), 2);
  for (const auto &f : proto.functions())
    EXPECT_EQ(f.opset_import(0).version(), 16);

  // RoiAlign's default changed at 16: the model keeps 15, GatherGrad gets
  // no function.
  onnx::ModelProto roi;
  roi.add_opset_import()->set_version(15);
  roi.mutable_graph()->add_node()->set_op_type("RoiAlign");
  appendMpcFunctions({"GatherGrad", "ReluGrad"}, model, roi);
  EXPECT_EQ(roi.opset_import(0).version(), 15);
  ASSERT_EQ(roi.functions_size(), 1);
  EXPECT_EQ(roi.functions(0).name(), "ReluGrad");
}

/// A node its body cannot express (running statistics): the step model's
/// export fails naming it; the training model keeps the op function-less.
TEST(MpcFunctions, InexpressibleNodeFailsTheStepExportOnly) {
  Model model;
  model.setOpsetVersion("", 17);
  auto addNode = [](onnx::GraphProto &g) {
    onnx::NodeProto *n = g.add_node();
    n->set_op_type("BatchNormalizationGrad");
    n->set_domain(kMpcDomain);
    n->set_name("frozen_bn_grad");
    for (const char *in : {"dy", "x", "scale", "mean", "var"})
      n->add_input(in);
    for (const char *out : {"dx", "dscale", "dbias"})
      n->add_output(out);
  };
  onnx::ModelProto step;
  step.add_opset_import()->set_version(17);
  addNode(*step.mutable_graph());
  try {
    appendMpcFunctions({"BatchNormalizationGrad", "ReluGrad"}, model, step);
    ADD_FAILURE() << "the step export did not fail";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("frozen_bn_grad"), std::string::npos);
  }

  onnx::ModelProto training;
  training.add_opset_import()->set_version(17);
  training.mutable_graph();
  addNode(*training.add_training_info()->mutable_algorithm());
  ASSERT_NO_THROW(appendMpcFunctions({"BatchNormalizationGrad", "ReluGrad"},
                                     model, training));
  ASSERT_EQ(training.functions_size(), 1);
  EXPECT_EQ(training.functions(0).name(), "ReluGrad");
  EXPECT_EQ(training.training_info(0).algorithm().node(0).input_size(), 5);
}

TEST(MpcFunctions, OldDefaultOpsetGetsNoFunctions) {
  Model model;
  model.setOpsetVersion("", 14);
  onnx::ModelProto proto;
  proto.add_opset_import()->set_version(14);
  appendMpcFunctions({"ReluGrad"}, model, proto);
  EXPECT_EQ(proto.functions_size(), 0);
  bool hasMpc = false;
  for (const auto &op : proto.opset_import())
    hasMpc |= op.domain() == kMpcDomain;
  EXPECT_TRUE(hasMpc);
}

} // namespace
