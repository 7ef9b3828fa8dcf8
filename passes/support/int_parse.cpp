// Numbers from the command line (passes/support/int_parse.h).
#include "passes/support/int_parse.h"

#include "passes/support/diagnostics.h"

#include <cmath>
#include <cstdlib>
#include <limits>

namespace mpc {

std::string describeIntRange(int64_t min, int64_t max) {
  if (max == std::numeric_limits<int64_t>::max())
    return ">= " + std::to_string(min);
  return "in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
}

int64_t parseIntFlag(const std::string &flag, const std::string &text,
                     int64_t min, int64_t max) {
  auto fail = [&]() -> int64_t {
    // A flag's value can be any length: the line quotes its start.
    std::string shown = text.size() > 40 ? text.substr(0, 37) + "..." : text;
    throw Error(flag + ": expected an integer " + describeIntRange(min, max) +
                ", got '" + shown + "'");
  };
  size_t i = 0;
  bool negative = false;
  if (i < text.size() && (text[i] == '-' || text[i] == '+'))
    negative = text[i++] == '-';
  if (i == text.size())
    return fail();
  // Accumulated as a negative number, whose range holds INT64_MIN.
  int64_t value = 0;
  for (; i < text.size(); ++i) {
    char c = text[i];
    if (c < '0' || c > '9')
      return fail();
    if (__builtin_mul_overflow(value, 10, &value) ||
        __builtin_sub_overflow(value, c - '0', &value))
      return fail();
  }
  if (!negative && __builtin_sub_overflow(int64_t(0), value, &value))
    return fail();
  if (value < min || value > max)
    return fail();
  return value;
}

std::optional<double> parseDecimal(const std::string &text) {
  // [+-] digits [. digits] [(e|E) [+-] digits], at least one mantissa digit.
  size_t i = 0, n = text.size();
  auto digits = [&]() {
    size_t start = i;
    while (i < n && text[i] >= '0' && text[i] <= '9')
      ++i;
    return i - start;
  };
  if (i < n && (text[i] == '+' || text[i] == '-'))
    ++i;
  size_t mantissa = digits();
  if (i < n && text[i] == '.') {
    ++i;
    mantissa += digits();
  }
  if (mantissa == 0)
    return std::nullopt;
  if (i < n && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    if (i < n && (text[i] == '+' || text[i] == '-'))
      ++i;
    if (digits() == 0)
      return std::nullopt;
  }
  if (i != n)
    return std::nullopt;
  double value = std::strtod(text.c_str(), nullptr);
  if (!std::isfinite(value))
    return std::nullopt;
  return value;
}

double parseNumberFlag(const std::string &flag, const std::string &text) {
  if (std::optional<double> value = parseDecimal(text))
    return *value;
  std::string shown = text.size() > 40 ? text.substr(0, 37) + "..." : text;
  throw Error(flag + ": expected a decimal number, got '" + shown + "'");
}

} // namespace mpc
