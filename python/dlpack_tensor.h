// DLPack tensors into the module: an object with __dlpack__ (a torch tensor,
// a JAX or CuPy array, a numpy array) read as a Tensor through the DLPack
// protocol (Debian's libdlpack-dev), its bytes used where they lie when the
// layout is C order, gathered into a Tensor of its own otherwise. bf16 comes
// through, which numpy's own import refuses.
#pragma once

#include "ir/tensor.h"

#include <pybind11/pybind11.h>

#include <string>

namespace mpc {

/// True when `object` offers the DLPack protocol (__dlpack__ and
/// __dlpack_device__).
bool hasDlpack(const pybind11::handle &object);

/// The tensor `object` exports through DLPack, in host memory. C-ordered
/// bytes are not copied: the Tensor holds them in place (read-only, see
/// ir/byte_buffer.h) with the exporter's tensor kept alive until the Tensor
/// lets go (which takes the GIL). Throws Error naming `what` for a tensor on
/// a device (cuda, ...), a dtype mpc has no type for, or an export the
/// producer refuses (a torch tensor that requires grad).
Tensor tensorFromDlpack(const pybind11::handle &object,
                        const std::string &what);

} // namespace mpc
