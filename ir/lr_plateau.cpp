// ReduceLROnPlateau's rule (ir/lr_plateau.h).
#include "ir/lr_plateau.h"

#include "support/diagnostics.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace mpc {

double stepLrPlateau(const LrPlateauConfig &c, LrPlateauState &s, double metric,
                     double lr) {
  // is_better in mode "min", threshold_mode "rel" (false for a NaN).
  if (metric < s.best * (1.0 - c.threshold)) {
    s.best = metric;
    s.badEvals = 0;
  } else {
    ++s.badEvals;
  }
  if (s.cooldownLeft > 0) {
    --s.cooldownLeft;
    s.badEvals = 0; // bad evaluations in cooldown do not count
  }
  if (s.badEvals > c.patience) {
    double reduced = std::max(lr * c.factor, c.minLr);
    if (lr - reduced > c.eps)
      lr = reduced;
    s.cooldownLeft = c.cooldown;
    s.badEvals = 0;
  }
  return lr;
}

std::string formatLrPlateau(const LrPlateauConfig &c) {
  char text[192];
  std::snprintf(text, sizeof text,
                "factor=%.17g,patience=%lld,threshold=%.17g,cooldown=%lld,"
                "min_lr=%.17g",
                c.factor, (long long)c.patience, c.threshold,
                (long long)c.cooldown, c.minLr);
  return text;
}

LrPlateauConfig parseLrPlateau(const std::string &text,
                               const std::string &what) {
  LrPlateauConfig c;
  std::istringstream in(text);
  std::string item;
  int seen = 0;
  while (std::getline(in, item, ',')) {
    size_t eq = item.find('=');
    std::string key = item.substr(0, eq);
    const char *value = eq == std::string::npos ? "" : item.c_str() + eq + 1;
    char *end = nullptr;
    double v = std::strtod(value, &end);
    if (eq == std::string::npos || *value == '\0' || *end != '\0')
      throw Error(what + ": expected key=number pairs, got '" + item + "'");
    if (key == "factor")
      c.factor = v;
    else if (key == "patience")
      c.patience = int64_t(v);
    else if (key == "threshold")
      c.threshold = v;
    else if (key == "cooldown")
      c.cooldown = int64_t(v);
    else if (key == "min_lr")
      c.minLr = v;
    else
      throw Error(what + ": unknown key '" + key + "'");
    ++seen;
  }
  if (seen != 5)
    throw Error(what +
                ": expected factor, patience, threshold, cooldown and "
                "min_lr, got '" +
                text + "'");
  return c;
}

} // namespace mpc
