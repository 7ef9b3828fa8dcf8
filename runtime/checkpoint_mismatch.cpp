// The compile settings two steps differ in (runtime/checkpoint_mismatch.h).
#include "runtime/checkpoint_mismatch.h"

#include "ir/step_metadata.h"

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace mpc {
namespace {

struct Setting {
  TextKey key;
  const char *what;
  const char *absent; ///< how an absent entry reads
};

// The settings that decide which state a step keeps. The learning rate is
// left out: it changes no state's shape (a resumed run may lower it).
const Setting kSettings[] = {
    {meta::kPrecision, "precision", "fp32"},
    {meta::kLossScaleMode, "loss scaling", "none"},
    {meta::kOptimizer, "optimizer", "none"},
    {meta::kGradAccum, "grad accumulation", "1"},
    {meta::kEmaDecay, "ema decay", "none"},
    {meta::kLrPlateau, "lr plateau", "none"},
    {meta::kShardWorldSize, "sharded optimizer world size", "none"},
};

std::string textOf(const Model &m, const Setting &s) {
  const std::string *t = readMeta(m, s.key);
  if (!t || t->empty())
    return s.absent;
  return *t;
}

/// "precision fp16 and optimizer 'sgd lr=...'".
std::string describe(const std::vector<std::string> &parts) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i)
      out += i + 1 == parts.size() ? " and " : ", ";
    out += parts[i];
  }
  return out;
}

std::string item(const Setting &s, const std::string &value) {
  // Multi-word values (the optimizer's line) are quoted to read as one.
  if (value.find(' ') != std::string::npos)
    return std::string(s.what) + " '" + value + "'";
  return std::string(s.what) + " " + value;
}

/// A rate as the user wrote it: "0.0010000000474974513" (the fp32 value's
/// digits) reads 0.001; a schedule's description stays as it is.
std::string shortRate(const std::string &text) {
  char *end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0')
    return text;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.7g", double(float(v)));
  return buf;
}

} // namespace

std::string compileSettingsDifference(const Model &checkpoint,
                                      const Model &step) {
  std::vector<std::string> theirs, mine;
  for (const Setting &s : kSettings) {
    std::string a = textOf(checkpoint, s), b = textOf(step, s);
    if (a == b)
      continue;
    theirs.push_back(item(s, a));
    mine.push_back(item(s, b));
  }
  if (theirs.empty())
    return "";
  return "; the checkpoint's step was compiled with " + describe(theirs) +
         ", this one with " + describe(mine) +
         ": resume with the step the checkpoint was saved from, or train the "
         "checkpoint itself on (mpc-run CKPT --resume=CKPT)";
}

std::string learningRateChange(const Model &checkpoint, const Model &step) {
  const std::string *theirs = readMeta(checkpoint, meta::kLr);
  const std::string *mine = readMeta(step, meta::kLr);
  if (!theirs || !mine || *theirs == *mine)
    return "";
  return "the checkpoint trained with lr " + shortRate(*theirs) +
         ", this step goes on with lr " + shortRate(*mine) + " (as compiled)";
}

} // namespace mpc
