// Host tensor helpers: element access in any dtype, casts, small constructors.
#include "ir/tensor.h"
#include "ir/zero_pages.h"

#include "ir/half.h"
#include "ir/round_to_odd.h"
#include "support/diagnostics.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace mpc {

int64_t elementCount(const std::vector<int64_t> &dims) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0)
      return -1;
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d)
      return -1;
    n *= d;
  }
  return n;
}

std::string dimsToString(const std::vector<int64_t> &dims) {
  if (dims.empty())
    return "scalar";
  std::string s;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i)
      s += "x";
    s += std::to_string(dims[i]);
  }
  return s;
}

namespace {

/// Bytes of a dense tensor; throws on a negative dim or a size past 64 bits
/// (allocating 0 bytes for it would let element loops run off the end).
size_t checkedByteSize(DType t, const std::vector<int64_t> &dims) {
  int64_t n = elementCount(dims);
  size_t element = dtypeSize(t);
  if (n < 0 ||
      (element && uint64_t(n) > std::numeric_limits<size_t>::max() / element))
    throw Error("a tensor of dims " + dimsToString(dims) + " and dtype " +
                dtypeName(t) + " has no valid size (a negative dim, or " +
                "more bytes than 64 bits count)");
  return size_t(n) * element;
}

} // namespace

Tensor::Tensor(DType t, std::vector<int64_t> d) : dtype(t), dims(std::move(d)) {
  bytes.assign(checkedByteSize(dtype, dims), 0);
}

Tensor Tensor::zeros(DType t, std::vector<int64_t> dims) {
  Tensor z;
  z.dtype = t;
  z.dims = std::move(dims);
  z.bytes = zeroBytes(checkedByteSize(t, z.dims));
  return z;
}

void Tensor::allocate(DType t, const std::vector<int64_t> &d, bool zero) {
  dtype = t;
  dims = d; // copy-assignment keeps the capacity (and allows d == dims)
  size_t size = checkedByteSize(dtype, dims);
  if (!zero && bytes.isView() && bytes.size() == size)
    return;
  bytes.assign(size, 0);
}

namespace {
/// Element i of type T read where the bytes lie, at any alignment: a read
/// does not copy bytes held in place (a caller's array, a mapped file) into
/// a buffer of their own, as data() would.
template <typename T> T elementAt(const ByteBuffer &b, int64_t i) {
  T v;
  std::memcpy(&v, b.unalignedData() + size_t(i) * sizeof(T), sizeof(T));
  return v;
}
} // namespace

namespace {
/// The first of n elements of type U at p whose bits include all of
/// `exponent` (a float of every exponent bit set: NaN or infinity), or -1.
template <typename U>
int64_t firstWithExponentBits(const uint8_t *p, int64_t n, U exponent) {
  for (int64_t i = 0; i < n; ++i) {
    U u;
    std::memcpy(&u, p + size_t(i) * sizeof(U), sizeof(U));
    if ((u & exponent) == exponent)
      return i;
  }
  return -1;
}
} // namespace

int64_t Tensor::firstNonFinite() const {
  const uint8_t *p = bytes.unalignedData();
  // The elements the bytes hold (a tensor whose bytes are not there yet
  // holds none).
  auto count = [&](size_t width) {
    return std::min(numel(), int64_t(bytes.size() / width));
  };
  switch (dtype) {
  case DType::F32:
    return firstWithExponentBits<uint32_t>(p, count(4), 0x7f800000u);
  case DType::F16:
    return firstWithExponentBits<uint16_t>(p, count(2), 0x7c00u);
  case DType::BF16:
    return firstWithExponentBits<uint16_t>(p, count(2), 0x7f80u);
  case DType::F64:
    return firstWithExponentBits<uint64_t>(p, count(8), 0x7ff0000000000000ull);
  default:
    return -1;
  }
}

std::string Tensor::nonFiniteNote() const {
  const int64_t i = firstNonFinite();
  if (i < 0)
    return "";
  const double v = getAsDouble(i);
  return std::string("a non-finite value (") +
         (std::isnan(v) ? "nan"
          : v > 0       ? "inf"
                        : "-inf") +
         ") at element " + std::to_string(i);
}

double Tensor::getAsDouble(int64_t i) const {
  switch (dtype) {
  case DType::F32:
    return elementAt<float>(bytes, i);
  case DType::F16:
    return halfToFloat(elementAt<uint16_t>(bytes, i));
  case DType::BF16:
    return bf16ToFloat(elementAt<uint16_t>(bytes, i));
  case DType::F64:
    return elementAt<double>(bytes, i);
  case DType::I64:
    return double(elementAt<int64_t>(bytes, i));
  case DType::I32:
    return elementAt<int32_t>(bytes, i);
  case DType::I8:
    return elementAt<int8_t>(bytes, i);
  case DType::U8:
  case DType::Bool:
    return elementAt<uint8_t>(bytes, i);
  case DType::Undefined:
    break;
  }
  return 0;
}

void Tensor::setFromDouble(int64_t i, double v) {
  switch (dtype) {
  case DType::F32:
    data<float>()[i] = float(v);
    break;
  // One rounding from the double (through fp32 rounded to odd: rounding
  // to fp32 to nearest first would round twice near a half-way point).
  case DType::F16:
    data<uint16_t>()[i] = floatToHalf(roundToOddFloat(v));
    break;
  case DType::BF16:
    data<uint16_t>()[i] = floatToBf16(roundToOddFloat(v));
    break;
  case DType::F64:
    data<double>()[i] = v;
    break;
  case DType::I64:
    data<int64_t>()[i] = int64_t(v);
    break;
  case DType::I32:
    data<int32_t>()[i] = int32_t(v);
    break;
  case DType::I8:
    data<int8_t>()[i] = int8_t(v);
    break;
  case DType::U8:
    data<uint8_t>()[i] = uint8_t(v);
    break;
  case DType::Bool:
    data<uint8_t>()[i] = v != 0;
    break;
  case DType::Undefined:
    break;
  }
}

Tensor Tensor::castTo(DType t) const {
  Tensor out(t, dims);
  int64_t n = numel();
  if (t == dtype) {
    out.bytes = bytes;
    return out;
  }
  // Integer to integer casts must not pass through double for large int64.
  bool srcInt = !isFloating(dtype), dstInt = !isFloating(t);
  for (int64_t i = 0; i < n; ++i) {
    if (srcInt && dstInt && dtype == DType::I64) {
      int64_t v = data<int64_t>()[i];
      if (t == DType::Bool)
        out.data<uint8_t>()[i] = v != 0;
      else if (t == DType::I32)
        out.data<int32_t>()[i] = int32_t(v);
      else
        out.setFromDouble(i, double(v));
      continue;
    }
    // fp32 -> fp16/bf16 must round once, from the fp32 value.
    if (dtype == DType::F32 && t == DType::F16) {
      out.data<uint16_t>()[i] = floatToHalf(data<float>()[i]);
      continue;
    }
    if (dtype == DType::F32 && t == DType::BF16) {
      out.data<uint16_t>()[i] = floatToBf16(data<float>()[i]);
      continue;
    }
    out.setFromDouble(i, getAsDouble(i));
  }
  return out;
}

Tensor Tensor::scalar(DType t, double v) {
  Tensor out(t, {});
  out.setFromDouble(0, v);
  return out;
}

namespace {

/// Copies at most the tensor's size (a shorter list leaves zeros); memcpy
/// must not see the null data() of an empty vector.
void copyValues(Tensor &out, const void *src, size_t bytes) {
  size_t n = std::min(bytes, out.bytes.size());
  if (n)
    std::memcpy(out.bytes.data(), src, n);
}

} // namespace

Tensor Tensor::fromFloats(const std::vector<int64_t> &dims,
                          const std::vector<float> &v) {
  Tensor out(DType::F32, dims);
  copyValues(out, v.data(), v.size() * sizeof(float));
  return out;
}

Tensor Tensor::fromInt64s(const std::vector<int64_t> &dims,
                          const std::vector<int64_t> &v) {
  Tensor out(DType::I64, dims);
  copyValues(out, v.data(), v.size() * sizeof(int64_t));
  return out;
}

std::vector<int64_t> Tensor::toInt64s() const {
  int64_t n = numel();
  std::vector<int64_t> v(size_t(n > 0 ? n : 0));
  for (int64_t i = 0; i < n; ++i)
    v[i] = dtype == DType::I64 ? data<int64_t>()[i] : int64_t(getAsDouble(i));
  return v;
}

std::vector<float> Tensor::toFloats() const {
  int64_t n = numel();
  std::vector<float> v(size_t(n > 0 ? n : 0));
  for (int64_t i = 0; i < n; ++i)
    v[i] = float(getAsDouble(i));
  return v;
}

} // namespace mpc
