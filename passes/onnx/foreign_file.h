// foreignFileKind: what a file handed over as an ONNX model is when it is
// plainly something else a PyTorch user has at hand -- the .npz data, a
// torch.save checkpoint (.pt/.pth: a zip, or a pickle), a .npy array, a
// safetensors file -- told by its first bytes, so the error says which and
// what to give instead of a protobuf or text parse error.
#pragma once

#include <string>
#include <string_view>

namespace mpc {

/// The one-line error for `bytes` (the file's contents, from its start) if
/// they begin as one of those formats, naming `path`; empty otherwise. No
/// ONNX model begins so: its first byte is a field tag of ModelProto.
std::string foreignFileKind(std::string_view bytes, const std::string &path);

} // namespace mpc
