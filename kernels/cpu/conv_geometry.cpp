// The Conv-family nodes' checked geometry (conv_geometry.h).
#include "kernels/cpu/conv_geometry.h"

#include "kernels/cpu/conv_util.h"

namespace mpc {
namespace cpu {
namespace {

/// Checks a 1-D bias of `m` entries.
void requireBias(const Node &node, const Tensor *b, int64_t m) {
  if (b && (b->dims.size() != 1 || b->dims[0] != m))
    fail(node, "B of shape ", shapeString(b->dims), " must be [", m, "]");
}

/// Checks X and W of a Conv or ConvTranspose and returns the window
/// attributes.
WindowAttrs convAttrs(const Node &node, const Tensor &x, const Tensor &w) {
  requireWindowRank(node, x, "X");
  if (w.dims.size() != x.dims.size())
    fail(node, "W of shape ", shapeString(w.dims),
         " must have the rank of X of shape ", shapeString(x.dims));
  return readWindowAttrs(node, WindowKind::Conv, x.dims.size() - 2,
                         spatialDims(w.dims));
}

} // namespace

ConvNodeGeometry convGeometry(const Node &node, const Tensor &x,
                              const Tensor &w, const Tensor *b) {
  ConvNodeGeometry r;
  r.attrs = convAttrs(node, x, w);
  r.batch = x.dims[0];
  r.c = x.dims[1];
  r.m = w.dims[0];
  if (r.c != w.dims[1] * r.attrs.group || r.m % r.attrs.group != 0)
    fail(node, "X of shape ", shapeString(x.dims), " and W of shape ",
         shapeString(w.dims), " do not match group ", r.attrs.group,
         " (X needs W.dims[1] * group channels, W.dims[0] must divide by it)");
  requireBias(node, b, r.m);
  r.window = resolveWindow(node, r.attrs, spatialDims(x.dims));
  r.outDims = {r.batch, r.m};
  r.outDims.insert(r.outDims.end(), r.window.out.begin(), r.window.out.end());
  return r;
}

ConvNodeGeometry convTransposeGeometry(const Node &node, const Tensor &x,
                                       const Tensor &w, const Tensor *b) {
  ConvNodeGeometry r;
  r.attrs = convAttrs(node, x, w);
  r.batch = x.dims[0];
  r.c = x.dims[1];
  r.m = w.dims[1] * r.attrs.group;
  if (r.c != w.dims[0] || r.c % r.attrs.group != 0)
    fail(node, "X of shape ", shapeString(x.dims), " and W of shape ",
         shapeString(w.dims), " do not match group ", r.attrs.group,
         " (W is [C, M/group, k...] and C must divide by group)");
  requireBias(node, b, r.m);
  r.window = resolveTransposedWindow(node, r.attrs, spatialDims(x.dims));
  r.outDims = {r.batch, r.m};
  r.outDims.insert(r.outDims.end(), r.window.in.begin(), r.window.in.end());
  return r;
}

ConvNodeGeometry convGradInputGeometry(const Node &node, const Tensor &dy,
                                       const Tensor &w,
                                       const std::vector<int64_t> &xs) {
  if (xs.size() != dy.dims.size())
    fail(node, "x_shape ", shapeString(xs), " must have the rank of dY ",
         shapeString(dy.dims));
  checkedCount(node, xs);
  if (xs.size() < 3 || w.dims.size() != xs.size())
    fail(node, "x_shape ", shapeString(xs), " and W of shape ",
         shapeString(w.dims), " must have the same rank >= 3");
  ConvNodeGeometry r;
  r.attrs = readWindowAttrs(node, WindowKind::Conv, xs.size() - 2,
                            spatialDims(w.dims));
  r.batch = xs[0];
  r.c = xs[1];
  r.m = w.dims[0];
  if (r.c != w.dims[1] * r.attrs.group || r.m % r.attrs.group != 0 ||
      dy.dims[1] != r.m || dy.dims[0] != xs[0])
    fail(node, "dY of shape ", shapeString(dy.dims), ", W of shape ",
         shapeString(w.dims), " and x_shape ", shapeString(xs),
         " do not match (group ", r.attrs.group, ")");
  r.window = resolveWindow(node, r.attrs, spatialDims(xs));
  requireWindowOutput(node, r.window, dy);
  r.outDims = xs;
  return r;
}

ConvNodeGeometry convGradWeightGeometry(const Node &node, const Tensor &dy,
                                        const Tensor &x) {
  requireWindowRank(node, x, "X");
  if (dy.dims.size() != x.dims.size())
    fail(node, "dY of shape ", shapeString(dy.dims),
         " must have the rank of X of shape ", shapeString(x.dims));
  if (!node.hasAttr("kernel_shape"))
    fail(node, "requires attribute 'kernel_shape'");
  ConvNodeGeometry r;
  r.attrs = readWindowAttrs(node, WindowKind::Conv, x.dims.size() - 2);
  r.batch = x.dims[0];
  r.c = x.dims[1];
  r.m = dy.dims[1];
  if (r.c % r.attrs.group != 0 || r.m % r.attrs.group != 0 ||
      dy.dims[0] != x.dims[0])
    fail(node, "dY of shape ", shapeString(dy.dims), " and X of shape ",
         shapeString(x.dims), " do not match group ", r.attrs.group);
  r.window = resolveWindow(node, r.attrs, spatialDims(x.dims));
  requireWindowOutput(node, r.window, dy);
  r.outDims = {r.m, r.c / r.attrs.group};
  r.outDims.insert(r.outDims.end(), r.attrs.kernel.begin(),
                   r.attrs.kernel.end());
  return r;
}

} // namespace cpu
} // namespace mpc
