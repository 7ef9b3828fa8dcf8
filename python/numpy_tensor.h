// numpy arrays in and out of the module: a Python array (numpy, or anything
// numpy.ascontiguousarray takes, a CPU torch tensor included) copied into a
// Tensor with its dtype (never cast), and a Tensor copied out as a numpy
// array.
#pragma once

#include "ir/tensor.h"

#include <pybind11/pybind11.h>

#include <string>

namespace mpc {

/// The array's bytes in a Tensor of the matching dtype (C order). Throws
/// Error naming `what` for a dtype mpc has no type for (complex, strings,
/// objects, unsigned wider than 8 bits).
Tensor tensorFromArray(const pybind11::handle &object, const std::string &what);

/// A new numpy array holding a copy of `t` (bf16 as float32: numpy has no
/// bfloat16).
pybind11::object arrayFromTensor(const Tensor &t);

} // namespace mpc
