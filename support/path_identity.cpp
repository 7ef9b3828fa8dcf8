// File identity by device and inode, or by real folder and name (see
// path_identity.h).
#include "support/path_identity.h"

#include "support/diagnostics.h"

#include <climits>
#include <cstdlib>
#include <sys/stat.h>

namespace mpc {
namespace {

struct Identity {
  enum Kind { Existing, Missing, Unknown } kind = Unknown;
  dev_t dev = 0;
  ino_t ino = 0;
  /// Missing: the real path of the folder, '/', the name.
  std::string where;
};

Identity identify(const std::string &path) {
  Identity id;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    // A device or pipe is written in place and holds nothing to lose.
    if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
      return id;
    id.kind = Identity::Existing;
    id.dev = st.st_dev;
    id.ino = st.st_ino;
    return id;
  }
  // Not there yet (or a dangling link, which the atomic write replaces by
  // name): where the write will create it.
  size_t slash = path.find_last_of('/');
  std::string folder = slash == std::string::npos ? "."
                       : slash == 0               ? "/"
                                                  : path.substr(0, slash);
  std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  if (name.empty() || name == "." || name == "..")
    return id;
  char real[PATH_MAX];
  if (!::realpath(folder.c_str(), real))
    return id; // no folder: the write fails by itself, naming it
  id.kind = Identity::Missing;
  id.where = std::string(real) + "/" + name;
  return id;
}

bool same(const Identity &a, const Identity &b) {
  if (a.kind != b.kind || a.kind == Identity::Unknown)
    return false;
  if (a.kind == Identity::Existing)
    return a.dev == b.dev && a.ino == b.ino;
  return a.where == b.where;
}

bool skipped(const FileRole &f) { return f.path.empty() || f.path == "-"; }

} // namespace

std::string describeFileRole(const FileRole &f) {
  if (f.role.empty())
    return f.path;
  if (f.role == "-o")
    return "-o " + f.path;
  if (f.role.rfind("--", 0) == 0 && f.role.find(' ') == std::string::npos)
    return f.role + "=" + f.path;
  return f.role + " " + f.path;
}

bool sameFileByIdentity(const std::string &a, const std::string &b) {
  return same(identify(a), identify(b));
}

void refuseOutputsOverInputs(const std::vector<FileRole> &inputs,
                             const std::vector<FileRole> &outputs) {
  std::vector<Identity> in;
  for (const FileRole &f : inputs)
    in.push_back(skipped(f) ? Identity() : identify(f.path));
  for (const FileRole &out : outputs) {
    if (skipped(out))
      continue;
    Identity o = identify(out.path);
    for (size_t i = 0; i < inputs.size(); ++i)
      if (same(o, in[i]))
        throw Error(describeFileRole(out) + ": is the same file as " +
                    describeFileRole(inputs[i]) +
                    ", an input that writing it would destroy; choose "
                    "another path");
  }
}

void refuseSharedOutputs(const std::vector<FileRole> &outputs) {
  std::vector<Identity> ids;
  for (const FileRole &f : outputs)
    ids.push_back(skipped(f) ? Identity() : identify(f.path));
  for (size_t i = 0; i < outputs.size(); ++i)
    for (size_t j = 0; j < i; ++j) {
      if (outputs[i].role == outputs[j].role &&
          outputs[i].path == outputs[j].path)
        continue;
      if (same(ids[i], ids[j]))
        throw Error(describeFileRole(outputs[i]) + ": is the same file as " +
                    describeFileRole(outputs[j]) +
                    "; each output needs a file of its own");
    }
}

} // namespace mpc
