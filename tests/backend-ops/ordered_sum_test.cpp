// The one-block reductions of the loss (kernels/cuda/ordered_sum.cuh) and
// ClipGradNorm give the same bits on every run: the order of the additions
// is fixed, whatever the threads' timing (skipped without a GPU).
#include "ir/graph.h"
#include "op_cases.h"
#include "runtime/cuda/cuda_backend.h"

#include <gtest/gtest.h>

using namespace mpc;

namespace {

std::vector<Tensor> runTwice(Backend &cuda, const Node &node,
                             const std::vector<const Tensor *> &in,
                             std::vector<Tensor> &second) {
  std::vector<Tensor> first(node.numOutputs());
  second.assign(node.numOutputs(), Tensor());
  for (std::vector<Tensor> *outs : {&first, &second}) {
    KernelContext ctx{node, in};
    for (Tensor &t : *outs)
      ctx.outputs.push_back(&t);
    cuda.run(ctx);
  }
  return first;
}

} // namespace

TEST(BackendOpsDevice, LossReductionsGiveTheSameBitsEveryRun) {
  std::string why;
  std::unique_ptr<Backend> cuda = createCudaBackend(why);
  if (!cuda)
    GTEST_SKIP() << "backend-ops skipped: no usable CUDA GPU: " << why;
  std::mt19937 rng(5);
  // 70000 positions: 1094 chunks, five rounds of the block's chunk sums.
  Tensor x = backend_ops::randomTensor(rng, DType::F32, {70000, 3}, -3, 3);
  Tensor labels = backend_ops::randomLabels(rng, {70000}, 3);
  Graph g;
  Node *node = g.createNode("SoftmaxCrossEntropyLoss",
                            {g.addInput("x", DType::F32, toDims(x.dims)),
                             g.addInput("l", DType::I64, toDims(labels.dims))},
                            2, "loss");
  for (int run = 0; run < 3; ++run) {
    std::vector<Tensor> b;
    std::vector<Tensor> a = runTwice(*cuda, *node, {&x, &labels}, b);
    ASSERT_EQ(a[0].bytes, b[0].bytes) << "run " << run;
  }
}
