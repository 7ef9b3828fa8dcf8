// Tests for runtime/data: .npy/.npz files and ONNX TensorProto .pb files.
#include "ir/tensor_pb.h"
#include "runtime/data/npy.h"
#include "runtime/data/npz.h"

#include "ir/half.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <sys/stat.h>
#include <unistd.h>

using namespace mpc;

namespace {

std::string inputsDir() {
  return std::string(MPC_SOURCE_DIR) + "/tests/unit/Inputs/";
}

bool exists(const std::string &p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0;
}

/// Whether a temporary of `p` (P.tmp, P.tmp.PID) is left in its folder.
bool tempLeft(const std::string &p) {
  std::filesystem::path path(p);
  std::string prefix = path.filename().string() + ".tmp";
  for (const auto &e : std::filesystem::directory_iterator(path.parent_path()))
    if (e.path().filename().string().rfind(prefix, 0) == 0)
      return true;
  return false;
}

std::string tempPath(const std::string &name) {
  std::string dir = ::testing::TempDir();
  if (!dir.empty() && dir.back() != '/')
    dir += '/';
  return dir + "mpc_npy_test_" + std::to_string(::getpid()) + "_" + name;
}

std::vector<uint8_t> readBytes(const std::string &p) {
  std::ifstream f(p, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

void writeBytes(const std::string &p, const std::vector<uint8_t> &b) {
  std::ofstream f(p, std::ios::binary);
  f.write(reinterpret_cast<const char *>(b.data()), std::streamsize(b.size()));
}

// A tensor of the given dtype and dims with distinct, representable values.
Tensor sample(DType t, std::vector<int64_t> dims) {
  Tensor x(t, dims);
  for (int64_t i = 0; i < x.numel(); ++i) {
    double v = t == DType::Bool ? double(i % 3 == 0)
               : t == DType::U8 ? double(i * 37 % 256)
                                : double((i * 37) % 200 - 100) * 0.5;
    if (!isFloating(t))
      v = std::floor(v);
    x.setFromDouble(i, v);
  }
  return x;
}

const Tensor *find(const std::vector<std::pair<std::string, Tensor>> &a,
                   const std::string &name) {
  for (auto &p : a)
    if (p.first == name)
      return &p.second;
  return nullptr;
}

// Builds a format 1.0 .npy image around a literal header and payload.
std::vector<uint8_t> npyImage(const std::string &header,
                              const std::vector<uint8_t> &payload = {}) {
  std::vector<uint8_t> b = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  b.push_back(uint8_t(header.size()));
  b.push_back(uint8_t(header.size() >> 8));
  b.insert(b.end(), header.begin(), header.end());
  b.insert(b.end(), payload.begin(), payload.end());
  return b;
}

std::string parseError(const std::vector<uint8_t> &img) {
  Tensor t;
  std::string err;
  EXPECT_FALSE(parseNpy(img.data(), img.size(), "mem.npy", t, err));
  return err;
}

std::string npyError(const std::string &file) {
  Tensor t;
  std::string err;
  EXPECT_FALSE(readNpy(inputsDir() + file, t, err)) << file;
  return err;
}

std::string npzError(const std::string &file) {
  std::vector<std::pair<std::string, Tensor>> a;
  std::string err;
  EXPECT_FALSE(readNpz(inputsDir() + file, a, err)) << file;
  return err;
}

const DType kAllTypes[] = {DType::F32, DType::F16, DType::BF16,
                           DType::F64, DType::I64, DType::I32,
                           DType::I8,  DType::U8,  DType::Bool};

} // namespace

// ---------------------------------------------------------------- .npy ----

TEST(Npy, RoundTripEveryDType) {
  for (DType dt : kAllTypes) {
    for (std::vector<int64_t> dims :
         {std::vector<int64_t>{2, 3}, {5}, {}, {0, 4}, {1, 2, 1, 3}}) {
      SCOPED_TRACE(std::string(dtypeName(dt)) + "[" + dimsToString(dims) + "]");
      Tensor x = sample(dt, dims);
      std::string p = tempPath("rt.npy");
      std::string err;
      ASSERT_TRUE(writeNpy(p, x, err)) << err;
      EXPECT_FALSE(tempLeft(p));
      std::vector<uint8_t> img = readBytes(p);
      ASSERT_GE(img.size(), 10u);
      EXPECT_EQ(
          (img.size() - x.numel() * (dt == DType::BF16 ? 4 : dtypeSize(dt))) %
              64,
          0u)
          << "data is 64-byte aligned";
      Tensor y;
      ASSERT_TRUE(readNpy(p, y, err)) << err;
      EXPECT_EQ(y.dims, x.dims);
      if (dt == DType::BF16) {
        // numpy has no bfloat16: written as float32, exactly.
        EXPECT_EQ(y.dtype, DType::F32);
        ASSERT_EQ(y.numel(), x.numel());
        for (int64_t i = 0; i < x.numel(); ++i)
          EXPECT_EQ(y.data<float>()[i], bf16ToFloat(x.data<uint16_t>()[i]));
      } else {
        EXPECT_EQ(y.dtype, dt);
        EXPECT_EQ(y.bytes, x.bytes);
      }
      // The in-memory parser agrees with the file reader.
      Tensor z;
      ASSERT_TRUE(parseNpy(img.data(), img.size(), "rt.npy", z, err)) << err;
      EXPECT_EQ(z.bytes, y.bytes);
      std::remove(p.c_str());
    }
  }
}

TEST(Npy, HeaderText) {
  std::vector<uint8_t> img;
  std::string err;
  ASSERT_TRUE(serializeNpy(sample(DType::F32, {7}), img, err)) << err;
  std::string text(img.begin() + 10, img.begin() + 10 + (img[8] | img[9] << 8));
  EXPECT_EQ(text.rfind(
                "{'descr': '<f4', 'fortran_order': False, 'shape': (7,), }", 0),
            0u)
      << text;
  EXPECT_EQ(text.back(), '\n');
  ASSERT_TRUE(serializeNpy(sample(DType::Bool, {}), img, err)) << err;
  text.assign(img.begin() + 10, img.begin() + 10 + (img[8] | img[9] << 8));
  EXPECT_NE(text.find("'descr': '|b1'"), std::string::npos) << text;
  EXPECT_NE(text.find("'shape': ()"), std::string::npos) << text;
}

TEST(Npy, LongHeaderUsesVersion2) {
  Tensor x(DType::I8, std::vector<int64_t>(30000, 1));
  x.data<int8_t>()[0] = -5;
  std::vector<uint8_t> img;
  std::string err;
  ASSERT_TRUE(serializeNpy(x, img, err)) << err;
  EXPECT_EQ(img[6], 2);
  EXPECT_EQ((img.size() - 1) % 64, 0u);
  Tensor y;
  ASSERT_TRUE(parseNpy(img.data(), img.size(), "long.npy", y, err)) << err;
  EXPECT_EQ(y.dims, x.dims);
  EXPECT_EQ(y.bytes, x.bytes);
}

TEST(Npy, ReadsVersions2And3) {
  for (const char *f : {"npy_v2.npy", "npy_v3.npy"}) {
    Tensor t;
    std::string err;
    ASSERT_TRUE(readNpy(inputsDir() + f, t, err)) << err;
    EXPECT_EQ(t.dtype, DType::F32);
    EXPECT_EQ(t.dims, (std::vector<int64_t>{2, 2}));
    EXPECT_EQ(t.toFloats(), (std::vector<float>{1.5f, -2.5f, 3.0f, 4.0f}));
  }
}

TEST(Npy, BadFiles) {
  EXPECT_NE(
      npyError("npy_big_endian.npy")
          .find("npy_big_endian.npy: unsupported dtype '>f4' (big-endian)"),
      std::string::npos);
  EXPECT_NE(npyError("npy_fortran.npy").find("fortran_order"),
            std::string::npos);
  std::string e = npyError("npy_truncated.npy");
  EXPECT_NE(e.find("npy_truncated.npy: truncated"), std::string::npos) << e;
  e = npyError("does_not_exist.npy");
  EXPECT_NE(e.find("does_not_exist.npy: cannot open"), std::string::npos) << e;
  e = npyError("npy_mixed.npz");
  EXPECT_NE(e.find("bad magic"), std::string::npos) << e;
}

TEST(Npy, MalformedHeaders) {
  struct Case {
    std::string header;
    std::string expect;
  } cases[] = {
      {"{'descr': '<u2', 'fortran_order': False, 'shape': (1,), }",
       "unsupported dtype '<u2'"},
      {"{'descr': '|O', 'fortran_order': False, 'shape': (1,), }",
       "unsupported dtype '|O'"},
      {"{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }",
       "unsupported dtype '<c8'"},
      {"{'descr': '>i8', 'fortran_order': False, 'shape': (1,), }",
       "(big-endian)"},
      {"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }",
       "structured"},
      {"{'descr': '<f4', 'fortran_order': False, }", "missing 'shape'"},
      {"{'fortran_order': False, 'shape': (1,), }", "missing 'descr'"},
      {"{'descr': '<f4', 'fortran_order': 0, 'shape': (1,), }",
       "fortran_order"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }",
       "bad dimension"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': [1], }",
       "not a tuple"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': "
       "(99999999999999999999,), }",
       "bad dimension"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, "
       "4294967296), }",
       "too large"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776, "
       "1024), }",
       "too large"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,",
       "malformed header"},
      {"{'descr': '<f4", "unterminated string"},
      {"['descr']", "not a dict"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,), } junk",
       "unexpected text"},
      {"", "malformed header"},
      {std::string(40, '(') + "1" + std::string(40, ')'), "nests too deeply"},
  };
  for (const Case &c : cases) {
    std::string e = parseError(npyImage(c.header, {0, 0, 128, 63}));
    EXPECT_NE(e.find(c.expect), std::string::npos) << c.header << " -> " << e;
    EXPECT_EQ(e.rfind("mem.npy: ", 0), 0u) << e;
  }
  // A well-formed header with the wrong amount of data.
  std::string ok =
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\n";
  EXPECT_NE(parseError(npyImage(ok, {1, 2, 3, 4})).find("truncated"),
            std::string::npos);
  EXPECT_NE(parseError(npyImage(ok, std::vector<uint8_t>(9))).find("trailing"),
            std::string::npos);
  Tensor t;
  std::string err;
  std::vector<uint8_t> good = npyImage(ok, std::vector<uint8_t>(8));
  EXPECT_TRUE(parseNpy(good.data(), good.size(), "mem.npy", t, err)) << err;
  // Python 2 longs and double quotes are accepted.
  good = npyImage(
      "{\"descr\": \"<i4\", \"fortran_order\": False, \"shape\": (2L,)}",
      std::vector<uint8_t>(8));
  EXPECT_TRUE(parseNpy(good.data(), good.size(), "mem.npy", t, err)) << err;
  // Bad magic / version / lengths.
  std::vector<uint8_t> img = good;
  img[7] = 1;
  EXPECT_NE(parseError(img).find("unsupported .npy format version 1.1"),
            std::string::npos);
  img = good;
  img[6] = 4;
  EXPECT_NE(parseError(img).find("version 4.0"), std::string::npos);
  img = good;
  img[9] = 0x7f;
  EXPECT_NE(parseError(img).find("truncated .npy header"), std::string::npos);
  EXPECT_NE(parseError({}).find("too short"), std::string::npos);
  EXPECT_NE(parseError({0x93, 'N', 'U', 'M', 'P', 'Y', 1}).find("truncated"),
            std::string::npos);
  img = {0x93, 'N', 'U', 'M', 'P', 'Y', 2, 0, 0xff, 0xff, 0xff, 0xff};
  EXPECT_NE(parseError(img).find("too large"), std::string::npos);
}

TEST(Npy, EveryTruncationFails) {
  std::vector<uint8_t> img;
  std::string err;
  ASSERT_TRUE(serializeNpy(sample(DType::F64, {3, 2}), img, err));
  for (size_t n = 0; n < img.size(); ++n) {
    std::vector<uint8_t> cut(img.begin(), img.begin() + n);
    Tensor t;
    EXPECT_FALSE(parseNpy(cut.data(), cut.size(), "cut.npy", t, err)) << n;
  }
}

TEST(Npy, RandomCorruptionNeverCrashes) {
  std::vector<uint8_t> img;
  std::string err;
  ASSERT_TRUE(serializeNpy(sample(DType::I32, {2, 5}), img, err));
  std::mt19937 rng(99);
  const char alphabet[] = "{}()[]',:\"0123456789-L <>|=fiub TrueFalse\n";
  for (int iter = 0; iter < 5000; ++iter) {
    std::vector<uint8_t> bad = img;
    int edits = 1 + int(rng() % 4);
    for (int k = 0; k < edits; ++k) {
      size_t at = rng() % 128; // the preamble and header
      bad[at] = rng() % 2 ? uint8_t(rng())
                          : uint8_t(alphabet[rng() % (sizeof alphabet - 1)]);
    }
    Tensor t;
    if (parseNpy(bad.data(), bad.size(), "fuzz.npy", t, err)) {
      EXPECT_EQ(uint64_t(t.numel()) * dtypeSize(t.dtype), t.bytes.size());
    } else {
      EXPECT_EQ(err.rfind("fuzz.npy: ", 0), 0u) << err;
    }
  }
}

TEST(Npy, WriteErrors) {
  std::string err;
  EXPECT_FALSE(writeNpy(tempPath("u.npy"), Tensor(), err));
  EXPECT_NE(err.find("undefined dtype"), std::string::npos) << err;
  Tensor bad = sample(DType::F32, {4});
  bad.bytes.resize(3);
  EXPECT_FALSE(writeNpy(tempPath("b.npy"), bad, err));
  EXPECT_NE(err.find("expected 16"), std::string::npos) << err;
  EXPECT_FALSE(
      writeNpy("/nonexistent-dir/x.npy", sample(DType::F32, {1}), err));
  EXPECT_NE(err.find("/nonexistent-dir/x.npy: cannot create"),
            std::string::npos)
      << err;
}

// ---------------------------------------------------------------- .npz ----

namespace {

void checkMixed(const std::vector<std::pair<std::string, Tensor>> &a,
                bool more) {
  std::vector<std::string> names;
  for (auto &p : a)
    names.push_back(p.first);
  std::vector<std::string> expect = {"a", "b", "c", "d", "e", "z"};
  if (more)
    expect.insert(expect.end(), {"i", "j", "k"});
  ASSERT_EQ(names, expect);
  const Tensor *t = find(a, "a");
  EXPECT_EQ(t->dtype, DType::F32);
  EXPECT_EQ(t->dims, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(t->toFloats(), (std::vector<float>{-1, -0.5, 0, 0.5, 1, 1.5}));
  t = find(a, "b");
  EXPECT_EQ(t->dtype, DType::I64);
  EXPECT_EQ(t->toInt64s(), (std::vector<int64_t>{-1, 0, int64_t(1) << 40,
                                                 -(int64_t(1) << 62)}));
  t = find(a, "c");
  EXPECT_EQ(t->dtype, DType::F16);
  EXPECT_EQ(t->toFloats(), (std::vector<float>{0.5f, -2.0f, 65504.0f}));
  t = find(a, "d");
  EXPECT_EQ(t->dtype, DType::Bool);
  EXPECT_EQ(t->dims, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(t->bytes, (std::vector<uint8_t>{1, 0, 0, 1}));
  t = find(a, "e");
  EXPECT_EQ(t->dtype, DType::F64);
  EXPECT_TRUE(t->dims.empty());
  EXPECT_EQ(t->getAsDouble(0), 3.25);
  t = find(a, "z");
  EXPECT_EQ(t->dtype, DType::F32);
  EXPECT_EQ(t->dims, (std::vector<int64_t>{0, 3}));
  EXPECT_TRUE(t->bytes.empty());
  if (!more)
    return;
  t = find(a, "i");
  EXPECT_EQ(t->dtype, DType::I32);
  EXPECT_EQ(t->toInt64s(), (std::vector<int64_t>{-7, 0, 2147483647}));
  t = find(a, "j");
  EXPECT_EQ(t->dtype, DType::I8);
  EXPECT_EQ(t->toInt64s(), (std::vector<int64_t>{-128, 5, 127}));
  t = find(a, "k");
  EXPECT_EQ(t->dtype, DType::U8);
  EXPECT_EQ(t->toInt64s(), (std::vector<int64_t>{0, 200, 255}));
}

} // namespace

TEST(Npz, ReadsSavez) {
  std::vector<std::pair<std::string, Tensor>> a;
  std::string err;
  ASSERT_TRUE(readNpz(inputsDir() + "npy_mixed.npz", a, err)) << err;
  checkMixed(a, false);
}

TEST(Npz, ReadsSavezCompressed) {
  std::vector<std::pair<std::string, Tensor>> a;
  std::string err;
  ASSERT_TRUE(readNpz(inputsDir() + "npy_compressed.npz", a, err)) << err;
  checkMixed(a, true);
}

TEST(Npz, ReadsZip64Records) {
  std::vector<std::pair<std::string, Tensor>> a;
  std::string err;
  ASSERT_TRUE(readNpz(inputsDir() + "npy_zip64.npz", a, err)) << err;
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].first, "a");
  EXPECT_EQ(a[0].second.toFloats(),
            (std::vector<float>{-1, -0.5, 0, 0.5, 1, 1.5}));
  EXPECT_EQ(a[1].first, "b");
  EXPECT_EQ(a[1].second.toInt64s()[2], int64_t(1) << 40);
}

TEST(Npz, BadFiles) {
  std::string e = npzError("npy_big_endian.npz");
  EXPECT_NE(e.find("npy_big_endian.npz: array 'x': unsupported dtype '>f4' "
                   "(big-endian)"),
            std::string::npos)
      << e;
  e = npzError("npy_truncated.npz");
  EXPECT_NE(
      e.find(
          "npy_truncated.npz: not a zip archive (no end of central directory"),
      std::string::npos)
      << e;
  e = npzError("npy_bad_crc.npz");
  EXPECT_NE(e.find("npy_bad_crc.npz: array 'a': CRC-32 mismatch"),
            std::string::npos)
      << e;
  e = npzError("npy_bad_deflate.npz");
  EXPECT_NE(e.find("npy_bad_deflate.npz: array 'a': "), std::string::npos) << e;
  e = npzError("npy_not_npy.npz");
  EXPECT_NE(e.find("entry 'README.txt' is not a .npy file"), std::string::npos)
      << e;
  e = npzError("npy_v2.npy");
  EXPECT_NE(e.find("not a zip archive"), std::string::npos) << e;
  e = npzError("missing.npz");
  EXPECT_NE(e.find("missing.npz: cannot open"), std::string::npos) << e;
}

TEST(Npz, ImpossibleDeclaredSize) {
  // A corrupt central directory claiming 2 GiB for a tiny deflate entry is
  // rejected before anything is allocated.
  std::vector<uint8_t> img = readBytes(inputsDir() + "npy_compressed.npz");
  ASSERT_FALSE(img.empty());
  const uint8_t sig[4] = {'P', 'K', 1, 2};
  auto it = std::search(img.begin(), img.end(), sig, sig + 4);
  ASSERT_NE(it, img.end());
  size_t cd = size_t(it - img.begin());
  img[cd + 24] = 0xff, img[cd + 25] = 0xff, img[cd + 26] = 0xff,
           img[cd + 27] = 0x7f;
  std::string p = tempPath("huge.npz"), err;
  writeBytes(p, img);
  std::vector<std::pair<std::string, Tensor>> a;
  EXPECT_FALSE(readNpz(p, a, err));
  EXPECT_NE(err.find("array 'a': declared size 2147483647 is impossible"),
            std::string::npos)
      << err;
  std::remove(p.c_str());
}

TEST(Npz, RoundTrip) {
  std::vector<std::pair<std::string, Tensor>> in;
  for (DType dt : kAllTypes)
    in.emplace_back(std::string("t_") + dtypeName(dt), sample(dt, {3, 2}));
  in.emplace_back("scalar", sample(DType::F32, {}));
  in.emplace_back("empty", sample(DType::I64, {0}));
  in.emplace_back("layer.0/weight", sample(DType::F16, {4}));
  std::string p = tempPath("rt.npz"), err;
  ASSERT_TRUE(writeNpz(p, in, err)) << err;
  EXPECT_FALSE(tempLeft(p));
  std::vector<std::pair<std::string, Tensor>> out;
  ASSERT_TRUE(readNpz(p, out, err)) << err;
  ASSERT_EQ(out.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    SCOPED_TRACE(in[i].first);
    EXPECT_EQ(out[i].first, in[i].first);
    EXPECT_EQ(out[i].second.dims, in[i].second.dims);
    if (in[i].second.dtype == DType::BF16) {
      EXPECT_EQ(out[i].second.dtype, DType::F32);
      EXPECT_EQ(out[i].second.toFloats(), in[i].second.toFloats());
    } else {
      EXPECT_EQ(out[i].second.dtype, in[i].second.dtype);
      EXPECT_EQ(out[i].second.bytes, in[i].second.bytes);
    }
  }
  std::remove(p.c_str());

  EXPECT_FALSE(writeNpz(p, {{"a", Tensor()}}, err));
  EXPECT_NE(err.find("array 'a': cannot write a tensor with undefined dtype"),
            std::string::npos)
      << err;
  EXPECT_FALSE(exists(p) || tempLeft(p));
  EXPECT_FALSE(writeNpz(p, {{"a", in[0].second}, {"a", in[1].second}}, err));
  EXPECT_NE(err.find("duplicate array name 'a'"), std::string::npos) << err;

  // A write that fails half-way leaves the previous archive as it was.
  ASSERT_TRUE(writeNpz(p, {{"keep", in[0].second}}, err)) << err;
  std::vector<uint8_t> before = readBytes(p);
  EXPECT_FALSE(writeNpz(p, {{"b", in[1].second}, {"c", Tensor()}}, err));
  EXPECT_EQ(readBytes(p), before);
  EXPECT_FALSE(tempLeft(p));
  std::remove(p.c_str());
}

// Truncations and random corruption of real archives must fail cleanly (or,
// for bytes the reader does not look at, succeed) and never crash.
TEST(Npz, CorruptionNeverCrashes) {
  for (const char *f :
       {"npy_mixed.npz", "npy_compressed.npz", "npy_zip64.npz"}) {
    std::vector<uint8_t> img = readBytes(inputsDir() + f);
    ASSERT_FALSE(img.empty()) << f;
    std::string p = tempPath("corrupt.npz"), err;
    std::vector<std::pair<std::string, Tensor>> a;
    for (size_t n = 0; n < img.size(); n += 7) {
      writeBytes(p, std::vector<uint8_t>(img.begin(), img.begin() + n));
      EXPECT_FALSE(readNpz(p, a, err)) << f << " cut at " << n;
      EXPECT_EQ(err.rfind(p + ": ", 0), 0u) << err;
    }
    std::mt19937 rng(1234);
    for (int iter = 0; iter < 300; ++iter) {
      std::vector<uint8_t> bad = img;
      for (int k = 0; k < 3; ++k)
        bad[rng() % bad.size()] ^= uint8_t(1u << (rng() % 8));
      writeBytes(p, bad);
      if (!readNpz(p, a, err)) {
        EXPECT_EQ(err.rfind(p + ": ", 0), 0u) << err;
      }
    }
    std::remove(p.c_str());
  }
}

TEST(Npz, MlpSeedData) {
  for (const char *f : {"mlp_seed_data.npz", "mlp_seed_data_compressed.npz"}) {
    std::string p = std::string(MPC_SOURCE_DIR) + "/models/" + f;
    if (!exists(p))
      GTEST_SKIP() << p << " not present";
    SCOPED_TRACE(f);
    std::vector<std::pair<std::string, Tensor>> a;
    std::string err;
    ASSERT_TRUE(readNpz(p, a, err)) << err;
    ASSERT_EQ(a.size(), 2u);
    EXPECT_EQ(a[0].first, "x");
    EXPECT_EQ(a[1].first, "y");
    const Tensor &x = a[0].second, &y = a[1].second;
    ASSERT_EQ(x.dtype, DType::F32);
    ASSERT_EQ(x.dims, (std::vector<int64_t>{1024, 10}));
    ASSERT_EQ(y.dtype, DType::I64);
    ASSERT_EQ(y.dims, (std::vector<int64_t>{1024}));
    // y = (x0 + 0.5*x1 - x2 > 0), computed in float32 by the generator.
    int64_t ones = 0;
    for (int64_t i = 0; i < 1024; ++i) {
      const float *r = x.data<float>() + i * 10;
      float s = r[0] + 0.5f * r[1];
      s = s - r[2];
      EXPECT_EQ(y.data<int64_t>()[i], s > 0 ? 1 : 0) << "row " << i;
      ones += y.data<int64_t>()[i];
    }
    EXPECT_GT(ones, 300);
    EXPECT_LT(ones, 724);
    EXPECT_NEAR(x.data<float>()[0], 0.12573022f, 1e-7);
  }
}

// -------------------------------------------------------- TensorProto ----

TEST(TensorPb, ReadsOnnxBackendTestData) {
  std::string dir =
      "/usr/share/libonnx-testdata/data/node/test_add/test_data_set_0/";
  if (!exists(dir))
    GTEST_SKIP() << dir << " not present";
  Tensor x, y, sum;
  std::string nx, ny, ns, err;
  ASSERT_TRUE(readTensorProtoFile(dir + "input_0.pb", x, &nx, err)) << err;
  ASSERT_TRUE(readTensorProtoFile(dir + "input_1.pb", y, &ny, err)) << err;
  ASSERT_TRUE(readTensorProtoFile(dir + "output_0.pb", sum, &ns, err)) << err;
  EXPECT_EQ(nx, "x");
  EXPECT_EQ(ny, "y");
  EXPECT_EQ(ns, "sum");
  EXPECT_EQ(x.dtype, DType::F32);
  EXPECT_EQ(x.dims, (std::vector<int64_t>{3, 4, 5}));
  EXPECT_NEAR(x.data<float>()[0], 1.7640524f, 1e-6);
  ASSERT_EQ(y.dims, x.dims);
  ASSERT_EQ(sum.dims, x.dims);
  for (int64_t i = 0; i < x.numel(); ++i)
    EXPECT_EQ(sum.data<float>()[i], x.data<float>()[i] + y.data<float>()[i]);
  EXPECT_TRUE(readTensorProtoFile(dir + "input_0.pb", x, nullptr, err)) << err;
}

TEST(TensorPb, TypedFields) {
  onnx::TensorProto p;
  Tensor t;
  std::string err;
  p.set_name("f");
  p.set_data_type(onnx::TensorProto_DataType_FLOAT);
  p.add_dims(2);
  p.add_float_data(1.5f);
  p.add_float_data(-3.0f);
  ASSERT_TRUE(tensorFromProto(p, t, err)) << err;
  EXPECT_EQ(t.toFloats(), (std::vector<float>{1.5f, -3.0f}));

  p.Clear();
  p.set_data_type(onnx::TensorProto_DataType_FLOAT16);
  p.add_dims(2);
  p.add_int32_data(floatToHalf(0.25f));
  p.add_int32_data(floatToHalf(-65504.0f));
  ASSERT_TRUE(tensorFromProto(p, t, err)) << err;
  EXPECT_EQ(t.dtype, DType::F16);
  EXPECT_EQ(t.toFloats(), (std::vector<float>{0.25f, -65504.0f}));

  p.set_data_type(onnx::TensorProto_DataType_BFLOAT16);
  p.set_int32_data(0, floatToBf16(2.0f));
  p.set_int32_data(1, floatToBf16(-1.0f));
  ASSERT_TRUE(tensorFromProto(p, t, err)) << err;
  EXPECT_EQ(t.dtype, DType::BF16);
  EXPECT_EQ(t.toFloats(), (std::vector<float>{2.0f, -1.0f}));

  p.set_data_type(onnx::TensorProto_DataType_BOOL);
  p.set_int32_data(0, 0);
  p.set_int32_data(1, 7);
  ASSERT_TRUE(tensorFromProto(p, t, err)) << err;
  EXPECT_EQ(t.bytes, (std::vector<uint8_t>{0, 1}));

  p.set_data_type(onnx::TensorProto_DataType_INT8);
  p.set_int32_data(0, -128);
  p.set_int32_data(1, 127);
  ASSERT_TRUE(tensorFromProto(p, t, err)) << err;
  EXPECT_EQ(t.toInt64s(), (std::vector<int64_t>{-128, 127}));

  p.set_data_type(onnx::TensorProto_DataType_UINT8);
  p.set_int32_data(0, 255);
  ASSERT_TRUE(tensorFromProto(p, t, err)) << err;
  EXPECT_EQ(t.toInt64s(), (std::vector<int64_t>{255, 127}));

  p.set_data_type(onnx::TensorProto_DataType_INT32);
  p.set_int32_data(0, -2147483647 - 1);
  ASSERT_TRUE(tensorFromProto(p, t, err)) << err;
  EXPECT_EQ(t.toInt64s(), (std::vector<int64_t>{-2147483647 - 1, 127}));

  p.Clear();
  p.set_data_type(onnx::TensorProto_DataType_INT64); // scalar: no dims, 1 value
  p.add_int64_data(int64_t(1) << 50);
  ASSERT_TRUE(tensorFromProto(p, t, err)) << err;
  EXPECT_TRUE(t.dims.empty());
  EXPECT_EQ(t.toInt64s(), (std::vector<int64_t>{int64_t(1) << 50}));

  p.Clear();
  p.set_data_type(onnx::TensorProto_DataType_DOUBLE);
  p.add_dims(1);
  p.add_double_data(0.1);
  ASSERT_TRUE(tensorFromProto(p, t, err)) << err;
  EXPECT_EQ(t.getAsDouble(0), 0.1);

  p.Clear(); // empty tensor, no data at all
  p.set_data_type(onnx::TensorProto_DataType_FLOAT);
  p.add_dims(0);
  p.add_dims(5);
  ASSERT_TRUE(tensorFromProto(p, t, err)) << err;
  EXPECT_EQ(t.dims, (std::vector<int64_t>{0, 5}));
  EXPECT_TRUE(t.bytes.empty());
}

TEST(TensorPb, RoundTrip) {
  for (DType dt : kAllTypes) {
    SCOPED_TRACE(dtypeName(dt));
    Tensor x = sample(dt, {2, 3});
    onnx::TensorProto p;
    tensorToProto(x, "w", p);
    EXPECT_EQ(p.name(), "w");
    EXPECT_EQ(p.data_type(), toOnnxDataType(dt));
    Tensor y;
    std::string err;
    ASSERT_TRUE(tensorFromProto(p, y, err)) << err;
    EXPECT_EQ(y.dtype, dt);
    EXPECT_EQ(y.dims, x.dims);
    EXPECT_EQ(y.bytes, x.bytes);
  }
  std::string path = tempPath("t.pb"), err, name;
  Tensor x = sample(DType::F16, {4}), y;
  ASSERT_TRUE(writeTensorProtoFile(path, x, "half", err)) << err;
  ASSERT_TRUE(readTensorProtoFile(path, y, &name, err)) << err;
  EXPECT_EQ(name, "half");
  EXPECT_EQ(y.bytes, x.bytes);
  std::remove(path.c_str());
}

// Taking a TensorProto over: large raw_data becomes the tensor's storage
// (the same bytes, no copy), small raw_data and typed fields are copied as
// before, bools are normalised either way, and the checks and their errors
// are the same as for a copy.
TEST(TensorPb, TakingOverRawDataHoldsTheProtosBytes) {
  std::string err;
  Tensor x = sample(DType::F32, {64, 33}); // 8448 bytes: held
  onnx::TensorProto p;
  tensorToProto(x, "w", p);
  const char *at = p.raw_data().data();
  Tensor y;
  ASSERT_TRUE(tensorFromProto(std::move(p), y, err)) << err;
  EXPECT_TRUE(y.bytes.isHeld());
  EXPECT_EQ(reinterpret_cast<const char *>(y.bytes.data()), at);
  EXPECT_EQ(y.bytes, x.bytes);
  EXPECT_EQ(y.dims, x.dims);
  EXPECT_FALSE(p.has_raw_data());

  Tensor small = sample(DType::F32, {3}), z;
  tensorToProto(small, "b", p);
  ASSERT_TRUE(tensorFromProto(std::move(p), z, err)) << err;
  EXPECT_FALSE(z.bytes.isHeld());
  EXPECT_EQ(z.bytes, small.bytes);

  onnx::TensorProto flags;
  flags.set_name("mask");
  flags.set_data_type(onnx::TensorProto_DataType_BOOL);
  flags.add_dims(kHeldRawDataBytes);
  std::string raw(kHeldRawDataBytes, '\0');
  raw[7] = 2; // not a 0/1 byte: read as true
  flags.set_raw_data(raw);
  Tensor mask;
  ASSERT_TRUE(tensorFromProto(std::move(flags), mask, err)) << err;
  EXPECT_TRUE(mask.bytes.isHeld());
  EXPECT_EQ(mask.bytes[7], 1);
  EXPECT_EQ(mask.bytes[6], 0);

  onnx::TensorProto bad;
  bad.set_name("w");
  bad.set_data_type(onnx::TensorProto_DataType_FLOAT);
  bad.add_dims(2048);
  bad.set_raw_data(std::string(8191, '\0'));
  Tensor t;
  EXPECT_FALSE(tensorFromProto(std::move(bad), t, err));
  EXPECT_EQ(err, "tensor 'w': raw_data has 8191 bytes, expected 8192 for "
                 "fp32[2048]");
}

TEST(TensorPb, Errors) {
  auto fails = [](const onnx::TensorProto &p) {
    Tensor t;
    std::string err;
    EXPECT_FALSE(tensorFromProto(p, t, err));
    return err;
  };
  onnx::TensorProto p;
  p.set_name("w");
  p.set_data_type(onnx::TensorProto_DataType_FLOAT);
  p.add_dims(3);
  p.set_raw_data(std::string(11, '\0'));
  std::string e = fails(p);
  EXPECT_NE(e.find("tensor 'w': raw_data has 11 bytes, expected 12"),
            std::string::npos)
      << e;

  p.clear_raw_data();
  p.add_float_data(1);
  e = fails(p);
  EXPECT_NE(e.find("1 values in float_data, expected 3"), std::string::npos)
      << e;

  p.Clear();
  p.set_data_type(onnx::TensorProto_DataType_FLOAT);
  p.add_dims(2);
  p.add_dims(-1);
  EXPECT_NE(fails(p).find("negative dimension -1"), std::string::npos);

  p.Clear();
  p.set_data_type(onnx::TensorProto_DataType_FLOAT);
  p.add_dims(int64_t(1) << 40);
  p.add_dims(int64_t(1) << 40);
  EXPECT_NE(fails(p).find("too large"), std::string::npos); // overflows int64

  p.Clear();
  p.set_data_type(onnx::TensorProto_DataType_FLOAT);
  p.add_dims(int64_t(1) << 32); // 16 GiB of floats
  p.add_dims(4);
  EXPECT_NE(fails(p).find("too large"), std::string::npos);

  p.Clear();
  p.set_data_type(onnx::TensorProto_DataType_STRING);
  EXPECT_NE(fails(p).find("unsupported data type STRING"), std::string::npos);
  p.set_data_type(12345);
  EXPECT_NE(fails(p).find("unsupported data type 12345"), std::string::npos);

  p.Clear();
  p.set_data_type(onnx::TensorProto_DataType_FLOAT);
  p.set_data_location(onnx::TensorProto_DataLocation_EXTERNAL);
  EXPECT_NE(fails(p).find("external data"), std::string::npos);

  Tensor t;
  std::string err;
  std::string bad = tempPath("bad.pb");
  writeBytes(bad, {0xff, 0xff, 0xff, 0xff, 0x0f});
  EXPECT_FALSE(readTensorProtoFile(bad, t, nullptr, err));
  EXPECT_NE(err.find("bad.pb: not a valid serialized TensorProto"),
            std::string::npos)
      << err;
  std::remove(bad.c_str());
  EXPECT_FALSE(readTensorProtoFile(tempPath("none.pb"), t, nullptr, err));
  EXPECT_NE(err.find("none.pb: cannot open"), std::string::npos) << err;
}
