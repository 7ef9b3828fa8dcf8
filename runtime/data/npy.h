// NumPy .npy reading and writing (format 1.0/2.0/3.0, little-endian, C order).
//
// Supported dtypes: <f4 <f2 <f8 <i8 <i4 |i1 |u1 |b1 ('=' is accepted as '<'
// for multi-byte types, and '<'/'=' as '|' for one-byte types). Big-endian
// data ('>'), fortran_order: True, structured and other dtypes are rejected
// with a one-line error. numpy has no bfloat16, so writeNpy stores BF16
// tensors as float32 ('<f4'); reading such a file gives an F32 tensor.
//
// All functions return false with `error` set (one line, starting with the
// file or array name) on failure; they never throw and never read out of
// bounds on malformed input. Tensors larger than kMaxNpyBytes are rejected.
#pragma once

#include "ir/tensor.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace mpc {

/// Largest tensor payload readNpy/parseNpy/readNpz accept (16 GiB).
constexpr uint64_t kMaxNpyBytes = uint64_t(16) << 30;

/// Reads a .npy file into `out`.
bool readNpy(const std::string &path, Tensor &out, std::string &error);

/// Parses an in-memory .npy image. Errors start with `nameForErrors + ": "`.
bool parseNpy(const uint8_t *data, size_t size,
              const std::string &nameForErrors, Tensor &out,
              std::string &error);

/// What a .npy header says: the array's dtype and shape, and where its data
/// starts.
struct NpyLayout {
  DType dtype = DType::Undefined;
  std::vector<int64_t> dims;
  size_t dataOffset = 0; ///< bytes before the array data
};

/// Validates the header of a .npy image of `size` bytes (a mapped file) and
/// that the data after it is exactly the array's size, reading no array
/// data. Errors start with `nameForErrors + ": "`.
bool parseNpyLayout(const uint8_t *data, size_t size,
                    const std::string &nameForErrors, NpyLayout &out,
                    std::string &error);

/// Same as above, but takes ownership of the image and reuses its storage for
/// the tensor data (no second copy of a large array).
bool parseNpy(std::vector<uint8_t> &&image, const std::string &nameForErrors,
              Tensor &out, std::string &error);

/// Serializes `t` as a .npy image (format 1.0, or 2.0 if the header needs it).
/// BF16 is written as '<f4'. Fails only for an Undefined dtype or bad dims.
bool serializeNpy(const Tensor &t, std::vector<uint8_t> &out,
                  std::string &error);

/// Writes `t` to `path` via `path + ".tmp"` and a rename, so a failed or
/// interrupted write never leaves a partial file at `path`.
bool writeNpy(const std::string &path, const Tensor &t, std::string &error);

} // namespace mpc
