// The backend-ops cases of TopK, ArgMax and ArgMin (kernels/cuda/topk.cu):
// every dtype the device kernels take (fp32, fp16, bf16, int64, int32), on
// values drawn from a few integers so that lines tie often (the lower index
// first, or the last one with select_last_index), with NaNs placed in the
// float cases (NaN above every number), along the last axis, a middle axis
// and axis 0, K below the axis' size and equal to it (an argsort), and
// keepdims on and off. Selection moves elements: the comparison is exact.
#include "op_cases.h"

#include <cmath>

namespace mpc {
namespace backend_ops {
namespace {

const std::vector<DType> kSelected = {DType::F32, DType::F16, DType::BF16,
                                      DType::I64, DType::I32};

Attribute i(int64_t v) { return Attribute::ofInt(v); }

/// Values in {-3, ..., 3} of dtype t (ties in every line), every 7th a NaN
/// for floating t.
Tensor tiedValues(std::mt19937 &rng, DType t, std::vector<int64_t> dims) {
  std::uniform_int_distribution<int> d(-3, 3);
  Tensor x(t, dims);
  for (int64_t k = 0; k < x.numel(); ++k)
    x.setFromDouble(k, isFloating(t) && k % 7 == 3 ? std::nan("") : d(rng));
  return x;
}

Tensor kOf(int64_t k) { return Tensor::fromInt64s({1}, {k}); }

} // namespace

void addSelection(std::vector<OpCase> &c) {
  struct Arg {
    const char *name, *op;
    int64_t axis, keepdims, last;
  };
  for (Arg a : {Arg{"ArgMax_last_axis", "ArgMax", -1, 1, 0},
                Arg{"ArgMax_axis0_select_last", "ArgMax", 0, 0, 1},
                Arg{"ArgMin_middle_axis", "ArgMin", 1, 0, 0},
                Arg{"ArgMin_select_last", "ArgMin", 2, 1, 1}})
    c.push_back({a.name,
                 "",
                 a.op,
                 {{"axis", i(a.axis)},
                  {"keepdims", i(a.keepdims)},
                  {"select_last_index", i(a.last)}},
                 1,
                 kSelected,
                 [](DType t, std::mt19937 &rng) -> Inputs {
                   return {tiedValues(rng, t, {5, 9, 13})};
                 }});
  struct TopK {
    const char *name;
    int64_t axis, k, largest, sorted;
    std::vector<int64_t> dims;
  };
  for (const TopK &k :
       {TopK{"TopK_largest_last_axis", -1, 4, 1, 1, {6, 33}},
        TopK{"TopK_smallest_middle_axis", 1, 3, 0, 1, {4, 10, 5}},
        TopK{"TopK_axis0_unsorted", 0, 2, 1, 0, {7, 12}},
        TopK{"TopK_argsort", 1, 49, 0, 1, {3, 49}},
        TopK{"TopK_k0", -1, 0, 1, 1, {3, 8}}}) {
    std::vector<int64_t> dims = k.dims;
    int64_t count = k.k;
    c.push_back({k.name,
                 "",
                 "TopK",
                 {{"axis", i(k.axis)},
                  {"largest", i(k.largest)},
                  {"sorted", i(k.sorted)}},
                 2,
                 kSelected,
                 [dims, count](DType t, std::mt19937 &rng) -> Inputs {
                   return {tiedValues(rng, t, dims), kOf(count)};
                 }});
  }
}

} // namespace backend_ops
} // namespace mpc
