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
#include "passes/pass.h"
#include "tests/e2e/parity_harness.h"

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

TEST(ZooParamCopies, MixedPrecisionFollowsFp32) {
  for (const Case &c : kCases) {
    expectFollowsFp32(c.model, c.data, "adam", DType::F16, 30, 0.01, 0.99);
    expectFollowsFp32(c.model, c.data, "adam", DType::BF16, 30, 0.03, 0.99);
  }
}
