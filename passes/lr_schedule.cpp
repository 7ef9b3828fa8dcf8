// The optimizer pass's learning-rate schedule (passes/lr_schedule.h).
#include "passes/lr_schedule.h"

#include "passes/ir/lr_schedule_attrs.h"
#include "passes/ir/mpc_ops.h"
#include "passes/support/diagnostics.h"
#include "passes/training_support.h"

#include <utility>
#include <vector>

namespace mpc {
namespace {

using Attrs = std::vector<std::pair<std::string, Attribute>>;

/// A real-valued attribute as the Python float torch reads: an fp64
/// scalar (passes/ir/lr_schedule_attrs.h).
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
  return a;
}

/// The flag that sets an attribute.
std::string flagOf(const std::string &attr) {
  if (attr == "schedule")
    return "--lr-schedule";
  if (attr == "base_lr")
    return "--lr";
  if (attr == "step_size")
    return "--lr-step-size";
  if (attr == "gamma" || attr == "cycles" || attr == "power" ||
      attr == "timescale")
    return "--lr-" + attr;
  std::string flag = "--" + attr;
  for (char &c : flag)
    if (c == '_')
      c = '-';
  return flag;
}

} // namespace

bool checkLrScheduleOptions(const CompileOptions &o) {
  bool asked = o.lrSchedule != "constant" || o.warmupSteps || o.totalSteps ||
               o.minLrRatio || o.lrStepSize || o.lrGamma || o.lrCycles ||
               o.lrEnd || o.lrPower || o.lrTimescale;
  if (!asked)
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

std::string lrScheduleSummary(const CompileOptions &o) {
  if (!checkLrScheduleOptions(o))
    return "";
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
