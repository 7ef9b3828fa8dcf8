// Fuzz target: ONNX TensorProto .pb files (mpc-run --infer inputs, ONNX's
// backend test data) and the conversion every initializer goes through.
//
// tensorFromProto on the parsed message and readTensorProtoFile on the same
// bytes as a file must agree; a tensor that loads must survive tensorToProto
// -> tensorFromProto unchanged. readTensorFile (mpc-run's reader, .npy or
// .pb by content) must load it or throw a one-line mpc::Error naming the
// file.
#include "ir/tensor_pb.h"
#include "runtime/inference.h"
#include "support/diagnostics.h"
#include "tests/fuzz/fuzz_support.h"

#include <climits>

using namespace mpc;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > size_t(INT_MAX))
    return 0;
  const std::string path = fuzz::writeScratchFile("input_0.pb", data, size);
  Tensor fromFile;
  std::string fileName, errFile;
  bool okFile = readTensorProtoFile(path, fromFile, &fileName, errFile);
  if (!okFile)
    fuzz::checkErrorMessage(errFile, path + ": ");

  onnx::TensorProto proto;
  bool parsed = proto.ParseFromArray(data, int(size));
  fuzz::require(parsed || !okFile, "readTensorProtoFile read an unparsable "
                                   "message");
  if (parsed) {
    Tensor fromProto;
    std::string err;
    bool ok = tensorFromProto(proto, fromProto, err);
    fuzz::require(ok == okFile,
                  "tensorFromProto and readTensorProtoFile disagree");
    if (ok) {
      fuzz::require(fuzz::sameTensor(fromProto, fromFile) &&
                        fileName == proto.name(),
                    "tensorFromProto and readTensorProtoFile differ");
      fuzz::require(int64_t(fromProto.bytes.size()) ==
                        fromProto.numel() * int64_t(dtypeSize(fromProto.dtype)),
                    "tensor size does not match its dims");
      onnx::TensorProto again;
      tensorToProto(fromProto, proto.name(), again);
      Tensor back;
      fuzz::require(tensorFromProto(again, back, err),
                    "a written TensorProto does not read back");
      fuzz::require(fuzz::sameTensor(back, fromProto),
                    "a TensorProto round trip changed the tensor");
    } else {
      fuzz::checkErrorMessage(err, "tensor");
    }
  }

  try {
    (void)readTensorFile(path);
  } catch (const Error &e) {
    fuzz::checkErrorMessage(e.what(), path + ": ");
  }
  return 0;
}
