// Per-node device time of the CUDA backend's steps (MPC_CUDA_PROFILE=1).
//
// Where a step's time goes on the GPU: CUDA events around each node's work
// on the backend's stream, read after the step's one synchronisation and
// summed per op and per node. The first step is left out (it sizes scratch
// and lets cuBLAS choose its algorithms). The report, printed to stderr
// when the backend goes away, gives per step: the host's wall time of the
// step, the device time inside nodes, and the ops and nodes that take most.
// Events between nodes cannot live in a CUDA graph, so profiling turns the
// graphs off; the times are those of the graph-less resident step (staged
// steps, --cuda-resident=off, are not profiled). The report ends with the
// cuBLASLt bias epilogue's hits and fallbacks per timed step
// (gemm_bias_epilogue.h).
#pragma once

#include "runtime/cuda/gemm_bias_epilogue.h"
#include "runtime/cuda/op_times.h"

#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdio>
#include <vector>

namespace mpc {
class Node;
namespace cuda {

class OpProfile {
public:
  ~OpProfile();

  /// A step starts (beginStep); a synchronisation has finished (the first
  /// after stepBegins ends the step's wall time).
  void stepBegins();
  void stepEnds();

  /// Around one node's work on `stream`.
  void nodeBegins(cudaStream_t stream);
  void nodeEnds(cudaStream_t stream, const Node &node);

  /// The report (nothing when no step after the first was timed).
  void print(std::FILE *out) const;

private:
  struct Pending {
    cudaEvent_t start, stop;
    const Node *node;
  };
  cudaEvent_t event();

  std::vector<cudaEvent_t> free_;
  std::vector<Pending> pending_;
  cudaEvent_t open_ = nullptr;
  OpTimes times_;
  size_t steps_ = 0;
  bool inStep_ = false; ///< between stepBegins and the next stepEnds
  std::chrono::steady_clock::time_point stepStart_;
  EpilogueCounts epilogueAtStart_; ///< the counts when the step began
  EpilogueCounts epilogueTimed_;   ///< summed over the timed steps
};

} // namespace cuda
} // namespace mpc
