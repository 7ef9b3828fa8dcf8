// Checked node geometry shared by the CPU kernels and the CUDA runners
// (node_geometry.h).
#include "kernels/cpu/node_geometry.h"

#include "kernels/cpu/cpu_util.h"
#include "passes/ir/mpc_ops.h"

namespace mpc {
namespace cpu {

std::vector<int64_t> transposePerm(const Node &node, size_t rank) {
  std::vector<int64_t> perm = node.attrInts("perm");
  if (!node.hasAttr("perm")) {
    perm.resize(rank);
    for (size_t i = 0; i < rank; ++i)
      perm[i] = int64_t(rank - 1 - i);
  }
  if (perm.size() != rank)
    fail(node, "perm has ", perm.size(), " entries for an input of rank ",
         rank);
  std::vector<bool> seen(rank, false);
  for (int64_t &p : perm) {
    p = normalizeAxis(node, p, int64_t(rank));
    if (seen[size_t(p)])
      fail(node, "axes contain a duplicate");
    seen[size_t(p)] = true;
  }
  return perm;
}

LayerNormShape layerNormShape(const Node &node, const Tensor &x) {
  int64_t rank = int64_t(x.dims.size());
  if (rank == 0)
    fail(node, "X must have rank >= 1");
  LayerNormShape s;
  s.axis = normalizeAxis(node, node.attrInt("axis", -1), rank);
  s.norm.assign(x.dims.begin() + s.axis, x.dims.end());
  for (int64_t d = 0; d < rank; ++d)
    (d < s.axis ? s.outer : s.n) *= x.dims[size_t(d)];
  s.stats = x.dims;
  for (size_t i = size_t(s.axis); i < s.stats.size(); ++i)
    s.stats[i] = 1;
  return s;
}

void requireBroadcastsTo(const Node &node, const Tensor &t,
                         const std::vector<int64_t> &norm, const char *what) {
  bool ok = t.dims.size() <= norm.size();
  for (size_t i = 0; ok && i < t.dims.size(); ++i) {
    int64_t d = t.dims[t.dims.size() - 1 - i];
    ok = d == 1 || d == norm[norm.size() - 1 - i];
  }
  if (!ok)
    fail(node, what, " of shape ", shapeString(t.dims),
         " does not broadcast to the normalised shape ", shapeString(norm));
}

bool geluTanh(const Node &node) {
  // mpc.GeluTanh has no attribute: its name is the form (it needs a function
  // body of its own, and a body cannot branch on a string attribute).
  if (node.domain() == kMpcDomain && node.opType() == "GeluTanh")
    return true;
  std::string a = node.attrString("approximate", "none");
  if (a != "none" && a != "tanh")
    fail(node, "attribute 'approximate' must be \"none\" or \"tanh\", got \"",
         a, "\"");
  return a == "tanh";
}

} // namespace cpu
} // namespace mpc
