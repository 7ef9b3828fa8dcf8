// Inference: runs a model's main graph forward on a backend (mpc-run --infer).
//
// runInference prepares any supported model for a forward run: it drops the
// training step (a compiled model's main graph is its inference graph), binds
// the given inputs to the graph inputs (by name, or positionally in graph
// order), checks each against the declared dtype and dims, runs verify,
// infer-shapes (with the inputs' actual shapes, so shape arithmetic becomes
// static) and fold-constants, then executes the main graph with the Executor.
// Every problem with the model or the inputs (unsupported op, unknown or
// missing input, dtype or shape mismatch, a kernel rejecting its input) is an
// mpc::Error with one line naming the input or the node.
//
// The file side (tensor files in, .npy files out) is here too so that mpc-run
// and the ONNX conformance runner share it: readTensorFile reads .npy or ONNX
// TensorProto .pb files; writeInferenceOutputs writes DIR/NAME.npy per output,
// NAME being the output's value name made safe as a file name
// (outputFileName).
#pragma once

#include "ir/graph.h"
#include "runtime/backend.h"
#include "support/path_identity.h"

#include <string>
#include <vector>

namespace mpc {

/// One input for runInference.
struct InferenceInput {
  /// The graph input it binds to; empty: the next graph input in order that
  /// is not bound by name (positional).
  std::string name;
  Tensor value;
  /// Where the tensor came from ("x.npy"), for error messages; may be empty.
  std::string source;
};

/// One graph output after the run, in graph output order.
struct InferenceOutput {
  std::string name;
  Tensor value;
};

/// Reads a tensor file: NumPy .npy, or a serialized ONNX TensorProto (.pb, the
/// format of ONNX's backend test data). Files are told apart by content (the
/// .npy magic), so the extension does not matter. Throws Error starting with
/// the path.
Tensor readTensorFile(const std::string &path);

/// Runs `model`'s main graph forward on `backend` with these inputs and
/// returns every graph output. Changes the model (training step removed,
/// passes applied). Throws Error on bad input, naming the input or node.
std::vector<InferenceOutput> runInference(Model &model,
                                          std::vector<InferenceInput> inputs,
                                          Backend &backend);

/// The file name (without ".npy") an output named `valueName` is written as:
/// every character other than ASCII letters, digits, '.', '-' and '_'
/// becomes '_' (so "/fc1/Gemm_output_0" -> "_fc1_Gemm_output_0"); an empty
/// name, "." and ".." become "_", "_." and "_.." (never a special path).
std::string outputFileName(const std::string &valueName);

/// Throws Error naming the directory when `dir` could not be written: it
/// is not a writable directory, or is missing and its nearest existing
/// parent is not one. Creates nothing (a run that fails later leaves no
/// folder behind).
void checkOutputDir(const std::string &dir);

/// Makes sure `dir` is a writable directory (creating it, and its parents,
/// when missing). Throws Error naming the directory when it cannot be.
void prepareOutputDir(const std::string &dir);

/// Writes each output as DIR/outputFileName(name).npy (atomically, via a
/// temporary file and a rename). When two outputs map to the same file name
/// the later ones get "_2", "_3", ... appended (in graph output order).
/// Returns the paths written, one per output. Throws Error on failure, and
/// before writing anything when an output would be one of `inputs` (the
/// files the run read: support/path_identity.h).
std::vector<std::string>
writeInferenceOutputs(const std::string &dir,
                      const std::vector<InferenceOutput> &outputs,
                      const std::vector<FileRole> &inputs = {});

} // namespace mpc
