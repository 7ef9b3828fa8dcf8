// GraphCache: per-plan capture, replay and eviction decisions.
#include "runtime/cuda/graph_cache.h"

namespace mpc {
namespace cuda {

namespace {
/// Plans remembered at most (warm-up counts of plans whose arenas are long
/// gone are dropped past this, oldest first).
constexpr size_t kMaxPlans = 64;
} // namespace

GraphCache::GraphCache(bool enabled, size_t capacity)
    : enabled_(enabled), capacity_(capacity ? capacity : 1) {}

GraphCache::Action GraphCache::begin(uint64_t planId) {
  if (!enabled_)
    return Action::Eager;
  if (!plans_.count(planId) && plans_.size() >= kMaxPlans) {
    // Forget the least recently used plan without a graph (a plan with a
    // graph is counted against capacity_ <= kMaxPlans anyway).
    auto victim = plans_.end();
    for (auto it = plans_.begin(); it != plans_.end(); ++it)
      if (!it->second.exec && (victim == plans_.end() ||
                               it->second.lastUse < victim->second.lastUse))
        victim = it;
    if (victim != plans_.end())
      plans_.erase(victim);
  }
  Plan &p = plans_[planId];
  p.lastUse = ++clock_;
  ++p.steps;
  if (p.exec)
    return Action::Replay;
  return p.steps >= 2 ? Action::Capture : Action::Eager;
}

void *GraphCache::graph(uint64_t planId) const {
  auto it = plans_.find(planId);
  return it == plans_.end() ? nullptr : it->second.exec;
}

std::vector<void *> GraphCache::store(uint64_t planId, void *exec) {
  std::vector<void *> evicted;
  Plan &p = plans_[planId];
  if (p.exec && p.exec != exec)
    evicted.push_back(p.exec);
  p.exec = exec;
  while (graphs() > capacity_) {
    auto victim = plans_.end();
    for (auto it = plans_.begin(); it != plans_.end(); ++it)
      if (it->second.exec && it->first != planId &&
          (victim == plans_.end() ||
           it->second.lastUse < victim->second.lastUse))
        victim = it;
    if (victim == plans_.end())
      break;
    evicted.push_back(victim->second.exec);
    victim->second.exec = nullptr;
  }
  return evicted;
}

std::vector<void *> GraphCache::captureFailed() {
  std::vector<void *> all = dropAll();
  enabled_ = false;
  plans_.clear();
  return all;
}

std::vector<void *> GraphCache::dropAll() {
  std::vector<void *> all;
  for (auto &kv : plans_)
    if (kv.second.exec) {
      all.push_back(kv.second.exec);
      kv.second.exec = nullptr;
    }
  return all;
}

std::vector<void *> GraphCache::abort(uint64_t planId) {
  std::vector<void *> dropped;
  auto it = plans_.find(planId);
  if (it == plans_.end())
    return dropped;
  if (it->second.exec)
    dropped.push_back(it->second.exec);
  plans_.erase(it);
  return dropped;
}

size_t GraphCache::graphs() const {
  size_t n = 0;
  for (const auto &kv : plans_)
    n += kv.second.exec != nullptr;
  return n;
}

} // namespace cuda
} // namespace mpc
