// Overflow provenance: re-runs a step with a hook that finds the first node
// whose floating-point output holds an inf or a nan.
#include "runtime/overflow_provenance.h"

#include <cmath>
#include <cstdio>
#include <unordered_set>

namespace mpc {

namespace {

bool isFloat(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16 ||
         t == DType::F64;
}

struct HookState {
  std::unordered_set<const Node *> forward;
  OverflowReport report;
};

void checkNode(void *user, const Node &node, const KernelContext &ctx) {
  auto &st = *static_cast<HookState *>(user);
  if (st.report.found)
    return;
  for (const Tensor *t : ctx.outputs) {
    if (!t || !isFloat(t->dtype))
      continue;
    int64_t n = t->numel(), inf = 0, nan = 0;
    double maxAbs = 0;
    for (int64_t i = 0; i < n; ++i) {
      double x = t->getAsDouble(i);
      if (std::isnan(x))
        ++nan;
      else if (std::isinf(x))
        ++inf;
      else
        maxAbs = std::max(maxAbs, std::fabs(x));
    }
    if (inf == 0 && nan == 0)
      continue;
    OverflowReport &r = st.report;
    r.found = true;
    r.node = node.name();
    r.op = node.opType();
    r.backward = !st.forward.count(&node);
    r.maxAbs = maxAbs;
    r.infCount = inf;
    r.nanCount = nan;
    return;
  }
}

} // namespace

std::string OverflowReport::line(int64_t step) const {
  if (!found)
    return "step " + std::to_string(step) +
           " overflowed but no node output holds an inf or a nan";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", maxAbs);
  return "step " + std::to_string(step) + " overflowed first at node '" + node +
         "' (" + op + ", " + (backward ? "backward" : "forward") +
         "): max |x| = " + buf + ", " + std::to_string(infCount) + " inf, " +
         std::to_string(nanCount) + " nan";
}

OverflowReport findFirstOverflow(Executor &exec, const Graph &graph,
                                 const std::string &lossName, uint64_t seed) {
  HookState st;
  // Forward: the loss's producer and everything it depends on.
  if (const Value *loss = graph.findValue(lossName)) {
    std::vector<const Node *> work;
    if (loss->producer())
      work.push_back(loss->producer());
    while (!work.empty()) {
      const Node *n = work.back();
      work.pop_back();
      if (!st.forward.insert(n).second)
        continue;
      for (const Value *in : n->inputs())
        if (in && in->producer())
          work.push_back(in->producer());
    }
  }
  exec.setNodeHook(checkNode, &st);
  try {
    exec.run(seed);
  } catch (...) {
    exec.setNodeHook(nullptr, nullptr);
    throw;
  }
  exec.setNodeHook(nullptr, nullptr);
  return st.report;
}

} // namespace mpc
