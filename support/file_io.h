// Whole-file reads and crash-safe writes, shared by every reader and writer.
//
// Writes go to a temporary file in the same folder, then are renamed over the
// target: a failed or killed writer or a full disk never leaves a partial
// file at the target path, and the previous file (e.g. the last good
// checkpoint) survives. A target that exists and is not a regular file
// (/dev/null, a FIFO) is written in place instead, so it stays what it is.
// Writes that must also survive a power cut (training state: checkpoints) are
// fsynced before the rename; a compiler's outputs, which are made again from
// their inputs, are not (as clang's and LLVM's tools do not): on a new 64-layer
// step file the fsync took 17-26 ms
// (`strace -T -e trace=fsync`) of a ~214 ms compile. A temp file that a
// writer killed before its rename left behind is removed by the next write of
// the same target (stale_temp_files.h).
#pragma once

#include <cstddef>
#include <functional>
#include <string>

namespace mpc {

/// Whether an atomic write waits for its bytes to reach the disk before the
/// rename (see above).
enum class Fsync { Yes, No };

/// Writes `size` bytes to `path` atomically. On failure sets `error` (one
/// line naming the file) and leaves `path` as it was.
bool writeFileAtomically(const std::string &path, const void *data, size_t size,
                         std::string &error, Fsync fsync = Fsync::Yes);

/// Writes `path` atomically with what `fill` writes to the temporary file's
/// descriptor (it returns false with `error` set on failure), so a large
/// output can be streamed into the file without first being built in memory.
bool writeFileAtomically(
    const std::string &path,
    const std::function<bool(int fd, std::string &error)> &fill,
    std::string &error, Fsync fsync = Fsync::Yes);

/// Writes a model file `path` and the data file `dataPath` its tensors'
/// external data lie in as one pair: neither is ever left partial, a
/// failure leaves the previous pair as it was, and `path` never points into
/// a `dataPath` that is not its own. Both are filled as temporary files
/// first (`fillData`, then `fillModel`); then the previous pair is moved
/// aside (PATH.prev.PID, DATAPATH.prev.PID), the new data and then the new
/// model are renamed into place, and the previous pair is removed. A rename
/// that fails puts the previous pair back. A crash between the renames
/// leaves no `path` (the previous pair survives under its .prev names)
/// rather than an old model over new data or a new model over old data.
/// Both targets must be regular files or not exist yet. On failure sets
/// `error` (one line naming the file).
bool writeFilePairAtomically(
    const std::string &dataPath,
    const std::function<bool(int fd, std::string &error)> &fillData,
    const std::string &path,
    const std::function<bool(int fd, std::string &error)> &fillModel,
    std::string &error, Fsync fsync = Fsync::Yes);

/// Writes all `size` bytes to `fd` (retrying short writes); on failure sets
/// `error` to "PATH: write error: ...".
bool writeAll(int fd, const void *data, size_t size, const std::string &path,
              std::string &error);

/// Reads a whole regular file. On failure sets `error` ("PATH: cannot open:
/// No such file or directory", "PATH: is a directory").
bool readWholeFile(const std::string &path, std::string &bytes,
                   std::string &error);

} // namespace mpc
