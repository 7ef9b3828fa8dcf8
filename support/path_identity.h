// Which file a path names, by identity, so that no output of a tool replaces
// one of its inputs or another of its outputs.
//
// Names are not enough: `m.onnx`, `./m.onnx`, a hard link and a symbolic link
// to it are one file. An existing file is known by its device and inode; a
// file not made yet by its folder's real path (symbolic links resolved) and
// its name, which is what the write will create. mpc-opt and mpc-run list
// their inputs (the model, its external data, the data sets, the resumed
// checkpoint) and outputs (-o, --save, --log, ... and the data files beside
// them) and call the checks below before reading or writing anything.
#pragma once

#include <string>
#include <vector>

namespace mpc {

/// A file a tool reads or writes: `role` says which in messages (a flag,
/// "-o", or words such as "the model"), `path` is the path as given.
struct FileRole {
  std::string role;
  std::string path;
};

/// "ROLE=PATH" for a flag ("--log=a.csv"), "-o PATH", "PATH" for no role,
/// else "ROLE PATH" ("the model m.onnx", "--save's data file c.onnx.data").
std::string describeFileRole(const FileRole &f);

/// Whether `a` and `b` name one file: the same device and inode when both
/// exist, the same real folder and name when neither does. An existing
/// file that is not a regular file or a folder (/dev/null, a FIFO, a
/// terminal: written in place, nothing in it to lose) is never the same as
/// anything.
bool sameFileByIdentity(const std::string &a, const std::string &b);

/// Throws Error ("OUTPUT: is the same file as INPUT, ...") when an output
/// is the same file as an input. Empty paths and "-" (standard output) are
/// skipped.
void refuseOutputsOverInputs(const std::vector<FileRole> &inputs,
                             const std::vector<FileRole> &outputs);

/// Throws Error when two of `outputs` are the same file (the second write
/// would replace the first); entries with equal role and path are one
/// output named twice, not two.
void refuseSharedOutputs(const std::vector<FileRole> &outputs);

} // namespace mpc
