// TrainingLog: a CSV log of a training run (mpc-run --log, --eval-log), one
// row per global step, that stays in step with the run's checkpoints.
//
// Rows are buffered and written in blocks (a CPU step can take 10 us: a
// write per row would cost more than the step). Every write, fsync and the
// close are checked: a full disk or a lost file system is an Error naming the
// file, never a run that exits 0 with a short log. sync() writes what is
// buffered and fsyncs it; mpc-run calls it before every checkpoint, so a
// checkpoint on disk is never ahead of the log (a run killed after it logged
// more rows than its last checkpoint holds leaves the log ahead instead).
// A resumed run opens the log at the checkpoint's step: rows after it, which
// the resumed run will log again, and a last row cut short by the kill are
// removed, so the log of a run resumed any number of times is the log of one
// straight run. A log the resumed run creates gets its header.
#pragma once

#include "runtime/buffered_log_file.h"

#include <cstdint>
#include <optional>
#include <string>

namespace mpc {

class TrainingLog {
public:
  TrainingLog() = default;
  TrainingLog(const TrainingLog &) = delete;
  TrainingLog &operator=(const TrainingLog &) = delete;
  /// Writes what is buffered and closes the file without reporting errors
  /// (the run failed already); call close() to have them.
  ~TrainingLog() = default;

  /// Opens `path` (`what`: "the log", "the evaluation log", in errors).
  /// A new run (`resumedAt` empty) empties it and writes `header`. A run
  /// resumed from a checkpoint of step `*resumedAt` keeps the rows of steps
  /// up to it and removes the rest (see above); it writes `header` when the
  /// file is new or empty. A path that is not a regular file (a pipe,
  /// /dev/stdout) is written as it is. Throws Error naming the file.
  void open(const std::string &path, const std::string &what,
            const std::string &header, std::optional<int64_t> resumedAt);
  bool isOpen() const { return file_.isOpen(); }
  const std::string &path() const { return file_.path(); }

  /// Appends `line` and a newline; writes the buffer when it is large or a
  /// second old (so that `tail -f` follows the run). Throws Error on a
  /// failed write.
  void row(const std::string &line);
  /// Writes what is buffered. Throws Error on failure.
  void flush() { file_.flush(); }
  /// flush(), then fsync: the rows reach the disk (before a checkpoint).
  void sync() { file_.sync(); }
  /// sync(), then closes the file. Throws Error on failure.
  void close() { file_.close(); }

  /// The byte length of the rows of `text` (a log's contents) to keep for
  /// a run resumed at step `step`: the header, then every whole row up to
  /// the first whose step is past `step` or that has no newline (cut short).
  static size_t keptBytes(const std::string &text, int64_t step);

private:
  BufferedLogFile file_;
};

} // namespace mpc
