// The regular expressions mpc-opt's flags match names with (--trainable,
// --frozen, --no-weight-decay, --fp32-nodes): RE2 syntax, searched anywhere
// in the name, as Python's re.search.
//
// RE2 matches in time linear in the name and without recursion, so a name
// of any length (an export's node names can be tens of kilobytes) cannot
// overflow the stack, as libstdc++'s std::regex did; it has no
// backreferences or lookaround, which a pattern then names as its error.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace re2 {
class RE2;
}

namespace mpc {

/// A compiled name pattern; copies share the compiled expression.
class NamePattern {
public:
  /// Whether the pattern matches somewhere in `name`.
  bool search(std::string_view name) const;
  /// The pattern as given.
  const std::string &text() const { return text_; }

private:
  friend std::optional<NamePattern> compileNamePattern(const std::string &,
                                                       const char *);
  std::string text_;
  std::shared_ptr<const re2::RE2> re_;
};

/// `pattern` compiled; nullopt when empty; an Error naming `--flag` and
/// RE2's reason when it is not a regular expression RE2 accepts.
std::optional<NamePattern> compileNamePattern(const std::string &pattern,
                                              const char *flag);

} // namespace mpc
