// TensorBoardWriter: scalars of a training run as a TensorBoard event file
// (mpc-run --tensorboard=DIR): DIR/events.out.tfevents.<time>.<host>, a
// TFRecord file of Event messages (runtime/tensorboard_event.proto) that
// TensorBoard and its EventAccumulator read.
//
// A TFRecord is the data's length (uint64, little-endian), the masked
// CRC-32C of those 8 bytes, the data, and the masked CRC-32C of the data
// (support/crc32c.h). The first record holds file_version "brain.Event:2".
//
// Writes follow the logs' discipline (runtime/buffered_log_file.h): events
// are buffered and written in blocks, at least once a second; every write,
// fsync and the close are checked, and a failure is an Error naming the
// file. A resumed run starts a new file in DIR beside the old ones;
// TensorBoard reads the directory as one run.
#pragma once

#include "runtime/buffered_log_file.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace mpc {

class TensorBoardWriter {
public:
  TensorBoardWriter() = default;
  TensorBoardWriter(const TensorBoardWriter &) = delete;
  TensorBoardWriter &operator=(const TensorBoardWriter &) = delete;
  /// Writes what is buffered and closes the file, errors unreported.
  ~TensorBoardWriter() = default;

  /// Creates `dir` (and its parents) when missing and a new event file in
  /// it, whose first record reaches the disk now: a directory that cannot
  /// be written fails here, before a run's first step. Throws Error naming
  /// the directory or the file.
  void open(const std::string &dir);
  bool isOpen() const { return file_.isOpen(); }
  /// The event file (after open).
  const std::string &path() const { return file_.path(); }

  /// One event at `step` holding a scalar per (tag, value).
  void scalars(int64_t step,
               const std::vector<std::pair<std::string, double>> &values);
  /// Writes what is buffered. Throws Error on failure.
  void flush() { file_.flush(); }
  /// flush(), then fsync (before a checkpoint, as the CSV logs).
  void sync() { file_.sync(); }
  /// sync(), then closes the file. Throws Error on failure.
  void close() { file_.close(); }

  /// `data` framed as one TFRecord.
  static std::string record(const std::string &data);

private:
  BufferedLogFile file_;
};

} // namespace mpc
