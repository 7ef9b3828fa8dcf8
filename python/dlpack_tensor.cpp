// DLPack tensors into the module (python/dlpack_tensor.h).
#include "python/dlpack_tensor.h"

#include "support/diagnostics.h"

#include <dlpack/dlpack.h>

#include <cstring>
#include <memory>

namespace py = pybind11;

namespace mpc {
namespace {

// DLPack 0.8 added a bool type code (torch exports bool tensors with it);
// Debian's header is 0.6.
constexpr uint8_t kDLBoolCode = 6;

/// mpc's dtype for a DLPack dtype; Undefined: none.
DType dtypeOf(const DLDataType &t) {
  if (t.lanes != 1)
    return DType::Undefined;
  switch (t.code) {
  case kDLFloat:
    return t.bits == 32   ? DType::F32
           : t.bits == 16 ? DType::F16
           : t.bits == 64 ? DType::F64
                          : DType::Undefined;
  case kDLBfloat:
    return t.bits == 16 ? DType::BF16 : DType::Undefined;
  case kDLInt:
    return t.bits == 64   ? DType::I64
           : t.bits == 32 ? DType::I32
           : t.bits == 8  ? DType::I8
                          : DType::Undefined;
  case kDLUInt:
    return t.bits == 8 ? DType::U8 : DType::Undefined;
  case kDLBoolCode:
    return t.bits == 8 ? DType::Bool : DType::Undefined;
  default:
    return DType::Undefined;
  }
}

std::string deviceName(int type) {
  switch (type) {
  case kDLCUDA:
  case kDLCUDAManaged:
    return "cuda";
  case kDLROCM:
    return "rocm";
  case kDLMetal:
    return "mps";
  default:
    return "device type " + std::to_string(type);
  }
}

/// The DLManagedTensor a "dltensor" capsule carries, owned from here on:
/// the capsule is renamed "used_dltensor" (the protocol's hand-over) and
/// the producer's deleter runs when the last holder lets go, under the GIL
/// (a Python producer's deleter drops Python references).
std::shared_ptr<DLManagedTensor> takeCapsule(const py::object &capsule,
                                             const std::string &what) {
  PyObject *c = capsule.ptr();
  if (!PyCapsule_IsValid(c, "dltensor"))
    throw Error(what + ": __dlpack__ returned no unused \"dltensor\" capsule");
  auto *managed =
      static_cast<DLManagedTensor *>(PyCapsule_GetPointer(c, "dltensor"));
  if (!managed || PyCapsule_SetName(c, "used_dltensor") != 0) {
    PyErr_Clear();
    throw Error(what + ": __dlpack__ returned an unreadable capsule");
  }
  return std::shared_ptr<DLManagedTensor>(managed, [](DLManagedTensor *m) {
    if (m->deleter) {
      py::gil_scoped_acquire gil;
      m->deleter(m);
    }
  });
}

/// Copies the strided elements of `t` into `out`'s C-ordered bytes.
void gather(const DLTensor &t, const uint8_t *base, size_t itemSize,
            uint8_t *out) {
  const int nd = t.ndim;
  std::vector<int64_t> index(size_t(nd), 0);
  int64_t n = 1;
  for (int d = 0; d < nd; ++d)
    n *= t.shape[d];
  for (int64_t i = 0; i < n; ++i) {
    int64_t offset = 0;
    for (int d = 0; d < nd; ++d)
      offset += index[size_t(d)] * t.strides[d];
    std::memcpy(out + size_t(i) * itemSize, base + offset * int64_t(itemSize),
                itemSize);
    for (int d = nd - 1; d >= 0; --d) { // the next index in C order
      if (++index[size_t(d)] < t.shape[d])
        break;
      index[size_t(d)] = 0;
    }
  }
}

} // namespace

bool hasDlpack(const py::handle &object) {
  return py::hasattr(object, "__dlpack__") &&
         py::hasattr(object, "__dlpack_device__");
}

Tensor tensorFromDlpack(const py::handle &object, const std::string &what) {
  std::shared_ptr<DLManagedTensor> managed;
  try {
    py::tuple device = object.attr("__dlpack_device__")();
    int type = device[0].cast<int>();
    if (type != kDLCPU && type != kDLCUDAHost)
      throw Error(what + ": a tensor on " + deviceName(type) + ":" +
                  std::string(py::str(device[1])) +
                  "; a cpu Trainer reads host memory (pass tensor.cpu())");
    managed = takeCapsule(object.attr("__dlpack__")(), what);
  } catch (const py::error_already_set &e) {
    // The exception's own line, not the traceback e.what() appends.
    throw Error(what + ": no DLPack export (" +
                std::string(py::str(e.type().attr("__name__"))) + ": " +
                std::string(py::str(e.value())) + ")");
  }
  const DLTensor &t = managed->dl_tensor;
  DType dtype = dtypeOf(t.dtype);
  if (dtype == DType::Undefined)
    throw Error(what + ": DLPack dtype (code " + std::to_string(t.dtype.code) +
                ", " + std::to_string(t.dtype.bits) + " bits, " +
                std::to_string(t.dtype.lanes) +
                " lanes) has no mpc type (float16/32/64, bfloat16, "
                "int8/32/64, uint8, bool)");
  Tensor out;
  out.dtype = dtype;
  out.dims.assign(t.shape, t.shape + t.ndim);
  for (int64_t d : out.dims)
    if (d < 0)
      throw Error(what + ": DLPack shape has a negative extent");
  const size_t itemSize = size_t(t.dtype.bits / 8);
  const size_t bytes = size_t(out.numel()) * itemSize;
  const auto *base = static_cast<const uint8_t *>(t.data) + t.byte_offset;
  // C order (no strides, or the compact ones; an extent of 1 may carry any
  // stride): the bytes are used where they lie.
  bool compact = true;
  if (t.strides) {
    int64_t expect = 1;
    for (int d = t.ndim - 1; d >= 0; --d) {
      if (t.shape[d] != 1 && t.strides[d] != expect)
        compact = false;
      expect *= t.shape[d];
    }
  }
  if (bytes == 0 || compact) {
    out.bytes = ByteBuffer::inPlace(base, bytes, managed);
    return out;
  }
  out.bytes.resize(bytes);
  gather(t, base, itemSize, out.bytes.data());
  return out;
}

} // namespace mpc
