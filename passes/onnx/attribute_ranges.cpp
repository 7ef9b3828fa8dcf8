// Ranges of sizing and indexing attributes (passes/onnx/attribute_ranges.h).
#include "passes/onnx/attribute_ranges.h"

#include "ir/graph.h"
#include "support/diagnostics.h"

#include <cstdint>

namespace mpc {
namespace {

/// A size, pad, stride or count: 2^31 - 1 either way (Pad-2's pads may be
/// negative), past any tensor a model trains.
constexpr int64_t kMaxSize = 2147483647;
/// An axis of a value of rank <= 64 (the importer's rank limit).
constexpr int64_t kMaxAxis = 64;

struct Range {
  const char *name;
  int64_t lo, hi;
};

// The ONNX attributes that size or index (the ops read them as dims, counts
// or axes). Slice-1's starts/ends are left out: INT64_MAX there means "to
// the end".
constexpr Range kRanges[] = {
    {"pads", -kMaxSize, kMaxSize},
    {"strides", -kMaxSize, kMaxSize},
    {"dilations", -kMaxSize, kMaxSize},
    {"kernel_shape", -kMaxSize, kMaxSize},
    {"output_padding", -kMaxSize, kMaxSize},
    {"output_shape", -kMaxSize, kMaxSize},
    {"group", -kMaxSize, kMaxSize},
    {"blocksize", -kMaxSize, kMaxSize},
    {"size", -kMaxSize, kMaxSize},
    {"split", -kMaxSize, kMaxSize},
    {"num_outputs", -kMaxSize, kMaxSize},
    {"hidden_size", -kMaxSize, kMaxSize},
    {"k", -kMaxSize, kMaxSize},
    {"depth", -kMaxSize, kMaxSize},
    {"output_height", -kMaxSize, kMaxSize},
    {"output_width", -kMaxSize, kMaxSize},
    {"sampling_ratio", -kMaxSize, kMaxSize},
    {"axis", -kMaxAxis, kMaxAxis},
    {"axes", -kMaxAxis, kMaxAxis},
    {"batch_axis", -kMaxAxis, kMaxAxis},
    {"time_axis", -kMaxAxis, kMaxAxis},
    {"perm", -kMaxAxis, kMaxAxis},
};

} // namespace

void checkAttributeRange(const Node &n, std::string_view name,
                         const Attribute &a) {
  if (!n.domain().empty() ||
      (a.kind != Attribute::Kind::Int && a.kind != Attribute::Kind::Ints))
    return;
  for (const Range &r : kRanges) {
    if (name != r.name)
      continue;
    auto check = [&](int64_t v) {
      if (v < r.lo || v > r.hi)
        errorAt(n) << "attribute " << name << " value " << v
                   << " out of range [" << r.lo << ", " << r.hi << "]";
    };
    if (a.kind == Attribute::Kind::Int)
      check(a.i);
    else
      for (int64_t v : a.ints)
        check(v);
    return;
  }
}

} // namespace mpc
