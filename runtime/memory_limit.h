// The memory a training run may plan for: --memory-limit, or what the device
// has free (the CPU's available physical memory, a GPU's free device memory).
//
// mpc-run checks the step's planned peak (the memory plan's arena) against it
// before the first step, so a model that cannot fit is refused with the
// plan's numbers instead of dying of an allocation failure (or the OOM
// killer) hours into a run.
#pragma once

#include "runtime/backend.h"
#include "runtime/executor.h"
#include "support/int_parse.h" // parseByteSize, for --memory-limit

#include <string>

namespace mpc {

/// The memory the process can still get on the CPU (availableMemory():
/// MemAvailable, bounded by the memory cgroup and ulimit -v); 0 when
/// nothing is known.
size_t cpuAvailableBytes();

/// The limit for a run on `backend`: `explicitBytes` when the user gave one
/// (source "<device>, --memory-limit"), else the device's free memory; a
/// limit of 0 bytes means unknown or switched off (no check).
MemoryLimit memoryLimitFor(const Backend &backend, bool given,
                           size_t explicitBytes);

} // namespace mpc
