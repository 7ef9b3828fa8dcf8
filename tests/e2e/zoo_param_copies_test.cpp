// End to end: parameters that torch's dynamo exporter reads through a no-op
// copy (models/make_zoo_param_copies.py), compiled and trained on the CPU
// as PyTorch trains the modules they came from.
//
// - weight_norm_dynamo: a Linear under parametrizations.weight_norm; the
//   gradient of its magnitude g comes out of autodiff as an Identity.
// - indexed_param_dynamo: a learned position table read as
//   pos[torch.arange(T)], which the exporter writes as
//   Transpose<perm = [0, 1]>(pos) then GatherND; the table's gradient is the
//   same Transpose of its copy's.
// cleanup removes both copies after the optimizer has read the gradients;
// mpc.grads must then name the value each copied (a compile used to fail
// its verifier after cleanup). fp32 SGD and Adam match PyTorch to 1e-4 at
// every one of 30 steps, fp16 and bf16 compile and follow fp32, and the
// compiled step keeps no copy.
// - frozen_param_dynamo: the same with Whisper's frozen sinusoidal
//   positions (a requires_grad=False nn.Parameter) and a buffer. The
//   exporter records the buffer, which stays frozen, but not requires_grad:
//   the table trains unless --frozen names it; with --frozen=sinusoid the
//   run matches PyTorch's.
#include "passes/pass.h"
#include "tests/e2e/parity_harness.h"

#include <cmath>
#include <set>

using namespace mpc;
using namespace mpc::parity;

namespace {

struct Case {
  const char *model, *data, *reference;
};
const Case kCases[] = {
    {"weight_norm_dynamo.onnx", "resmlp_data.npz", "weight_norm_dynamo_ref_"},
    {"indexed_param_dynamo.onnx", "gpt2_tiny_data.npz",
     "indexed_param_dynamo_ref_"}};

/// Whether n copies its input unchanged (what cleanup removes).
bool isNoOpCopy(const Node &n) {
  if (n.isOp("", "Identity"))
    return true;
  if (!n.isOp("", "Transpose"))
    return false;
  std::vector<int64_t> perm = n.attrInts("perm");
  for (size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != int64_t(i))
      return false;
  return !perm.empty();
}

} // namespace

TEST(ZooParamCopies, SgdAndAdamMatchPyTorch) {
  for (const Case &c : kCases)
    for (const char *optimizer : {"sgd", "adam"})
      expectMatchesPyTorch(c.model, c.data, optimizer,
                           std::string(c.reference) + optimizer + ".csv", 1e-4);
}

TEST(ZooParamCopies, GradientsNameValuesOfTheStepAndNoCopyIsLeft) {
  for (const Case &c : kCases)
    for (DType precision : {DType::F32, DType::F16, DType::BF16}) {
      SCOPED_TRACE(std::string(c.model) + " " + dtypeName(precision));
      auto model = compile(c.model, options("adam", precision));
      const Graph &step = *model->training->algorithm;
      std::vector<std::string> params = splitList(*model->meta("mpc.params"));
      std::vector<std::string> grads = splitList(*model->meta("mpc.grads"));
      ASSERT_EQ(grads.size(), params.size());
      std::set<std::string> distinct(grads.begin(), grads.end());
      EXPECT_EQ(distinct.size(), grads.size());
      for (const std::string &g : grads) {
        const Value *v = step.findValue(g);
        ASSERT_NE(v, nullptr) << g;
        EXPECT_TRUE(v->producer()) << g << " is not computed by the step";
      }
      for (const Node *n : step.nodeList())
        EXPECT_FALSE(isNoOpCopy(*n) && !n->output(0)->isGraphOutput())
            << n->describe() << " was left";
    }
}

TEST(ZooParamCopies, FrozenParameterTrainsOnlyWithoutFrozen) {
  // What the exporter records: the buffer is no parameter; the frozen
  // table is one like any other (byte for byte the same export).
  auto model = compile("frozen_param_dynamo.onnx", options("adam", DType::F32));
  std::vector<std::string> params = splitList(*model->meta("mpc.params"));
  std::set<std::string> names(params.begin(), params.end());
  EXPECT_EQ(names, (std::set<std::string>{"pos", "sinusoid", "emb.weight",
                                          "head.weight", "head.bias"}));
  for (const char *optimizer : {"sgd", "adam"}) {
    CompileOptions o = options(optimizer, DType::F32);
    o.frozen = "^sinusoid$";
    auto frozen = compile("frozen_param_dynamo.onnx", o);
    EXPECT_EQ(frozen->meta("mpc.params")->find("sinusoid"), std::string::npos);
    std::vector<double> ref = readReference(
        std::string("frozen_param_dynamo_ref_") + optimizer + ".csv");
    ASSERT_EQ(ref.size(), 30u);
    std::vector<StepRecord> run =
        train(std::move(frozen), "gpt2_tiny_data.npz", 30);
    for (size_t i = 0; i < ref.size(); ++i)
      EXPECT_LT(std::fabs(run[i].loss - ref[i]) / std::fabs(ref[i]), 1e-4)
          << optimizer << " step " << i << ": mpc " << run[i].loss << " torch "
          << ref[i];
  }
}

TEST(ZooParamCopies, MixedPrecisionFollowsFp32) {
  for (const Case &c : kCases) {
    expectFollowsFp32(c.model, c.data, "adam", DType::F16, 30, 0.01, 0.99);
    expectFollowsFp32(c.model, c.data, "adam", DType::BF16, 30, 0.03, 0.99);
  }
}
