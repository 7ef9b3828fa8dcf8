// GraphCache: which device-resident steps the CUDA backend records as CUDA
// graphs, replays, or runs eagerly; one graph per plan.
//
// The trainer and the evaluator each run their own plan (a planId per
// executor arena and shapes) on one backend, and they alternate: a step or
// many, then an --eval-data pass, then steps again. Keeping one graph per
// plan (up to `capacity`, least recently used out first) lets each side
// replay its own after a switch instead of capturing again. The first step
// of a plan is never captured: it sizes the shared workspace and every
// node's tables and lets cuBLAS and cuDNN choose their algorithms, so the
// capture that follows allocates nothing.
//
// What the graphs hold goes stale together: when the shared workspace moves
// or an arena is freed, every graph is dropped (dropAll) and each plan
// captures again on its next step, without another warm-up. A capture that
// fails turns graphs off for the backend (captureFailed): the step is run
// eagerly and so is every step after it. Pure host logic over opaque
// handles (cudaGraphExec_t), so it is tested without a GPU; the caller
// destroys the handles this returns.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

namespace mpc {
namespace cuda {

class GraphCache {
public:
  enum class Action {
    Eager,   ///< run the nodes (a plan's first step, or graphs are off)
    Capture, ///< run the nodes under stream capture, then store()
    Replay,  ///< launch graph(planId); run no node
  };

  explicit GraphCache(bool enabled, size_t capacity = 8);

  bool enabled() const { return enabled_; }

  /// A step of plan `planId` starts: what to do with it.
  Action begin(uint64_t planId);
  /// The graph stored for `planId`, or nullptr.
  void *graph(uint64_t planId) const;
  /// Keeps `exec` as planId's graph; returns the graphs evicted to make
  /// room (least recently used), for the caller to destroy.
  std::vector<void *> store(uint64_t planId, void *exec);
  /// A capture failed: graphs stay off from now on; returns every graph.
  std::vector<void *> captureFailed();
  /// The graphs' addresses went stale (workspace moved, arena freed):
  /// returns every graph; plans keep their warm-up and capture next step.
  std::vector<void *> dropAll();
  /// A step of `planId` was interrupted by an error: its graph (if any) is
  /// returned and the plan starts over from a warm-up step.
  std::vector<void *> abort(uint64_t planId);

  size_t graphs() const;

private:
  struct Plan {
    uint64_t steps = 0;   ///< steps begun since its warm-up
    void *exec = nullptr; ///< its graph, once captured
    uint64_t lastUse = 0; ///< the clock at its last begin()
  };
  bool enabled_;
  size_t capacity_;
  uint64_t clock_ = 0;
  std::map<uint64_t, Plan> plans_;
};

} // namespace cuda
} // namespace mpc
