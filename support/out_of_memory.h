// Allocation failures as user-facing errors: "out of memory while ...".
//
// A size the input controls is checked before it is allocated (against the
// file's real size, the tensor's dims, support/available_memory.h);
// what still fails to allocate (the machine is busy, `ulimit -v` is low)
// throws std::bad_alloc (tools/process_allocator/throwing_new.cpp makes
// mimalloc's operator new do so too), or std::length_error for a size past
// what a container can hold. whileAllocating turns either into an Error
// that says what was being done, which the tools print as their one line.
#pragma once

#include "support/diagnostics.h"

#include <new>
#include <stdexcept>
#include <string>
#include <utility>

namespace mpc {

/// "out of memory while " + `doing`: the message of an allocation failure.
inline std::string outOfMemoryMessage(const std::string &doing) {
  return "out of memory while " + doing;
}

/// Runs `body` and returns what it returns; an allocation failure inside it
/// becomes Error(outOfMemoryMessage(doing)). Errors pass through unchanged.
template <class F>
auto whileAllocating(const std::string &doing, F &&body)
    -> decltype(std::forward<F>(body)()) {
  try {
    return std::forward<F>(body)();
  } catch (const std::bad_alloc &) {
    throw Error(outOfMemoryMessage(doing));
  } catch (const std::length_error &) {
    throw Error(outOfMemoryMessage(doing) + " (a size past what it can hold)");
  }
}

} // namespace mpc
