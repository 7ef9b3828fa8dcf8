// The CPU kernels' one pool of threads.
//
// oneDNN (Debian's build runs on OpenMP), OpenBLAS and the kernels' own
// loops share one thread count, set in one place (setThreadCount: mpc-run's
// --threads), so no library starts more threads than the others leave
// cores for: oneDNN's primitives and parallelFor below run on the same
// OpenMP threads (libgomp), one parallel region at a time, and OpenBLAS's
// own pool (Debian's pthread build) is told the same count.
#pragma once

#include <algorithm>
#include <cstdint>

namespace mpc {
namespace cpu {

/// The pool's size: setThreadCount's, else OPENBLAS_NUM_THREADS or
/// OMP_NUM_THREADS when one is a positive integer (in that order), else the
/// cores this process may run on.
int threadCount();

/// Sets the pool's size for OpenMP (oneDNN, parallelFor) and OpenBLAS.
/// n >= 1 (the caller checks its flag).
void setThreadCount(int n);

/// Gives the calling thread's OpenMP regions (oneDNN's) threadCount()
/// threads; cheap after the first call on a thread while the count stays.
void applyThreadCount();

/// Gives the calling thread's next OpenMP regions `n` threads (a oneDNN
/// primitive too small to share out runs on one); cheap when unchanged.
void useThreads(int n);

/// Calls body(begin, end) on disjoint ranges covering [0, n), in parallel
/// when n is at least 2 * grain and the pool has more than one thread
/// (each range then holds at least `grain` items), else once on [0, n)
/// in the calling thread. `body` must not throw.
void parallelRanges(int64_t n, int64_t grain,
                    void (*body)(void *, int64_t, int64_t), void *state);

/// The least work worth a range of a parallel loop: some 16K values (tens
/// of microseconds against a parallel region's few).
constexpr int64_t kGrainValues = 16384;

/// Items per range at least when each item is `valuesPerItem` values (a
/// row, a channel, a plane): kGrainValues of them, at least one item.
inline int64_t grainFor(int64_t valuesPerItem) {
  return std::max<int64_t>(1,
                           kGrainValues / std::max<int64_t>(1, valuesPerItem));
}

template <typename F> void parallelFor(int64_t n, int64_t grain, F &&body) {
  parallelRanges(
      n, grain,
      [](void *s, int64_t b, int64_t e) { (*static_cast<F *>(s))(b, e); },
      static_cast<void *>(&body));
}

} // namespace cpu
} // namespace mpc
