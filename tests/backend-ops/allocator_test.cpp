// The CUDA backend's caching allocator, on the CPU: malloc stands in for
// cudaMalloc (the raw functions are parameters), so the caching that keeps
// cudaMalloc out of a training step's steady state is checked without a GPU.
#include "runtime/cuda/device_allocator.h"

#include "support/diagnostics.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <set>

using mpc::cuda::DeviceAllocator;

namespace {

/// A raw allocator over malloc with a byte budget.
struct Budget {
  size_t limit = size_t(1) << 40;
  size_t used = 0;
  std::set<void *> blocks;
  std::map<void *, size_t> sizes;
};

void *budgetAlloc(size_t bytes, void *user) {
  auto *b = static_cast<Budget *>(user);
  if (b->used + bytes > b->limit)
    return nullptr;
  void *p = std::malloc(bytes);
  b->used += bytes;
  b->blocks.insert(p);
  b->sizes[p] = bytes;
  return p;
}

void budgetFree(void *p, void *user) {
  auto *b = static_cast<Budget *>(user);
  EXPECT_TRUE(b->blocks.erase(p)) << "freed a block twice or never allocated";
  b->used -= b->sizes[p];
  b->sizes.erase(p);
  std::free(p);
}

TEST(CudaAllocator, SizeClassesBoundTheSlack) {
  for (size_t bytes :
       {size_t(1), size_t(511), size_t(512), size_t(513), size_t(4096),
        size_t(4097), size_t(100000), size_t(1) << 20, (size_t(1) << 20) + 1,
        size_t(123456789)}) {
    size_t c = DeviceAllocator::sizeClass(bytes);
    EXPECT_GE(c, bytes);
    EXPECT_EQ(c % 512, 0u) << bytes;
    EXPECT_LE(c, bytes + bytes / 4 + 512) << bytes;
  }
}

TEST(CudaAllocator, SteadyStateReusesEveryBlock) {
  Budget budget;
  {
    DeviceAllocator a(budgetAlloc, budgetFree, &budget);
    const size_t sizes[] = {800, 20 * 4, 64 * 20 * 2, 1 << 20, 800};
    for (int step = 0; step < 5; ++step) {
      std::vector<void *> live;
      for (size_t s : sizes)
        live.push_back(a.allocate(s));
      EXPECT_EQ(std::set<void *>(live.begin(), live.end()).size(), live.size())
          << "two live buffers share a block";
      for (void *p : live)
        a.release(p);
      // Only the first step reaches the raw allocator.
      EXPECT_EQ(a.stats().rawAllocations, std::size(sizes)) << "step " << step;
    }
    EXPECT_EQ(a.stats().cacheHits, 4 * std::size(sizes));
    EXPECT_EQ(a.stats().liveBytes, 0u);
  }
  EXPECT_EQ(budget.used, 0u) << "the allocator leaked raw blocks";
}

TEST(CudaAllocator, ReleasesTheCacheWhenMemoryRunsOut) {
  Budget budget;
  budget.limit = 8192;
  DeviceAllocator a(budgetAlloc, budgetFree, &budget);
  a.release(a.allocate(4096)); // cached, holding half the budget
  void *p = a.allocate(6000);  // does not fit beside it: cache released
  EXPECT_NE(p, nullptr);
  EXPECT_EQ(a.stats().reservedBytes, DeviceAllocator::sizeClass(6000));
  EXPECT_THROW(a.allocate(4096), mpc::Error); // nothing left to release
  a.release(p);
}

TEST(CudaAllocator, RefusesAForeignPointer) {
  Budget budget;
  DeviceAllocator a(budgetAlloc, budgetFree, &budget);
  int x = 0;
  EXPECT_THROW(a.release(&x), mpc::Error);
}

} // namespace
