// MeasuredPeak: the device memory a CUDA backend really holds, measured.
//
// The memory plan says what the step's arena needs; the device also holds
// the shared scratch workspace, every node's tables, cuBLAS's workspace,
// cuDNN's and cuBLAS's own allocations behind their handles, and whatever a
// library allocates lazily. cudaMemGetInfo sees all of it: the backend
// takes the device's free memory once its context exists and before it
// allocates anything (the baseline), samples it again at step ends, and the
// largest drop is the measured peak (the CUDA context itself is not in it,
// as PyTorch's max_memory_allocated leaves it out; another process on the
// same GPU would be counted in, which gpu-check's machines do not have).
// Sampling is a driver call, so it is made at the first steps, where the
// footprint grows, and then every 64th step. Pure host arithmetic.
#pragma once

#include <cstddef>
#include <cstdint>

namespace mpc {
namespace cuda {

class MeasuredPeak {
public:
  /// The baseline: free bytes before the backend allocated anything.
  void start(size_t freeBytes);
  /// Free bytes now; the peak is the largest drop below the baseline.
  void sample(size_t freeBytes);
  bool started() const { return started_; }
  size_t peak() const { return peak_; }
  /// Whether step `step` (1 for the first) is sampled.
  static bool sampleAt(uint64_t step);

private:
  bool started_ = false;
  size_t baseline_ = 0, peak_ = 0;
};

} // namespace cuda
} // namespace mpc
