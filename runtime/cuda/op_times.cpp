// MPC_CUDA_PROFILE's sums and report (see op_times.h).
#include "runtime/cuda/op_times.h"

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

namespace mpc {
namespace cuda {

void OpTimes::addStep(double wallMs) {
  ++steps_;
  wallMs_ += wallMs;
}

void OpTimes::add(const std::string &node, const std::string &op, double ms) {
  Totals &t = nodes_[node];
  t.op = op;
  t.ms += ms;
  ++t.calls;
}

void OpTimes::print(std::FILE *out) const {
  if (!steps_)
    return;
  double steps = double(steps_), deviceMs = 0;
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
               steps_, wallMs_ / steps, deviceMs / steps, nodes_.size());
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
