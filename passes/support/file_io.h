// Whole-file reads and crash-safe writes, shared by every reader and writer.
//
// Writes go to a temporary file in the same folder, are fsynced, then renamed
// over the target: a crash or a full disk never leaves a partial file at the
// target path, and the previous file (e.g. the last good checkpoint) survives.
#pragma once

#include <cstddef>
#include <string>

namespace mpc {

/// Writes `size` bytes to `path` atomically. On failure sets `error` (one
/// line naming the file) and leaves `path` as it was.
bool writeFileAtomically(const std::string &path, const void *data, size_t size,
                         std::string &error);

/// Reads a whole regular file. On failure sets `error` ("PATH: cannot open:
/// No such file or directory", "PATH: is a directory").
bool readWholeFile(const std::string &path, std::string &bytes,
                   std::string &error);

} // namespace mpc
