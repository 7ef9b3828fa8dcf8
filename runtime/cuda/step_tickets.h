// StepTickets: which of the CUDA backend's step slots are in flight, in
// what order they were submitted, and which step found an error: the host
// bookkeeping of asynchronous resident steps (Backend::submitStep and
// waitStep), apart from the CUDA calls so that it is tested without a GPU.
//
// A step fills the current slot (its pinned staging, seed and error words)
// and is submitted with a ticket; the next step takes the next slot, which
// must have arrived first. A step's device error belongs to its ticket: it
// is reported by the wait on that ticket (or a later one, or a full
// synchronisation), never by the submit of a later step that happened to
// wait for its slot.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace mpc {
namespace cuda {

class StepTickets {
public:
  explicit StepTickets(int slots) : slots_(size_t(slots < 1 ? 1 : slots)) {}

  /// The slot the step being set up fills.
  int current() const { return current_; }
  /// Submits the current slot's step: returns its ticket (1, 2, ...), and
  /// the next slot becomes current (if it is still in flight, the caller
  /// waits for it: oldestInFlight(ticket(current()))).
  uint64_t submit();
  bool inFlight(int slot) const { return slots_[size_t(slot)].inFlight; }
  uint64_t ticket(int slot) const { return slots_[size_t(slot)].ticket; }
  /// The slot submitted first of those in flight with a ticket up to
  /// `upTo`, or -1.
  int oldestInFlight(uint64_t upTo = UINT64_MAX) const;
  /// `slot`'s work is done (its downloads delivered); `error` is what its
  /// step found ("": nothing). A slot not in flight holds what was
  /// enqueued since the last submit: its error counts as the newest.
  void arrived(int slot, const std::string &error);
  /// The first error of the arrived steps with tickets up to `upTo` (""
  /// when none); those steps' errors are forgotten.
  std::string takeError(uint64_t upTo);

private:
  struct Slot {
    uint64_t ticket = 0;
    bool inFlight = false;
  };
  std::vector<Slot> slots_;
  int current_ = 0;
  uint64_t next_ = 1;
  std::vector<std::pair<uint64_t, std::string>> errors_;
};

} // namespace cuda
} // namespace mpc
