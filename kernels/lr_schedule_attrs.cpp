// mpc.LearningRate's attributes: read, defaulted and checked
// (kernels/lr_schedule_attrs.h).
#include "kernels/lr_schedule_attrs.h"

#include "support/diagnostics.h"

#include <cmath>
#include <cstdio>
#include <string_view>
#include <vector>

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

/// The problem of an integer attribute below `min`, if it is.
std::optional<LrScheduleProblem> atLeast(const char *attr, int64_t v,
                                         int64_t min) {
  if (v >= min)
    return std::nullopt;
  return problem(attr, "must be >= " + std::to_string(min) + ", got " +
                           std::to_string(v));
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
  return "constant, linear, cosine, cosine_with_restarts, polynomial, "
         "inverse_sqrt, warmup_stable_decay, step, exponential";
}

std::optional<LrScheduleProblem> readLrSchedule(const AttributeLookup &lookup,
                                                LrSchedule &s, bool strict) {
  s = LrSchedule{};
  const Attrs node{lookup};
  const std::string name = node.text("schedule", "constant");
  // Each schedule and the attributes it takes beside base_lr and
  // warmup_steps.
  struct Form {
    const char *name;
    LrScheduleKind kind;
    std::vector<const char *> takes;
  };
  static const Form forms[] = {
      {"constant", LrScheduleKind::Constant, {}},
      {"linear", LrScheduleKind::Linear, {"total_steps"}},
      {"cosine", LrScheduleKind::Cosine, {"total_steps", "min_lr_ratio"}},
      {"cosine_with_restarts",
       LrScheduleKind::CosineRestarts,
       {"total_steps", "cycles"}},
      {"polynomial",
       LrScheduleKind::Polynomial,
       {"total_steps", "lr_end", "power"}},
      {"inverse_sqrt", LrScheduleKind::InverseSqrt, {"timescale"}},
      {"warmup_stable_decay",
       LrScheduleKind::WarmupStableDecay,
       {"total_steps", "stable_steps", "decay_steps", "warmup_type",
        "decay_type", "min_lr_ratio"}},
      {"step", LrScheduleKind::Step, {"step_size", "gamma"}},
      {"exponential", LrScheduleKind::Step, {"gamma"}},
  };
  const Form *form = nullptr;
  for (const Form &f : forms)
    if (name == f.name)
      form = &f;
  if (!form)
    return problem("schedule", "unknown schedule '" + name + "' (expected " +
                                   lrScheduleNames() + ")");
  s.kind = form->kind;
  auto takes = [&](const char *attr) {
    for (const char *a : form->takes)
      if (std::string_view(a) == attr)
        return true;
    return false;
  };
  if (strict)
    for (const char *attr :
         {"total_steps", "min_lr_ratio", "cycles", "lr_end", "power",
          "timescale", "step_size", "gamma", "stable_steps", "decay_steps",
          "warmup_type", "decay_type"})
      if (node.has(attr) && !takes(attr))
        return problem(attr, "does not apply to the " + name + " schedule");

  s.baseLr = node.real("base_lr", 1e-3);
  if (!(s.baseLr >= 0) || !std::isfinite(s.baseLr))
    return problem("base_lr",
                   "must be a finite number >= 0, got " + number(s.baseLr));
  s.warmupSteps = node.integer("warmup_steps", 0);
  if (auto p = atLeast("warmup_steps", s.warmupSteps, 0))
    return p;
  const bool wsd = s.kind == LrScheduleKind::WarmupStableDecay;
  if (takes("total_steps") && !wsd) {
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
  }
  if (takes("min_lr_ratio")) {
    s.minLrRatio = node.real("min_lr_ratio", 0.0);
    if (!(s.minLrRatio >= 0 && s.minLrRatio <= 1))
      return problem("min_lr_ratio",
                     "must be in [0, 1], got " + number(s.minLrRatio));
  }
  if (wsd) {
    // transformers' get_wsd_schedule: decay steps, and the stable steps
    // given or what the total leaves.
    if (!node.has("decay_steps"))
      return problem("decay_steps", "the warmup_stable_decay schedule needs "
                                    "the number of updates its decay takes");
    s.decaySteps = node.integer("decay_steps", 0);
    if (auto p = atLeast("decay_steps", s.decaySteps, 0))
      return p;
    // Both given: the flags are refused; a node takes stable_steps, as
    // transformers does (a written node carries both).
    if (!node.has("stable_steps") && !node.has("total_steps"))
      return problem("total_steps", "the warmup_stable_decay schedule needs "
                                    "the total or the stable number of "
                                    "updates");
    if (strict && node.has("stable_steps") && node.has("total_steps"))
      return problem("stable_steps", "the warmup_stable_decay schedule takes "
                                     "the total or the stable number of "
                                     "updates, not both");
    if (node.has("stable_steps")) {
      s.stableSteps = node.integer("stable_steps", 0);
    } else {
      s.totalSteps = node.integer("total_steps", 0);
      s.stableSteps = s.totalSteps - s.warmupSteps - s.decaySteps;
    }
    if (s.stableSteps < 0)
      return problem(node.has("stable_steps") ? "stable_steps" : "total_steps",
                     "leaves " + std::to_string(s.stableSteps) +
                         " stable updates (warmup_steps " +
                         std::to_string(s.warmupSteps) + ", decay_steps " +
                         std::to_string(s.decaySteps) + ")");
    auto shape = [&](const char *attr, const char *dflt,
                     LrShape &out) -> std::optional<LrScheduleProblem> {
      std::string v = node.text(attr, dflt);
      if (v == "linear")
        out = LrShape::Linear;
      else if (v == "cosine")
        out = LrShape::Cosine;
      else if (v == "1-sqrt")
        out = LrShape::OneMinusSqrt;
      else
        return problem(attr,
                       "must be linear, cosine or 1-sqrt, got '" + v + "'");
      return std::nullopt;
    };
    if (auto p = shape("warmup_type", "linear", s.warmupShape))
      return p;
    if (auto p = shape("decay_type", "cosine", s.decayShape))
      return p;
  }
  if (takes("cycles")) {
    s.cycles = node.integer("cycles", 1);
    if (auto p = atLeast("cycles", s.cycles, 1))
      return p;
  }
  if (takes("lr_end")) {
    s.lrEnd = node.real("lr_end", 1e-7);
    if (!(s.lrEnd >= 0 && s.lrEnd < s.baseLr))
      return problem("lr_end", "must be >= 0 and below the rate (" +
                                   number(s.baseLr) + "), got " +
                                   number(s.lrEnd));
    s.power = node.real("power", 1.0);
    if (!(s.power > 0) || !std::isfinite(s.power))
      return problem("power",
                     "must be a finite number > 0, got " + number(s.power));
  }
  if (takes("timescale")) {
    // transformers' default: the warmup's length, else 10000.
    s.timescale =
        node.integer("timescale", s.warmupSteps ? s.warmupSteps : 10000);
    if (auto p = atLeast("timescale", s.timescale, 1))
      return p;
  }
  if (takes("gamma")) {
    s.stepSize = 1; // exponential: a decay every update
    if (takes("step_size")) {
      if (!node.has("step_size"))
        return problem("step_size", "the step schedule needs the number of "
                                    "updates between decays");
      s.stepSize = node.integer("step_size", 1);
      if (auto p = atLeast("step_size", s.stepSize, 1))
        return p;
    }
    s.gamma = node.real("gamma", 0.1);
    if (!(s.gamma > 0) || !std::isfinite(s.gamma))
      return problem("gamma",
                     "must be a finite number > 0, got " + number(s.gamma));
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
