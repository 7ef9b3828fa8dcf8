// BufferedLogFile: the write discipline every log of a training run follows
// (the CSV logs of runtime/training_log.h, the TensorBoard event file of
// runtime/tensorboard_writer.h): bytes are buffered and written in blocks,
// at least once a second (so `tail -f` and TensorBoard follow the run);
// every write, fsync and the close are checked, and a failure is one Error
// naming the file; a write that fails part-way is cut back to the last
// whole record, so a file never ends inside a row. The owner opens the file its
// own way and attaches it.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

namespace mpc {

class BufferedLogFile {
public:
  BufferedLogFile() = default;
  BufferedLogFile(const BufferedLogFile &) = delete;
  BufferedLogFile &operator=(const BufferedLogFile &) = delete;
  /// Writes what is buffered and closes the file without reporting errors
  /// (the run failed already); call close() to have them.
  ~BufferedLogFile();

  /// How errors name the file: "<prefix><path>: cannot <doing> <what>: ...".
  void name(const std::string &path, const std::string &what,
            const std::string &prefix = "");
  /// Takes the open descriptor of the named file; `regular`: a regular file
  /// (a pipe or /dev/stdout is not fsynced). The buffer starts empty.
  void attach(int fd, bool regular);
  bool isOpen() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  const std::string &path() const { return path_; }

  /// Appends one record (a whole row, a whole event); writes the buffer
  /// when it is large or a second old.
  void append(std::string_view bytes);
  /// Writes what is buffered. Throws Error on failure.
  void flush();
  /// flush(), then fsync (before a checkpoint).
  void sync();
  /// sync(), then closes the file. Throws Error on failure.
  void close();
  /// Closes the file and throws the Error for `doing` with errno's reason.
  [[noreturn]] void fail(const char *doing);

private:
  /// Writes the buffer; a write that fails part-way is cut back to the
  /// last whole record (errno says why it failed).
  bool writeBuffer();

  int fd_ = -1;
  bool regular_ = false;
  std::string path_, what_, prefix_, buffer_;
  /// Where each record appended since the last write ends in buffer_.
  std::vector<size_t> recordEnds_;
  std::chrono::steady_clock::time_point lastWrite_;
};

} // namespace mpc
