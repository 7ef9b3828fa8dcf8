// The host plan of a cuDNN convolution: lifting 1-D, explicit pads.
#include "runtime/cuda/conv_plan.h"

#include "kernels/cpu/cpu_util.h"

#include <algorithm>

namespace mpc {
namespace cuda {

using cpu::fail;

ConvProblem convProblem(const Node &node, const WindowGeometry &g, int64_t n,
                        int64_t c, int64_t m, int64_t groups, DType t) {
  size_t r = g.rank();
  if (r == 0 || r > kMaxConvSpatial)
    fail(node, "the cuda backend's convolutions take 1 to ", kMaxConvSpatial,
         " spatial dims, got ", r);
  WindowGeometry w = g;
  if (r == 1) { // 1-D as 2-D over a height of 1, without pads
    for (auto *v : {&w.in, &w.out, &w.kernel, &w.strides, &w.dilations})
      v->insert(v->begin(), 1);
    for (auto *v : {&w.padBegin, &w.padEnd})
      v->insert(v->begin(), 0);
  }
  ConvProblem p;
  p.type = t;
  p.groups = groups;
  p.x = {n, c};
  p.w = {m, groups ? c / groups : 0};
  p.y = {n, m};
  p.offset = {0, 0};
  p.xUnpadded = p.x;
  for (size_t d = 0; d < w.rank(); ++d) {
    p.x.push_back(w.in[d]);
    p.xUnpadded.push_back(w.in[d]);
    p.w.push_back(w.kernel[d]);
    p.y.push_back(w.out[d]);
    p.strides.push_back(w.strides[d]);
    p.dilations.push_back(w.dilations[d]);
    p.explicitPad |= w.padBegin[d] != w.padEnd[d];
  }
  for (size_t d = 0; d < w.rank(); ++d) {
    if (p.explicitPad) {
      p.x[d + 2] = w.in[d] + w.padBegin[d] + w.padEnd[d];
      if (p.x[d + 2] < 1)
        fail(node, "pads leave an empty input in spatial dim ", d);
      p.pads.push_back(0);
      p.offset.push_back(w.padBegin[d]);
    } else {
      p.pads.push_back(w.padBegin[d]);
      p.offset.push_back(0);
    }
  }
  return p;
}

std::vector<int64_t> cropOffset(const ConvProblem &p) {
  std::vector<int64_t> crop(p.offset.size());
  for (size_t d = 0; d < crop.size(); ++d)
    crop[d] = -p.offset[d];
  return crop;
}

ConvLayout preferredLayout(const ConvProblem &p, bool allowed) {
  if (!allowed || (p.type != DType::F16 && p.type != DType::BF16) ||
      p.x.size() != 4 || p.groups != 1)
    return ConvLayout::Nchw;
  int64_t c = p.x[1], m = p.y[1];
  return c > 0 && m > 0 && c % 8 == 0 && m % 8 == 0 ? ConvLayout::Nhwc
                                                    : ConvLayout::Nchw;
}

std::vector<int64_t> packedStrides(const std::vector<int64_t> &dims,
                                   ConvLayout layout) {
  std::vector<int64_t> strides(dims.size());
  // The order from the innermost dim out: NCHW w, h, ..., c, n; NHWC c, w,
  // h, ..., n.
  std::vector<size_t> order;
  if (layout == ConvLayout::Nhwc && dims.size() > 2)
    order.push_back(1);
  for (size_t d = dims.size(); d-- > 0;)
    if (!(layout == ConvLayout::Nhwc && dims.size() > 2 && d == 1))
      order.push_back(d);
  int64_t stride = 1;
  for (size_t d : order) {
    strides[d] = stride;
    stride *= std::max<int64_t>(dims[d], 1);
  }
  return strides;
}

} // namespace cuda
} // namespace mpc
