// The cuBLASLt bias epilogue's hit and fallback counts (gemm_bias_epilogue.h)
// that MPC_CUDA_PROFILE reports: the report line's arithmetic on the host,
// and a Linear layer's Gemm on the GPU counted once (skipped without one).
#include "ir/graph.h"
#include "op_cases.h"
#include "runtime/cuda/cuda_backend.h"
#include "runtime/cuda/gemm_bias_epilogue.h"

#include <gtest/gtest.h>

using namespace mpc;
using namespace mpc::cuda;

TEST(EpilogueCounts, ReportPerStepNamesTheFirstFallback) {
  EpilogueCounts total;
  EXPECT_EQ(epilogueReport(total, 3), "") << "no Gemm tried the epilogue";
  total.hits = 30;
  EXPECT_EQ(epilogueReport(total, 0), "") << "no timed step";
  EXPECT_EQ(epilogueReport(total, 3),
            "cuBLASLt bias epilogue per step: 10.0 hits, 0.0 fallbacks "
            "(cuBLAS + a bias pass)");
  total.fallbacks = 6;
  total.firstFallback = "fp16 m 8 n 3 k 5, alignment 2/2/2/2 bytes";
  EXPECT_EQ(epilogueReport(total, 3),
            "cuBLASLt bias epilogue per step: 10.0 hits, 2.0 fallbacks "
            "(cuBLAS + a bias pass); first fallback: fp16 m 8 n 3 k 5, "
            "alignment 2/2/2/2 bytes");
}

TEST(EpilogueCounts, DeltaSubtractsTheEarlierCounts) {
  EpilogueCounts earlier, later;
  earlier.hits = 5;
  earlier.fallbacks = 1;
  later.hits = 9;
  later.fallbacks = 3;
  later.firstFallback = "x";
  EpilogueCounts d = epilogueDelta(later, earlier);
  EXPECT_EQ(d.hits, 4u);
  EXPECT_EQ(d.fallbacks, 2u);
  EXPECT_EQ(d.firstFallback, "x");
}

TEST(BackendOpsDevice, GemmWithARowBiasIsCountedOnce) {
  std::string why;
  std::unique_ptr<Backend> cuda = createCudaBackend(why);
  if (!cuda)
    GTEST_SKIP() << "backend-ops skipped: no usable CUDA GPU: " << why;
  std::mt19937 rng(11);
  for (DType t : {DType::F32, DType::F16, DType::BF16}) {
    Tensor a = backend_ops::randomTensor(rng, t, {64, 96});
    Tensor b = backend_ops::randomTensor(rng, t, {32, 96});
    Tensor c = backend_ops::randomTensor(rng, t, {32});
    Graph g;
    Node *node = g.createNode("Gemm",
                              {g.addInput("a", t, toDims(a.dims)),
                               g.addInput("b", t, toDims(b.dims)),
                               g.addInput("c", t, toDims(c.dims))},
                              1, "linear");
    node->setAttr("transB", Attribute::ofInt(1));
    Tensor y;
    KernelContext ctx{*node, {&a, &b, &c}, {&y}, 0, {}};
    EpilogueCounts before = epilogueCounts();
    cuda->run(ctx);
    EpilogueCounts d = epilogueDelta(epilogueCounts(), before);
    EXPECT_EQ(d.hits + d.fallbacks, 1u) << dtypeName(t);
    // Aligned operands of a Linear layer: cuBLASLt has an algorithm on
    // every GPU the backend runs on; a fallback here is the silent loss
    // the count exists to show.
    EXPECT_EQ(d.hits, 1u) << dtypeName(t) << ": " << d.firstFallback;
  }
}
