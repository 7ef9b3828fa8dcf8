// Zero bytes carved from anonymous mappings (see zero_pages.h).
#include "ir/zero_pages.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <sys/mman.h>

namespace mpc {
namespace {

constexpr size_t kPage = size_t(4) << 10;
constexpr size_t kHugePage = size_t(2) << 20;
/// Address space reserved per mapping; untouched, it costs no memory.
constexpr size_t kChunkBytes = size_t(64) << 20;

size_t roundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

/// One mapping, unmapped once the last buffer carved from it is gone.
class Chunk {
public:
  static std::shared_ptr<Chunk> map(size_t size) {
    // Aligned to a huge page, so that reading an untouched 2 MiB maps the
    // huge zero page in one fault instead of 512.
    size_t reserve = size + kHugePage;
    void *p = ::mmap(nullptr, reserve, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
      return nullptr;
    auto base = reinterpret_cast<uintptr_t>(p);
    uintptr_t aligned = roundUp(base, kHugePage);
    if (aligned > base)
      ::munmap(p, aligned - base);
    size_t tail = reserve - (aligned - base) - size;
    if (tail)
      ::munmap(reinterpret_cast<void *>(aligned + size), tail);
    ::madvise(reinterpret_cast<void *>(aligned), size, MADV_HUGEPAGE);
    return std::shared_ptr<Chunk>(
        new Chunk(reinterpret_cast<uint8_t *>(aligned), size));
  }
  ~Chunk() { ::munmap(base_, size_); }
  Chunk(const Chunk &) = delete;
  Chunk &operator=(const Chunk &) = delete;

  uint8_t *base() const { return base_; }
  size_t size() const { return size_; }

private:
  Chunk(uint8_t *base, size_t size) : base_(base), size_(size) {}
  uint8_t *base_;
  size_t size_;
};

} // namespace

ByteBuffer zeroBytes(size_t size) {
  if (size >= kZeroPagesMinBytes) {
    static std::mutex mutex;
    static std::shared_ptr<Chunk> current;
    static size_t used = 0;
    // Page-aligned slots: a buffer written in place copies only its own
    // pages (and never shares a small page with another buffer's writes).
    size_t slot = roundUp(size, kPage);
    std::lock_guard<std::mutex> lock(mutex);
    if (!current || current->size() - used < slot) {
      std::shared_ptr<Chunk> next =
          Chunk::map(roundUp(std::max(slot, kChunkBytes), kHugePage));
      if (next) {
        current = std::move(next);
        used = 0;
      }
    }
    if (current && current->size() - used >= slot) {
      uint8_t *p = current->base() + used;
      used += slot;
      return ByteBuffer::held(p, size, current);
    }
  }
  if (size > 0 && size < kZeroPagesMinBytes) {
    // Small zeros (an Adam step has two per bias and norm parameter) are
    // views of one shared block, in place (ByteBuffer::inPlace): the writer
    // reads them from there, and whatever writes or reads them as typed
    // data gets a copy of its own first. Left unwritten, the block costs
    // no memory (its pages read as the kernel's zero page).
    static uint8_t zeros[kZeroPagesMinBytes]; // never written
    // No owner to keep (a non-null pointer without a control block).
    static const std::shared_ptr<const void> keeper(
        std::shared_ptr<const void>(), zeros);
    return ByteBuffer::inPlace(zeros, size, keeper);
  }
  ByteBuffer b;
  b.assign(size, 0);
  return b;
}

} // namespace mpc
