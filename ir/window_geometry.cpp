// Window geometry of convolutions and pools (see window_geometry.h).
//
// The output-size formulas are ONNX's: explicit pads give
// floor((in + pads - dilated_kernel) / stride) + 1 (ceil for pools with
// ceil_mode, dropping a last window that would start in the end padding, as
// PyTorch and the ONNX reference do); SAME_* gives ceil(in / stride) with the
// odd pad at the end (UPPER) or the beginning (LOWER); VALID gives no pads.
#include "ir/window_geometry.h"

#include "support/diagnostics.h"

#include <algorithm>
#include <map>

namespace mpc {
namespace {

std::string listText(const std::vector<int64_t> &v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i)
    s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

/// An ints attribute with exactly `count` entries, each >= `min`, or `dflt`
/// when absent.
std::vector<int64_t> intsAttr(const Node &n, const char *name, size_t count,
                              int64_t min, std::vector<int64_t> dflt) {
  const Attribute *a = n.attr(name);
  if (!a)
    return dflt;
  if (a->kind != Attribute::Kind::Ints)
    errorAt(n) << "attribute '" << name << "' must be a list of ints";
  if (a->ints.size() != count)
    errorAt(n) << "attribute '" << name << "' " << listText(a->ints)
               << " must have " << count << " entries, got " << a->ints.size();
  for (int64_t v : a->ints)
    if (v < min)
      errorAt(n) << "attribute '" << name << "' " << listText(a->ints)
                 << " must have entries >= " << min;
  return a->ints;
}

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

int64_t dilatedKernel(const WindowAttrs &a, size_t d) {
  return (a.kernel[d] - 1) * a.dilations[d] + 1;
}

} // namespace

int64_t WindowGeometry::outCount() const { return elementCount(out); }
int64_t WindowGeometry::inCount() const { return elementCount(in); }
int64_t WindowGeometry::kernelCount() const { return elementCount(kernel); }

WindowAttrs readWindowAttrs(const Node &n, WindowKind kind, size_t spatialRank,
                            const std::vector<int64_t> &weightKernel) {
  WindowAttrs a;
  if (spatialRank == 0)
    errorAt(n) << "needs at least one spatial dim (input rank >= 3)";
  std::vector<int64_t> ones(spatialRank, 1), zeros(2 * spatialRank, 0);
  if (n.hasAttr("kernel_shape")) {
    a.kernel = intsAttr(n, "kernel_shape", spatialRank, 1, ones);
    for (size_t d = 0; d < weightKernel.size() && d < spatialRank; ++d)
      if (weightKernel[d] >= 0 && weightKernel[d] != a.kernel[d])
        errorAt(n) << "attribute 'kernel_shape' " << listText(a.kernel)
                   << " does not match the weight's kernel "
                   << listText(weightKernel);
  } else if (kind == WindowKind::Pool) {
    errorAt(n) << "requires attribute 'kernel_shape'";
  } else {
    if (weightKernel.size() != spatialRank)
      errorAt(n) << "the weight has " << weightKernel.size()
                 << " kernel dims but the input has " << spatialRank
                 << " spatial dims";
    a.kernel = weightKernel; // may hold -1 while shapes are unknown
  }
  a.strides = intsAttr(n, "strides", spatialRank, 1, ones);
  a.dilations = intsAttr(n, "dilations", spatialRank, 1, ones);
  a.pads = intsAttr(n, "pads", 2 * spatialRank, 0, zeros);
  if (const Attribute *p = n.attr("auto_pad")) {
    if (p->kind != Attribute::Kind::String)
      errorAt(n) << "attribute 'auto_pad' must be a string";
    a.autoPad = p->s;
  }
  if (a.autoPad != "NOTSET" && a.autoPad != "SAME_UPPER" &&
      a.autoPad != "SAME_LOWER" && a.autoPad != "VALID")
    errorAt(n) << "attribute 'auto_pad' must be NOTSET, SAME_UPPER, "
                  "SAME_LOWER or VALID, got '"
               << a.autoPad << "'";
  if (a.autoPad != "NOTSET" &&
      std::any_of(a.pads.begin(), a.pads.end(), [](int64_t v) { return v; }))
    errorAt(n) << "attribute 'pads' " << listText(a.pads)
               << " cannot be used together with auto_pad = " << a.autoPad;
  if (kind == WindowKind::Pool) {
    int64_t ceil = n.attrInt("ceil_mode", 0);
    if (ceil != 0 && ceil != 1)
      errorAt(n) << "attribute 'ceil_mode' must be 0 or 1, got " << ceil;
    a.ceilMode = ceil == 1;
    // A pad as wide as the window would make windows that see no input.
    for (size_t d = 0; d < spatialRank; ++d)
      if (a.pads[d] >= dilatedKernel(a, d) ||
          a.pads[d + spatialRank] >= dilatedKernel(a, d))
        errorAt(n) << "pads " << listText(a.pads)
                   << " must be smaller than the window " << listText(a.kernel)
                   << " in every dim";
  } else {
    a.group = n.attrInt("group", 1);
    if (a.group < 1)
      errorAt(n) << "attribute 'group' must be >= 1, got " << a.group;
  }
  return a;
}

WindowGeometry resolveWindow(const Node &n, const WindowAttrs &a,
                             const std::vector<int64_t> &in) {
  size_t r = a.strides.size();
  WindowGeometry g;
  g.in = in;
  g.kernel = a.kernel;
  g.strides = a.strides;
  g.dilations = a.dilations;
  g.padBegin.assign(a.pads.begin(), a.pads.begin() + r);
  g.padEnd.assign(a.pads.begin() + r, a.pads.end());
  g.out.assign(r, -1);
  for (size_t d = 0; d < r; ++d) {
    if (in[d] < 0 || a.kernel[d] < 0) {
      if (a.autoPad != "NOTSET" && a.autoPad != "VALID")
        g.padBegin[d] = g.padEnd[d] = -1;
      continue;
    }
    int64_t k = dilatedKernel(a, d), s = a.strides[d];
    if (a.autoPad == "SAME_UPPER" || a.autoPad == "SAME_LOWER") {
      g.out[d] = ceilDiv(in[d], s);
      int64_t total = std::max<int64_t>(0, (g.out[d] - 1) * s + k - in[d]);
      int64_t small = total / 2;
      g.padBegin[d] = a.autoPad == "SAME_UPPER" ? small : total - small;
      g.padEnd[d] = total - g.padBegin[d];
      continue;
    }
    int64_t span = in[d] + g.padBegin[d] + g.padEnd[d] - k;
    if (span < 0)
      errorAt(n) << "spatial dim " << d << " of the input (" << in[d]
                 << (g.padBegin[d] + g.padEnd[d]
                         ? " plus pads " + std::to_string(g.padBegin[d]) + "+" +
                               std::to_string(g.padEnd[d])
                         : std::string())
                 << ") is smaller than the window (" << k << ", kernel "
                 << a.kernel[d] << " dilation " << a.dilations[d] << ")";
    g.out[d] = (a.ceilMode ? ceilDiv(span, s) : span / s) + 1;
    // ceil_mode: the last window must start inside the input or the
    // beginning pad, not entirely in the end padding.
    if (a.ceilMode && (g.out[d] - 1) * s >= in[d] + g.padBegin[d])
      --g.out[d];
  }
  return g;
}

WindowGeometry resolveTransposedWindow(const Node &n, const WindowAttrs &a,
                                       const std::vector<int64_t> &in) {
  size_t r = a.strides.size();
  std::vector<int64_t> zeros(r, 0);
  std::vector<int64_t> outPad = intsAttr(n, "output_padding", r, 0, zeros);
  for (size_t d = 0; d < r; ++d)
    if (outPad[d] >= std::max(a.strides[d], a.dilations[d]))
      errorAt(n) << "attribute 'output_padding' " << listText(outPad)
                 << " must be smaller than the stride or the dilation in "
                    "every dim (as in PyTorch)";
  std::vector<int64_t> outputShape;
  if (const Attribute *os = n.attr("output_shape")) {
    if (os->kind != Attribute::Kind::Ints ||
        (os->ints.size() != r && os->ints.size() != r + 2))
      errorAt(n) << "attribute 'output_shape' must list the " << r
                 << " spatial output sizes";
    outputShape.assign(os->ints.end() - int64_t(r), os->ints.end());
  }
  WindowGeometry g;
  g.out = in; // the convolution's output is the ConvTranspose's input
  g.kernel = a.kernel;
  g.strides = a.strides;
  g.dilations = a.dilations;
  g.padBegin.assign(a.pads.begin(), a.pads.begin() + r);
  g.padEnd.assign(a.pads.begin() + r, a.pads.end());
  g.in.assign(r, -1);
  bool samePad = a.autoPad == "SAME_UPPER" || a.autoPad == "SAME_LOWER";
  for (size_t d = 0; d < r; ++d) {
    if (in[d] < 0 || a.kernel[d] < 0) {
      if (samePad || !outputShape.empty()) {
        g.padBegin[d] = g.padEnd[d] = -1;
        if (!outputShape.empty())
          g.in[d] = outputShape[d];
      }
      continue;
    }
    int64_t full = a.strides[d] * (in[d] - 1) + outPad[d] + dilatedKernel(a, d);
    if (a.autoPad == "VALID") {
      g.padBegin[d] = g.padEnd[d] = 0;
      g.in[d] = full;
    } else if (samePad || !outputShape.empty()) {
      int64_t target =
          outputShape.empty() ? in[d] * a.strides[d] : outputShape[d];
      // A target larger than `full` makes the total padding negative: the
      // output positions past the computed values are zeros. The spec's
      // total_padding/2 is floor division, as in ONNX's (Python) reference
      // implementation: without SAME_UPPER a total of -1 puts the extra zero
      // at the end, as test_convtranspose_output_shape expects.
      int64_t total = full - target;
      int64_t small = total >= 0 ? total / 2 : -((1 - total) / 2);
      g.padBegin[d] = a.autoPad == "SAME_UPPER" ? small : total - small;
      g.padEnd[d] = total - g.padBegin[d];
      g.in[d] = target;
    } else {
      g.in[d] = full - g.padBegin[d] - g.padEnd[d];
    }
    if (g.in[d] < 1)
      errorAt(n) << "pads " << listText(a.pads)
                 << " leave no output in spatial dim " << d;
  }
  return g;
}

std::vector<int64_t> windowIndexTable(const WindowGeometry &g) {
  size_t r = g.rank();
  int64_t kCount = g.kernelCount(), pCount = g.outCount();
  std::vector<int64_t> table(size_t(kCount * pCount));
  std::vector<int64_t> k(r, 0);
  for (int64_t ki = 0; ki < kCount; ++ki) {
    std::vector<int64_t> o(r, 0);
    for (int64_t p = 0; p < pCount; ++p) {
      int64_t flat = 0;
      bool pad = false, beyond = false;
      for (size_t d = 0; d < r; ++d) {
        int64_t x = o[d] * g.strides[d] - g.padBegin[d] + k[d] * g.dilations[d];
        if (x < 0 || x >= g.in[d]) {
          pad = true;
          beyond |= x >= g.in[d] + g.padEnd[d];
        }
        flat = flat * g.in[d] + x;
      }
      table[size_t(ki * pCount + p)] =
          beyond ? kBeyondPadding : (pad ? kInPadding : flat);
      for (size_t d = r; d-- > 0;) // next output position, row-major
        if (++o[d] < g.out[d])
          break;
        else
          o[d] = 0;
    }
    for (size_t d = r; d-- > 0;) // next kernel offset, row-major
      if (++k[d] < g.kernel[d])
        break;
      else
        k[d] = 0;
  }
  return table;
}

std::shared_ptr<const std::vector<int64_t>>
cachedWindowIndexTable(const WindowGeometry &g) {
  // Keyed by every field; a handful of entries cover a model, and the map is
  // emptied rather than grown past that (a model with many shapes only
  // recomputes, as before).
  constexpr size_t kEntries = 64;
  thread_local std::map<std::vector<int64_t>,
                        std::shared_ptr<const std::vector<int64_t>>>
      cache;
  std::vector<int64_t> key = {int64_t(g.rank())};
  for (const std::vector<int64_t> *f : {&g.in, &g.out, &g.kernel, &g.strides,
                                        &g.dilations, &g.padBegin, &g.padEnd})
    key.insert(key.end(), f->begin(), f->end());
  auto it = cache.find(key);
  if (it != cache.end())
    return it->second;
  if (cache.size() >= kEntries)
    cache.clear();
  auto table =
      std::make_shared<const std::vector<int64_t>>(windowIndexTable(g));
  cache.emplace(std::move(key), table);
  return table;
}

} // namespace mpc
