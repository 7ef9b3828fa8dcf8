// Per-node wall time of the CPU backend's kernels (MPC_CPU_PROFILE=1).
//
// Where a CPU step's time goes: a steady clock around each node's kernel,
// summed per op and per node, with the bytes the node read and wrote. The
// first call of each node is left out (it makes oneDNN's primitives and
// sizes scratch). The backend has no step boundaries, so a step is one call
// of the node called most often. The report, printed to stderr when the
// backend goes away, is laid out as MPC_CUDA_PROFILE's (runtime/cuda/
// op_times.h) with a bytes column: per step, the time inside nodes, then
// each op's nodes, ms, share and MiB moved, then the 25 slowest nodes;
// every line starts with "cpu profile: ".
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>
#include <unordered_map>

namespace mpc {
namespace cpu {

class OpProfile {
public:
  /// True when MPC_CPU_PROFILE is set to something other than "0" or "".
  static bool requested();

  /// One call of node `node` (op `op`): `ms` of wall time, `bytes` of its
  /// inputs and outputs.
  void add(const std::string &node, const std::string &op, double ms,
           size_t bytes);

  /// Timed steps so far (calls of the most-called node after its first).
  size_t steps() const;

  /// The report (nothing when no call after a node's first was timed).
  void print(std::FILE *out) const;

private:
  struct Totals {
    std::string op;
    double ms = 0;
    double bytes = 0;
    size_t calls = 0; ///< timed calls (the first is not)
    bool seen = false;
  };
  /// Keyed by node name: nodes keep their names for the whole run.
  std::unordered_map<std::string, Totals> nodes_;
};

} // namespace cpu
} // namespace mpc
