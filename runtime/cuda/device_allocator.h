// DeviceAllocator: a caching allocator of device buffers.
//
// The staged CUDA backend needs device buffers for every node's inputs and
// outputs on every step; cudaMalloc/cudaFree per node would synchronise the
// device and cost more than the small kernels themselves. Released blocks
// are kept in free lists by size class and handed out again, so a training
// step that repeats the same shapes allocates nothing after its first run.
// The raw allocation functions are parameters, so the caching is tested on
// the CPU (tests/backend-ops) with malloc standing in for cudaMalloc.
//
// Not thread-safe (one backend, one stream). Buffers released here may
// still be read by work queued on the backend's stream; reusing them for
// later work on that same stream is ordered after it, which is why one
// allocator serves exactly one stream.
#pragma once

#include <cstddef>
#include <map>
#include <unordered_map>

namespace mpc {
namespace cuda {

class DeviceAllocator {
public:
  /// Returns nullptr when out of memory.
  using RawAlloc = void *(*)(size_t bytes, void *user);
  using RawFree = void (*)(void *p, void *user);

  struct Stats {
    size_t rawAllocations = 0; ///< calls of RawAlloc
    size_t cacheHits = 0;      ///< allocations served from the free lists
    size_t reservedBytes = 0;  ///< bytes held from RawAlloc (live + cached)
    size_t liveBytes = 0;      ///< bytes handed out and not released
    size_t peakReservedBytes = 0;
  };

  DeviceAllocator(RawAlloc alloc, RawFree free, void *user);
  ~DeviceAllocator();
  DeviceAllocator(const DeviceAllocator &) = delete;
  DeviceAllocator &operator=(const DeviceAllocator &) = delete;

  /// A block of at least `bytes` (> 0), 256-byte aligned when the raw
  /// allocator's blocks are. Throws mpc::Error when even after releasing
  /// every cached block the memory is not there.
  void *allocate(size_t bytes);
  /// Returns a block from allocate() to the cache.
  void release(void *p);
  /// Gives every cached (not live) block back to the raw allocator.
  void releaseCached();

  const Stats &stats() const { return stats_; }

  /// The size class of a request: a multiple of 512 bytes, and at most a
  /// quarter more than asked above 4 KiB (so similar sizes share blocks).
  static size_t sizeClass(size_t bytes);

private:
  RawAlloc rawAlloc_;
  RawFree rawFree_;
  void *user_;
  std::multimap<size_t, void *> cached_;
  std::unordered_map<void *, size_t> live_;
  Stats stats_;
};

} // namespace cuda
} // namespace mpc
