// Fuzz target: the .npz reader (zip central directory, zip64, deflate, CRC)
// and the training-data validation mpc-run applies to it.
//
// The input is read with readNpz; what loads must survive writeNpz ->
// readNpz unchanged. Then Dataset::fromNpz checks it against the seed MLP's
// data inputs (x: float [10] per sample, y: int64 labels of 2 classes,
// ignore_index -100) and, when it is accepted, a few batches are cut from
// it, in order and shuffled. Every rejection is one line naming the file.
#include "runtime/data/dataset.h"
#include "runtime/data/npz.h"
#include "support/diagnostics.h"
#include "tests/fuzz/fuzz_support.h"

using namespace mpc;

namespace {

std::vector<DataInputSpec> seedMlpInputs() {
  DataInputSpec x;
  x.name = "x";
  x.dtype = DType::F32;
  x.sampleDims = {10};
  DataInputSpec y;
  y.name = "y";
  y.dtype = DType::I64;
  y.numClasses = 2;
  y.ignoreIndex = -100;
  return {x, y};
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string path = fuzz::writeScratchFile("fuzz.npz", data, size);
  std::vector<std::pair<std::string, Tensor>> arrays;
  std::string err;
  if (!readNpz(path, arrays, err)) {
    fuzz::checkErrorMessage(err, path + ": ");
    return 0;
  }
  for (const auto &kv : arrays)
    fuzz::require(int64_t(kv.second.bytes.size()) ==
                      kv.second.numel() * int64_t(dtypeSize(kv.second.dtype)),
                  "array size does not match its dims");

  const std::string again = fuzz::scratchDir() + "/again.npz";
  fuzz::require(writeNpz(again, arrays, err, Fsync::No), "writeNpz failed");
  std::vector<std::pair<std::string, Tensor>> back;
  fuzz::require(readNpz(again, back, err), "a written .npz does not read back");
  fuzz::require(back.size() == arrays.size(), "round trip lost arrays");
  for (size_t i = 0; i < back.size(); ++i)
    fuzz::require(back[i].first == arrays[i].first &&
                      fuzz::sameTensor(back[i].second, arrays[i].second),
                  "a .npz round trip changed an array");

  try {
    Dataset d = Dataset::fromNpz(path, seedMlpInputs());
    for (int64_t step = 0; step < 3; ++step) {
      d.batch(step, 4, false, 0);
      d.batch(step, 4, true, 7);
    }
  } catch (const Error &e) {
    fuzz::checkErrorMessage(e.what(), path + ": ");
  }
  return 0;
}
