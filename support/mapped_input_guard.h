// A mapped input file truncated while mpc reads it: a one-line error and
// exit code 1, not a crash.
//
// FileBytes maps model files (support/file_bytes.h), and mpc-opt
// keeps its input mapped to the end for the weights it writes out as they
// came in; mpc-run maps --data=DIR's arrays (runtime/data/mapped_npy.h). If another process truncates the file meanwhile, the kernel takes
// the pages past the new end away and the next read of one raises SIGBUS.
// A handler for it, installed with the first mapping, tells an address in a
// watched mapping from any other fault: for a watched one it removes the
// temporary files of the atomic write in progress (support/file_io.h:
// the target itself is only ever renamed into place, so it keeps its old
// contents), prints "TOOL: PATH: the file changed while it was being read
// (truncated by another process?)" and exits with code 1. Any other SIGBUS
// keeps its default action. The handler only reads fixed-size tables and
// makes async-signal-safe calls (write, unlink, _exit).
#pragma once

#include <cstddef>
#include <string>

namespace mpc {

/// Watches [data, data + size), the mapping of `path`. Returns a slot to
/// pass to unwatchMappedFile, or -1 when every slot is taken (the mapping
/// then faults as before).
int watchMappedFile(const void *data, size_t size, const std::string &path);
void unwatchMappedFile(int slot);

/// Temporary files of an atomic write in progress: the file it is
/// filling, and the one it filled first when it writes a pair (a model's
/// data file, file_io.h's writeFilePairAtomically). Each slot (below
/// kPendingTempFiles) holds one path (empty: none); all are removed if a
/// watched mapping faults before the write renames them into place.
constexpr int kPendingTempFiles = 2;
void setPendingTempFile(const std::string &path, int slot = 0);

} // namespace mpc
