// Numbers from the command line (support/int_parse.h).
#include "support/int_parse.h"

#include "support/diagnostics.h"

#include <cctype>
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

size_t parseByteSize(const std::string &flag, const std::string &text) {
  const char *s = text.c_str();
  char *end = nullptr;
  double n = text.empty() || !std::isdigit((unsigned char)text[0])
                 ? -1
                 : std::strtod(s, &end);
  // Plain decimals only: strtod would also take hex, exponents, "inf".
  for (const char *p = s; n >= 0 && p < end; ++p)
    if (!std::isdigit((unsigned char)*p) && *p != '.')
      n = -1;
  double unit = -1;
  if (n >= 0 && std::isfinite(n)) {
    std::string suffix(end);
    static const struct {
      const char *letter;
      double unit;
    } kUnits[] = {{"", 1},
                  {"K", 1024.0},
                  {"M", 1024.0 * 1024},
                  {"G", 1024.0 * 1024 * 1024}};
    for (const auto &u : kUnits)
      for (const char *tail : {"", "B", "iB"})
        if ((*u.letter || *tail != 'i') &&
            suffix == std::string(u.letter) + tail)
          unit = u.unit;
  }
  double bytes = n * unit;
  // 2^63: far above any memory, and exactly representable in a double.
  if (unit < 0 || !(bytes < 9223372036854775808.0))
    throw Error(flag +
                ": expected a byte count with an optional K, M or G "
                "suffix (e.g. 256M), got '" +
                text + "'");
  return size_t(bytes);
}

} // namespace mpc
