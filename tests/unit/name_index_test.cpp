// Unit tests for NameIndex and hashName (ir/name_index.h).
//
// The index is checked against std::map through long random runs of
// inserts, assigns and erases over a small pool of names (so runs of
// occupied slots form, wrap around the table's end and are shifted back on
// erase), and the hash must tell apart names that differ in any one byte,
// at every length, including the bytes a word-wise read covers twice.
#include "ir/name_index.h"

#include <gtest/gtest.h>

#include <deque>
#include <map>
#include <random>
#include <set>
#include <string>

using namespace mpc;

namespace {

struct Item {
  std::string text;
  const std::string &name() const { return text; }
};

TEST(HashName, EveryByteAndLengthCounts) {
  std::set<uint64_t> seen;
  size_t count = 0;
  for (size_t length = 0; length <= 40; ++length) {
    const std::string base(length, 'a');
    seen.insert(hashName(base));
    ++count;
    for (size_t at = 0; at < length; ++at) {
      std::string changed = base;
      changed[at] = 'b';
      seen.insert(hashName(changed));
      ++count;
    }
  }
  EXPECT_EQ(seen.size(), count);
  // Only the view's bytes are read.
  const std::string longer = "layers.12.attn.q.weight_and_more";
  EXPECT_EQ(hashName(std::string_view(longer).substr(0, 23)),
            hashName("layers.12.attn.q.weight"));
}

TEST(NameIndex, FindInsertAssign) {
  NameIndex<Item> index;
  Item a{"a"}, a2{"a"}, b{"b"};
  EXPECT_EQ(index.find("a"), nullptr);
  EXPECT_EQ(index.erase("a"), nullptr);
  EXPECT_EQ(index.insert(&a), std::make_pair(&a, true));
  EXPECT_EQ(index.insert(&a2), std::make_pair(&a, false)); // name taken
  EXPECT_EQ(index.find("a"), &a);
  EXPECT_EQ(index.assign(&a2), &a); // a2 takes the name over
  EXPECT_EQ(index.find("a"), &a2);
  EXPECT_EQ(index.assign(&b), nullptr);
  EXPECT_EQ(index.size(), 2u);
  EXPECT_EQ(index.erase("a"), &a2);
  EXPECT_EQ(index.find("a"), nullptr);
  EXPECT_EQ(index.find("b"), &b);
  EXPECT_EQ(index.size(), 1u);
}

TEST(NameIndex, MatchesAMapThroughRandomChanges) {
  std::deque<Item> items; // stable addresses
  std::vector<std::string> pool;
  for (int i = 0; i < 300; ++i)
    pool.push_back(i % 3 ? "v" + std::to_string(i)
                         : "layers." + std::to_string(i) + ".mlp.weight");
  NameIndex<Item> index;
  std::map<std::string, Item *> expected;
  std::mt19937 rng(11);
  for (int step = 0; step < 20000; ++step) {
    const std::string &name = pool[rng() % pool.size()];
    switch (rng() % 3) {
    case 0: {
      Item *item = &items.emplace_back(Item{name});
      auto [holder, added] = index.insert(item);
      auto [it, fresh] = expected.emplace(name, item);
      ASSERT_EQ(added, fresh) << name;
      ASSERT_EQ(holder, it->second) << name;
      break;
    }
    case 1: {
      Item *item = &items.emplace_back(Item{name});
      Item *&slot = expected[name];
      ASSERT_EQ(index.assign(item), slot) << name;
      slot = item;
      break;
    }
    default: {
      auto it = expected.find(name);
      ASSERT_EQ(index.erase(name), it == expected.end() ? nullptr : it->second)
          << name;
      if (it != expected.end())
        expected.erase(it);
    }
    }
    ASSERT_EQ(index.size(), expected.size());
    if (step % 97 == 0) // every name, present or not
      for (const std::string &n : pool) {
        auto it = expected.find(n);
        ASSERT_EQ(index.find(n), it == expected.end() ? nullptr : it->second)
            << n << " at step " << step;
      }
  }
  index.reserve(5000); // re-laid: every entry still found
  for (const auto &kv : expected)
    EXPECT_EQ(index.find(kv.first), kv.second);
}

} // namespace
