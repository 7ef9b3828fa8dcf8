// NumPy .npz reading and writing: zip archives of .npy files.
//
// readNpz understands what np.savez (stored, method 0) and np.savez_compressed
// (deflate, method 8) write, including the zip64 extra fields and end records
// numpy/Python's zipfile emit for large arrays. It parses the central
// directory itself, inflates with zlib and verifies every entry's CRC-32.
// Encrypted, multi-disk and other-method archives are rejected. Each entry
// must be a .npy file (see runtime/data/npy.h for the supported dtypes).
// Only the arrays asked for are inflated, and only once their declared
// sizes together fit the memory (a zip bomb is refused from its central
// directory, before a byte of it is inflated).
//
// Errors are one line naming the file and, for per-array problems, the array:
//   "data.npz: array 'x': unsupported dtype '>f4' (big-endian)"
// Nothing throws; malformed input never causes an out-of-bounds read.
#pragma once

#include "ir/tensor.h"
#include "support/file_io.h"

#include <string>
#include <utility>
#include <vector>

namespace mpc {

/// Which arrays of an .npz readNpz reads, and the memory they may take.
struct NpzSelection {
  /// Only these arrays (names without ".npy") are read; the others are
  /// never inflated (an unused 15 GiB member costs nothing). Empty: all.
  std::vector<std::string> only;
  /// The most bytes the arrays read may take together: their declared
  /// (inflated) sizes are summed from the central directory and checked
  /// before any is read. 0: the memory the process can still get
  /// (support/available_memory.h). `limitSource` says what the
  /// limit is in the error ("the memory limit 1.0 GiB (cpu, --memory-limit)
  /// less the planned peak 200.0 MiB").
  uint64_t limitBytes = 0;
  std::string limitSource;
};

/// Reads every array of an .npz; names lose their ".npy" suffix and come in
/// archive (central directory) order. Duplicate names are an error.
bool readNpz(const std::string &path,
             std::vector<std::pair<std::string, Tensor>> &arrays,
             std::string &error);

/// The same for the arrays `selection` names (in archive order; a name the
/// file lacks is not an error here), within its memory limit. `names`
/// (if non-null) receives the names of every array in the file.
bool readNpz(const std::string &path, const NpzSelection &selection,
             std::vector<std::pair<std::string, Tensor>> &arrays,
             std::vector<std::string> *names, std::string &error);

/// Writes an uncompressed (stored) .npz that np.load reads, atomically
/// (support/file_io.h: a failure leaves `path` as it was). Uses zip64
/// records only where sizes or offsets need them. BF16 arrays are stored as
/// float32 (see npy.h).
bool writeNpz(const std::string &path,
              const std::vector<std::pair<std::string, Tensor>> &arrays,
              std::string &error, Fsync fsync = Fsync::Yes);

} // namespace mpc
