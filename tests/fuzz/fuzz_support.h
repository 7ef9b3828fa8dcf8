// Helpers shared by the libFuzzer targets and their replay main.
//
// The readers under test take file paths (that is how the tools call them),
// so each target writes its input into a scratch folder of its own and reads
// it back. The oracles here are the product contract: a rejection is an
// mpc::Error (or a false return) with a one-line message; anything else that
// escapes a target (another exception, a crash, a sanitizer report, a huge
// allocation, a hang) is a bug the fuzzer reports.
#pragma once

#include "ir/graph.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace mpc::fuzz {

/// A private folder for this process (in /dev/shm when it exists, else
/// $TMPDIR or /tmp), created on first use and removed at exit.
const std::string &scratchDir();

/// Writes the bytes to scratchDir()/name, replacing it; returns the path.
std::string writeScratchFile(const std::string &name, const uint8_t *data,
                             size_t size);

/// Aborts (a finding) unless `message` is a non-empty single line that
/// starts with `prefix` (may be empty): the shape every error must have.
void checkErrorMessage(const std::string &message, const std::string &prefix);

/// Aborts with `what` when `ok` is false: a broken invariant is a finding.
void require(bool ok, const char *what);

/// True when two tensors have the same dtype, dims and bytes.
bool sameTensor(const Tensor &a, const Tensor &b);

/// What mpc-opt does with a model read from disk when asked for
/// `--passes=verify,infer-shapes` and a binary and text output: the passes
/// (each followed by the verifier), then export to ONNX and to text, and
/// the --emit=step model when there is a training step. Throws mpc::Error.
void verifyInferAndExport(Model &model);

} // namespace mpc::fuzz
