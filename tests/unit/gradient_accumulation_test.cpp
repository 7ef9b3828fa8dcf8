// The structure of autodiff's gradient accumulation (passes/autodiff.cpp):
// a value with N consumers gets its N gradient contributions summed by a
// balanced tree of N - 1 Adds (depth ceil(log2 N)), each contribution used
// once, not by a chain of depth N - 1; up to three contributions it is the
// chain ((g1 + g2) + g3). The tree's values are checked against the
// closed-form gradient by running the compiled step.
#include "passes/onnx/onnx_io.h"
#include "passes/pass.h"
#include "runtime/backend.h"
#include "runtime/executor.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <unordered_map>
#include <unordered_set>

using namespace mpc;

namespace {

/// h = x * w feeds n Relus, summed by one Sum; loss = ReduceSum of it.
std::string fanOutModel(int n) {
  std::string text = R"(<ir_version: 8, opset_import: ["" : 17]>
fan_out (float[4] x) => (float loss)
  <float[4] w = {0.5, -1.0, 2.0, 0.25}>
{
  h = Mul (x, w)
)";
  std::string sumInputs;
  for (int i = 0; i < n; ++i) {
    text += "  r" + std::to_string(i) + " = Relu (h)\n";
    sumInputs += (i ? ", r" : "r") + std::to_string(i);
  }
  text += "  s = Sum (" + sumInputs + ")\n";
  text += "  loss = ReduceSum <keepdims = 0> (s)\n}\n";
  return text;
}

struct Compiled {
  std::unique_ptr<Model> model;
  Statistics stats;
};

Compiled compile(int n) {
  Compiled c;
  c.model = parseModelText(fanOutModel(n), "fan_out.onnxtext");
  PassContext ctx{CompileOptions{}, {}, {}};
  runInferShapes(*c.model, ctx);
  runAutodiff(*c.model, ctx);
  c.stats = ctx.stats;
  return c;
}

/// The accumulation of h's gradient: its Adds, the tree's root, and for
/// each Add its depth (longest path down to a contribution).
struct Tree {
  std::vector<const Node *> adds;
  const Node *root = nullptr;
  int depth = 0;
  std::vector<const Value *> leaves; ///< the contributions, in tree order
};

Tree accumulationOf(const Graph &step) {
  Tree t;
  std::unordered_set<const Node *> isAdd;
  for (const Node *n : step.nodeList())
    if (n->opType() == "Add" && n->name().rfind("h_grad_accum", 0) == 0) {
      t.adds.push_back(n);
      isAdd.insert(n);
    }
  for (const Node *n : t.adds) {
    bool feedsAnother = false;
    for (const Use &u : n->output(0)->uses())
      feedsAnother |= isAdd.count(u.user) > 0;
    if (!feedsAnother) {
      EXPECT_EQ(t.root, nullptr) << "two roots: " << n->name();
      t.root = n;
    }
  }
  std::function<int(const Value *)> walk = [&](const Value *v) -> int {
    const Node *p = v->producer();
    if (!p || !isAdd.count(p)) {
      t.leaves.push_back(v);
      return 0;
    }
    return 1 + std::max(walk(p->input(0)), walk(p->input(1)));
  };
  if (t.root)
    t.depth = walk(t.root->output(0));
  return t;
}

int ceilLog2(int n) {
  int d = 0;
  while ((1 << d) < n)
    ++d;
  return d;
}

} // namespace

TEST(GradientAccumulation, ABalancedTreeOfAddsNotAChain) {
  for (int n : {2, 3, 4, 5, 7, 8, 9, 1000, 4097}) {
    SCOPED_TRACE(std::to_string(n) + " consumers");
    Compiled c = compile(n);
    const Graph &step = *c.model->training->algorithm;
    Tree t = accumulationOf(step);
    EXPECT_EQ(int(t.adds.size()), n - 1);
    ASSERT_NE(t.root, nullptr);
    EXPECT_EQ(t.depth, ceilLog2(n));
    // Every contribution once, each a Relu gradient of its own.
    ASSERT_EQ(int(t.leaves.size()), n);
    std::unordered_set<const Value *> distinct(t.leaves.begin(),
                                               t.leaves.end());
    EXPECT_EQ(int(distinct.size()), n);
    // The root is what h's backward (Mul's rule) reads.
    bool readByMulGrad = false;
    for (const Use &u : t.root->output(0)->uses())
      readByMulGrad |= u.user->opType() == "Mul";
    EXPECT_TRUE(readByMulGrad);
  }
}

TEST(GradientAccumulation, UpToThreeContributionsAreTheChain) {
  // ((g0 + g1) + g2): the root's first operand is the first Add.
  Compiled c = compile(3);
  Tree t = accumulationOf(*c.model->training->algorithm);
  ASSERT_EQ(t.adds.size(), 2u);
  const Node *first = t.root->input(0)->producer();
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first, t.adds[0]);
  EXPECT_NE(t.root->input(1)->producer(), t.adds[0]);
}

TEST(GradientAccumulation, TheTreeSumsToTheGradient) {
  // d loss / d w = n * x * (x * w > 0), exact in fp32 for these n.
  for (int n : {1, 3, 6, 33}) {
    SCOPED_TRACE(std::to_string(n) + " consumers");
    Compiled c = compile(n);
    const Graph &step = *c.model->training->algorithm;
    std::unique_ptr<Backend> cpu = createCpuBackend();
    Executor exec(step, *cpu);
    const float x[4] = {1.5f, 2.0f, -0.5f, 3.0f};
    const float w[4] = {0.5f, -1.0f, 2.0f, 0.25f};
    exec.setInput("x", Tensor::fromFloats({4}, std::vector<float>(x, x + 4)));
    exec.run();
    std::vector<float> g = exec.output("w_grad").toFloats();
    ASSERT_EQ(g.size(), 4u);
    for (int i = 0; i < 4; ++i)
      EXPECT_EQ(g[size_t(i)], x[i] * w[i] > 0 ? float(n) * x[i] : 0.0f)
          << "element " << i;
  }
}

TEST(GradientAccumulation, HundredThousandConsumersCompileInLinearTime) {
  // Was minutes (a chain of Adds, each new value's name probed past every
  // earlier one); the bound is loose for a loaded machine, five times that
  // under AddressSanitizer (5 s here, idle).
#ifdef __SANITIZE_ADDRESS__
  const double bound = 100.0;
#else
  const double bound = 20.0;
#endif
  auto start = std::chrono::steady_clock::now();
  Compiled c = compile(100000);
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  EXPECT_LT(seconds, bound);
  EXPECT_EQ(c.stats.at("gradient-sums"), 100000 - 1);
}
