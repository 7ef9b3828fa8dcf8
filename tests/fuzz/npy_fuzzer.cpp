// Fuzz target: the .npy reader (mpc-run --infer inputs, the arrays of .npz).
//
// The three entry points must agree: parseNpy on a buffer, parseNpy taking
// ownership of it, and readNpy on the same bytes as a file. A tensor that
// loads must survive serializeNpy -> parseNpy unchanged; a rejection is one
// line starting with the name given.
#include "runtime/data/npy.h"
#include "tests/fuzz/fuzz_support.h"

using namespace mpc;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  Tensor fromBuffer, fromImage, fromFile;
  std::string errBuffer, errImage, errFile;
  bool okBuffer = parseNpy(data, size, "fuzz.npy", fromBuffer, errBuffer);
  bool okImage = parseNpy(std::vector<uint8_t>(data, data + size), "fuzz.npy",
                          fromImage, errImage);
  const std::string path = fuzz::writeScratchFile("fuzz.npy", data, size);
  bool okFile = readNpy(path, fromFile, errFile);

  fuzz::require(okBuffer == okImage && okBuffer == okFile,
                "parseNpy (buffer, image) and readNpy disagree");
  if (!okBuffer) {
    fuzz::checkErrorMessage(errBuffer, "fuzz.npy: ");
    fuzz::checkErrorMessage(errImage, "fuzz.npy: ");
    fuzz::checkErrorMessage(errFile, path + ": ");
    return 0;
  }
  fuzz::require(fuzz::sameTensor(fromBuffer, fromImage) &&
                    fuzz::sameTensor(fromBuffer, fromFile),
                "parseNpy (buffer, image) and readNpy read different tensors");
  fuzz::require(int64_t(fromBuffer.bytes.size()) ==
                    fromBuffer.numel() * int64_t(dtypeSize(fromBuffer.dtype)),
                "tensor size does not match its dims");

  std::vector<uint8_t> again;
  std::string err;
  fuzz::require(serializeNpy(fromBuffer, again, err), "serializeNpy failed");
  Tensor back;
  fuzz::require(parseNpy(again.data(), again.size(), "again.npy", back, err),
                "a written .npy does not read back");
  fuzz::require(fuzz::sameTensor(back, fromBuffer),
                "a .npy round trip changed the tensor");
  return 0;
}
