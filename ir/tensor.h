// Host tensors: dense, row-major data with a dtype and concrete dims.
//
// Tensor is what initializers, constants, checkpoints, data files and the CPU
// backend's buffers hold. Storage is raw bytes, owned or a view into the
// executor's arena (ir/byte_buffer.h); fp16/bf16 are stored as their
// 16-bit patterns (see ir/half.h for conversions).
#pragma once

#include "ir/byte_buffer.h"
#include "ir/types.h"

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace mpc {

/// Number of elements of a shape; -1 if a dim is negative or the count
/// overflows int64 (callers treat that as bad input).
int64_t elementCount(const std::vector<int64_t> &dims);

/// "2x3x4" ("scalar" for rank 0).
std::string dimsToString(const std::vector<int64_t> &dims);

struct Tensor {
  DType dtype = DType::Undefined;
  std::vector<int64_t> dims;
  ByteBuffer bytes;

  Tensor() = default;
  Tensor(DType t, std::vector<int64_t> d);

  /// Gives the tensor this type and shape with zeroed bytes. A view of
  /// exactly the right size keeps its place (filled in place); otherwise the
  /// bytes become owned. With zero=false a fitting view keeps its contents
  /// (an output computed in place over its input). `d` is copied into the
  /// tensor's own dims, reusing their capacity: an executor that runs the
  /// same node every step allocates no dims after the first.
  void allocate(DType t, const std::vector<int64_t> &d, bool zero = true);

  int64_t numel() const { return elementCount(dims); }
  size_t byteSize() const { return bytes.size(); }

  template <typename T> T *data() {
    return reinterpret_cast<T *>(bytes.data());
  }
  template <typename T> const T *data() const {
    return reinterpret_cast<const T *>(bytes.data());
  }

  /// Element i converted to double (any dtype).
  double getAsDouble(int64_t i) const;
  /// The index of the first NaN or infinity (a floating dtype), else -1.
  int64_t firstNonFinite() const;
  /// "a non-finite value (nan) at element 3" for the first NaN or
  /// infinity, or "" when every element is finite: the words of the lines
  /// that refuse such a tensor.
  std::string nonFiniteNote() const;
  /// Stores v into element i, converting (and rounding) to the dtype.
  void setFromDouble(int64_t i, double v);

  /// Returns a copy converted to another dtype (round-to-nearest-even for
  /// fp16/bf16).
  Tensor castTo(DType t) const;

  /// Zeros of this type and shape whose large buffers cost no memory until
  /// written (ir/zero_pages.h): optimizer state a compiler writes out.
  static Tensor zeros(DType t, std::vector<int64_t> dims);
  static Tensor scalar(DType t, double v);
  static Tensor fromFloats(const std::vector<int64_t> &dims,
                           const std::vector<float> &v);
  static Tensor fromInt64s(const std::vector<int64_t> &dims,
                           const std::vector<int64_t> &v);

  /// Values as int64 (for shape/axes tensors); any integer or float dtype.
  std::vector<int64_t> toInt64s() const;
  /// Values as float (any dtype).
  std::vector<float> toFloats() const;
};

using TensorPtr = std::shared_ptr<Tensor>;

} // namespace mpc
