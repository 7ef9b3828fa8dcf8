// Temporary files that writers killed mid-write left behind.
//
// An atomic write (file_io.h) fills PATH.tmp.PID and renames it over PATH.
// A writer killed before the rename (SIGKILL, OOM killer, power cut) leaves
// its temp file, as large as what it had written (tens of megabytes for a
// checkpoint), and a training run that checkpoints every few minutes and is
// preempted leaves one per preemption. The next write of PATH removes the
// ones whose writer is gone: only names that are exactly PATH's name, ".tmp."
// and a process id, only regular files, and only when that process no
// longer exists (kill(pid, 0) fails with ESRCH); a live writer's file, this
// process's own and anything else in the folder are left alone.
#pragma once

#include <string>

namespace mpc {

/// Removes PATH.tmp.<pid> files of processes that no longer exist (see
/// above); returns how many. Failures are ignored: the write that follows
/// does not depend on them.
int removeStaleTempFiles(const std::string &path);

} // namespace mpc
