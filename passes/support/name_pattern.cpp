// Name patterns of mpc-opt's flags (passes/support/name_pattern.h).
#include "passes/support/name_pattern.h"

#include "passes/support/diagnostics.h"

namespace mpc {

std::optional<std::regex> compileNamePattern(const std::string &pattern,
                                             const char *flag) {
  if (pattern.empty())
    return std::nullopt;
  try {
    return std::regex(pattern);
  } catch (const std::regex_error &e) {
    error() << "--" << flag << ": invalid regular expression '" << pattern
            << "': " << e.what();
  }
  return std::nullopt;
}

} // namespace mpc
