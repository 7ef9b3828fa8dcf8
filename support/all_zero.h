// allZero: whether a run of bytes is all zero, as fast as the CPU allows.
//
// The model file writer asks this of every block of tensor data, to leave
// holes in the file where optimizer moments (zero at the start) would be:
// a 64-layer Adam step has ~28 MB of them, and the scan was a tenth of the
// writer's instructions (libc's memcmp of the bytes against themselves
// shifted by one: 3.07M instructions). With AVX2, 1024 bytes are or-ed
// into four carried accumulators per test: 1.72M, with the edges of each
// zero run scanned too (1.90M with 512 bytes or-ed afresh per test).
// zeroSteps measures a whole zero run in one call (FileSink::putData asked
// allZero once per 4 KiB block of it).
#pragma once

#include <cstddef>
#include <cstdint>

namespace mpc {

/// True when all `size` bytes at `p` are zero (also when `size` is 0).
bool allZero(const uint8_t *p, size_t size);

/// The step of zeroSteps.
constexpr size_t kZeroStep = 1024;

/// Bytes in the whole kZeroStep-byte steps at `p` (within `size`) that are
/// all zero, up to the first that is not: a multiple of kZeroStep. A long
/// zero run is measured in one call, not a call per block.
size_t zeroSteps(const uint8_t *p, size_t size);

} // namespace mpc
