// MeasuredPeak: the largest drop of the device's free memory.
#include "runtime/cuda/device_peak.h"

#include <algorithm>

namespace mpc {
namespace cuda {

void MeasuredPeak::start(size_t freeBytes) {
  started_ = true;
  baseline_ = freeBytes;
  peak_ = 0;
}

void MeasuredPeak::sample(size_t freeBytes) {
  // More free than at the start: something else gave memory back; the
  // backend holds at least nothing.
  if (started_ && freeBytes < baseline_)
    peak_ = std::max(peak_, baseline_ - freeBytes);
}

bool MeasuredPeak::sampleAt(uint64_t step) {
  return step <= 4 || step % 64 == 0;
}

} // namespace cuda
} // namespace mpc
