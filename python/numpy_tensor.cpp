// numpy arrays to and from Tensors (python/numpy_tensor.h).
#include "python/numpy_tensor.h"

#include "python/dlpack_tensor.h"
#include "support/diagnostics.h"

#include <cstring>

namespace py = pybind11;

namespace mpc {
namespace {

// numpy is reached through its Python API (attributes, the buffer
// protocol) only, never pybind11's views of numpy's C structs, whose layout
// numpy 2 changed: one module serves numpy 1.24 and 2.x alike.

/// mpc's dtype for numpy's kind and item size; Undefined: none.
DType dtypeOf(char kind, size_t size) {
  switch (kind) {
  case 'f':
    return size == 4   ? DType::F32
           : size == 2 ? DType::F16
           : size == 8 ? DType::F64
                       : DType::Undefined;
  case 'i':
    return size == 8   ? DType::I64
           : size == 4 ? DType::I32
           : size == 1 ? DType::I8
                       : DType::Undefined;
  case 'u':
    return size == 1 ? DType::U8 : DType::Undefined;
  case 'b':
    return size == 1 ? DType::Bool : DType::Undefined;
  default:
    return DType::Undefined;
  }
}

py::module_ numpy() { return py::module_::import("numpy"); }

} // namespace

Tensor tensorFromArray(const py::handle &object, const std::string &what) {
  py::object ndarray = numpy().attr("ndarray");
  if (!py::isinstance(object, ndarray) && hasDlpack(object))
    return tensorFromDlpack(object, what); // torch tensors, bf16 included
  // C order, the dtype kept (no cast): the array itself where it is one.
  py::object array;
  try {
    array = numpy().attr("ascontiguousarray")(object);
  } catch (const py::error_already_set &e) {
    throw Error(what + ": not an array (" + std::string(e.what()) + ")");
  }
  py::object dt = array.attr("dtype");
  std::string kind = py::str(dt.attr("kind"));
  size_t itemSize = dt.attr("itemsize").cast<size_t>();
  DType dtype =
      kind.size() == 1 ? dtypeOf(kind[0], itemSize) : DType::Undefined;
  if (std::string(py::str(dt.attr("byteorder"))) == ">")
    dtype = DType::Undefined; // big-endian: not the bytes a tensor holds
  if (dtype == DType::Undefined)
    throw Error(what + ": dtype " + std::string(py::str(dt)) +
                " has no mpc type (float16/32/64, int8/32/64, uint8, bool)");
  Tensor t;
  t.dtype = dtype;
  for (const py::handle &d : array.attr("shape"))
    t.dims.push_back(d.cast<int64_t>());
  const uint8_t *data = nullptr;
  size_t size = 0;
  {
    py::buffer_info info = py::reinterpret_borrow<py::buffer>(array).request();
    data = static_cast<const uint8_t *>(info.ptr);
    size = size_t(info.size) * size_t(info.itemsize);
  }
  if (size != size_t(t.numel()) * itemSize)
    throw Error(what + ": " + std::to_string(size) +
                " bytes where its shape needs " +
                std::to_string(size_t(t.numel()) * itemSize));
  // The array's bytes where they lie (read-only, ir/byte_buffer.h), the
  // array kept alive until the tensor lets go; dropping that reference
  // takes the GIL, which a step runs without.
  auto *kept = new py::object(std::move(array));
  t.bytes = ByteBuffer::inPlace(
      data, size, std::shared_ptr<const void>(kept, [](py::object *o) {
        py::gil_scoped_acquire gil;
        delete o;
      }));
  return t;
}

py::object arrayFromTensor(const Tensor &t) {
  if (t.dtype == DType::BF16)
    return arrayFromTensor(t.castTo(DType::F32));
  const char *format = nullptr;
  switch (t.dtype) {
  case DType::F32:
    format = "float32";
    break;
  case DType::F16:
    format = "float16";
    break;
  case DType::F64:
    format = "float64";
    break;
  case DType::I64:
    format = "int64";
    break;
  case DType::I32:
    format = "int32";
    break;
  case DType::I8:
    format = "int8";
    break;
  case DType::U8:
    format = "uint8";
    break;
  case DType::Bool:
    format = "bool";
    break;
  default:
    throw Error(std::string("a tensor of dtype ") + dtypeName(t.dtype) +
                " has no numpy type");
  }
  py::tuple shape(t.dims.size());
  for (size_t i = 0; i < t.dims.size(); ++i)
    shape[i] = py::int_(t.dims[i]);
  py::object out = numpy().attr("empty")(shape, format);
  py::buffer_info info =
      py::reinterpret_borrow<py::buffer>(out).request(/*writable=*/true);
  if (t.byteSize())
    std::memcpy(info.ptr, t.bytes.unalignedData(), t.byteSize());
  return out;
}

} // namespace mpc
