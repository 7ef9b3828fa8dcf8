// TopK, ArgMax and ArgMin on the CPU: selecting elements along one axis by
// their order (kernels/common/select_math.h: NaN above every number, ties
// to the lower index).
//
// TopK(X, K) (opsets 11+: axis, largest, sorted; K an int64 input of one
// value) writes the K first elements of each line in that order, and their
// indices; sorted = 0 leaves the order to the implementation, and this one
// sorts anyway. PyTorch exports torch.topk and torch.argsort (ViT-MAE's
// random masking) this way. ArgMax/ArgMin (axis, keepdims,
// select_last_index) write the int64 index of each line's extreme; CLIP
// pools its text features at the argmax of the token ids.
#include "kernels/common/select_math.h"
#include "kernels/cpu/cpu_util.h"

#include <algorithm>
#include <numeric>

namespace mpc {
namespace cpu {

namespace {

/// The input's rank checked (>= 1) and the node's axis normalised.
int64_t lineAxis(const Node &node, const Tensor &x, int64_t dflt) {
  int64_t rank = int64_t(x.dims.size());
  if (rank == 0)
    fail(node, "input must have rank >= 1, got a scalar");
  return normalizeAxis(node, node.attrInt("axis", dflt), rank);
}

void argExtremum(KernelContext &ctx, bool max) {
  const Node &node = ctx.node;
  const Tensor &x = input(ctx, 0, "data");
  int64_t a = lineAxis(node, x, 0);
  bool keep = node.attrInt("keepdims", 1) != 0;
  bool last = node.attrInt("select_last_index", 0) != 0;
  AxisSplit s = splitAt(x.dims, a);
  if (s.len == 0)
    fail(node, "axis ", a, " is empty: there is no arg ", max ? "max" : "min",
         " of ", shapeString(x.dims));
  std::vector<int64_t> dims = x.dims;
  if (keep)
    dims[size_t(a)] = 1;
  else
    dims.erase(dims.begin() + a);
  Tensor &y = overwrittenOutput(ctx, 0, DType::I64, dims);
  int64_t *py = y.data<int64_t>();
  dispatchNumeric(node, x.dtype, [&](auto io) {
    using Io = decltype(io);
    const auto *px = ptr<Io>(x);
    for (int64_t o = 0; o < s.outer; ++o)
      for (int64_t i = 0; i < s.inner; ++i) {
        int64_t base = o * s.len * s.inner + i, at = 0;
        auto best = Io::load(px, base);
        for (int64_t j = 1; j < s.len; ++j) {
          auto v = Io::load(px, base + j * s.inner);
          if (argReplaces(v, best, max, last)) {
            best = v;
            at = j;
          }
        }
        py[o * s.inner + i] = at;
      }
  });
}

void kernelArgMax(KernelContext &ctx) { argExtremum(ctx, true); }
void kernelArgMin(KernelContext &ctx) { argExtremum(ctx, false); }

void kernelTopK(KernelContext &ctx) {
  const Node &node = ctx.node;
  const Tensor &x = input(ctx, 0, "X"), &kTensor = input(ctx, 1, "K");
  int64_t a = lineAxis(node, x, -1);
  int64_t k = topkCount(node, kTensor, x.dims[size_t(a)]);
  bool largest = node.attrInt("largest", 1) != 0;
  AxisSplit s = splitAt(x.dims, a);
  std::vector<int64_t> dims = x.dims;
  dims[size_t(a)] = k;
  Tensor *values = optionalOutput(ctx, 0, x.dtype, dims);
  Tensor *indices = optionalOutput(ctx, 1, DType::I64, dims);
  std::vector<int64_t> order(size_t(s.len));
  dispatchNumeric(node, x.dtype, [&](auto io) {
    using Io = decltype(io);
    using C = typename Io::Compute;
    const auto *px = ptr<Io>(x);
    auto *pv = values ? ptr<Io>(*values) : nullptr;
    int64_t *pi = indices ? indices->data<int64_t>() : nullptr;
    std::vector<C> line(size_t(s.len));
    for (int64_t o = 0; o < s.outer; ++o)
      for (int64_t i = 0; i < s.inner; ++i) {
        int64_t base = o * s.len * s.inner + i;
        for (int64_t j = 0; j < s.len; ++j)
          line[size_t(j)] = Io::load(px, base + j * s.inner);
        std::iota(order.begin(), order.end(), int64_t(0));
        std::partial_sort(order.begin(), order.begin() + k, order.end(),
                          [&](int64_t p, int64_t q) {
                            return topkBefore(line[size_t(p)], p,
                                              line[size_t(q)], q, largest);
                          });
        int64_t outBase = o * k * s.inner + i;
        for (int64_t j = 0; j < k; ++j) {
          int64_t from = order[size_t(j)];
          if (pv) // the stored bits themselves: exact in every dtype
            pv[outBase + j * s.inner] = px[base + from * s.inner];
          if (pi)
            pi[outBase + j * s.inner] = from;
        }
      }
  });
}

} // namespace

int64_t topkCount(const Node &node, const Tensor &k, int64_t len) {
  if (k.dtype != DType::I64)
    fail(node, "K must be int64, got ", dtypeName(k.dtype));
  if (k.numel() != 1 || k.dims.size() > 1)
    fail(node, "K must be a 1-D tensor of one value, got shape ",
         shapeString(k.dims));
  int64_t v = k.data<int64_t>()[0];
  if (v < 0 || v > len)
    fail(node, "K = ", v, " is out of range for an axis of size ", len,
         " (0 to ", len, ")");
  return v;
}

std::vector<KernelEntry> selectionKernels() {
  return {
      {"", "TopK", kernelTopK},
      {"", "ArgMax", kernelArgMax},
      {"", "ArgMin", kernelArgMin},
  };
}

} // namespace cpu
} // namespace mpc
