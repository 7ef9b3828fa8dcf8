// The shared scratch workspace's planning (runtime/cuda/workspace_plan.h)
// and the measured device footprint (runtime/cuda/device_peak.h), without
// a GPU.
#include "runtime/cuda/device_peak.h"
#include "runtime/cuda/workspace_plan.h"

#include "support/diagnostics.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <vector>

using namespace mpc::cuda;

namespace {

TEST(WorkspacePlan, PiecesOfANodeAreAlignedAndDisjoint) {
  ScratchCursor c;
  std::vector<size_t> sizes = {1, 256, 257, 4096, 3};
  std::vector<size_t> offsets;
  for (size_t s : sizes)
    offsets.push_back(c.take(s));
  EXPECT_EQ(offsets, (std::vector<size_t>{0, 256, 512, 1024, 5120}));
  for (size_t i = 0; i < offsets.size(); ++i) {
    EXPECT_EQ(offsets[i] % kScratchAlignment, 0u);
    if (i + 1 < offsets.size())
      EXPECT_GE(offsets[i + 1], offsets[i] + sizes[i]);
  }
  EXPECT_EQ(c.used(), 5120u + 256u);
}

TEST(WorkspacePlan, TheWorkspaceIsTheHungriestNodeNotTheSum) {
  // Three nodes' requests (a cuDNN workspace, a widened operand, a padded
  // input): the shared buffer holds the largest node's, each node from 0.
  std::vector<std::vector<size_t>> nodes = {
      {size_t(64) << 20}, {1000, 3000, 5000}, {size_t(8) << 20, 100}};
  size_t capacity = 0, sum = 0;
  for (const auto &node : nodes) {
    ScratchCursor c;
    size_t first = c.take(node[0]);
    EXPECT_EQ(first, 0u);
    for (size_t i = 1; i < node.size(); ++i)
      c.take(node[i]);
    sum += c.used();
    capacity = grownWorkspaceCapacity(capacity, c.used());
    EXPECT_GE(capacity, c.used());
  }
  EXPECT_EQ(capacity, size_t(64) << 20);
  EXPECT_LT(capacity, sum);
}

TEST(WorkspacePlan, GrowsOnlyAndInCoarseSteps) {
  EXPECT_EQ(grownWorkspaceCapacity(0, 0), 0u);
  EXPECT_EQ(grownWorkspaceCapacity(0, 1), size_t(2) << 20);
  EXPECT_EQ(grownWorkspaceCapacity(size_t(2) << 20, 100), size_t(2) << 20);
  EXPECT_EQ(grownWorkspaceCapacity(size_t(2) << 20, (size_t(2) << 20) + 1),
            size_t(4) << 20);
  EXPECT_EQ(grownWorkspaceCapacity(size_t(10) << 20, size_t(3) << 20),
            size_t(10) << 20); // never shrinks
}

TEST(WorkspacePlan, SizesPastTheAddressSpaceAreRefused) {
  ScratchCursor c;
  c.take(1024);
  EXPECT_THROW(c.take(std::numeric_limits<size_t>::max() - 10), mpc::Error);
  EXPECT_THROW(grownWorkspaceCapacity(0, std::numeric_limits<size_t>::max()),
               mpc::Error);
}

TEST(MeasuredPeak, TheLargestDropBelowTheBaseline) {
  MeasuredPeak m;
  EXPECT_FALSE(m.started());
  m.sample(10); // before start: nothing
  EXPECT_EQ(m.peak(), 0u);
  m.start(1000);
  m.sample(900);
  m.sample(400);
  m.sample(700); // freed some: the peak stays
  EXPECT_EQ(m.peak(), 600u);
  m.sample(2000); // more free than at the start (another process freed)
  EXPECT_EQ(m.peak(), 600u);
}

TEST(MeasuredPeak, SamplesTheFirstStepsThenEvery64th) {
  std::vector<uint64_t> sampled;
  for (uint64_t step = 0; step <= 200; ++step)
    if (MeasuredPeak::sampleAt(step))
      sampled.push_back(step);
  EXPECT_EQ(sampled, (std::vector<uint64_t>{0, 1, 2, 3, 4, 64, 128, 192}));
}

} // namespace
