// Arrays in and out of the module: a Python array (numpy, a DLPack tensor
// such as a CPU torch tensor, or anything numpy.ascontiguousarray takes) as a
// Tensor with its dtype (never cast), its bytes used where they lie when they
// are in C order; and a Tensor copied out as a numpy array.
#pragma once

#include "ir/tensor.h"

#include <pybind11/pybind11.h>

#include <string>

namespace mpc {

/// The array as a Tensor of the matching dtype (C order), holding its bytes
/// in place (read-only; the array kept alive) where its layout allows, a
/// copy otherwise. DLPack objects go through python/dlpack_tensor.h. Throws
/// Error naming `what` for a dtype mpc has no type for (complex, strings,
/// objects, unsigned wider than 8 bits).
Tensor tensorFromArray(const pybind11::handle &object, const std::string &what);

/// A new numpy array holding a copy of `t` (bf16 as float32: numpy has no
/// bfloat16).
pybind11::object arrayFromTensor(const Tensor &t);

} // namespace mpc
