// StepTickets: slots in flight and their steps' errors (see the header).
#include "runtime/cuda/step_tickets.h"

namespace mpc {
namespace cuda {

uint64_t StepTickets::submit() {
  Slot &s = slots_[size_t(current_)];
  s.ticket = next_++;
  s.inFlight = true;
  current_ = int((size_t(current_) + 1) % slots_.size());
  return s.ticket;
}

int StepTickets::oldestInFlight(uint64_t upTo) const {
  int oldest = -1;
  for (size_t i = 0; i < slots_.size(); ++i)
    if (slots_[i].inFlight && slots_[i].ticket <= upTo &&
        (oldest < 0 || slots_[i].ticket < slots_[size_t(oldest)].ticket))
      oldest = int(i);
  return oldest;
}

void StepTickets::arrived(int slot, const std::string &error) {
  Slot &s = slots_[size_t(slot)];
  uint64_t ticket = s.inFlight ? s.ticket : UINT64_MAX;
  s.inFlight = false;
  if (!error.empty())
    errors_.emplace_back(ticket, error);
}

std::string StepTickets::takeError(uint64_t upTo) {
  std::string first;
  for (auto it = errors_.begin(); it != errors_.end();) {
    if (it->first > upTo) {
      ++it;
      continue;
    }
    if (first.empty())
      first = it->second;
    it = errors_.erase(it);
  }
  return first;
}

} // namespace cuda
} // namespace mpc
