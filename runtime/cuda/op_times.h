// The arithmetic and the report of MPC_CUDA_PROFILE (op_profile.h): device
// times per node summed over the timed steps, then per op and the slowest
// nodes, per step. Host code only, so the CPU tests check the report that
// tools/gpu-check.sh's step-profile stage reads (its "cuda profile:" lines).
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>
#include <unordered_map>

namespace mpc {
namespace cuda {

class OpTimes {
public:
  /// A timed step's wall time, host clock.
  void addStep(double wallMs);
  /// `ms` of device time in node `node` (op `op`) during a timed step.
  void add(const std::string &node, const std::string &op, double ms);

  size_t steps() const { return steps_; }

  /// Per step: the wall and device times, each op's nodes, ms and share
  /// (most time first), and the 25 slowest nodes; every line starts with
  /// "cuda profile: ". Nothing when no step was timed.
  void print(std::FILE *out) const;

private:
  struct Totals {
    std::string op;
    double ms = 0;
    size_t calls = 0;
  };
  /// Keyed by node name: nodes keep their names for the whole run.
  std::unordered_map<std::string, Totals> nodes_;
  size_t steps_ = 0;
  double wallMs_ = 0;
};

} // namespace cuda
} // namespace mpc
