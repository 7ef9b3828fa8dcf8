// The kernels a compiled step launches and the bytes they move, counted
// from the graph alone (mpc-opt --report=kernels): the same numbers on any
// machine, so a fusion's effect is measured before a GPU confirms it.
//
// The model: every node is one kernel launch that reads each input once and
// writes each output once, at the sizes its static shapes and dtypes give.
// Nodes the runtime runs as views or that move nothing (Reshape, Squeeze,
// Unsqueeze, Flatten, Identity, Shape, Size, Constant) count no launch and
// no bytes. A node with a shape that is not concrete is counted as a launch
// and listed as unsized (its bytes unknown). Real kernels may read an input
// twice (a row in two passes) or launch more than once (a chunked sum's
// second pass); the report is the floor both backends start from.
#pragma once

#include "ir/graph.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mpc {

/// One kernel class's totals over a step.
struct KernelClassCount {
  std::string name; ///< "cast", "matmul", "elementwise", ...
  int64_t launches = 0;
  int64_t bytesRead = 0, bytesWritten = 0;
  int64_t unsized = 0; ///< launches whose bytes are unknown
};

struct KernelReport {
  /// Every class that launches anything, most bytes first.
  std::vector<KernelClassCount> classes;
  KernelClassCount total;

  /// The table mpc-opt prints: per class launches, bytes read and written
  /// (KiB, or MiB from 64 MiB in all) and the share of all bytes, then the
  /// totals.
  std::string table() const;
  /// The same as JSON: {"classes": [{"class", "launches", "bytes_read",
  /// "bytes_written", "unsized"}...], "total": {...}}.
  std::string json() const;
};

/// The kernel class of a node ("" for the nodes that launch nothing).
std::string kernelClass(const Node &n);

/// The step's kernels: the training step when the model has one, else the
/// main graph.
KernelReport reportKernels(const Model &model);

} // namespace mpc
