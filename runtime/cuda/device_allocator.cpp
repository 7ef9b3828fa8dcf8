// DeviceAllocator: size classes, free lists, retry after releasing the cache.
#include "runtime/cuda/device_allocator.h"

#include "support/diagnostics.h"

#include <algorithm>
#include <string>

namespace mpc {
namespace cuda {

DeviceAllocator::DeviceAllocator(RawAlloc alloc, RawFree free, void *user)
    : rawAlloc_(alloc), rawFree_(free), user_(user) {}

DeviceAllocator::~DeviceAllocator() {
  releaseCached();
  for (auto &kv : live_) // leaked by a caller: still ours to return
    rawFree_(kv.first, user_);
}

size_t DeviceAllocator::sizeClass(size_t bytes) {
  size_t granule = 512;
  // Four classes per power of two above 4 KiB: at most 25% slack.
  for (size_t top = 4096; top < bytes && top < (size_t(1) << 62); top <<= 1)
    granule = std::max<size_t>(512, top / 4);
  return (bytes + granule - 1) / granule * granule;
}

void *DeviceAllocator::allocate(size_t bytes) {
  size_t size = sizeClass(std::max<size_t>(bytes, 1));
  auto it = cached_.find(size);
  void *p = nullptr;
  if (it != cached_.end()) {
    p = it->second;
    cached_.erase(it);
    ++stats_.cacheHits;
  } else {
    p = rawAlloc_(size, user_);
    if (!p && !cached_.empty()) { // fragmentation: give the cache back, retry
      releaseCached();
      p = rawAlloc_(size, user_);
    }
    if (!p)
      throw Error("cuda: out of device memory allocating " +
                  std::to_string(size) + " bytes (" +
                  std::to_string(stats_.liveBytes) + " bytes in use)");
    ++stats_.rawAllocations;
    stats_.reservedBytes += size;
    stats_.peakReservedBytes =
        std::max(stats_.peakReservedBytes, stats_.reservedBytes);
  }
  live_[p] = size;
  stats_.liveBytes += size;
  return p;
}

void DeviceAllocator::release(void *p) {
  if (!p)
    return;
  auto it = live_.find(p);
  if (it == live_.end())
    throw Error("cuda: internal error: releasing a block the allocator did "
                "not hand out");
  cached_.emplace(it->second, p);
  stats_.liveBytes -= it->second;
  live_.erase(it);
}

void DeviceAllocator::releaseCached() {
  for (auto &kv : cached_) {
    rawFree_(kv.second, user_);
    stats_.reservedBytes -= kv.first;
  }
  cached_.clear();
}

} // namespace cuda
} // namespace mpc
