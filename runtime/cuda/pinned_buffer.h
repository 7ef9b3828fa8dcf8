// PinnedBuffer: page-locked host memory that stages the step's copies.
//
// A cudaMemcpyAsync from pageable memory to the device first waits for the
// stream to drain, and one into pageable memory returns only when it is
// done: either way the host stalls on the GPU once per copy. Through pinned
// memory both copies are asynchronous, so a step's batch upload, its
// copies and its kernels queue without a wait, and the step ends with its
// one synchronisation. The buffer is carved front to back between two
// synchronisations (take()); what did not fit goes the pageable way and
// is remembered, and at the next synchronisation, when no copy is in
// flight, the buffer grows to fit it (up to a limit).
#pragma once

#include <cstddef>
#include <cstdint>

namespace mpc {
namespace cuda {

class PinnedBuffer {
public:
  /// `limit`: the most bytes ever pinned; `initial`: the first size wanted.
  PinnedBuffer(size_t limit, size_t initial)
      : limit_(limit), wanted_(initial) {}
  ~PinnedBuffer();
  PinnedBuffer(const PinnedBuffer &) = delete;
  PinnedBuffer &operator=(const PinnedBuffer &) = delete;

  /// `bytes` of pinned memory until the next recycle(), or nullptr when
  /// they do not fit (the caller copies from pageable memory instead).
  uint8_t *take(size_t bytes);

  /// Called when no copy through the buffer is in flight (after a stream
  /// synchronisation): everything is free again, and the buffer grows if
  /// the last round wanted more.
  void recycle();

  /// Bytes pinned now.
  size_t capacity() const { return capacity_; }

private:
  size_t limit_, wanted_;
  uint8_t *data_ = nullptr;
  size_t capacity_ = 0, used_ = 0;
};

} // namespace cuda
} // namespace mpc
