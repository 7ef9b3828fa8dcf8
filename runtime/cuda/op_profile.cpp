// Per-node device time of the CUDA backend's steps (see op_profile.h).
#include "runtime/cuda/op_profile.h"

#include "ir/graph.h"
#include "kernels/cuda/cuda_check.h"

namespace mpc {
namespace cuda {

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
  epilogueAtStart_ = epilogueCounts();
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
    times_.addStep(std::chrono::duration<double, std::milli>(
                       std::chrono::steady_clock::now() - stepStart_)
                       .count());
    EpilogueCounts d = epilogueDelta(epilogueCounts(), epilogueAtStart_);
    epilogueTimed_.hits += d.hits;
    epilogueTimed_.fallbacks += d.fallbacks;
    epilogueTimed_.firstFallback = d.firstFallback;
  }
  inStep_ = false;
  for (const Pending &p : pending_) {
    if (timed) {
      float ms = 0;
      MPC_CUDA_CHECK(cudaEventElapsedTime(&ms, p.start, p.stop));
      times_.add(p.node->name(), p.node->opType(), ms);
    }
    free_.push_back(p.start);
    free_.push_back(p.stop);
  }
  pending_.clear();
}

void OpProfile::print(std::FILE *out) const {
  times_.print(out);
  std::string line = epilogueReport(epilogueTimed_, times_.steps());
  if (!line.empty())
    std::fprintf(out, "cuda profile: %s\n", line.c_str());
}

} // namespace cuda
} // namespace mpc
