// The regular expressions mpc-opt's flags match value names with
// (--trainable, --frozen, --no-weight-decay): ECMAScript, searched anywhere
// in the name, as Python's re.search.
#pragma once

#include <optional>
#include <regex>
#include <string>

namespace mpc {

/// `pattern` compiled; nullopt when empty; an Error naming `--flag` when it
/// is not a regular expression.
std::optional<std::regex> compileNamePattern(const std::string &pattern,
                                             const char *flag);

} // namespace mpc
