// The memory this process can still get: /proc/meminfo, the memory cgroup,
// RLIMIT_AS.
#include "support/available_memory.h"

#include <cstdio>
#include <fstream>
#include <sstream>
#include <sys/resource.h>
#include <unistd.h>

namespace mpc {
namespace {

/// The first number in `path` (a cgroup file: "max" and junk read as none).
bool readNumber(const char *path, uint64_t &value) {
  std::ifstream in(path);
  unsigned long long v = 0;
  if (!(in >> v))
    return false;
  value = uint64_t(v);
  return true;
}

/// MemAvailable, else free pages times the page size; 0 when neither.
uint64_t physicalAvailable() {
  std::ifstream meminfo("/proc/meminfo");
  std::string line;
  while (std::getline(meminfo, line)) {
    if (line.rfind("MemAvailable:", 0) != 0)
      continue;
    std::istringstream is(line.substr(13));
    unsigned long long kib = 0;
    std::string unit;
    if (is >> kib >> unit && unit == "kB")
      return uint64_t(kib) * 1024;
  }
  long pages = sysconf(_SC_AVPHYS_PAGES), pageSize = sysconf(_SC_PAGESIZE);
  return pages > 0 && pageSize > 0 ? uint64_t(pages) * uint64_t(pageSize) : 0;
}

/// What the memory cgroup the process sees at /sys/fs/cgroup (its own,
/// in a container) has left; false without a limit. v1 reports "no limit"
/// as a number near 2^63.
bool cgroupAvailable(uint64_t &bytes) {
  uint64_t limit = 0, used = 0;
  bool v2 = readNumber("/sys/fs/cgroup/memory.max", limit) &&
            readNumber("/sys/fs/cgroup/memory.current", used);
  bool v1 = !v2 &&
            readNumber("/sys/fs/cgroup/memory/memory.limit_in_bytes", limit) &&
            readNumber("/sys/fs/cgroup/memory/memory.usage_in_bytes", used);
  if ((!v2 && !v1) || limit >= (uint64_t(1) << 60))
    return false;
  bytes = limit > used ? limit - used : 1; // 1: none left (0 is unknown)
  return true;
}

/// What RLIMIT_AS leaves above the process's virtual size; false without
/// a limit.
bool addressSpaceAvailable(uint64_t &bytes) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
    return false;
  uint64_t pages = 0;
  long pageSize = sysconf(_SC_PAGESIZE);
  if (!readNumber("/proc/self/statm", pages) || pageSize <= 0)
    return false;
  uint64_t size = pages * uint64_t(pageSize);
  bytes = uint64_t(rl.rlim_cur) > size ? uint64_t(rl.rlim_cur) - size : 1;
  return true;
}

} // namespace

AvailableMemory availableMemory() {
  AvailableMemory m;
  m.bytes = physicalAvailable();
  if (m.bytes)
    m.source = "available physical memory";
  uint64_t b = 0;
  if (cgroupAvailable(b) && (!m.bytes || b < m.bytes)) {
    m.bytes = b;
    m.source = "what the memory cgroup's limit leaves";
  }
  if (addressSpaceAvailable(b) && (!m.bytes || b < m.bytes)) {
    m.bytes = b;
    m.source = "what the address-space limit (ulimit -v) leaves";
  }
  return m;
}

std::string formatMemorySize(uint64_t bytes) {
  char buf[64];
  double b = double(bytes);
  if (bytes >= (uint64_t(1) << 30))
    std::snprintf(buf, sizeof buf, "%.1f GiB", b / double(1 << 30));
  else if (bytes >= (uint64_t(1) << 20))
    std::snprintf(buf, sizeof buf, "%.1f MiB", b / double(1 << 20));
  else
    std::snprintf(buf, sizeof buf, "%llu bytes", (unsigned long long)bytes);
  return buf;
}

} // namespace mpc
