// The run's memory limit: parsing --memory-limit, reading the free memory.
#include "runtime/memory_limit.h"

#include "passes/support/diagnostics.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace mpc {

size_t parseByteSize(const std::string &flag, const std::string &text) {
  const char *s = text.c_str();
  char *end = nullptr;
  double n = text.empty() || !std::isdigit((unsigned char)text[0])
                 ? -1
                 : std::strtod(s, &end);
  // Plain decimals only: strtod would also take hex, exponents, "inf".
  for (const char *p = s; n >= 0 && p < end; ++p)
    if (!std::isdigit((unsigned char)*p) && *p != '.')
      n = -1;
  double unit = -1;
  if (n >= 0 && std::isfinite(n)) {
    std::string suffix(end);
    static const struct {
      const char *letter;
      double unit;
    } kUnits[] = {{"", 1},
                  {"K", 1024.0},
                  {"M", 1024.0 * 1024},
                  {"G", 1024.0 * 1024 * 1024}};
    for (const auto &u : kUnits)
      for (const char *tail : {"", "B", "iB"})
        if ((*u.letter || *tail != 'i') &&
            suffix == std::string(u.letter) + tail)
          unit = u.unit;
  }
  double bytes = n * unit;
  // 2^63: far above any memory, and exactly representable in a double.
  if (unit < 0 || !(bytes < 9223372036854775808.0))
    throw Error(flag +
                ": expected a byte count with an optional K, M or G "
                "suffix (e.g. 256M), got '" +
                text + "'");
  return size_t(bytes);
}

size_t cpuAvailableBytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string line;
  while (std::getline(meminfo, line)) {
    if (line.rfind("MemAvailable:", 0) != 0)
      continue;
    std::istringstream is(line.substr(13));
    unsigned long long kib = 0;
    std::string unit;
    if (is >> kib >> unit && unit == "kB")
      return size_t(kib) * 1024;
  }
  long pages = sysconf(_SC_AVPHYS_PAGES), pageSize = sysconf(_SC_PAGESIZE);
  return pages > 0 && pageSize > 0 ? size_t(pages) * size_t(pageSize) : 0;
}

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
  limit.bytes = cpuAvailableBytes();
  limit.source = device + ", available physical memory";
  return limit;
}

} // namespace mpc
