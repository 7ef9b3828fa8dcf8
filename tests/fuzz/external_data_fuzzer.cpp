// Fuzz target: ONNX external data (passes/onnx/external_data_reader.h), the
// model-relative files an initializer's bytes come from.
//
// The input describes one tensor and its data file: the location (chosen
// from a table that holds the attacks: symlinks out of the folder, a
// symlinked folder, '..', absolute paths, a directory, a FIFO, a missing
// file, an embedded NUL), the data type, dims (small or absurd), offset and
// length (absent, small, absurd or not numbers), extra keys; the rest of
// the input is the data file, which may also be made a sparse terabyte.
// The tensor is read with ExternalDataReader under a 64 MiB limit and, for
// a file of its real size, as an initializer of a model by loadModel.
// Oracles: a rejection is one line naming the tensor (the model file, for
// loadModel); a location that leaves the model's folder is always refused;
// what loads is exactly the file's bytes at [offset, offset + the bytes the
// dims take); nothing allocates more than the limit (libFuzzer's
// -malloc_limit_mb) or hangs on the FIFO.
#include "ir/tensor_pb.h"
#include "passes/onnx/external_data_reader.h"
#include "passes/onnx/onnx_io.h"
#include "support/diagnostics.h"
#include "tests/fuzz/fuzz_support.h"

#include "onnx/onnx_pb.h"

#include <filesystem>
#include <fstream>
#include <sys/stat.h>
#include <unistd.h>

using namespace mpc;

namespace {

/// Reads the fuzz input front to back; past its end every byte is 0.
struct Bytes {
  const uint8_t *data;
  size_t size, pos = 0;
  uint8_t next() { return pos < size ? data[pos++] : 0; }
  uint64_t next64() {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i)
      v |= uint64_t(next()) << (8 * i);
    return v;
  }
};

/// A dim, offset or length: mostly small, sometimes absurd.
int64_t number(Bytes &in) {
  uint8_t b = in.next();
  switch (b) {
  case 0xf0:
    return int64_t(1) << 31;
  case 0xf1:
    return int64_t(1) << 38;
  case 0xf2:
    return int64_t(1) << 62;
  case 0xf3:
    return -1;
  case 0xf4:
    return INT64_MAX;
  case 0xf5:
    return int64_t(in.next64());
  case 0xf6:
    return int64_t(1) << 40;
  default:
    return b;
  }
}

/// A number's text: the number, or a few things that are not one.
std::string numberText(Bytes &in) {
  switch (in.next() % 8) {
  case 0:
    return "8junk";
  case 1:
    return "";
  case 2:
    return "99999999999999999999999";
  case 3:
    return " 4";
  default:
    return std::to_string(number(in));
  }
}

/// Locations, and whether each stays inside the model's folder (a read of
/// it may succeed).
struct Location {
  const char *text;
  bool inside;
};
constexpr Location kLocations[] = {
    {"w.bin", true},
    {"sub/w.bin", true},
    {"link.bin", true},
    {"./w.bin", true},
    {"out.bin", false},
    {"dirlink/w.bin", false},
    {"../outside.bin", false},
    {"sub/../w.bin", false},
    {"/etc/passwd", false},
    {"", false},
    {"sub", false},
    {"fifo", false},
    {"missing.bin", false},
    {"a..b", false},
    {"w.bin\0x", false},
    {"sub//w.bin", true},
};
constexpr size_t kNulLocation = 14;

/// The model's folder, with the files and links the locations name, made
/// once: m/{w.bin, sub/w.bin, link.bin -> w.bin, out.bin -> ../outside.bin,
/// dirlink -> ../outdir, fifo}, and ../outside.bin, ../outdir/w.bin.
const std::string &modelDir() {
  static const std::string dir = [] {
    std::string root = fuzz::scratchDir();
    std::string m = root + "/m";
    std::filesystem::create_directories(m + "/sub");
    std::filesystem::create_directories(root + "/outdir");
    std::ofstream(root + "/outside.bin") << std::string(4096, 'o');
    std::ofstream(root + "/outdir/w.bin") << std::string(4096, 'd');
    fuzz::require(symlink("w.bin", (m + "/link.bin").c_str()) == 0 &&
                      symlink("../outside.bin", (m + "/out.bin").c_str()) ==
                          0 &&
                      symlink("../outdir", (m + "/dirlink").c_str()) == 0 &&
                      mkfifo((m + "/fifo").c_str(), 0600) == 0,
                  "cannot make the model folder's links");
    return m;
  }();
  return dir;
}

/// The file a location inside the folder reads.
std::string fileOf(const std::string &location) {
  if (location.rfind("sub/", 0) == 0)
    return modelDir() + "/sub/w.bin";
  return modelDir() + "/w.bin";
}

void writeFile(const std::string &path, const uint8_t *data, size_t size,
               bool sparse) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char *>(data), std::streamsize(size));
  out.close();
  // A sparse terabyte: holes take no space, but a reader that trusts the
  // size would allocate it.
  fuzz::require(bool(out) &&
                    (!sparse || truncate(path.c_str(), off_t(1) << 40) == 0),
                "cannot write the data file");
}

/// The bytes at [offset, offset + n) of `path`.
std::string slice(const std::string &path, int64_t offset, size_t n) {
  std::ifstream in(path, std::ios::binary);
  in.seekg(offset);
  std::string bytes(n, '\0');
  in.read(bytes.data(), std::streamsize(n));
  return bytes;
}

constexpr uint64_t kReadLimit = uint64_t(64) << 20;

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  Bytes in{data, size};
  const size_t pick = in.next() % (sizeof kLocations / sizeof kLocations[0]);
  const Location &where = kLocations[pick];
  // "w.bin\0x" keeps its NUL (the table's C string ends at it).
  std::string location =
      pick == kNulLocation ? std::string("w.bin\0x", 7) : where.text;
  const int dataType = in.next() % 24;
  const uint8_t flags = in.next();
  const bool sparse = flags & 4;

  onnx::TensorProto tp;
  tp.set_name("w");
  tp.set_data_type(dataType);
  for (int i = 0, rank = (flags >> 6); i < rank; ++i)
    tp.add_dims(number(in));
  tp.set_data_location(onnx::TensorProto::EXTERNAL);
  auto add = [&](const std::string &key, const std::string &value) {
    auto *kv = tp.add_external_data();
    kv->set_key(key);
    kv->set_value(value);
  };
  add("location", location);
  std::string offsetText, lengthText;
  if (flags & 1)
    add("offset", offsetText = numberText(in));
  if (flags & 2)
    add("length", lengthText = numberText(in));
  if (flags & 8)
    add("checksum", "0");
  if (flags & 16) // a second location: the last one counts
    add("location", location = "out.bin");
  const bool inside = (flags & 16) ? false : where.inside;

  const uint8_t *fileData = data + in.pos;
  const size_t fileSize = size - std::min(in.pos, size);
  writeFile(modelDir() + "/w.bin", fileData, fileSize, sparse);
  writeFile(modelDir() + "/sub/w.bin", fileData, fileSize, false);

  // The reader alone, under a limit well below libFuzzer's malloc limit.
  onnx::TensorProto read = tp;
  ExternalDataReader reader(modelDir(), kReadLimit);
  bool ok = true;
  try {
    reader.read(read, "initializer 'w'");
  } catch (const Error &e) {
    ok = false;
    fuzz::checkErrorMessage(e.what(), "initializer 'w': ");
  }
  fuzz::require(!ok || inside, "external data outside the model's folder "
                               "was read");
  if (ok) {
    uint64_t needed = 0;
    std::string err;
    fuzz::require(tensorProtoBytes(tp, needed, err),
                  "a tensor whose size is refused was read");
    fuzz::require(read.raw_data().size() == needed &&
                      read.data_location() != onnx::TensorProto::EXTERNAL &&
                      read.external_data_size() == 0,
                  "the tensor read has the wrong size");
    int64_t offset = offsetText.empty() ? 0 : std::stoll(offsetText);
    if (needed <= kReadLimit)
      fuzz::require(read.raw_data() ==
                        slice(fileOf(location), offset, size_t(needed)),
                    "the tensor read is not the file's bytes");
    Tensor t;
    fuzz::require(tensorFromProto(read, t, err),
                  "a tensor read does not convert");
  }

  // The same tensor as a model's initializer, read by loadModel (a file of
  // its real size: every read is bounded by the input).
  if (!sparse) {
    onnx::ModelProto model;
    model.set_ir_version(8);
    model.add_opset_import()->set_version(17);
    onnx::GraphProto *g = model.mutable_graph();
    g->set_name("g");
    *g->add_initializer() = tp;
    onnx::NodeProto *n = g->add_node();
    n->set_op_type("Identity");
    n->add_input("w");
    n->add_output("y");
    g->add_output()->set_name("y");
    std::string bytes = model.SerializeAsString();
    std::string path = modelDir() + "/model.onnx";
    fuzz::writeScratchFile("m/model.onnx",
                           reinterpret_cast<const uint8_t *>(bytes.data()),
                           bytes.size());
    try {
      std::unique_ptr<Model> m = loadModel(path);
      fuzz::require(inside, "loadModel read external data outside the "
                            "model's folder");
      const Value *w = m->graph->findValue("w");
      fuzz::require(w && w->initializer() && ok,
                    "loadModel and the reader disagree");
    } catch (const Error &e) {
      fuzz::checkErrorMessage(e.what(), path + ": ");
    }
  }
  return 0;
}
