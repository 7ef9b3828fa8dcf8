// The compile flags: every flag that sets a field of CompileOptions, parsed
// and range-checked in one place. mpc-opt's command line and the options of
// --passes=name{key=value} both go through applyCompileFlag, so
// `autocast{precision=bf16}` means what `--precision=bf16` means, checked the
// same way.
#include "passes/compile_flags.h"

#include "support/diagnostics.h"
#include "support/int_parse.h"

namespace mpc {
namespace {

std::pair<std::string, std::vector<int64_t>>
parseInputShape(const std::string &v) {
  size_t colon = v.rfind(':');
  if (colon == std::string::npos || colon == 0)
    throw Error("--input-shape: expected NAME:AxBxC, got '" + v + "'");
  std::vector<int64_t> dims;
  std::string flag = "--input-shape=" + v.substr(0, colon);
  // Every 'x'-separated field is a dim: "4x" and "4xx3" are refused, not
  // read as 4 and 4x3.
  std::string text = v.substr(colon + 1);
  for (size_t at = 0;;) {
    // As many dims as a value may have (the importer refuses rank > 64).
    if (dims.size() == 64)
      throw Error(flag + ": more than 64 dimensions");
    size_t x = text.find('x', at);
    dims.push_back(parseIntFlag(flag + " dimension", text.substr(at, x - at), 0,
                                kMaxDimFlag));
    if (x == std::string::npos)
      break;
    at = x + 1;
  }
  return {v.substr(0, colon), dims};
}

} // namespace

bool isBooleanCompileFlag(const std::string &key) {
  return key == "--nesterov" || key == "--data-parallel" ||
         key == "--sync-batchnorm";
}

bool applyCompileFlag(CompileOptions &o, const std::string &key,
                      const std::string *value) {
  static const std::string kNone;
  const std::string &val = value ? *value : kNone;
  auto need = [&]() -> const std::string & {
    if (!value)
      throw Error(key + ": expects a value (" + key + "=...)");
    return *value;
  };
  // A switch: given bare, or as true/false (a pass option's form).
  auto boolean = [&]() {
    if (!value || *value == "true")
      return true;
    if (*value == "false")
      return false;
    throw Error(key + ": a switch, given bare or as true/false, got '" +
                *value + "'");
  };
  if (key == "--precision") {
    auto t = parseDType(need());
    if (!t || (*t != DType::F16 && *t != DType::BF16 && *t != DType::F32))
      throw Error("--precision: expected fp16, bf16 or fp32, got '" + val +
                  "'");
    o.precision = *t;
  } else if (key == "--fp32-ops") {
    o.fp32Ops = splitList(need());
  } else if (key == "--fp16-ops") {
    o.fp16Ops = splitList(need());
  } else if (key == "--fp32-nodes") {
    o.fp32Nodes = need();
  } else if (key == "--loss-scale") {
    o.lossScale = need();
  } else if (key == "--init-scale") {
    o.initScale = parseNumberFlag(key, need());
  } else if (key == "--growth-factor") {
    o.growthFactor = parseNumberFlag(key, need());
  } else if (key == "--backoff-factor") {
    o.backoffFactor = parseNumberFlag(key, need());
  } else if (key == "--growth-interval") {
    o.growthInterval = parseIntFlag(key, need(), 1, kMaxStepsFlag);
  } else if (key == "--optimizer") {
    o.optimizer = need();
  } else if (key == "--lr") {
    o.lr = parseNumberFlag(key, need());
    o.lrSet = true;
  } else if (key == "--momentum") {
    o.momentum = parseNumberFlag(key, need());
  } else if (key == "--dampening") {
    o.dampening = parseNumberFlag(key, need());
  } else if (key == "--nesterov") {
    o.nesterov = boolean();
  } else if (key == "--weight-decay") {
    o.weightDecay = parseNumberFlag(key, need());
    o.weightDecaySet = true;
  } else if (key == "--no-weight-decay") {
    o.noWeightDecay = need();
  } else if (key == "--beta1") {
    o.beta1 = parseNumberFlag(key, need());
  } else if (key == "--beta2") {
    o.beta2 = parseNumberFlag(key, need());
  } else if (key == "--eps") {
    o.epsilon = parseNumberFlag(key, need());
    o.epsilonSet = true;
  } else if (key == "--beta2-decay") {
    o.beta2Decay = parseNumberFlag(key, need());
  } else if (key == "--eps2") {
    o.eps2 = parseNumberFlag(key, need());
  } else if (key == "--clip-threshold") {
    o.clipThreshold = parseNumberFlag(key, need());
  } else if (key == "--grad-accum") {
    o.gradAccum = parseIntFlag(key, need(), 1, 65536);
  } else if (key == "--data-parallel") {
    o.dataParallel = boolean();
  } else if (key == "--sync-batchnorm") {
    o.syncBatchNorm = boolean();
  } else if (key == "--grad-comm-dtype") {
    o.gradCommDtype = need();
    if (o.gradCommDtype != "fp32" && o.gradCommDtype != "bf16" &&
        o.gradCommDtype != "fp16")
      throw Error("--grad-comm-dtype: expected fp32, bf16 or fp16, got '" +
                  val + "'");
  } else if (key == "--max-grad-norm") {
    o.maxGradNorm = parseNumberFlag(key, need());
  } else if (key == "--lr-schedule") {
    o.lrSchedule = need();
  } else if (key == "--warmup-steps") {
    o.warmupSteps = parseIntFlag(key, need(), 0, kMaxStepsFlag);
  } else if (key == "--total-steps") {
    o.totalSteps = parseIntFlag(key, need(), 1, kMaxStepsFlag);
  } else if (key == "--min-lr-ratio") {
    o.minLrRatio = parseNumberFlag(key, need());
  } else if (key == "--lr-step-size") {
    o.lrStepSize = parseIntFlag(key, need(), 1, kMaxStepsFlag);
  } else if (key == "--lr-gamma") {
    o.lrGamma = parseNumberFlag(key, need());
  } else if (key == "--lr-cycles") {
    o.lrCycles = parseIntFlag(key, need(), 1, kMaxStepsFlag);
  } else if (key == "--lr-end") {
    o.lrEnd = parseNumberFlag(key, need());
  } else if (key == "--lr-power") {
    o.lrPower = parseNumberFlag(key, need());
  } else if (key == "--lr-timescale") {
    o.lrTimescale = parseIntFlag(key, need(), 1, kMaxStepsFlag);
  } else if (key == "--lr-stable-steps") {
    o.lrStableSteps = parseIntFlag(key, need(), 0, kMaxStepsFlag);
  } else if (key == "--lr-decay-steps") {
    o.lrDecaySteps = parseIntFlag(key, need(), 1, kMaxStepsFlag);
  } else if (key == "--lr-warmup-type") {
    o.lrWarmupType = need();
  } else if (key == "--lr-decay-type") {
    o.lrDecayType = need();
  } else if (key == "--lr-factor") {
    o.lrFactor = parseNumberFlag(key, need());
  } else if (key == "--lr-patience") {
    o.lrPatience = parseIntFlag(key, need(), 0, kMaxStepsFlag);
  } else if (key == "--lr-threshold") {
    o.lrThreshold = parseNumberFlag(key, need());
  } else if (key == "--lr-cooldown") {
    o.lrCooldown = parseIntFlag(key, need(), 0, kMaxStepsFlag);
  } else if (key == "--min-lr") {
    o.minLr = parseNumberFlag(key, need());
  } else if (key == "--ema-decay") {
    o.emaDecay = parseNumberFlag(key, need());
  } else if (key == "--loss") {
    o.loss = need();
    if (o.loss.empty())
      throw Error("--loss: expects the name of the loss output (--loss=NAME)");
  } else if (key == "--trainable") {
    o.trainable = need();
  } else if (key == "--frozen") {
    o.frozen = need();
  } else if (key == "--input-shape") {
    o.inputShapes.push_back(parseInputShape(need()));
  } else if (key == "--recompute") {
    o.recompute = need();
    if (o.recompute.empty())
      throw Error("--recompute: expected none, auto or node names");
  } else if (key == "--memory-budget") {
    o.memoryBudget = int64_t(parseByteSize(key, need()));
    if (o.memoryBudget <= 0)
      throw Error("--memory-budget: must be a positive byte count, got '" +
                  val + "'");
  } else if (key == "--batch") {
    o.batch = parseIntFlag(key, need(), 1, kMaxDimFlag);
  } else {
    return false;
  }
  return true;
}

} // namespace mpc
