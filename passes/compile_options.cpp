// CompileOptions defaults and the small list helpers every pass shares.
//
// The loss-scale mode is resolved here, not in the driver, so that every
// caller (mpc-opt, unit tests calling passes directly) gets the same defaults
// and the same errors for a malformed --loss-scale: dynamic for fp16 (fp16's
// range needs it), none for bf16/fp32 (their range does not), unless given.
#include "passes/pass.h"

#include "support/diagnostics.h"

#include <cmath>
#include <cstdlib>

namespace mpc {
namespace {

constexpr const char *kStaticPrefix = "static:";

/// The F of "static:F"; throws for anything that is not a positive finite
/// number, since a zero, negative or infinite scale would poison every step.
double parseStaticScale(const std::string &spec) {
  std::string text = spec.substr(std::string(kStaticPrefix).size());
  char *end = nullptr;
  double scale = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0')
    throw Error("--loss-scale: expected static:F with a number F, got '" +
                spec + "'");
  if (!(scale > 0) || !std::isfinite(scale))
    throw Error("--loss-scale: the static scale must be a positive finite "
                "number, got '" +
                spec + "'");
  return scale;
}

} // namespace

std::string CompileOptions::effectiveLossScaleMode() const {
  if (lossScale.empty())
    return precision == DType::F16 ? "dynamic" : "none";
  if (lossScale == "dynamic" || lossScale == "none")
    return lossScale;
  if (lossScale.rfind(kStaticPrefix, 0) == 0) {
    parseStaticScale(lossScale); // validates
    return "static";
  }
  if (lossScale == "static")
    throw Error("--loss-scale: 'static' needs a scale, e.g. static:128");
  throw Error("--loss-scale: unknown mode '" + lossScale +
              "' (expected dynamic, none or static:F)");
}

double CompileOptions::staticScale() const {
  if (lossScale.rfind(kStaticPrefix, 0) == 0)
    return parseStaticScale(lossScale);
  return initScale;
}

Graph &workingGraph(Model &model) {
  return model.training ? *model.training->algorithm : *model.graph;
}

std::vector<std::string> splitList(const std::string &s, char sep) {
  std::vector<std::string> items;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(sep, start);
    if (end == std::string::npos)
      end = s.size();
    if (end > start)
      items.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return items;
}

std::string joinList(const std::vector<std::string> &items, char sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i)
      out += sep;
    out += items[i];
  }
  return out;
}

} // namespace mpc
