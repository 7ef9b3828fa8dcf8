// The CPU kernels' one pool of threads (see parallel.h). The only file
// compiled with OpenMP: the pool is libgomp's, which oneDNN uses too.
#include "kernels/cpu/parallel.h"

#include "kernels/cpu/blas.h"

#include <omp.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string>
#include <thread>

namespace mpc {
namespace cpu {
namespace {

/// As OpenBLAS counts when nothing sets it: OPENBLAS_NUM_THREADS, then
/// OMP_NUM_THREADS (mpc-opt sets the first to 1), then the cores.
int defaultThreads() {
  for (const char *name : {"OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"})
    if (const char *v = std::getenv(name)) {
      char *end = nullptr;
      long n = std::strtol(v, &end, 10);
      if (end != v && *end == '\0' && n > 0 && n <= 4096)
        return int(n);
    }
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
    return CPU_COUNT(&set);
  return int(std::max(1u, std::thread::hardware_concurrency()));
}

std::atomic<int> &count() {
  static std::atomic<int> c{defaultThreads()};
  return c;
}

} // namespace

int threadCount() { return count().load(std::memory_order_relaxed); }

void setThreadCount(int n) {
  count().store(std::max(1, n), std::memory_order_relaxed);
  applyThreadCount();
  setBlasThreadCount(threadCount());
}

void applyThreadCount() { useThreads(threadCount()); }

void useThreads(int n) {
  thread_local int applied = 0;
  if (applied == n)
    return;
  applied = n;
  omp_set_num_threads(n);
}

void parallelRanges(int64_t n, int64_t grain,
                    void (*body)(void *, int64_t, int64_t), void *state) {
  grain = std::max<int64_t>(grain, 1);
  int threads = threadCount();
  // Inside another region (a kernel called from one) the loop runs here.
  if (n < 2 * grain || threads < 2 || omp_in_parallel()) {
    if (n > 0)
      body(state, 0, n);
    return;
  }
  int64_t chunks = std::min<int64_t>(threads, n / grain);
#pragma omp parallel num_threads(int(chunks))
  {
    int64_t t = omp_get_thread_num(), used = omp_get_num_threads();
    int64_t begin = n * t / used, end = n * (t + 1) / used;
    if (begin < end)
      body(state, begin, end);
  }
}

} // namespace cpu
} // namespace mpc
