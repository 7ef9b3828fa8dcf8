// MPC_CPU_PROFILE's sums and report (see op_profile.h).
#include "runtime/cpu/op_profile.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <utility>
#include <vector>

namespace mpc {
namespace cpu {

bool OpProfile::requested() {
  const char *v = std::getenv("MPC_CPU_PROFILE");
  return v && *v && std::string(v) != "0";
}

void OpProfile::add(const std::string &node, const std::string &op, double ms,
                    size_t bytes) {
  Totals &t = nodes_[node];
  if (!t.seen) { // the first call makes primitives and scratch: not timed
    t.seen = true;
    t.op = op;
    return;
  }
  t.ms += ms;
  t.bytes += double(bytes);
  ++t.calls;
}

size_t OpProfile::steps() const {
  size_t steps = 0;
  for (const auto &[name, t] : nodes_)
    steps = std::max(steps, t.calls);
  return steps;
}

void OpProfile::print(std::FILE *out) const {
  size_t n = steps();
  if (!n)
    return;
  double steps = double(n), totalMs = 0;
  std::map<std::string, Totals> ops;
  std::vector<std::pair<double, const std::string *>> byNode;
  for (const auto &[name, t] : nodes_) {
    totalMs += t.ms;
    Totals &o = ops[t.op];
    o.op = t.op;
    o.ms += t.ms;
    o.bytes += t.bytes;
    o.calls += t.calls;
    byNode.push_back({t.ms, &name});
  }
  std::fprintf(out,
               "cpu profile: %zu steps after the first; per step %.3f ms "
               "inside %zu nodes\n",
               n, totalMs / steps, nodes_.size());
  std::vector<const Totals *> sorted;
  for (const auto &[op, t] : ops)
    sorted.push_back(&t);
  std::sort(sorted.begin(), sorted.end(),
            [](const Totals *a, const Totals *b) { return a->ms > b->ms; });
  std::fprintf(out, "cpu profile: %-28s %10s %12s %7s %12s %9s\n", "op",
               "nodes/step", "ms/step", "share", "MiB/step", "GB/s");
  for (const Totals *t : sorted)
    std::fprintf(out, "cpu profile: %-28s %10.0f %12.3f %6.1f%% %12.1f %9.2f\n",
                 t->op.c_str(), double(t->calls) / steps, t->ms / steps,
                 totalMs > 0 ? 100 * t->ms / totalMs : 0.0,
                 t->bytes / steps / (1 << 20),
                 t->ms > 0 ? t->bytes / (t->ms * 1e6) : 0.0);
  std::sort(byNode.begin(), byNode.end(),
            [](const auto &a, const auto &b) { return a.first > b.first; });
  size_t top = std::min<size_t>(byNode.size(), 25);
  std::fprintf(out, "cpu profile: the %zu slowest nodes\n", top);
  for (size_t i = 0; i < top; ++i) {
    const Totals &t = nodes_.at(*byNode[i].second);
    std::fprintf(out, "cpu profile: %-40s %-20s %10.3f ms/step %10.1f MiB\n",
                 byNode[i].second->c_str(), t.op.c_str(),
                 byNode[i].first / steps,
                 t.calls ? t.bytes / t.calls / (1 << 20) : 0.0);
  }
}

} // namespace cpu
} // namespace mpc
