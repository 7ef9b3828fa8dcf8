// TensorBoardWriter (runtime/tensorboard_writer.h): the file is TFRecords
// whose lengths and masked CRC-32Cs check, the first holding the file
// version, then one Event per scalars() call with every value (0 too); a
// missing directory is created; a DIR that is a file, or under one, is one
// error naming it.
#include "runtime/tensorboard_writer.h"

#include "runtime/tensorboard_event.pb.h"
#include "support/crc32c.h"
#include "support/diagnostics.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace mpc {
namespace {

namespace fs = std::filesystem;

/// A fresh directory, removed at the end.
struct TempDir {
  TempDir() {
    char tmpl[] = "/tmp/mpc_tensorboard_test_XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string path;
};

uint64_t littleEndian(const std::string &s, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i)
    v = (v << 8) | uint8_t(s[at + size_t(i)]);
  return v;
}

/// The records of a TFRecord file, each frame checked.
std::vector<std::string> readRecords(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string bytes = ss.str();
  std::vector<std::string> records;
  size_t at = 0;
  while (at < bytes.size()) {
    EXPECT_LE(at + 12, bytes.size());
    uint64_t length = littleEndian(bytes, at, 8);
    EXPECT_EQ(littleEndian(bytes, at + 8, 4),
              maskCrc32c(crc32c(bytes.data() + at, 8)));
    EXPECT_LE(at + 16 + length, bytes.size());
    std::string data = bytes.substr(at + 12, length);
    EXPECT_EQ(littleEndian(bytes, at + 12 + length, 4),
              maskCrc32c(crc32c(data.data(), data.size())));
    records.push_back(data);
    at += 16 + length;
  }
  return records;
}

TEST(TensorBoardWriter, RecordFraming) {
  // An empty record: a zero length, its CRC, no data, the empty CRC.
  std::string r = TensorBoardWriter::record("");
  ASSERT_EQ(r.size(), 16u);
  EXPECT_EQ(r.substr(0, 8), std::string(8, '\0'));
  EXPECT_EQ(littleEndian(r, 8, 4), maskCrc32c(crc32c(r.data(), 8)));
  EXPECT_EQ(littleEndian(r, 12, 4), maskCrc32c(0));
  r = TensorBoardWriter::record("123456789");
  EXPECT_EQ(littleEndian(r, 0, 8), 9u);
  EXPECT_EQ(r.substr(12, 9), "123456789");
  EXPECT_EQ(littleEndian(r, 21, 4), maskCrc32c(0xe3069283u));
}

TEST(TensorBoardWriter, WritesEventsTensorBoardReads) {
  TempDir tmp;
  const std::string dir = tmp.path + "/runs/a";
  TensorBoardWriter w;
  w.open(dir); // created, parents too
  ASSERT_TRUE(w.isOpen());
  EXPECT_EQ(fs::path(w.path()).parent_path(), fs::path(dir));
  EXPECT_EQ(
      fs::path(w.path()).filename().string().rfind("events.out.tfevents.", 0),
      0u);
  w.scalars(1, {{"train/loss", 2.5}, {"train/skipped", 0}});
  w.scalars(2, {{"train/loss", 1.25}});
  w.close();

  std::vector<std::string> records = readRecords(w.path());
  ASSERT_EQ(records.size(), 3u);
  tensorboard::Event first, e1, e2;
  ASSERT_TRUE(first.ParseFromString(records[0]));
  EXPECT_EQ(first.file_version(), "brain.Event:2");
  EXPECT_GT(first.wall_time(), 1.6e9);
  ASSERT_TRUE(e1.ParseFromString(records[1]));
  EXPECT_EQ(e1.step(), 1);
  ASSERT_TRUE(e1.has_summary());
  ASSERT_EQ(e1.summary().value_size(), 2);
  EXPECT_EQ(e1.summary().value(0).tag(), "train/loss");
  EXPECT_EQ(e1.summary().value(0).simple_value(), 2.5f);
  // A scalar of 0 is written, not left out as a proto3 default.
  EXPECT_EQ(e1.summary().value(1).tag(), "train/skipped");
  EXPECT_TRUE(e1.summary().value(1).has_simple_value());
  ASSERT_TRUE(e2.ParseFromString(records[2]));
  EXPECT_EQ(e2.step(), 2);
  EXPECT_EQ(e2.summary().value(0).simple_value(), 1.25f);

  // A second writer in the same second gets its own file.
  TensorBoardWriter again;
  again.open(dir);
  EXPECT_NE(again.path(), w.path());
  again.close();
}

TEST(TensorBoardWriter, BadDirectoryIsOneError) {
  TempDir tmp;
  const std::string file = tmp.path + "/plain";
  std::ofstream(file) << "x";
  for (const std::string &dir : {file, file + "/sub"}) {
    TensorBoardWriter w;
    try {
      w.open(dir);
      FAIL() << dir;
    } catch (const Error &e) {
      std::string what = e.what();
      EXPECT_EQ(what.rfind("--tensorboard=" + dir + ": ", 0), 0u) << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
    EXPECT_FALSE(w.isOpen());
  }
}

} // namespace
} // namespace mpc
