// Per-node device time of the CUDA backend's steps (see op_profile.h).
#include "runtime/cuda/op_profile.h"

#include "kernels/cuda/cuda_check.h"
#include "passes/ir/graph.h"

#include <algorithm>
#include <cstdlib>
#include <map>

namespace mpc {
namespace cuda {

bool OpProfile::requested() {
  const char *v = std::getenv("MPC_CUDA_PROFILE");
  return v && *v && std::string(v) != "0";
}

OpProfile::~OpProfile() {
  for (const Pending &p : pending_) {
    cudaEventDestroy(p.start);
    cudaEventDestroy(p.stop);
  }
  if (open_)
    cudaEventDestroy(open_);
  for (cudaEvent_t e : free_)
    cudaEventDestroy(e);
}

cudaEvent_t OpProfile::event() {
  if (!free_.empty()) {
    cudaEvent_t e = free_.back();
    free_.pop_back();
    return e;
  }
  cudaEvent_t e = nullptr;
  MPC_CUDA_CHECK(cudaEventCreate(&e));
  return e;
}

void OpProfile::stepBegins() {
  ++steps_;
  inStep_ = true;
  stepStart_ = std::chrono::steady_clock::now();
}

void OpProfile::nodeBegins(cudaStream_t stream) {
  if (!open_)
    open_ = event();
  MPC_CUDA_CHECK(cudaEventRecord(open_, stream));
}

void OpProfile::nodeEnds(cudaStream_t stream, const Node &node) {
  cudaEvent_t stop = event();
  MPC_CUDA_CHECK(cudaEventRecord(stop, stream));
  pending_.push_back({open_, stop, &node});
  open_ = nullptr;
}

void OpProfile::stepEnds() {
  // Called after each of the stream's synchronisations (the step's, and any
  // host copy after it): every event has completed.
  bool timed = steps_ > 1;
  if (timed && inStep_) {
    ++timedSteps_;
    stepWallMs_ += std::chrono::duration<double, std::milli>(
                       std::chrono::steady_clock::now() - stepStart_)
                       .count();
  }
  inStep_ = false;
  for (const Pending &p : pending_) {
    if (timed) {
      float ms = 0;
      MPC_CUDA_CHECK(cudaEventElapsedTime(&ms, p.start, p.stop));
      Totals &t = nodes_[p.node->name()];
      t.op = p.node->opType();
      t.ms += ms;
      ++t.calls;
    }
    free_.push_back(p.start);
    free_.push_back(p.stop);
  }
  pending_.clear();
}

void OpProfile::print(std::FILE *out) const {
  if (!timedSteps_)
    return;
  double steps = double(timedSteps_), deviceMs = 0;
  std::map<std::string, Totals> ops;
  std::vector<std::pair<double, const std::string *>> byNode;
  for (const auto &[name, t] : nodes_) {
    deviceMs += t.ms;
    Totals &o = ops[t.op];
    o.op = t.op;
    o.ms += t.ms;
    o.calls += t.calls;
    byNode.push_back({t.ms, &name});
  }
  std::fprintf(out,
               "cuda profile: %zu steps after the first; per step %.3f ms "
               "wall, %.3f ms of device time inside %zu nodes\n",
               timedSteps_, stepWallMs_ / steps, deviceMs / steps,
               nodes_.size());
  std::vector<const Totals *> sorted;
  for (const auto &[op, t] : ops)
    sorted.push_back(&t);
  std::sort(sorted.begin(), sorted.end(),
            [](const Totals *a, const Totals *b) { return a->ms > b->ms; });
  std::fprintf(out, "cuda profile: %-28s %10s %12s %7s\n", "op", "nodes/step",
               "ms/step", "share");
  for (const Totals *t : sorted)
    std::fprintf(out, "cuda profile: %-28s %10.0f %12.3f %6.1f%%\n",
                 t->op.c_str(), double(t->calls) / steps, t->ms / steps,
                 deviceMs > 0 ? 100 * t->ms / deviceMs : 0.0);
  std::sort(byNode.begin(), byNode.end(),
            [](const auto &a, const auto &b) { return a.first > b.first; });
  size_t top = std::min<size_t>(byNode.size(), 25);
  std::fprintf(out, "cuda profile: the %zu slowest nodes\n", top);
  for (size_t i = 0; i < top; ++i) {
    const Totals &t = nodes_.at(*byNode[i].second);
    std::fprintf(out, "cuda profile: %-40s %-20s %10.3f ms/step\n",
                 byNode[i].second->c_str(), t.op.c_str(),
                 byNode[i].first / steps);
  }
}

} // namespace cuda
} // namespace mpc
