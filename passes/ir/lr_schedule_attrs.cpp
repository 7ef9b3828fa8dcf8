// mpc.LearningRate's attributes: read, defaulted and checked
// (passes/ir/lr_schedule_attrs.h).
#include "passes/ir/lr_schedule_attrs.h"

#include "passes/support/diagnostics.h"

#include <cmath>
#include <cstdio>

namespace mpc {
namespace {

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

LrScheduleProblem problem(const char *attr, std::string message) {
  return {attr, std::move(message)};
}

/// Node::attrInt/attrFloat/attrString's readings of a looked-up attribute.
struct Attrs {
  const AttributeLookup &lookup;
  bool has(const char *name) const { return lookup(name) != nullptr; }
  int64_t integer(const char *name, int64_t dflt) const {
    const Attribute *a = lookup(name);
    return a && a->kind == Attribute::Kind::Int ? a->i : dflt;
  }
  /// A real number: mpc-opt writes an fp64 scalar tensor (torch's Python
  /// float; a float attribute would round gamma, and gamma^k multiplies
  /// that error by k); a hand-written float or int is read too.
  double real(const char *name, double dflt) const {
    const Attribute *a = lookup(name);
    if (a && a->kind == Attribute::Kind::Tensor && a->t && a->t->numel() == 1)
      return a->t->getAsDouble(0);
    if (a && a->kind == Attribute::Kind::Float)
      return a->f;
    if (a && a->kind == Attribute::Kind::Int)
      return double(a->i);
    return dflt;
  }
  std::string text(const char *name, const char *dflt) const {
    const Attribute *a = lookup(name);
    return a && a->kind == Attribute::Kind::String ? a->s : dflt;
  }
};

} // namespace

const char *lrScheduleNames() {
  return "constant, linear, cosine, step, exponential";
}

std::optional<LrScheduleProblem> readLrSchedule(const AttributeLookup &lookup,
                                                LrSchedule &s, bool strict) {
  s = LrSchedule{};
  const Attrs node{lookup};
  const std::string name = node.text("schedule", "constant");
  bool exponential = name == "exponential";
  if (name == "constant")
    s.kind = LrScheduleKind::Constant;
  else if (name == "linear")
    s.kind = LrScheduleKind::Linear;
  else if (name == "cosine")
    s.kind = LrScheduleKind::Cosine;
  else if (name == "step" || exponential)
    s.kind = LrScheduleKind::Step;
  else
    return problem("schedule", "unknown schedule '" + name + "' (expected " +
                                   lrScheduleNames() + ")");
  const bool decays =
      s.kind == LrScheduleKind::Linear || s.kind == LrScheduleKind::Cosine;
  auto notFor = [&](const char *attr) -> std::optional<LrScheduleProblem> {
    if (!strict)
      return std::nullopt;
    return problem(attr, "does not apply to the " + name + " schedule");
  };

  s.baseLr = node.real("base_lr", 1e-3);
  if (!(s.baseLr >= 0) || !std::isfinite(s.baseLr))
    return problem("base_lr",
                   "must be a finite number >= 0, got " + number(s.baseLr));
  s.warmupSteps = node.integer("warmup_steps", 0);
  if (s.warmupSteps < 0)
    return problem("warmup_steps",
                   "must be >= 0, got " + std::to_string(s.warmupSteps));

  if (decays) {
    if (!node.has("total_steps"))
      return problem("total_steps",
                     "the " + name +
                         " schedule needs the number of optimizer updates "
                         "it spans");
    s.totalSteps = node.integer("total_steps", 0);
    if (s.totalSteps <= s.warmupSteps)
      return problem("total_steps", "must exceed warmup_steps (" +
                                        std::to_string(s.warmupSteps) +
                                        "), got " +
                                        std::to_string(s.totalSteps));
  } else if (node.has("total_steps")) {
    if (auto p = notFor("total_steps"))
      return p;
  }

  if (s.kind == LrScheduleKind::Cosine) {
    s.minLrRatio = node.real("min_lr_ratio", 0.0);
    if (!(s.minLrRatio >= 0 && s.minLrRatio <= 1))
      return problem("min_lr_ratio",
                     "must be in [0, 1], got " + number(s.minLrRatio));
  } else if (node.has("min_lr_ratio")) {
    if (auto p = notFor("min_lr_ratio"))
      return p;
  }

  if (s.kind == LrScheduleKind::Step) {
    if (exponential) {
      if (node.has("step_size"))
        if (auto p = notFor("step_size"))
          return p;
      s.stepSize = 1;
    } else {
      if (!node.has("step_size"))
        return problem("step_size", "the step schedule needs the number of "
                                    "updates between decays");
      s.stepSize = node.integer("step_size", 1);
      if (s.stepSize < 1)
        return problem("step_size",
                       "must be >= 1, got " + std::to_string(s.stepSize));
    }
    s.gamma = node.real("gamma", 0.1);
    if (!(s.gamma > 0) || !std::isfinite(s.gamma))
      return problem("gamma",
                     "must be a finite number > 0, got " + number(s.gamma));
  } else {
    for (const char *attr : {"step_size", "gamma"})
      if (node.has(attr))
        if (auto p = notFor(attr))
          return p;
  }
  return std::nullopt;
}

LrSchedule lrScheduleOf(const Node &node) {
  LrSchedule s;
  if (auto p = readLrSchedule(
          [&](std::string_view name) { return node.attr(name); }, s, false))
    errorAt(node) << "attribute '" << p->attr << "' " << p->message;
  return s;
}

} // namespace mpc
