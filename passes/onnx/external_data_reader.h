// Reading a tensor's ONNX external data (data_location EXTERNAL) safely.
//
// The location is untrusted input, like the rest of the model. As ONNX's own
// loader does, it must be a relative path naming a regular file inside the
// model's folder: empty, absolute and '..' locations are refused, and so is
// one that resolves (realpath: symlinks followed, of the file or of a folder
// on the way) to anything outside the folder, so a model cannot copy
// /etc/passwd or a FIFO's endless stream into a compiled model. The range
// (offset, length) must lie inside the file's real size and be exactly the
// bytes the tensor's data type and dims take; those are checked (a
// supported type, the 16 GiB cap of ir/tensor_pb.h) before
// anything is read, and the bytes the model's external data takes in all
// must fit the memory the process can still get
// (support/available_memory.h): a sparse terabyte file is refused
// with the numbers instead of being read into the heap.
#pragma once

#include "onnx/onnx_pb.h"

#include <cstdint>
#include <string>

namespace mpc {

/// Reads the external data of one model's tensors, keeping the running
/// total of the bytes read against the memory available.
class ExternalDataReader {
public:
  /// `modelDir`: the folder of the model file ("" is the root, "/").
  /// `byteLimit`: the most bytes it reads in all (0: as much as the memory
  /// available allows; a fuzz target sets a small one).
  explicit ExternalDataReader(std::string modelDir, uint64_t byteLimit = 0);

  /// Replaces `tp`'s external data by its bytes (raw_data, data_location
  /// DEFAULT). Throws Error naming `what` (e.g. "initializer 'w'") and the
  /// file on any bad location, range or size, and when the bytes cannot
  /// fit in memory.
  void read(onnx::TensorProto &tp, const std::string &what);

private:
  /// The real path of `location` inside the model's folder (throws).
  std::string resolve(const std::string &location, const std::string &what);
  /// Checks that `bytes` more fit in memory (throws).
  void reserve(uint64_t bytes, const std::string &what,
               const std::string &path);

  std::string dir_;
  uint64_t byteLimit_;
  std::string realDir_; ///< realpath of dir_, once known
  /// Bytes that may still be read before the available memory is asked
  /// again: each read takes its bytes off; a read that does not fit asks
  /// again (memory may have been freed) before refusing.
  uint64_t budget_ = 0;
};

} // namespace mpc
