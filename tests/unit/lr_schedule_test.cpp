// The learning-rate schedules (kernels/common/lr_schedule_math.h) against
// the rates torch and transformers give (models/lr_schedule_ref.csv, made by
// models/make_lr_schedule_refs.py: 120 updates of each scheduler on an
// optimizer of lr 0.5), and mpc.LearningRate's attribute rules
// (kernels/lr_schedule_attrs.h) as a node and as mpc-opt's flags.
#include "ir/lr_plateau.h"
#include "kernels/common/lr_schedule_math.h"
#include "kernels/lr_schedule_attrs.h"
#include "passes/optimizer/lr_schedule.h"
#include "support/diagnostics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

using namespace mpc;

namespace {

/// case -> the rate of updates 0, 1, ... as torch computed them.
std::map<std::string, std::vector<double>> readTorchRates() {
  std::ifstream in(std::string(MPC_SOURCE_DIR) + "/models/lr_schedule_ref.csv");
  EXPECT_TRUE(in);
  std::map<std::string, std::vector<double>> rates;
  std::string line;
  std::getline(in, line); // header
  while (std::getline(in, line)) {
    std::istringstream row(line);
    std::string name, step, lr;
    std::getline(row, name, ',');
    std::getline(row, step, ',');
    std::getline(row, lr, ',');
    EXPECT_EQ(std::stoll(step), int64_t(rates[name].size())) << line;
    rates[name].push_back(std::stod(lr));
  }
  return rates;
}

LrSchedule schedule(LrScheduleKind kind, int64_t warmup, int64_t total,
                    double minRatio = 0, int64_t stepSize = 1,
                    double gamma = 0.1) {
  LrSchedule s;
  s.kind = kind;
  s.baseLr = 0.5;
  s.warmupSteps = warmup;
  s.totalSteps = total;
  s.minLrRatio = minRatio;
  s.stepSize = stepSize;
  s.gamma = gamma;
  return s;
}

using K = LrScheduleKind;

LrSchedule restarts(int64_t warmup, int64_t total, int64_t cycles) {
  LrSchedule s = schedule(K::CosineRestarts, warmup, total);
  s.cycles = cycles;
  return s;
}

LrSchedule polynomial(int64_t warmup, int64_t total, double end, double power) {
  LrSchedule s = schedule(K::Polynomial, warmup, total);
  s.lrEnd = end;
  s.power = power;
  return s;
}

LrSchedule wsd(int64_t warmup, int64_t stable, int64_t decay, LrShape up,
               LrShape down, double minRatio) {
  LrSchedule s = schedule(K::WarmupStableDecay, warmup, 0, minRatio);
  s.stableSteps = stable;
  s.decaySteps = decay;
  s.warmupShape = up;
  s.decayShape = down;
  return s;
}

LrSchedule inverseSqrt(int64_t warmup, int64_t timescale) {
  LrSchedule s = schedule(K::InverseSqrt, warmup, 0);
  s.timescale = timescale;
  return s;
}

} // namespace

// transformers' LambdaLR schedules compute base_lr * lambda(step) in double
// with the same operations: the same bits at every update, past
// total_steps included (linear holds 0, cosine rises again).
TEST(LrSchedule, TransformersSchedulesGiveTorchsBits) {
  auto torch = readTorchRates();
  const std::map<std::string, LrSchedule> cases = {
      {"linear_w10_t100", schedule(K::Linear, 10, 100)},
      {"cosine_w10_t100", schedule(K::Cosine, 10, 100)},
      {"cosine_w0_t50_min0.25", schedule(K::Cosine, 0, 50, 0.25)},
      {"constant_w7", schedule(K::Constant, 7, 0)},
      // StepLR halves in place: a power of two is exact either way.
      {"step_s10_g0.5", schedule(K::Step, 0, 0, 0, 10, 0.5)},
      {"restarts_w10_t100_c3", restarts(10, 100, 3)},
      {"polynomial_w10_t100_end0.01_p2", polynomial(10, 100, 0.01, 2.0)},
      {"polynomial_w0_t50", polynomial(0, 50, 1e-7, 1.0)},
      {"inverse_sqrt_w10", inverseSqrt(10, 10)},
      {"inverse_sqrt_w0_t200", inverseSqrt(0, 200)},
      {"wsd_w10_s30_d40", wsd(10, 30, 40, LrShape::Linear, LrShape::Cosine, 0)},
      // num_training_steps 100 leaves 100 - 12 - 50 stable updates.
      {"wsd_cos_sqrt_min0.25",
       wsd(12, 38, 50, LrShape::Cosine, LrShape::OneMinusSqrt, 0.25)},
      {"wsd_sqrt_linear",
       wsd(8, 5, 20, LrShape::OneMinusSqrt, LrShape::Linear, 0.5)},
  };
  for (const auto &[name, s] : cases) {
    const std::vector<double> &want = torch.at(name);
    ASSERT_EQ(want.size(), 120u) << name;
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_EQ(scheduledLr(s, int64_t(i)), want[i]) << name << " update " << i;
  }
}

// torch's CosineAnnealingLR and ExponentialLR update the previous rate in
// place (a recurrence, whose rounding drifts: 3e-14 relative after 120
// updates); the closed form mpc computes agrees far below an fp32 ulp.
TEST(LrSchedule, TorchRecurrencesAgreeWithTheClosedForm) {
  auto torch = readTorchRates();
  const std::map<std::string, LrSchedule> cases = {
      {"cosine_annealing_t50_eta0.125", schedule(K::Cosine, 0, 50, 0.25)},
      {"exponential_g0.96875", schedule(K::Step, 0, 0, 0, 1, 0.96875)},
  };
  for (const auto &[name, s] : cases) {
    const std::vector<double> &want = torch.at(name);
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_NEAR(scheduledLr(s, int64_t(i)), want[i], 1e-12 * want[i])
          << name << " update " << i;
  }
}

TEST(LrSchedule, WarmupRampsFromZeroThenHandsOverToTheDecay) {
  LrSchedule s = schedule(K::Step, 4, 0, 0, 2, 0.5);
  const double want[] = {0, 0.125, 0.25, 0.375, 0.5, 0.5, 0.25, 0.25, 0.125};
  for (int64_t i = 0; i < 9; ++i)
    EXPECT_EQ(scheduledLr(s, i), want[i]) << "update " << i;
}

namespace {

/// Whether the attributes make a schedule; the problem as "attr: message".
std::string problemOf(const std::map<std::string, Attribute> &attrs,
                      bool strict = true) {
  LrSchedule s;
  auto p = readLrSchedule(
      [&](std::string_view name) -> const Attribute * {
        auto it = attrs.find(std::string(name));
        return it == attrs.end() ? nullptr : &it->second;
      },
      s, strict);
  return p ? p->attr + ": " + p->message : "";
}

Attribute str(const char *v) { return Attribute::ofString(v); }
Attribute integer(int64_t v) { return Attribute::ofInt(v); }
Attribute real(float v) { return Attribute::ofFloat(v); }

} // namespace

TEST(LrSchedule, AttributesAreCheckedWithTheirNames) {
  EXPECT_EQ(problemOf({}), "");
  EXPECT_EQ(problemOf({{"schedule", str("cosine")},
                       {"total_steps", integer(10)},
                       {"warmup_steps", integer(2)},
                       {"min_lr_ratio", real(0.1f)}}),
            "");
  EXPECT_EQ(problemOf({{"schedule", str("onecycle")}}),
            "schedule: unknown schedule 'onecycle' (expected constant, "
            "linear, cosine, cosine_with_restarts, polynomial, inverse_sqrt, "
            "warmup_stable_decay, step, exponential)");
  EXPECT_EQ(problemOf({{"schedule", str("warmup_stable_decay")},
                       {"total_steps", integer(10)}}),
            "decay_steps: the warmup_stable_decay schedule needs the number "
            "of updates its decay takes");
  EXPECT_EQ(problemOf({{"schedule", str("warmup_stable_decay")},
                       {"decay_steps", integer(5)},
                       {"warmup_steps", integer(8)},
                       {"total_steps", integer(10)}}),
            "total_steps: leaves -3 stable updates (warmup_steps 8, "
            "decay_steps 5)");
  EXPECT_EQ(problemOf({{"schedule", str("warmup_stable_decay")},
                       {"decay_steps", integer(5)},
                       {"stable_steps", integer(5)},
                       {"decay_type", str("exp")}}),
            "decay_type: must be linear, cosine or 1-sqrt, got 'exp'");
  EXPECT_EQ(problemOf({{"schedule", str("warmup_stable_decay")},
                       {"decay_steps", integer(5)},
                       {"stable_steps", integer(5)},
                       {"total_steps", integer(20)}}),
            "stable_steps: the warmup_stable_decay schedule takes the total "
            "or the stable number of updates, not both");
  EXPECT_EQ(problemOf({{"schedule", str("polynomial")},
                       {"base_lr", real(0.01f)},
                       {"total_steps", integer(10)},
                       {"lr_end", real(0.01f)}}),
            "lr_end: must be >= 0 and below the rate (0.01), got 0.01");
  EXPECT_EQ(problemOf({{"schedule", str("polynomial")},
                       {"total_steps", integer(10)},
                       {"power", real(0)}}),
            "power: must be a finite number > 0, got 0");
  EXPECT_EQ(problemOf({{"schedule", str("cosine_with_restarts")},
                       {"total_steps", integer(10)},
                       {"cycles", integer(0)}}),
            "cycles: must be >= 1, got 0");
  EXPECT_EQ(
      problemOf({{"schedule", str("inverse_sqrt")}, {"timescale", integer(0)}}),
      "timescale: must be >= 1, got 0");
  EXPECT_EQ(problemOf({{"schedule", str("inverse_sqrt")},
                       {"total_steps", integer(10)}}),
            "total_steps: does not apply to the inverse_sqrt schedule");
  EXPECT_EQ(problemOf({{"schedule", str("linear")}}),
            "total_steps: the linear schedule needs the number of optimizer "
            "updates it spans");
  EXPECT_EQ(problemOf({{"schedule", str("cosine")},
                       {"warmup_steps", integer(10)},
                       {"total_steps", integer(10)}}),
            "total_steps: must exceed warmup_steps (10), got 10");
  EXPECT_EQ(problemOf({{"warmup_steps", integer(-1)}}),
            "warmup_steps: must be >= 0, got -1");
  EXPECT_EQ(problemOf({{"schedule", str("cosine")},
                       {"total_steps", integer(10)},
                       {"min_lr_ratio", real(1.5f)}}),
            "min_lr_ratio: must be in [0, 1], got 1.5");
  EXPECT_EQ(problemOf({{"schedule", str("step")}}),
            "step_size: the step schedule needs the number of updates "
            "between decays");
  EXPECT_EQ(problemOf({{"schedule", str("step")}, {"step_size", integer(0)}}),
            "step_size: must be >= 1, got 0");
  EXPECT_EQ(problemOf({{"schedule", str("exponential")}, {"gamma", real(0)}}),
            "gamma: must be a finite number > 0, got 0");
  EXPECT_EQ(problemOf({{"base_lr", real(-1)}}),
            "base_lr: must be a finite number >= 0, got -1");
  // Strict (the flags): an attribute the schedule does not take is refused;
  // a node's are ignored (its written form carries them all).
  const std::map<std::string, Attribute> extra = {{"schedule", str("linear")},
                                                  {"total_steps", integer(10)},
                                                  {"gamma", real(0.5f)}};
  EXPECT_EQ(problemOf(extra), "gamma: does not apply to the linear schedule");
  EXPECT_EQ(problemOf(extra, false), "");
  EXPECT_EQ(
      problemOf({{"schedule", str("exponential")}, {"step_size", integer(3)}}),
      "step_size: does not apply to the exponential schedule");
}

TEST(LrSchedule, FlagsAreCheckedWithTheFlagsNames) {
  auto errorOf = [](const CompileOptions &o) -> std::string {
    try {
      checkLrScheduleOptions(o);
    } catch (const Error &e) {
      return e.what();
    }
    return "";
  };
  CompileOptions o;
  EXPECT_FALSE(checkLrScheduleOptions(o));
  o.warmupSteps = 5;
  EXPECT_TRUE(checkLrScheduleOptions(o)); // constant with warmup
  o.lrSchedule = "cosine";
  EXPECT_EQ(errorOf(o), "--total-steps: the cosine schedule needs the number "
                        "of optimizer updates it spans");
  o.totalSteps = 100;
  EXPECT_EQ(errorOf(o), "");
  o.lrGamma = 0.5;
  EXPECT_EQ(errorOf(o), "--lr-gamma: does not apply to the cosine schedule");
  o = CompileOptions{};
  o.lrSchedule = "step";
  EXPECT_EQ(errorOf(o), "--lr-step-size: the step schedule needs the number "
                        "of updates between decays");
  o.lrStepSize = 0;
  EXPECT_EQ(errorOf(o), "--lr-step-size: must be >= 1, got 0");
  o = CompileOptions{};
  o.lrSchedule = "warmup";
  EXPECT_EQ(errorOf(o),
            "--lr-schedule: unknown schedule 'warmup' (expected constant, "
            "linear, cosine, cosine_with_restarts, polynomial, inverse_sqrt, "
            "warmup_stable_decay, step, exponential)");
  o = CompileOptions{};
  o.lrSchedule = "warmup_stable_decay";
  o.lrDecaySteps = 10;
  o.totalSteps = 100;
  o.lrWarmupType = "sigmoid";
  EXPECT_EQ(errorOf(o), "--lr-warmup-type: must be linear, cosine or "
                        "1-sqrt, got 'sigmoid'");
  o = CompileOptions{};
  o.lrSchedule = "polynomial";
  o.totalSteps = 10;
  o.lrEnd = 1.0;
  EXPECT_EQ(errorOf(o), "--lr-end: must be >= 0 and below the rate (0.001), "
                        "got 1");
  o.lrEnd.reset();
  o.lrCycles = 2;
  EXPECT_EQ(errorOf(o),
            "--lr-cycles: does not apply to the polynomial schedule");
  o = CompileOptions{};
  o.lrSchedule = "inverse_sqrt";
  o.lrTimescale = -5;
  EXPECT_EQ(errorOf(o), "--lr-timescale: must be >= 1, got -5");
  o = CompileOptions{};
  o.minLrRatio = 0.1;
  EXPECT_EQ(errorOf(o),
            "--min-lr-ratio: does not apply to the constant schedule");
}

// ReduceLROnPlateau (ir/lr_plateau.h) stepped with the metric
// sequences of models/lr_plateau_ref.csv gives torch's rates, reductions,
// cooldowns and the min_lr floor included.
TEST(LrPlateau, StepsAsTorchsReduceLROnPlateau) {
  std::ifstream in(std::string(MPC_SOURCE_DIR) + "/models/lr_plateau_ref.csv");
  ASSERT_TRUE(in);
  std::map<std::string, LrPlateauConfig> configs;
  configs["defaults"] = LrPlateauConfig{};
  LrPlateauConfig tuned;
  tuned.factor = 0.5;
  tuned.patience = 2;
  tuned.threshold = 1e-2;
  tuned.cooldown = 1;
  tuned.minLr = 0.01;
  configs["tuned"] = tuned;
  std::map<std::string, std::pair<LrPlateauState, double>> runs;
  std::string line;
  std::getline(in, line);
  int rows = 0, reductions = 0;
  while (std::getline(in, line)) {
    std::istringstream row(line);
    std::string name, k, metric, lr;
    std::getline(row, name, ',');
    std::getline(row, k, ',');
    std::getline(row, metric, ',');
    std::getline(row, lr, ',');
    auto &[state, rate] =
        runs.try_emplace(name, LrPlateauState{}, 0.5).first->second;
    double before = rate;
    rate = stepLrPlateau(configs.at(name), state, std::stod(metric), rate);
    EXPECT_EQ(rate, std::stod(lr)) << line;
    reductions += rate != before;
    ++rows;
  }
  EXPECT_EQ(rows, 160);
  EXPECT_GE(reductions, 8); // the sequences exercise the rule
}

TEST(LrPlateau, ConfigRoundTripsThroughItsMetadata) {
  LrPlateauConfig c;
  c.factor = 0.3;
  c.patience = 4;
  c.threshold = 0.001;
  c.cooldown = 2;
  c.minLr = 1e-6;
  LrPlateauConfig back = parseLrPlateau(formatLrPlateau(c), "x");
  EXPECT_EQ(back.factor, c.factor);
  EXPECT_EQ(back.patience, c.patience);
  EXPECT_EQ(back.threshold, c.threshold);
  EXPECT_EQ(back.cooldown, c.cooldown);
  EXPECT_EQ(back.minLr, c.minLr);
  EXPECT_THROW(parseLrPlateau("factor=0.1", "mpc.lr_plateau"), Error);
  EXPECT_THROW(parseLrPlateau("factor=a,patience=1,threshold=0,cooldown=0,"
                              "min_lr=0",
                              "mpc.lr_plateau"),
               Error);
}
