// NumPy .npz reading and writing: zip archives of .npy files.
//
// readNpz understands what np.savez (stored, method 0) and np.savez_compressed
// (deflate, method 8) write, including the zip64 extra fields and end records
// numpy/Python's zipfile emit for large arrays. It parses the central
// directory itself, inflates with zlib and verifies every entry's CRC-32.
// Encrypted, multi-disk and other-method archives are rejected. Each entry
// must be a .npy file (see runtime/data/npy.h for the supported dtypes).
//
// Errors are one line naming the file and, for per-array problems, the array:
//   "data.npz: array 'x': unsupported dtype '>f4' (big-endian)"
// Nothing throws; malformed input never causes an out-of-bounds read.
#pragma once

#include "passes/ir/tensor.h"

#include <string>
#include <utility>
#include <vector>

namespace mpc {

/// Reads every array of an .npz; names lose their ".npy" suffix and come in
/// archive (central directory) order. Duplicate names are an error.
bool readNpz(const std::string &path,
             std::vector<std::pair<std::string, Tensor>> &arrays,
             std::string &error);

/// Writes an uncompressed (stored) .npz that np.load reads, via
/// `path + ".tmp"` and a rename. Uses zip64 records only where sizes or
/// offsets need them. BF16 arrays are stored as float32 (see npy.h).
bool writeNpz(const std::string &path,
              const std::vector<std::pair<std::string, Tensor>> &arrays,
              std::string &error);

} // namespace mpc
