// parseIntFlag: the one parser of the tools' integer flags.
#include "support/diagnostics.h"
#include "support/int_parse.h"

#include <gtest/gtest.h>

#include <limits>

using namespace mpc;

namespace {

std::string errorOf(const std::string &text, int64_t min, int64_t max) {
  try {
    parseIntFlag("--n", text, min, max);
  } catch (const Error &e) {
    return e.what();
  }
  return "";
}

TEST(IntParse, AcceptsDecimalsInRange) {
  EXPECT_EQ(parseIntFlag("--n", "0", 0, 10), 0);
  EXPECT_EQ(parseIntFlag("--n", "10", 0, 10), 10);
  EXPECT_EQ(parseIntFlag("--n", "+7", 0, 10), 7);
  EXPECT_EQ(parseIntFlag("--n", "-3", -5, 10), -3);
  EXPECT_EQ(parseIntFlag("--n", "007", 0, 10), 7);
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(parseIntFlag("--n", "9223372036854775807", 0, kMax), kMax);
  EXPECT_EQ(parseIntFlag("--n", "-9223372036854775808", kMin, 0), kMin);
}

TEST(IntParse, RefusesJunkOverflowAndRange) {
  const std::string range = "--n: expected an integer in [1, 1024], got ";
  EXPECT_EQ(errorOf("", 1, 1024), range + "''");
  EXPECT_EQ(errorOf("-", 1, 1024), range + "'-'");
  EXPECT_EQ(errorOf("+", 1, 1024), range + "'+'");
  EXPECT_EQ(errorOf(" 4", 1, 1024), range + "' 4'");
  EXPECT_EQ(errorOf("4 ", 1, 1024), range + "'4 '");
  EXPECT_EQ(errorOf("4k", 1, 1024), range + "'4k'");
  EXPECT_EQ(errorOf("0x10", 1, 1024), range + "'0x10'");
  EXPECT_EQ(errorOf("2.5", 1, 1024), range + "'2.5'");
  EXPECT_EQ(errorOf("1e3", 1, 1024), range + "'1e3'");
  EXPECT_EQ(errorOf("--4", 1, 1024), range + "'--4'");
  EXPECT_EQ(errorOf("0", 1, 1024), range + "'0'");
  EXPECT_EQ(errorOf("1025", 1, 1024), range + "'1025'");
  // Values that wrap in an int (4294967298 is 2 in 32 bits) or past 64 bits.
  EXPECT_EQ(errorOf("4294967298", 1, 1024), range + "'4294967298'");
  EXPECT_EQ(errorOf("9223372036854775808", 1, 1024),
            range + "'9223372036854775808'");
  EXPECT_EQ(errorOf("-9223372036854775809", 1, 1024),
            range + "'-9223372036854775809'");
  EXPECT_EQ(errorOf(std::string("4\0", 2), 1, 1024).substr(0, range.size()),
            range);
  // A value of any length is quoted by its start, on one line.
  std::string msg = errorOf(std::string(100000, '9'), 1, 1024);
  EXPECT_LT(msg.size(), 120u);
  EXPECT_NE(msg.find("'9999"), std::string::npos);
  EXPECT_EQ(errorOf("-1", 0, std::numeric_limits<int64_t>::max()),
            "--n: expected an integer >= 0, got '-1'");
}

} // namespace

TEST(NumberParse, AcceptsDecimalSpellings) {
  EXPECT_EQ(parseNumberFlag("--lr", "0.1"), 0.1);
  EXPECT_EQ(parseNumberFlag("--lr", "-3"), -3.0);
  EXPECT_EQ(parseNumberFlag("--lr", "+2.5"), 2.5);
  EXPECT_EQ(parseNumberFlag("--lr", "1e-4"), 1e-4);
  EXPECT_EQ(parseNumberFlag("--lr", "3E+2"), 300.0);
  EXPECT_EQ(parseNumberFlag("--lr", ".5"), 0.5);
  EXPECT_EQ(parseNumberFlag("--lr", "5."), 5.0);
  // Below the smallest double: zero, not an error (strtod's underflow).
  EXPECT_EQ(parseNumberFlag("--lr", "1e-400"), 0.0);
}

TEST(NumberParse, RefusesNonDecimalAndNonFinite) {
  for (const char *bad :
       {"", "nan", "NaN", "inf", "-inf", "infinity", "0x1p3", " 0.1", "0.1 ",
        "1e", "e5", ".", "-", "1e400", "-1e400", "1.2.3", "1,5", "0.1abc"}) {
    try {
      parseNumberFlag("--beta1", bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error &e) {
      EXPECT_NE(
          std::string(e.what()).find("--beta1: expected a decimal number"),
          std::string::npos)
          << e.what();
    }
  }
}
