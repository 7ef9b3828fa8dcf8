// PinnedBuffer: carving and growth of the pinned staging memory.
#include "runtime/cuda/pinned_buffer.h"

#include <cuda_runtime_api.h>

#include <algorithm>

namespace mpc {
namespace cuda {

PinnedBuffer::~PinnedBuffer() {
  if (data_)
    cudaFreeHost(data_);
}

uint8_t *PinnedBuffer::take(size_t bytes) {
  // 16-byte steps keep every piece aligned for the DMA engines.
  size_t rounded = (bytes + 15) / 16 * 16;
  if (used_ + rounded > capacity_) {
    // A copy past the limit (a large model's first state upload) stays
    // pageable without pinning more for it.
    if (used_ + rounded <= limit_)
      wanted_ = std::max(wanted_, used_ + rounded);
    return nullptr;
  }
  uint8_t *p = data_ + used_;
  used_ += rounded;
  return p;
}

void PinnedBuffer::recycle() {
  used_ = 0;
  if (wanted_ <= capacity_)
    return;
  if (data_)
    cudaFreeHost(data_);
  data_ = nullptr;
  capacity_ = 0;
  // Twice what was wanted, so a slowly growing demand does not pin anew
  // every step.
  size_t want = std::min(limit_, wanted_ * 2);
  if (cudaMallocHost(reinterpret_cast<void **>(&data_), want) == cudaSuccess) {
    capacity_ = want;
  } else {
    cudaGetLastError(); // not an error of the step: pageable copies work
    limit_ = 0;         // and are what this buffer leaves to from now on
  }
  wanted_ = capacity_;
}

} // namespace cuda
} // namespace mpc
