// Tests for what keeps a tool's outputs from losing data: file identity
// (support/path_identity.h: names, ./, hard and symbolic links,
// files not made yet), the non-regular input check (regular_input.h), the
// removal of dead writers' temp files (stale_temp_files.h) and the training
// log (runtime/training_log.h: the cut on resume, checked writes on a full
// device).
#include "runtime/training_log.h"
#include "support/diagnostics.h"
#include "support/file_io.h"
#include "support/path_identity.h"
#include "support/regular_input.h"
#include "support/stale_temp_files.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <dirent.h>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

using namespace mpc;

namespace {

class OutputSafetyTest : public ::testing::Test {
protected:
  void SetUp() override {
    char tmpl[] = "/tmp/mpc-output-safety-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    for (const std::string &name : entries()) {
      std::string p = dir_ + "/" + name;
      if (::unlink(p.c_str()) != 0)
        ::rmdir(p.c_str());
    }
    ::rmdir(dir_.c_str());
  }
  std::string path(const std::string &name) const { return dir_ + "/" + name; }
  void write(const std::string &name, const std::string &text) {
    std::ofstream(path(name), std::ios::binary) << text;
  }
  std::string read(const std::string &name) {
    std::ifstream in(path(name), std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    if (DIR *d = ::opendir(dir_.c_str())) {
      while (dirent *e = ::readdir(d))
        if (std::string(e->d_name) != "." && std::string(e->d_name) != "..")
          names.push_back(e->d_name);
      ::closedir(d);
    }
    return names;
  }
  /// The id of a process that has exited (and been reaped).
  static pid_t deadPid() {
    pid_t pid = ::fork();
    if (pid == 0)
      ::_exit(0);
    int status = 0;
    ::waitpid(pid, &status, 0);
    return pid;
  }
  std::string dir_;
};

TEST_F(OutputSafetyTest, IdentityFollowsNamesAndLinks) {
  write("a", "x");
  write("b", "x");
  ASSERT_EQ(::link(path("a").c_str(), path("hard").c_str()), 0);
  ASSERT_EQ(::symlink(path("a").c_str(), path("soft").c_str()), 0);
  ASSERT_EQ(::mkdir(path("sub").c_str(), 0755), 0);
  ASSERT_EQ(::symlink(path("sub").c_str(), path("subLink").c_str()), 0);
  EXPECT_TRUE(sameFileByIdentity(path("a"), dir_ + "/./a"));
  EXPECT_TRUE(sameFileByIdentity(path("a"), path("hard")));
  EXPECT_TRUE(sameFileByIdentity(path("soft"), path("a")));
  EXPECT_FALSE(sameFileByIdentity(path("a"), path("b")));
  // Files not made yet: by their folder's real path and their name.
  EXPECT_TRUE(sameFileByIdentity(path("sub/new"), path("subLink/new")));
  EXPECT_TRUE(sameFileByIdentity(path("new"), path("sub/../new")));
  EXPECT_FALSE(sameFileByIdentity(path("new"), path("new2")));
  EXPECT_FALSE(sameFileByIdentity(path("new"), path("a")));
  // Devices are written in place and hold nothing to lose.
  EXPECT_FALSE(sameFileByIdentity("/dev/null", "/dev/null"));
  ::unlink(path("sub").c_str());
  ::unlink(path("subLink").c_str());
  ::rmdir(path("sub").c_str());
}

TEST_F(OutputSafetyTest, RefusesAnOutputOverAnInputOrAnotherOutput) {
  write("m.onnx", "model");
  ASSERT_EQ(::link(path("m.onnx").c_str(), path("log.csv").c_str()), 0);
  std::vector<FileRole> inputs = {{"the model", path("m.onnx")},
                                  {"--data", ""}};
  try {
    refuseOutputsOverInputs(
        inputs, {{"--save", path("c.onnx")}, {"--log", path("log.csv")}});
    FAIL() << "a hard link to the model was accepted as the log";
  } catch (const Error &e) {
    EXPECT_EQ(std::string(e.what()),
              "--log=" + path("log.csv") + ": is the same file as the model " +
                  path("m.onnx") +
                  ", an input that writing it would destroy; choose another "
                  "path");
  }
  EXPECT_NO_THROW(refuseOutputsOverInputs(
      inputs, {{"--save", path("c.onnx")}, {"-o", "-"}}));
  // Two outputs, neither made yet, one name.
  EXPECT_THROW(refuseSharedOutputs({{"--log", path("a.csv")},
                                    {"--eval-log", dir_ + "/./a.csv"}}),
               Error);
  EXPECT_NO_THROW(refuseSharedOutputs({{"--log", path("a.csv")},
                                       {"--eval-log", path("b.csv")},
                                       {"--dot", "/dev/null"},
                                       {"--report-json", "/dev/null"}}));
  EXPECT_EQ(read("m.onnx"), "model");
}

TEST_F(OutputSafetyTest, RefusesInputsThatAreNotRegularFiles) {
  write("data.npz", "x");
  EXPECT_NO_THROW(requireRegularFile(path("data.npz"), "--data"));
  EXPECT_NO_THROW(requireRegularFile(path("missing.npz"), "--data"));
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0644), 0);
  // Refused at once, not waited on (no writer ever opens the FIFO).
  try {
    requireRegularFile(path("fifo"), "--data");
    FAIL() << "a FIFO was accepted";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("--data=" + path("fifo") +
                                         ": is a FIFO, not a regular file"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(requireRegularFile("/dev/zero", "--eval-data"), Error);
  EXPECT_THROW(requireRegularFile(dir_, ""), Error);
}

TEST_F(OutputSafetyTest, RemovesOnlyDeadWritersTempFiles) {
  pid_t dead = deadPid();
  std::string d = std::to_string(dead);
  std::string self = std::to_string(::getpid());
  std::string parent = std::to_string(::getppid());
  for (const std::string &name : std::vector<std::string>{
           "c.onnx", "c.onnx.tmp." + d, "c.onnx.tmp." + self,
           "c.onnx.tmp." + parent, "c.onnx.tmp.0" + d, "c.onnx.tmp." + d + "x",
           "c.onnx.tmp.", "b.onnx.tmp." + d, "c.onnx.prev." + d,
           "xc.onnx.tmp." + d})
    write(name, "bytes");
  EXPECT_EQ(removeStaleTempFiles(path("c.onnx")), 1);
  std::vector<std::string> left = entries();
  EXPECT_EQ(std::count(left.begin(), left.end(), "c.onnx.tmp." + d), 0);
  EXPECT_EQ(left.size(), 9u);
  // The next atomic write of the file removes them too.
  write("c.onnx.tmp." + d, "bytes");
  std::string error;
  ASSERT_TRUE(writeFileAtomically(path("c.onnx"), "new", 3, error)) << error;
  left = entries();
  EXPECT_EQ(std::count(left.begin(), left.end(), "c.onnx.tmp." + d), 0);
  EXPECT_EQ(read("c.onnx"), "new");
}

TEST_F(OutputSafetyTest, LogKeepsTheRowsUpToTheResumedStep) {
  const std::string log = "step,loss\n1,0.5\n2,0.4\n3,0.3\n4,0.2\n5,0.1";
  // Rows past the step go, and so does a last row with no newline.
  EXPECT_EQ(TrainingLog::keptBytes(log, 3),
            std::string("step,loss\n1,0.5\n2,0.4\n3,0.3\n").size());
  EXPECT_EQ(TrainingLog::keptBytes(log, 4), log.size() - 5);
  EXPECT_EQ(TrainingLog::keptBytes(log, 9), log.size() - 5);
  EXPECT_EQ(TrainingLog::keptBytes(log, 0), std::string("step,loss\n").size());
  EXPECT_EQ(TrainingLog::keptBytes("", 3), 0u);

  write("run.csv", log);
  {
    TrainingLog l;
    l.open(path("run.csv"), "the log", "step,loss", 2);
    l.row("3,0.25");
    l.close();
  }
  EXPECT_EQ(read("run.csv"), "step,loss\n1,0.5\n2,0.4\n3,0.25\n");
  // A resumed run that makes its log writes the header; a new run empties
  // the file.
  {
    TrainingLog l;
    l.open(path("new.csv"), "the log", "step,loss", 7);
    l.row("8,0.1");
    l.close();
  }
  EXPECT_EQ(read("new.csv"), "step,loss\n8,0.1\n");
  {
    TrainingLog l;
    l.open(path("run.csv"), "the log", "step,loss", std::nullopt);
    l.row("1,0.9");
  } // the destructor writes what is buffered
  EXPECT_EQ(read("run.csv"), "step,loss\n1,0.9\n");
}

TEST_F(OutputSafetyTest, LogWriteErrorsNameTheFile) {
  // /dev/full fails every write with ENOSPC, as a full disk does.
  TrainingLog l;
  try {
    l.open("/dev/full", "the log", "step,loss", std::nullopt);
    FAIL() << "the header's write error was ignored";
  } catch (const Error &e) {
    EXPECT_EQ(std::string(e.what()),
              "/dev/full: cannot write the log: No space left on device");
  }
  EXPECT_THROW(l.open(dir_, "the log", "step", std::nullopt), Error);
  // A FIFO nobody reads is refused, not waited on.
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0644), 0);
  EXPECT_THROW(l.open(path("fifo"), "the log", "step", std::nullopt), Error);
}

TEST_F(OutputSafetyTest, ALogWriteThatFailsPartWayEndsAtTheLastWholeRow) {
  // A disk that fills in the middle of a buffered write: the log keeps
  // every row that fitted whole and ends there, not inside the next one.
  // A file size limit (RLIMIT_FSIZE, SIGXFSZ ignored) fails a write
  // part-way as a full disk does.
  const std::string log = path("run.csv");
  TrainingLog l;
  l.open(log, "the log", "step,loss", std::nullopt);
  l.row("1,0.9");
  l.flush();
  const std::string first = read("run.csv");
  ASSERT_EQ(first, "step,loss\n1,0.9\n");
  struct rlimit old;
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  auto previous = ::signal(SIGXFSZ, SIG_IGN);
  struct rlimit tight = old;
  // Rows 2 and 3 fit; row 4 would end 5 bytes past the limit.
  tight.rlim_cur = first.size() + std::string("2,0.8\n3,0.7\n4,0.6").size();
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &tight), 0);
  std::string error;
  try {
    l.row("2,0.8");
    l.row("3,0.7");
    l.row("4,0.61234");
    l.flush();
    ADD_FAILURE() << "the write past the limit succeeded";
  } catch (const Error &e) {
    error = e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &old);
  ::signal(SIGXFSZ, previous);
  EXPECT_EQ(error, log + ": cannot write the log: File too large");
  EXPECT_EQ(read("run.csv"), first + "2,0.8\n3,0.7\n");
}

} // namespace
