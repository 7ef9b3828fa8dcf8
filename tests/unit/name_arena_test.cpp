// Unit tests for NameArena (ir/name_arena.h): every kept name reads
// back as given for as long as the arena lives, across blocks, and a name
// longer than a block gets one of its own.
#include "ir/name_arena.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace mpc {
namespace {

TEST(NameArena, KeptNamesReadBackAcrossBlocks) {
  NameArena arena;
  std::vector<std::string> names;
  std::vector<std::string_view> kept;
  for (int i = 0; i < 5000; ++i) { // some 100 KiB: several blocks
    names.push_back("layer" + std::to_string(i) + "/attention/q_proj_grad");
    kept.push_back(arena.keep(names.back()));
  }
  std::string huge(100 << 10, 'x'); // longer than a block
  std::string_view hugeKept = arena.keep(huge);
  std::string_view empty = arena.keep("");
  std::string_view after = arena.keep("after");
  for (size_t i = 0; i < names.size(); ++i) {
    EXPECT_EQ(kept[i], names[i]);
    EXPECT_NE(kept[i].data(), names[i].data()); // a copy
  }
  EXPECT_EQ(hugeKept, huge);
  EXPECT_TRUE(empty.empty());
  EXPECT_EQ(after, "after");
}

} // namespace
} // namespace mpc
