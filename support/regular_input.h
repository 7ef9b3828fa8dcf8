// Inputs that must be regular files: a model, a data set, a checkpoint.
//
// Opening a FIFO for reading waits for a writer that may never come, and a
// device (/dev/zero, /dev/urandom) reads without end: a tool given one would
// hang instead of failing. The tools check such inputs before reading them.
#pragma once

#include <string>

namespace mpc {

/// Throws Error ("--data=PATH: is a FIFO, not a regular file") when `path`
/// exists and is not a regular file (a folder, FIFO, device or socket).
/// The file is opened without blocking and checked with fstat, so a FIFO
/// is refused, not waited on. A path that cannot be opened is left to the
/// reader, whose message says why. `role` names it ("--data"; "" for
/// the model: the message starts with its path).
void requireRegularFile(const std::string &path, const std::string &role);

} // namespace mpc
