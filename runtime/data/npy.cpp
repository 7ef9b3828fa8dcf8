// NumPy .npy reader/writer: header dict parsing, dtype mapping, atomic writes.
#include "runtime/data/npy.h"

#include "support/file_io.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <sys/stat.h>

namespace mpc {
namespace {

const uint8_t kMagic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
// Headers longer than this are treated as corrupt (numpy itself refuses
// headers over 10000 bytes by default).
constexpr size_t kMaxHeaderLen = size_t(1) << 20;

// Header text quoted in errors (control bytes shown as '?'; one line).
std::string printable(const std::string &s);

// ---- A small parser for the Python literal in the .npy header ----

struct PyValue {
  enum Kind { Str, Bool, None, Int, Seq, Dict } kind = None;
  std::string str;
  bool b = false;
  int64_t i = 0;
  bool intOverflow = false;
  bool isTuple = false;
  std::vector<PyValue> items;                           // Seq
  std::vector<std::pair<std::string, PyValue>> entries; // Dict
};

class LiteralParser {
public:
  LiteralParser(const char *p, size_t n) : p_(p), end_(p + n) {}

  bool parseTop(PyValue &v, std::string &err) {
    if (!parseValue(v, 0, err))
      return false;
    skipSpace();
    if (p_ != end_) {
      err = "unexpected text after the header dict";
      return false;
    }
    return true;
  }

private:
  const char *p_, *end_;

  void skipSpace() {
    while (p_ != end_ &&
           (*p_ == ' ' || *p_ == '\t' || *p_ == '\n' || *p_ == '\r'))
      ++p_;
  }
  bool peek(char c) {
    skipSpace();
    return p_ != end_ && *p_ == c;
  }
  bool accept(char c) {
    if (!peek(c))
      return false;
    ++p_;
    return true;
  }
  bool acceptWord(const char *w) {
    size_t n = std::strlen(w);
    if (size_t(end_ - p_) < n || std::memcmp(p_, w, n) != 0)
      return false;
    p_ += n;
    return true;
  }

  bool parseString(std::string &s, std::string &err) {
    char q = *p_++;
    s.clear();
    while (p_ != end_ && *p_ != q) {
      if (*p_ == '\\') {
        ++p_;
        if (p_ == end_)
          break;
      }
      s += *p_++;
    }
    if (p_ == end_) {
      err = "unterminated string in header";
      return false;
    }
    ++p_;
    return true;
  }

  bool parseValue(PyValue &v, int depth, std::string &err) {
    if (depth > 16) {
      err = "header nests too deeply";
      return false;
    }
    skipSpace();
    if (p_ == end_) {
      err = "header ends early";
      return false;
    }
    char c = *p_;
    if (c == '\'' || c == '"') {
      v.kind = PyValue::Str;
      return parseString(v.str, err);
    }
    if (acceptWord("True")) {
      v.kind = PyValue::Bool;
      v.b = true;
      return true;
    }
    if (acceptWord("False")) {
      v.kind = PyValue::Bool;
      v.b = false;
      return true;
    }
    if (acceptWord("None")) {
      v.kind = PyValue::None;
      return true;
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
      v.kind = PyValue::Int;
      bool neg = false;
      if (c == '-') {
        neg = true;
        ++p_;
      }
      if (p_ == end_ || *p_ < '0' || *p_ > '9') {
        err = "bad number in header";
        return false;
      }
      uint64_t x = 0;
      while (p_ != end_ && *p_ >= '0' && *p_ <= '9') {
        unsigned d = unsigned(*p_++ - '0');
        if (x > (uint64_t(std::numeric_limits<int64_t>::max()) - d) / 10)
          v.intOverflow = true;
        else
          x = x * 10 + d;
      }
      if (p_ != end_ && (*p_ == 'L' || *p_ == 'l')) // Python 2 long
        ++p_;
      v.i = neg ? -int64_t(x) : int64_t(x);
      return true;
    }
    if (c == '(' || c == '[') {
      char close = c == '(' ? ')' : ']';
      ++p_;
      v.kind = PyValue::Seq;
      v.isTuple = c == '(';
      while (!accept(close)) {
        v.items.emplace_back();
        if (!parseValue(v.items.back(), depth + 1, err))
          return false;
        if (!accept(',') && !peek(close)) {
          err = "expected ',' or closing bracket in header";
          return false;
        }
      }
      return true;
    }
    if (c == '{') {
      ++p_;
      v.kind = PyValue::Dict;
      while (!accept('}')) {
        skipSpace();
        if (p_ == end_ || (*p_ != '\'' && *p_ != '"')) {
          err = "expected a string key in the header dict";
          return false;
        }
        std::string key;
        if (!parseString(key, err))
          return false;
        if (!accept(':')) {
          err = "expected ':' after key '" + printable(key) + "' in header";
          return false;
        }
        v.entries.emplace_back(key, PyValue());
        if (!parseValue(v.entries.back().second, depth + 1, err))
          return false;
        if (!accept(',') && !peek('}')) {
          err = "expected ',' or '}' in header dict";
          return false;
        }
      }
      return true;
    }
    err =
        "unexpected character '" + printable(std::string(1, c)) + "' in header";
    return false;
  }
};

std::string printable(const std::string &s) {
  std::string r;
  for (char c : s)
    r += (c >= 32 && c < 127) ? c : '?';
  return r.size() > 40 ? r.substr(0, 40) + "..." : r;
}

// Maps a descr string to a dtype; on failure sets err.
bool dtypeFromDescr(const std::string &descr, DType &t, std::string &err) {
  if (descr.size() >= 2) {
    char order = descr[0];
    std::string code = descr.substr(1);
    struct Entry {
      const char *code;
      DType t;
    };
    static const Entry kTypes[] = {{"f4", DType::F32}, {"f2", DType::F16},
                                   {"f8", DType::F64}, {"i8", DType::I64},
                                   {"i4", DType::I32}, {"i1", DType::I8},
                                   {"u1", DType::U8},  {"b1", DType::Bool}};
    for (const Entry &e : kTypes) {
      if (code != e.code)
        continue;
      bool oneByte = dtypeSize(e.t) == 1;
      if (order == '<' || order == '=' ||
          (oneByte && (order == '|' || order == '>'))) {
        t = e.t;
        return true;
      }
      if (order == '>') {
        err = "unsupported dtype '" + printable(descr) + "' (big-endian)";
        return false;
      }
      break;
    }
  }
  err = "unsupported dtype '" + printable(descr) + "'";
  // ml_dtypes' bfloat16 (jax, torch's .numpy() refuses bf16) is saved as
  // raw 2-byte records: the type is lost, so say what to store instead.
  if (descr.size() == 3 && descr.substr(1) == "V2")
    err += " (raw 2-byte records, as an ml_dtypes bfloat16 array is saved: "
           "store float32, which a bf16 input rounds as it is read)";
  return false;
}

const char *descrFor(DType t) {
  switch (t) {
  case DType::F32:
  case DType::BF16: // written as float32
    return "<f4";
  case DType::F16:
    return "<f2";
  case DType::F64:
    return "<f8";
  case DType::I64:
    return "<i8";
  case DType::I32:
    return "<i4";
  case DType::I8:
    return "|i1";
  case DType::U8:
    return "|u1";
  case DType::Bool:
    return "|b1";
  case DType::Undefined:
    break;
  }
  return nullptr;
}

struct NpyHeader {
  DType dtype = DType::Undefined;
  std::vector<int64_t> dims;
  size_t prefix = 0;     // magic + version + header length field
  size_t dataOffset = 0; // bytes before the array data
  uint64_t dataBytes = 0;
};

// Reads the magic, version and header length from the first bytes; sets
// h.dataOffset. Needs at least 12 bytes (or the whole file if shorter).
bool parsePreamble(const uint8_t *data, size_t size, NpyHeader &h,
                   std::string &err) {
  if (size < 6) {
    err = "not a .npy file (too short)";
    return false;
  }
  if (std::memcmp(data, kMagic, 6) != 0) {
    err = "not a .npy file (bad magic)";
    return false;
  }
  if (size < 10) {
    err = "truncated .npy header";
    return false;
  }
  uint8_t major = data[6], minor = data[7];
  size_t headerLen, prefix;
  if (major == 1 && minor == 0) {
    headerLen = size_t(data[8]) | size_t(data[9]) << 8;
    prefix = 10;
  } else if ((major == 2 || major == 3) && minor == 0) {
    if (size < 12) {
      err = "truncated .npy header";
      return false;
    }
    uint32_t n = uint32_t(data[8]) | uint32_t(data[9]) << 8 |
                 uint32_t(data[10]) << 16 | uint32_t(data[11]) << 24;
    if (n > kMaxHeaderLen) {
      err = "header length " + std::to_string(n) + " is too large";
      return false;
    }
    headerLen = n;
    prefix = 12;
  } else {
    err = "unsupported .npy format version " + std::to_string(major) + "." +
          std::to_string(minor);
    return false;
  }
  h.prefix = prefix;
  h.dataOffset = prefix + headerLen;
  return true;
}

// Parses the header dict; `data` must hold at least h.dataOffset bytes.
bool parseHeaderDict(const uint8_t *data, NpyHeader &h, std::string &err) {
  const char *text = reinterpret_cast<const char *>(data + h.prefix);
  PyValue dict;
  LiteralParser parser(text, h.dataOffset - h.prefix);
  if (!parser.parseTop(dict, err)) {
    err = "malformed header: " + err;
    return false;
  }
  if (dict.kind != PyValue::Dict) {
    err = "malformed header: not a dict";
    return false;
  }
  const PyValue *descr = nullptr, *fortran = nullptr, *shape = nullptr;
  for (auto &e : dict.entries) {
    if (e.first == "descr")
      descr = &e.second;
    else if (e.first == "fortran_order")
      fortran = &e.second;
    else if (e.first == "shape")
      shape = &e.second;
  }
  if (!descr || !fortran || !shape) {
    err = std::string("malformed header: missing '") +
          (!descr     ? "descr"
           : !fortran ? "fortran_order"
                      : "shape") +
          "'";
    return false;
  }
  if (descr->kind == PyValue::Seq) {
    err = "unsupported structured dtype";
    return false;
  }
  if (descr->kind != PyValue::Str) {
    err = "malformed header: 'descr' is not a string";
    return false;
  }
  if (!dtypeFromDescr(descr->str, h.dtype, err))
    return false;
  if (fortran->kind != PyValue::Bool) {
    err = "malformed header: 'fortran_order' is not True/False";
    return false;
  }
  if (fortran->b) {
    err = "fortran_order: True is not supported (save a C-order array)";
    return false;
  }
  if (shape->kind != PyValue::Seq || !shape->isTuple) {
    err = "malformed header: 'shape' is not a tuple";
    return false;
  }
  h.dims.clear();
  for (const PyValue &d : shape->items) {
    if (d.kind != PyValue::Int || d.intOverflow || d.i < 0) {
      err = "malformed header: bad dimension in 'shape'";
      return false;
    }
    h.dims.push_back(d.i);
  }
  int64_t n = elementCount(h.dims);
  size_t es = dtypeSize(h.dtype);
  if (n < 0 || uint64_t(n) > kMaxNpyBytes / es) {
    err = "array of shape " + dimsToString(h.dims) + " is too large (limit " +
          std::to_string(kMaxNpyBytes >> 30) + " GiB)";
    return false;
  }
  h.dataBytes = uint64_t(n) * es;
  return true;
}

std::string sizeMismatch(const NpyHeader &h, uint64_t have) {
  std::string what = have < h.dataBytes ? "truncated" : "trailing bytes";
  return what + ": " + std::to_string(have) + " data bytes, expected " +
         std::to_string(h.dataBytes) + " for " + dtypeName(h.dtype) + "[" +
         dimsToString(h.dims) + "]";
}

void normalizeBools(Tensor &t) {
  if (t.dtype != DType::Bool)
    return;
  for (uint8_t &b : t.bytes)
    b = b != 0;
}

struct FileCloser {
  void operator()(std::FILE *f) const {
    if (f)
      std::fclose(f);
  }
};
using FilePtr = std::unique_ptr<std::FILE, FileCloser>;

bool readFully(std::FILE *f, uint8_t *dst, size_t n) {
  while (n > 0) {
    size_t chunk = n < (size_t(1) << 30) ? n : (size_t(1) << 30);
    size_t got = std::fread(dst, 1, chunk, f);
    if (got != chunk)
      return false;
    dst += got;
    n -= got;
  }
  return true;
}

// Validates an in-memory image; on success h describes it.
bool checkImage(const uint8_t *data, size_t size, NpyHeader &h,
                std::string &err) {
  if (!parsePreamble(data, size, h, err))
    return false;
  if (h.dataOffset > size) {
    err = "truncated .npy header";
    return false;
  }
  if (!parseHeaderDict(data, h, err))
    return false;
  uint64_t have = size - h.dataOffset;
  if (have != h.dataBytes) {
    err = sizeMismatch(h, have);
    return false;
  }
  return true;
}

} // namespace

bool parseNpy(const uint8_t *data, size_t size,
              const std::string &nameForErrors, Tensor &out,
              std::string &error) {
  try {
    NpyHeader h;
    std::string err;
    if (!checkImage(data, size, h, err)) {
      error = nameForErrors + ": " + err;
      return false;
    }
    Tensor t;
    t.dtype = h.dtype;
    t.dims = h.dims;
    t.bytes.assign(data + h.dataOffset, data + size);
    normalizeBools(t);
    out = std::move(t);
    return true;
  } catch (const std::exception &e) {
    error = nameForErrors + ": " + e.what();
    return false;
  }
}

bool parseNpyLayout(const uint8_t *data, size_t size,
                    const std::string &nameForErrors, NpyLayout &out,
                    std::string &error) {
  try {
    NpyHeader h;
    std::string err;
    if (!checkImage(data, size, h, err)) {
      error = nameForErrors + ": " + err;
      return false;
    }
    out.dtype = h.dtype;
    out.dims = h.dims;
    out.dataOffset = h.dataOffset;
    return true;
  } catch (const std::exception &e) {
    error = nameForErrors + ": " + e.what();
    return false;
  }
}

bool parseNpy(std::vector<uint8_t> &&image, const std::string &nameForErrors,
              Tensor &out, std::string &error) {
  try {
    NpyHeader h;
    std::string err;
    if (!checkImage(image.data(), image.size(), h, err)) {
      error = nameForErrors + ": " + err;
      return false;
    }
    image.erase(image.begin(), image.begin() + std::ptrdiff_t(h.dataOffset));
    Tensor t;
    t.dtype = h.dtype;
    t.dims = h.dims;
    t.bytes = std::move(image);
    normalizeBools(t);
    out = std::move(t);
    return true;
  } catch (const std::exception &e) {
    error = nameForErrors + ": " + e.what();
    return false;
  }
}

bool readNpy(const std::string &path, Tensor &out, std::string &error) {
  try {
    FilePtr f(std::fopen(path.c_str(), "rb"));
    if (!f) {
      error = path + ": cannot open: " + std::strerror(errno);
      return false;
    }
    struct stat st;
    if (fstat(fileno(f.get()), &st) == 0 && S_ISDIR(st.st_mode)) {
      error = path + ": is a directory";
      return false;
    }
    if (fseeko(f.get(), 0, SEEK_END) != 0) {
      error = path + ": cannot seek: " + std::strerror(errno);
      return false;
    }
    off_t fileSize = ftello(f.get());
    if (fileSize < 0 || fseeko(f.get(), 0, SEEK_SET) != 0) {
      error = path + ": cannot seek: " + std::strerror(errno);
      return false;
    }
    uint8_t pre[12];
    size_t preLen = std::fread(pre, 1, sizeof pre, f.get());
    NpyHeader h;
    std::string err;
    if (!parsePreamble(pre, preLen, h, err)) {
      error = path + ": " + err;
      return false;
    }
    if (uint64_t(fileSize) < h.dataOffset) {
      error = path + ": truncated .npy header";
      return false;
    }
    std::vector<uint8_t> header(h.dataOffset);
    if (fseeko(f.get(), 0, SEEK_SET) != 0 ||
        !readFully(f.get(), header.data(), header.size())) {
      error = path + ": read error";
      return false;
    }
    if (!parseHeaderDict(header.data(), h, err)) {
      error = path + ": " + err;
      return false;
    }
    uint64_t have = uint64_t(fileSize) - h.dataOffset;
    if (have != h.dataBytes) {
      error = path + ": " + sizeMismatch(h, have);
      return false;
    }
    Tensor t;
    t.dtype = h.dtype;
    t.dims = h.dims;
    t.bytes.resize(size_t(h.dataBytes));
    if (!readFully(f.get(), t.bytes.data(), t.bytes.size())) {
      error = path + ": read error in array data";
      return false;
    }
    normalizeBools(t);
    out = std::move(t);
    return true;
  } catch (const std::exception &e) {
    error = path + ": " + e.what();
    return false;
  }
}

bool serializeNpy(const Tensor &tIn, std::vector<uint8_t> &out,
                  std::string &error) {
  try {
    const char *descr = descrFor(tIn.dtype);
    if (!descr) {
      error = "cannot write a tensor with undefined dtype as .npy";
      return false;
    }
    int64_t n = tIn.numel();
    if (n < 0) {
      error = "cannot write a tensor with bad dims " + dimsToString(tIn.dims);
      return false;
    }
    if (tIn.bytes.size() != uint64_t(n) * dtypeSize(tIn.dtype)) {
      error = "tensor " + std::string(dtypeName(tIn.dtype)) + "[" +
              dimsToString(tIn.dims) + "] holds " +
              std::to_string(tIn.bytes.size()) + " bytes, expected " +
              std::to_string(uint64_t(n) * dtypeSize(tIn.dtype));
      return false;
    }
    Tensor converted;
    const Tensor *t = &tIn;
    if (tIn.dtype == DType::BF16) {
      converted = tIn.castTo(DType::F32);
      t = &converted;
    }
    std::string hdr = std::string("{'descr': '") + descr +
                      "', 'fortran_order': False, 'shape': (";
    for (size_t i = 0; i < t->dims.size(); ++i) {
      if (i)
        hdr += ", ";
      hdr += std::to_string(t->dims[i]);
    }
    if (t->dims.size() == 1)
      hdr += ",";
    hdr += "), }";
    // Pad with spaces and a final newline so the data starts 64-aligned.
    size_t prefix = 10;
    size_t total = (prefix + hdr.size() + 1 + 63) / 64 * 64;
    if (total - prefix > 65535) {
      prefix = 12;
      total = (prefix + hdr.size() + 1 + 63) / 64 * 64;
    }
    hdr.append(total - prefix - hdr.size() - 1, ' ');
    hdr += '\n';
    size_t hl = hdr.size();
    out.clear();
    out.reserve(total + t->bytes.size());
    out.insert(out.end(), kMagic, kMagic + 6);
    if (prefix == 10) {
      out.push_back(1);
      out.push_back(0);
      out.push_back(uint8_t(hl));
      out.push_back(uint8_t(hl >> 8));
    } else {
      out.push_back(2);
      out.push_back(0);
      for (int i = 0; i < 4; ++i)
        out.push_back(uint8_t(hl >> (8 * i)));
    }
    out.insert(out.end(), hdr.begin(), hdr.end());
    out.insert(out.end(), t->bytes.begin(), t->bytes.end());
    return true;
  } catch (const std::exception &e) {
    error = std::string("cannot serialize tensor: ") + e.what();
    return false;
  }
}

bool writeNpy(const std::string &path, const Tensor &t, std::string &error) {
  std::vector<uint8_t> buf;
  if (!serializeNpy(t, buf, error)) {
    error = path + ": " + error;
    return false;
  }
  return writeFileAtomically(path, buf.data(), buf.size(), error);
}

} // namespace mpc
