// FileSink (support/file_sink.h): the file holds exactly the bytes
// put, in order; zero runs of tensor data that cover a whole block of the
// file, with their zeros in the partial blocks at the run's edges, are not
// written (a hole, or zeros the kernel fills in); everything else is.
#include "support/file_sink.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace mpc {
namespace {

/// A fresh empty file, removed at the end.
class TempFile {
public:
  TempFile() {
    char tmpl[] = "/tmp/mpc_file_sink_test_XXXXXX";
    fd_ = ::mkstemp(tmpl);
    if (fd_ < 0)
      throw std::runtime_error("mkstemp failed");
    path_ = tmpl;
  }
  ~TempFile() {
    ::close(fd_);
    ::unlink(path_.c_str());
  }
  int fd() const { return fd_; }
  const std::string &path() const { return path_; }
  std::string bytes() const {
    std::ifstream in(path_, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }
  size_t blockSize() const {
    struct stat st {};
    ::fstat(fd_, &st);
    return st.st_blksize > 0 ? size_t(st.st_blksize) : 4096;
  }

private:
  int fd_;
  std::string path_;
};

// Header bytes, a zero tensor of a few blocks at an odd offset, more bytes,
// a tensor that is zero but for one value, and a zero tensor at the very
// end: every zero run that covers a whole block is left out with its edge
// zeros, and the file is as long as all that was put.
TEST(FileSink, LeavesZeroRunsAndTheirEdgesUnwritten) {
  TempFile file;
  const size_t block = file.blockSize();
  std::string header(1000, 'h');
  std::vector<uint8_t> zeros(3 * block + 123, 0);
  std::string middle(300, 'm');
  std::vector<uint8_t> mixed(4 * block, 0);
  mixed[2 * block + 7] = 0x5a;
  std::vector<uint8_t> tail(2 * block + 5, 0);

  FileSink out(file.fd(), file.path());
  out.put(header);
  out.putData(zeros.data(), zeros.size());
  out.put(middle);
  out.putData(mixed.data(), mixed.size());
  out.putData(tail.data(), tail.size());
  ASSERT_TRUE(out.flush()) << out.error();

  std::string expected = header;
  expected.append(zeros.begin(), zeros.end());
  expected += middle;
  expected.append(mixed.begin(), mixed.end());
  expected.append(tail.begin(), tail.end());
  EXPECT_EQ(file.bytes(), expected);

  // The mixed tensor's value lies in one block: its partial edge blocks
  // hold zeros that go to the file; of the rest only the block around the
  // value is written (its zeros before the value are the run's edge).
  size_t mixedStart = header.size() + zeros.size() + middle.size();
  size_t valueAt = mixedStart + 2 * block + 7;
  size_t valueBlockEnd = (valueAt / block + 1) * block;
  size_t written = header.size() + middle.size() +
                   (valueBlockEnd - (valueAt / block) * block);
  const FileSink::Counts &c = out.counts();
  EXPECT_EQ(c.bytesWritten + c.bytesSkipped, expected.size());
  EXPECT_EQ(c.bytesWritten, written);
  EXPECT_GE(c.bytesSkipped, zeros.size() + tail.size());
}

// Tensor data under a block, and a run of zeros that covers no whole block
// of the file, is written as it is.
TEST(FileSink, WritesZerosThatCoverNoWholeBlock) {
  TempFile file;
  const size_t block = file.blockSize();
  std::string header(block / 2, 'h');
  std::vector<uint8_t> small(block - 1, 0);
  // From the middle of a block across a boundary, short of the next one.
  std::vector<uint8_t> straddling(block + block / 2 - 2, 0);
  FileSink out(file.fd(), file.path());
  out.put(header);
  out.putData(small.data(), small.size());
  out.put("x", 1);
  out.putData(straddling.data(), straddling.size());
  out.put("end", 3);
  ASSERT_TRUE(out.flush()) << out.error();
  size_t total = header.size() + small.size() + 1 + straddling.size() + 3;
  EXPECT_EQ(out.counts().bytesSkipped, 0u);
  EXPECT_EQ(out.counts().bytesWritten, total);
  EXPECT_EQ(file.bytes().size(), total);
}

// A file that is not empty (or not regular) gets no holes: every byte put
// is written after what is there.
TEST(FileSink, WritesEveryByteWhereHolesWouldNotReadAsZeros) {
  TempFile file;
  ASSERT_EQ(::write(file.fd(), "old", 3), 3);
  std::vector<uint8_t> zeros(8 * file.blockSize(), 0);
  FileSink out(file.fd(), file.path());
  out.putData(zeros.data(), zeros.size());
  ASSERT_TRUE(out.flush()) << out.error();
  EXPECT_EQ(out.counts().bytesSkipped, 0u);
  EXPECT_EQ(out.counts().bytesWritten, zeros.size());
  EXPECT_EQ(file.bytes(), "old" + std::string(zeros.size(), '\0'));
}

} // namespace
} // namespace mpc
