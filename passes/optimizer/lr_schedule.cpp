// The optimizer pass's learning-rate schedule (passes/optimizer/lr_schedule.h).
#include "passes/optimizer/lr_schedule.h"

#include "ir/lr_plateau.h"
#include "ir/mpc_ops.h"
#include "ir/step_metadata.h"
#include "kernels/lr_schedule_attrs.h"
#include "passes/training_support.h"
#include "support/diagnostics.h"

#include <cmath>
#include <utility>
#include <vector>

namespace mpc {
namespace {

using Attrs = std::vector<std::pair<std::string, Attribute>>;

/// A real-valued attribute as the Python float torch reads: an fp64
/// scalar (kernels/lr_schedule_attrs.h).
Attribute real(double v) {
  return Attribute::ofTensor(Tensor::scalar(DType::F64, v));
}

/// mpc.LearningRate's attributes from the flags that were given.
Attrs scheduleAttrs(const CompileOptions &o, double baseLr) {
  Attrs a;
  a.emplace_back("schedule", Attribute::ofString(o.lrSchedule));
  a.emplace_back("base_lr", real(baseLr));
  if (o.warmupSteps)
    a.emplace_back("warmup_steps", Attribute::ofInt(*o.warmupSteps));
  if (o.totalSteps)
    a.emplace_back("total_steps", Attribute::ofInt(*o.totalSteps));
  if (o.minLrRatio)
    a.emplace_back("min_lr_ratio", real(*o.minLrRatio));
  if (o.lrStepSize)
    a.emplace_back("step_size", Attribute::ofInt(*o.lrStepSize));
  if (o.lrGamma)
    a.emplace_back("gamma", real(*o.lrGamma));
  if (o.lrCycles)
    a.emplace_back("cycles", Attribute::ofInt(*o.lrCycles));
  if (o.lrEnd)
    a.emplace_back("lr_end", real(*o.lrEnd));
  if (o.lrPower)
    a.emplace_back("power", real(*o.lrPower));
  if (o.lrTimescale)
    a.emplace_back("timescale", Attribute::ofInt(*o.lrTimescale));
  if (o.lrStableSteps)
    a.emplace_back("stable_steps", Attribute::ofInt(*o.lrStableSteps));
  if (o.lrDecaySteps)
    a.emplace_back("decay_steps", Attribute::ofInt(*o.lrDecaySteps));
  if (o.lrWarmupType)
    a.emplace_back("warmup_type", Attribute::ofString(*o.lrWarmupType));
  if (o.lrDecayType)
    a.emplace_back("decay_type", Attribute::ofString(*o.lrDecayType));
  return a;
}

/// The flag that sets an attribute: --lr for base_lr, --lr-schedule,
/// --warmup-steps, --total-steps, --min-lr-ratio and --lr-end as they are,
/// the others with an "lr-" prefix (--lr-step-size, --lr-gamma, ...).
std::string flagOf(const std::string &attr) {
  if (attr == "base_lr")
    return "--lr";
  const bool plain = attr == "warmup_steps" || attr == "total_steps" ||
                     attr == "min_lr_ratio" || attr == "lr_end";
  std::string flag = (plain ? "--" : "--lr-") + attr;
  for (char &c : flag)
    if (c == '_')
      c = '-';
  return flag;
}

/// The attributes of the schedule flags given (all but schedule and
/// base_lr, which are always there).
Attrs givenScheduleFlags(const CompileOptions &o) {
  Attrs a = scheduleAttrs(o, o.lr);
  a.erase(a.begin(), a.begin() + 2);
  return a;
}

} // namespace

bool isLrPlateau(const CompileOptions &o) {
  return o.lrSchedule == "reduce_lr_on_plateau";
}

LrPlateauConfig checkLrPlateauOptions(const CompileOptions &o) {
  Attrs given = givenScheduleFlags(o);
  if (!given.empty())
    throw Error(flagOf(given.front().first) +
                ": does not apply to the reduce_lr_on_plateau schedule");
  LrPlateauConfig c;
  c.factor = o.lrFactor.value_or(c.factor);
  c.patience = o.lrPatience.value_or(c.patience);
  c.threshold = o.lrThreshold.value_or(c.threshold);
  c.cooldown = o.lrCooldown.value_or(c.cooldown);
  c.minLr = o.minLr.value_or(c.minLr);
  // torch's checks (factor < 1), and the counts and bounds.
  if (!(c.factor >= 0 && c.factor < 1))
    throw Error("--lr-factor: must be in [0, 1), got " +
                formatNumber(c.factor));
  if (c.patience < 0)
    throw Error("--lr-patience: must be >= 0, got " +
                std::to_string(c.patience));
  if (!(c.threshold >= 0) || !std::isfinite(c.threshold))
    throw Error("--lr-threshold: must be a finite number >= 0, got " +
                formatNumber(c.threshold));
  if (c.cooldown < 0)
    throw Error("--lr-cooldown: must be >= 0, got " +
                std::to_string(c.cooldown));
  if (!(c.minLr >= 0) || !std::isfinite(c.minLr))
    throw Error("--min-lr: must be a finite number >= 0, got " +
                formatNumber(c.minLr));
  return c;
}

bool checkLrScheduleOptions(const CompileOptions &o) {
  if (isLrPlateau(o)) {
    checkLrPlateauOptions(o);
    return true;
  }
  struct Plateau {
    bool given;
    const char *flag;
  };
  for (const Plateau &x : {Plateau{bool(o.lrFactor), "--lr-factor"},
                           Plateau{bool(o.lrPatience), "--lr-patience"},
                           Plateau{bool(o.lrThreshold), "--lr-threshold"},
                           Plateau{bool(o.lrCooldown), "--lr-cooldown"},
                           Plateau{bool(o.minLr), "--min-lr"}})
    if (x.given)
      throw Error(std::string(x.flag) +
                  ": only applies to --lr-schedule=reduce_lr_on_plateau");
  if (o.lrSchedule == "constant" && givenScheduleFlags(o).empty())
    return false;
  Attrs attrs = scheduleAttrs(o, o.lr);
  auto lookup = [&](std::string_view name) -> const Attribute * {
    for (const auto &[key, value] : attrs)
      if (key == name)
        return &value;
    return nullptr;
  };
  LrSchedule schedule;
  if (auto p = readLrSchedule(lookup, schedule, true))
    throw Error(flagOf(p->attr) + ": " + p->message);
  return true;
}

Value *addLearningRate(Graph &g, Value *step, const CompileOptions &o,
                       double baseLr) {
  Node *n = createNamedNode(g, "LearningRate", kMpcDomain, {step},
                            {"learning_rate"}, "learning_rate");
  n->setAttrs(scheduleAttrs(o, baseLr));
  n->output(0)->setType(DType::F64, {});
  return n->output(0);
}

Value *addPlateauRate(Model &model, const CompileOptions &o, double baseLr) {
  LrPlateauConfig c = checkLrPlateauOptions(o);
  Value *lr =
      addState(model, "learning_rate", Tensor::scalar(DType::F64, baseLr));
  writeMeta(model, meta::kLrState, lr->name());
  writeMeta(model, meta::kLrPlateau, formatLrPlateau(c));
  return lr;
}

std::string lrScheduleSummary(const CompileOptions &o) {
  if (!checkLrScheduleOptions(o))
    return "";
  if (isLrPlateau(o))
    return " schedule=reduce_lr_on_plateau " +
           formatLrPlateau(checkLrPlateauOptions(o));
  std::string s;
  for (const auto &[key, a] : scheduleAttrs(o, o.lr)) {
    if (key == "base_lr")
      continue;
    s += " " + key + "=";
    s += a.kind == Attribute::Kind::String   ? a.s
         : a.kind == Attribute::Kind::Tensor ? formatNumber(a.t->getAsDouble(0))
                                             : std::to_string(a.i);
  }
  return s;
}

} // namespace mpc
