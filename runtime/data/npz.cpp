// NumPy .npz reader/writer: zip central directory, zip64, zlib inflate, CRC-32.
#include "runtime/data/npz.h"

#include "runtime/data/npy.h"
#include "support/available_memory.h"
#include "support/out_of_memory.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>
#include <sys/stat.h>

namespace mpc {
namespace {

constexpr uint32_t kLocalSig = 0x04034b50;
constexpr uint32_t kCentralSig = 0x02014b50;
constexpr uint32_t kEocdSig = 0x06054b50;
constexpr uint32_t kZip64EocdSig = 0x06064b50;
constexpr uint32_t kZip64LocatorSig = 0x07064b50;
constexpr size_t kEocdSize = 22;
constexpr size_t kZip64EocdSize = 56;
constexpr size_t kZip64LocatorSize = 20;
constexpr size_t kCentralSize = 46;
constexpr size_t kLocalSize = 30;
// An entry's .npy image is the array plus a header (capped at 1 MiB by the
// .npy reader); anything larger is rejected before allocating.
constexpr uint64_t kMaxEntryBytes = kMaxNpyBytes + (uint64_t(1) << 20) + 64;
constexpr size_t kChunk = size_t(1) << 30; // zlib lengths are 32-bit

uint16_t rd16(const uint8_t *p) { return uint16_t(p[0] | p[1] << 8); }
uint32_t rd32(const uint8_t *p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 |
         uint32_t(p[3]) << 24;
}
uint64_t rd64(const uint8_t *p) {
  return uint64_t(rd32(p)) | uint64_t(rd32(p + 4)) << 32;
}

uint32_t crc32Of(const uint8_t *p, size_t n) {
  uLong crc = crc32(0L, Z_NULL, 0);
  while (n > 0) {
    size_t c = n < kChunk ? n : kChunk;
    crc = crc32(crc, p, uInt(c));
    p += c;
    n -= c;
  }
  return uint32_t(crc);
}

std::string printable(const std::string &s) {
  std::string r;
  for (unsigned char c : s)
    r += (c >= 32 && c < 127) || c >= 0x80 ? char(c) : '?';
  return r;
}

// Bounds-checked random access to a file.
class InFile {
public:
  ~InFile() {
    if (f_)
      std::fclose(f_);
  }
  bool open(const std::string &path, std::string &err) {
    f_ = std::fopen(path.c_str(), "rb");
    if (!f_) {
      err = std::string("cannot open: ") + std::strerror(errno);
      return false;
    }
    struct stat st;
    if (fstat(fileno(f_), &st) == 0 && S_ISDIR(st.st_mode)) {
      err = "is a directory";
      return false;
    }
    if (fseeko(f_, 0, SEEK_END) != 0 || (size_ = ftello(f_)) < 0) {
      err = std::string("cannot seek: ") + std::strerror(errno);
      return false;
    }
    return true;
  }
  uint64_t size() const { return uint64_t(size_); }
  // Reads n bytes at off; false if the range is outside the file.
  bool readAt(uint64_t off, size_t n, uint8_t *dst) {
    if (off > size() || n > size() - off)
      return false;
    if (fseeko(f_, off_t(off), SEEK_SET) != 0)
      return false;
    while (n > 0) {
      size_t c = n < kChunk ? n : kChunk;
      if (std::fread(dst, 1, c, f_) != c)
        return false;
      dst += c;
      n -= c;
    }
    return true;
  }

private:
  std::FILE *f_ = nullptr;
  off_t size_ = 0;
};

struct Entry {
  std::string name;
  uint16_t flags = 0, method = 0;
  uint32_t crc = 0;
  uint64_t csize = 0, usize = 0, offset = 0;
};

// Finds the end-of-central-directory records and returns the central
// directory's location and entry count.
bool findCentralDirectory(InFile &f, uint64_t &cdOffset, uint64_t &cdSize,
                          uint64_t &count, std::string &err) {
  uint64_t size = f.size();
  if (size < kEocdSize) {
    err = size == 0 ? "empty file" : "not a zip archive (too short)";
    return false;
  }
  size_t tailLen = size_t(std::min<uint64_t>(size, kEocdSize + 0xffff));
  std::vector<uint8_t> tail(tailLen);
  uint64_t tailStart = size - tailLen;
  if (!f.readAt(tailStart, tailLen, tail.data())) {
    err = "read error";
    return false;
  }
  // Scan backwards for the EOCD signature whose comment ends at the file end.
  size_t pos = tailLen - kEocdSize + 1;
  bool found = false;
  while (pos-- > 0) {
    if (rd32(&tail[pos]) == kEocdSig &&
        pos + kEocdSize + rd16(&tail[pos + 20]) <= tailLen) {
      found = true;
      break;
    }
  }
  if (!found) {
    err = "not a zip archive (no end of central directory record; truncated?)";
    return false;
  }
  const uint8_t *e = &tail[pos];
  uint64_t eocdPos = tailStart + pos;
  uint16_t disk = rd16(e + 4), cdDisk = rd16(e + 6);
  uint16_t diskEntries = rd16(e + 8);
  count = rd16(e + 10);
  cdSize = rd32(e + 12);
  cdOffset = rd32(e + 16);
  bool zip64 = false;
  if (eocdPos >= kZip64LocatorSize) {
    uint8_t loc[kZip64LocatorSize];
    if (f.readAt(eocdPos - kZip64LocatorSize, kZip64LocatorSize, loc) &&
        rd32(loc) == kZip64LocatorSig) {
      zip64 = true;
      if (rd32(loc + 4) != 0 || rd32(loc + 16) > 1) {
        err = "multi-disk zip archives are not supported";
        return false;
      }
      uint64_t z64Pos = rd64(loc + 8);
      uint8_t z[kZip64EocdSize];
      uint64_t locPos = eocdPos - kZip64LocatorSize;
      if (z64Pos > locPos || locPos - z64Pos < kZip64EocdSize ||
          !f.readAt(z64Pos, kZip64EocdSize, z) || rd32(z) != kZip64EocdSig) {
        err = "corrupt zip64 end of central directory record";
        return false;
      }
      if (rd32(z + 16) != 0 || rd32(z + 20) != 0) {
        err = "multi-disk zip archives are not supported";
        return false;
      }
      count = rd64(z + 32);
      cdSize = rd64(z + 40);
      cdOffset = rd64(z + 48);
      eocdPos = z64Pos;
    }
  }
  if (!zip64) {
    if (disk != 0 || cdDisk != 0 || diskEntries != count) {
      err = "multi-disk zip archives are not supported";
      return false;
    }
    if (count == 0xffff || cdSize == 0xffffffffu || cdOffset == 0xffffffffu) {
      err = "corrupt zip archive (zip64 end record missing)";
      return false;
    }
  }
  if (cdOffset > eocdPos || cdSize > eocdPos - cdOffset) {
    err = "corrupt zip archive (central directory outside the file)";
    return false;
  }
  if (count > cdSize / kCentralSize) {
    err = "corrupt zip archive (entry count " + std::to_string(count) +
          " does not fit the central directory)";
    return false;
  }
  return true;
}

bool parseCentralDirectory(const std::vector<uint8_t> &cd, uint64_t count,
                           std::vector<Entry> &entries, std::string &err) {
  size_t pos = 0;
  for (uint64_t i = 0; i < count; ++i) {
    if (cd.size() - pos < kCentralSize || rd32(&cd[pos]) != kCentralSig) {
      err = "corrupt zip central directory (entry " + std::to_string(i) + ")";
      return false;
    }
    const uint8_t *c = &cd[pos];
    Entry e;
    e.flags = rd16(c + 8);
    e.method = rd16(c + 10);
    e.crc = rd32(c + 16);
    e.csize = rd32(c + 20);
    e.usize = rd32(c + 24);
    size_t nlen = rd16(c + 28), elen = rd16(c + 30), clen = rd16(c + 32);
    uint16_t diskStart = rd16(c + 34);
    e.offset = rd32(c + 42);
    if (cd.size() - pos - kCentralSize < nlen + elen + clen) {
      err = "corrupt zip central directory (entry " + std::to_string(i) +
            " overruns it)";
      return false;
    }
    const uint8_t *name = c + kCentralSize;
    e.name.assign(reinterpret_cast<const char *>(name), nlen);
    // Zip64 extended information: the 64-bit values of the saturated fields.
    const uint8_t *extra = name + nlen;
    bool needU = e.usize == 0xffffffffu, needC = e.csize == 0xffffffffu;
    bool needO = e.offset == 0xffffffffu, needD = diskStart == 0xffff;
    size_t x = 0;
    while (x + 4 <= elen) {
      uint16_t id = rd16(extra + x), sz = rd16(extra + x + 2);
      if (x + 4 + sz > elen)
        break;
      if (id == 0x0001) {
        const uint8_t *b = extra + x + 4;
        size_t have = sz, at = 0;
        auto take = [&](uint64_t &v) {
          if (at + 8 > have)
            return false;
          v = rd64(b + at);
          at += 8;
          return true;
        };
        bool ok = (!needU || take(e.usize)) && (!needC || take(e.csize)) &&
                  (!needO || take(e.offset));
        if (ok && needD) {
          ok = at + 4 <= have;
          if (ok)
            diskStart = uint16_t(rd32(b + at) == 0 ? 0 : 1);
        }
        if (!ok) {
          err = "entry '" + printable(e.name) + "': corrupt zip64 extra field";
          return false;
        }
        needU = needC = needO = needD = false;
      }
      x += 4 + sz;
    }
    if (needU || needC || needO || needD) {
      err = "entry '" + printable(e.name) + "': missing zip64 extra field";
      return false;
    }
    if (diskStart != 0) {
      err = "multi-disk zip archives are not supported";
      return false;
    }
    entries.push_back(std::move(e));
    pos += kCentralSize + nlen + elen + clen;
  }
  return true;
}

// Inflates raw deflate data into exactly `out.size()` bytes.
bool inflateRaw(const uint8_t *in, size_t inLen, std::vector<uint8_t> &out,
                std::string &err) {
  z_stream s;
  std::memset(&s, 0, sizeof s);
  if (inflateInit2(&s, -MAX_WBITS) != Z_OK) {
    err = "zlib initialization failed";
    return false;
  }
  size_t inPos = 0, outPos = 0;
  uint8_t spill;
  bool ok = true;
  for (;;) {
    if (s.avail_in == 0 && inPos < inLen) {
      size_t c = std::min(inLen - inPos, kChunk);
      s.next_in = const_cast<Bytef *>(in + inPos);
      s.avail_in = uInt(c);
      inPos += c;
    }
    bool spilling = false;
    if (s.avail_out == 0) {
      if (outPos < out.size()) {
        size_t c = std::min(out.size() - outPos, kChunk);
        s.next_out = out.data() + outPos;
        s.avail_out = uInt(c);
        outPos += c;
      } else {
        // Output is full: any further byte means the entry lied about its size.
        s.next_out = &spill;
        s.avail_out = 1;
        spilling = true;
      }
    }
    int ret = inflate(&s, Z_NO_FLUSH);
    if (spilling && s.avail_out == 0) {
      err = "inflated data is larger than the declared size";
      ok = false;
      break;
    }
    if (ret == Z_STREAM_END)
      break;
    if (ret == Z_OK)
      continue;
    if (ret == Z_BUF_ERROR && s.avail_in == 0 && inPos == inLen)
      err = "compressed data is truncated";
    else
      err = std::string("corrupt deflate data") + (s.msg ? ": " : "") +
            (s.msg ? s.msg : "");
    ok = false;
    break;
  }
  if (ok && uint64_t(s.total_out) != out.size()) {
    err = "inflated " + std::to_string(uint64_t(s.total_out)) +
          " bytes, expected " + std::to_string(out.size());
    ok = false;
  }
  inflateEnd(&s);
  return ok;
}

bool readEntry(InFile &f, const Entry &e, uint64_t dataLimit,
               std::vector<uint8_t> &image, std::string &err) {
  if (e.flags & 1) {
    err = "encrypted zip entries are not supported";
    return false;
  }
  if (e.method != 0 && e.method != 8) {
    err = "unsupported zip compression method " + std::to_string(e.method) +
          " (only stored and deflate)";
    return false;
  }
  if (e.usize > kMaxEntryBytes) {
    err = "entry of " + std::to_string(e.usize) + " bytes is too large";
    return false;
  }
  uint8_t lh[kLocalSize];
  if (!f.readAt(e.offset, kLocalSize, lh) || rd32(lh) != kLocalSig) {
    err = "corrupt zip local header";
    return false;
  }
  uint64_t dataStart = e.offset + kLocalSize + rd16(lh + 26) + rd16(lh + 28);
  if (dataStart > dataLimit || e.csize > dataLimit - dataStart) {
    err = "entry data runs past the end of the archive (truncated?)";
    return false;
  }
  // Deflate cannot expand data more than ~1032:1, so a larger declared size
  // is corrupt; checking it bounds the allocation by the file size.
  if (e.method == 8 && e.usize > e.csize * 1040 + 1024) {
    err = "declared size " + std::to_string(e.usize) + " is impossible for " +
          std::to_string(e.csize) + " bytes of deflate data";
    return false;
  }
  if (e.method == 0) {
    if (e.csize != e.usize) {
      err = "stored entry has compressed size " + std::to_string(e.csize) +
            " != size " + std::to_string(e.usize);
      return false;
    }
    image.resize(size_t(e.usize));
    if (!f.readAt(dataStart, image.size(), image.data())) {
      err = "read error";
      return false;
    }
  } else {
    std::vector<uint8_t> packed(static_cast<size_t>(e.csize));
    if (!f.readAt(dataStart, packed.size(), packed.data())) {
      err = "read error";
      return false;
    }
    image.resize(size_t(e.usize));
    if (!inflateRaw(packed.data(), packed.size(), image, err))
      return false;
  }
  uint32_t crc = crc32Of(image.data(), image.size());
  if (crc != e.crc) {
    char buf[80];
    std::snprintf(buf, sizeof buf, "CRC-32 mismatch (stored %08x, data %08x)",
                  unsigned(e.crc), unsigned(crc));
    err = buf;
    return false;
  }
  return true;
}

// ---- Writing ----

void put16(std::vector<uint8_t> &b, uint32_t v) {
  b.push_back(uint8_t(v));
  b.push_back(uint8_t(v >> 8));
}
void put32(std::vector<uint8_t> &b, uint32_t v) {
  put16(b, v & 0xffff);
  put16(b, v >> 16);
}
void put64(std::vector<uint8_t> &b, uint64_t v) {
  put32(b, uint32_t(v));
  put32(b, uint32_t(v >> 32));
}

constexpr uint32_t kDosDate = (0 << 9) | (1 << 5) | 1; // 1980-01-01
constexpr uint64_t kMax32 = 0xffffffffu;

} // namespace

bool readNpz(const std::string &path,
             std::vector<std::pair<std::string, Tensor>> &arrays,
             std::string &error) {
  return readNpz(path, NpzSelection(), arrays, nullptr, error);
}

bool readNpz(const std::string &path, const NpzSelection &selection,
             std::vector<std::pair<std::string, Tensor>> &arrays,
             std::vector<std::string> *names, std::string &error) {
  try {
    InFile f;
    std::string err;
    uint64_t cdOffset, cdSize, count;
    if (!f.open(path, err) ||
        !findCentralDirectory(f, cdOffset, cdSize, count, err)) {
      error = path + ": " + err;
      return false;
    }
    std::vector<uint8_t> cd(static_cast<size_t>(cdSize));
    if (!f.readAt(cdOffset, cd.size(), cd.data())) {
      error = path + ": read error in central directory";
      return false;
    }
    std::vector<Entry> entries;
    if (!parseCentralDirectory(cd, count, entries, err)) {
      error = path + ": " + err;
      return false;
    }
    // Every entry's name is checked; the chosen ones are then sized from
    // the central directory, all together, before any is inflated.
    std::set<std::string> seen;
    std::vector<std::string> all;
    std::vector<std::pair<const Entry *, std::string>> chosen;
    uint64_t total = 0, largestPacked = 0;
    for (const Entry &e : entries) {
      if (!e.name.empty() && e.name.back() == '/' && e.usize == 0)
        continue; // directory entry
      std::string name = e.name;
      if (name.size() < 4 || name.compare(name.size() - 4, 4, ".npy") != 0) {
        error = path + ": entry '" + printable(e.name) + "' is not a .npy file";
        return false;
      }
      name.resize(name.size() - 4);
      if (!seen.insert(name).second) {
        error =
            path + ": array '" + printable(name) + "': duplicate array name";
        return false;
      }
      all.push_back(name);
      if (!selection.only.empty() &&
          std::find(selection.only.begin(), selection.only.end(), name) ==
              selection.only.end())
        continue;
      if (e.usize > kMaxEntryBytes) {
        error = path + ": array '" + printable(name) + "': entry of " +
                std::to_string(e.usize) + " bytes is too large";
        return false;
      }
      // A compressed entry's packed bytes are held while it is inflated.
      total += e.usize;
      if (e.method != 0)
        largestPacked = std::max(largestPacked, e.csize);
      chosen.emplace_back(&e, std::move(name));
    }
    uint64_t limit = selection.limitBytes;
    std::string source = selection.limitSource;
    if (limit == 0) {
      AvailableMemory memory = availableMemory();
      limit = memory.bytes;
      source = memory.source + " (" + formatMemorySize(memory.bytes) + ")";
    }
    uint64_t needed = total + std::min(largestPacked, kMaxEntryBytes);
    if (limit && needed > limit) {
      std::string list;
      for (const auto &c : chosen)
        list += (list.empty() ? "'" : ", '") + printable(c.second) + "'";
      error = path + ": arrays " + list + " take " + std::to_string(needed) +
              " bytes (" + formatMemorySize(needed) + ") to read, more than " +
              source + " allows";
      return false;
    }
    std::vector<std::pair<std::string, Tensor>> result;
    for (const auto &c : chosen) {
      std::string where = path + ": array '" + printable(c.second) + "'";
      std::vector<uint8_t> image;
      Tensor t;
      try {
        if (!readEntry(f, *c.first, cdOffset, image, err)) {
          error = where + ": " + err;
          return false;
        }
        if (!parseNpy(std::move(image), where, t, error))
          return false;
      } catch (const std::bad_alloc &) {
        error = where + ": " +
                outOfMemoryMessage("reading its " +
                                   formatMemorySize(c.first->usize));
        return false;
      }
      result.emplace_back(c.second, std::move(t));
    }
    arrays = std::move(result);
    if (names)
      *names = std::move(all);
    return true;
  } catch (const std::bad_alloc &) {
    error = path + ": " + outOfMemoryMessage("reading it");
    return false;
  } catch (const std::exception &e) {
    error = path + ": " + e.what();
    return false;
  }
}

bool writeNpz(const std::string &path,
              const std::vector<std::pair<std::string, Tensor>> &arrays,
              std::string &error, Fsync fsync) {
  std::set<std::string> seen;
  for (const auto &a : arrays) {
    if (a.first.empty() || a.first.size() > 0xff00) {
      error = path + ": bad array name '" + printable(a.first) + "'";
      return false;
    }
    if (!seen.insert(a.first).second) {
      error = path + ": duplicate array name '" + printable(a.first) + "'";
      return false;
    }
  }
  // Through the atomic writer every output shares: a failure or a kill
  // leaves `path` as it was, and a dead writer's temporary is reclaimed by
  // the next write.
  auto fill = [&](int fd, std::string &err) -> bool {
    auto fail = [&](const std::string &msg) {
      err = path + ": " + msg;
      return false;
    };
    uint64_t pos = 0;
    auto write = [&](const uint8_t *p, size_t n) {
      if (n && !writeAll(fd, p, n, path, err))
        return false;
      pos += n;
      return true;
    };
    std::vector<uint8_t> central;
    std::vector<uint8_t> image, hdr;
    for (const auto &a : arrays) {
      std::string why;
      if (!serializeNpy(a.second, image, why))
        return fail("array '" + printable(a.first) + "': " + why);
      std::string name = a.first + ".npy";
      uint16_t flags = 0;
      for (unsigned char c : name)
        if (c >= 0x80)
          flags = 0x800; // name is UTF-8
      uint32_t crc = crc32Of(image.data(), image.size());
      uint64_t size = image.size(), offset = pos;
      bool bigSize = size >= kMax32, bigOffset = offset >= kMax32;
      uint16_t version = bigSize || bigOffset ? 45 : 20;

      hdr.clear();
      put32(hdr, kLocalSig);
      put16(hdr, version);
      put16(hdr, flags);
      put16(hdr, 0); // stored
      put16(hdr, 0); // time 00:00
      put16(hdr, kDosDate);
      put32(hdr, crc);
      put32(hdr, bigSize ? uint32_t(kMax32) : uint32_t(size));
      put32(hdr, bigSize ? uint32_t(kMax32) : uint32_t(size));
      put16(hdr, uint32_t(name.size()));
      put16(hdr, bigSize ? 20 : 0);
      hdr.insert(hdr.end(), name.begin(), name.end());
      if (bigSize) {
        put16(hdr, 0x0001);
        put16(hdr, 16);
        put64(hdr, size);
        put64(hdr, size);
      }
      if (!write(hdr.data(), hdr.size()) || !write(image.data(), image.size()))
        return false;

      uint16_t extraLen = uint16_t((bigSize ? 16 : 0) + (bigOffset ? 8 : 0));
      put32(central, kCentralSig);
      put16(central, version);
      put16(central, version);
      put16(central, flags);
      put16(central, 0);
      put16(central, 0);
      put16(central, kDosDate);
      put32(central, crc);
      put32(central, bigSize ? uint32_t(kMax32) : uint32_t(size));
      put32(central, bigSize ? uint32_t(kMax32) : uint32_t(size));
      put16(central, uint32_t(name.size()));
      put16(central, extraLen ? extraLen + 4u : 0u);
      put16(central, 0);           // comment
      put16(central, 0);           // disk
      put16(central, 0);           // internal attributes
      put32(central, 0600u << 16); // external attributes: -rw-------
      put32(central, bigOffset ? uint32_t(kMax32) : uint32_t(offset));
      central.insert(central.end(), name.begin(), name.end());
      if (extraLen) {
        put16(central, 0x0001);
        put16(central, extraLen);
        if (bigSize) {
          put64(central, size);
          put64(central, size);
        }
        if (bigOffset)
          put64(central, offset);
      }
    }
    uint64_t cdOffset = pos, cdSize = central.size(), count = arrays.size();
    std::vector<uint8_t> end;
    if (count >= 0xffff || cdOffset >= kMax32 || cdSize >= kMax32) {
      uint64_t z64Pos = cdOffset + cdSize;
      put32(end, kZip64EocdSig);
      put64(end, kZip64EocdSize - 12);
      put16(end, 45);
      put16(end, 45);
      put32(end, 0);
      put32(end, 0);
      put64(end, count);
      put64(end, count);
      put64(end, cdSize);
      put64(end, cdOffset);
      put32(end, kZip64LocatorSig);
      put32(end, 0);
      put64(end, z64Pos);
      put32(end, 1);
    }
    put32(end, kEocdSig);
    put16(end, 0);
    put16(end, 0);
    put16(end, uint32_t(std::min<uint64_t>(count, 0xffff)));
    put16(end, uint32_t(std::min<uint64_t>(count, 0xffff)));
    put32(end, uint32_t(std::min(cdSize, kMax32)));
    put32(end, uint32_t(std::min(cdOffset, kMax32)));
    put16(end, 0);
    return write(central.data(), central.size()) &&
           write(end.data(), end.size());
  };
  try {
    return writeFileAtomically(path, fill, error, fsync);
  } catch (const std::bad_alloc &) {
    error = path + ": " + outOfMemoryMessage("writing it");
    return false;
  } catch (const std::exception &e) {
    error = path + ": " + e.what();
    return false;
  }
}

} // namespace mpc
