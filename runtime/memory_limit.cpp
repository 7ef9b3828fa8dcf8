// The run's memory limit: parsing --memory-limit, reading the free memory.
#include "runtime/memory_limit.h"

#include "support/available_memory.h"
#include "support/diagnostics.h"

#include <cctype>
#include <cmath>
#include <cstdlib>

namespace mpc {

size_t cpuAvailableBytes() { return size_t(availableMemory().bytes); }

MemoryLimit memoryLimitFor(const Backend &backend, bool given,
                           size_t explicitBytes) {
  MemoryLimit limit;
  std::string device = backend.name();
  if (given) {
    limit.bytes = explicitBytes;
    limit.source = device + ", --memory-limit";
    return limit;
  }
  size_t freeBytes = 0, totalBytes = 0;
  if (backend.deviceMemory(freeBytes, totalBytes)) {
    limit.bytes = freeBytes;
    limit.source =
        device + ", free device memory of " + formatByteSize(totalBytes);
    return limit;
  }
  if (device != "cpu")
    return limit; // unknown: no check
  AvailableMemory memory = availableMemory();
  limit.bytes = size_t(memory.bytes);
  limit.source = device + ", " + memory.source;
  return limit;
}

} // namespace mpc
