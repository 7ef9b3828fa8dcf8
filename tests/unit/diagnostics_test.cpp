// Error lines: one line whatever the input's names hold, and bounded in
// length (support/diagnostics.h).
#include "support/diagnostics.h"

#include <gtest/gtest.h>

using namespace mpc;

TEST(ErrorLine, ControlCharactersAreEscaped) {
  EXPECT_EQ(oneLine("a\nb\rc\x01"), "a\\nb\\rc\\x01");
  EXPECT_EQ(std::string(Error("x\ny").what()), "x\\ny");
}

TEST(ErrorLine, ALongMessageKeepsItsStartAndEnd) {
  std::string name(50000, 'n');
  std::string message =
      "--no-weight-decay: 'w' matches no parameter (they are: " + name + ", " +
      name + "); use --frozen";
  std::string line = Error(message).what();
  EXPECT_LE(line.size(), kMaxErrorLine + 64);
  EXPECT_EQ(line.rfind("--no-weight-decay: 'w' matches no parameter", 0), 0u);
  EXPECT_EQ(line.substr(line.size() - 15), "); use --frozen");
  EXPECT_NE(line.find(" characters left out] ... "), std::string::npos);
  // What was left out, plus what stayed, is the whole message.
  size_t open = line.find(" ... [");
  size_t count = std::stoul(line.substr(open + 6));
  size_t marker = line.find("] ... ") + 6 - open;
  EXPECT_EQ(line.size() - marker + count, message.size());
}

TEST(ErrorLine, TheCutNeverSplitsAUtf8Character) {
  std::string name;
  for (int i = 0; i < 20000; ++i)
    name += "\xc3\xa9"; // é
  std::string line = Error("node '" + name + "': bad").what();
  // Every byte sequence is whole: no continuation byte after an ASCII one,
  // and every lead byte of a two-byte é followed by its continuation byte.
  for (size_t i = 1; i < line.size(); ++i)
    if ((static_cast<unsigned char>(line[i]) & 0xC0) == 0x80) {
      EXPECT_EQ(static_cast<unsigned char>(line[i - 1]) & 0x80, 0x80) << i;
    }
  for (size_t i = 0; i < line.size(); ++i)
    if (static_cast<unsigned char>(line[i]) == 0xC3) {
      ASSERT_LT(i + 1, line.size());
      EXPECT_EQ(static_cast<unsigned char>(line[i + 1]), 0xA9) << i;
    }
  EXPECT_EQ(line.substr(line.size() - 6), "': bad");
}

TEST(ErrorLine, ShortMessagesAreUnchanged) {
  std::string m(kMaxErrorLine, 'a');
  EXPECT_EQ(oneLine(m), m);
}
