// Einsum's lowering (passes/onnx/einsum_lowering.h) against a reference
// einsum written out here (every assignment of the indices, summed), on
// random fp64 operands: the forward the gradient checks take as given.
#include "passes/onnx/onnx_io.h"
#include "runtime/backend.h"
#include "runtime/inference.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

using namespace mpc;

namespace {

struct Case {
  std::string equation; // explicit, letters only
  std::vector<std::vector<int64_t>> dims;
};

Tensor randomOperand(const std::vector<int64_t> &dims, std::mt19937 &rng) {
  std::uniform_real_distribution<double> d(-1, 1);
  Tensor t(DType::F64, dims);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.setFromDouble(i, d(rng));
  return t;
}

/// out[output indices] = sum over the others of the operands' product.
Tensor referenceEinsum(const Case &c, const std::vector<Tensor> &ops) {
  std::string lhs = c.equation.substr(0, c.equation.find("->"));
  std::string out = c.equation.substr(c.equation.find("->") + 2);
  std::vector<std::string> terms;
  for (size_t s = 0;;) {
    size_t comma = lhs.find(',', s);
    terms.push_back(lhs.substr(s, comma - s));
    if (comma == std::string::npos)
      break;
    s = comma + 1;
  }
  std::map<char, int64_t> size;
  for (size_t i = 0; i < terms.size(); ++i)
    for (size_t d = 0; d < terms[i].size(); ++d)
      size[terms[i][d]] = c.dims[i][d];
  std::vector<char> all;
  for (const auto &kv : size)
    all.push_back(kv.first);
  std::vector<int64_t> outDims;
  for (char ch : out)
    outDims.push_back(size[ch]);
  Tensor y(DType::F64, outDims);
  std::map<char, int64_t> at;
  for (char ch : all)
    at[ch] = 0;
  auto flat = [&](const std::string &term, const std::vector<int64_t> &dims) {
    int64_t f = 0;
    for (size_t d = 0; d < term.size(); ++d)
      f = f * dims[d] + at[term[d]];
    return f;
  };
  while (true) {
    double prod = 1;
    for (size_t i = 0; i < terms.size(); ++i)
      prod *= ops[i].getAsDouble(flat(terms[i], c.dims[i]));
    int64_t o = flat(out, outDims);
    y.setFromDouble(o, y.getAsDouble(o) + prod);
    size_t k = all.size();
    while (k-- > 0) {
      if (++at[all[k]] < size[all[k]])
        break;
      at[all[k]] = 0;
    }
    if (k == size_t(-1))
      break;
  }
  return y;
}

} // namespace

TEST(EinsumLowering, MatchesAReferenceEinsum) {
  std::vector<Case> cases = {{"bij,bjk->bik", {{2, 3, 4}, {2, 4, 5}}},
                             {"bhqd,bhkd->bhqk", {{2, 2, 3, 4}, {2, 2, 5, 4}}},
                             {"bhqk,bhkd->bqhd", {{2, 2, 3, 5}, {2, 2, 5, 4}}},
                             {"i,j->ij", {{3}, {4}}},
                             {"ij,ij->i", {{3, 4}, {3, 4}}},
                             {"ij->ji", {{3, 4}}},
                             {"ij->", {{3, 4}}},
                             {"bij,j->bi", {{2, 3, 4}, {4}}},
                             {"ij,jk,kl->li", {{2, 3}, {3, 4}, {4, 2}}},
                             {"abc,cd->dba", {{2, 3, 4}, {4, 5}}},
                             {"ab,cd->abcd", {{2, 3}, {2, 2}}},
                             {"abc,b->ac", {{2, 3, 4}, {3}}}};
  std::mt19937 rng(7);
  for (const Case &c : cases) {
    SCOPED_TRACE(c.equation);
    std::string text = "<ir_version: 8, opset_import: [\"\" : 17]>\ng (";
    std::string ins;
    std::vector<Tensor> ops;
    for (size_t i = 0; i < c.dims.size(); ++i) {
      std::string dims;
      for (size_t d = 0; d < c.dims[i].size(); ++d)
        dims += (d ? "," : "") + std::to_string(c.dims[i][d]);
      text += (i ? ", " : "") + std::string("double[") + dims + "] x" +
              std::to_string(i);
      ins += (i ? ", x" : "x") + std::to_string(i);
      ops.push_back(randomOperand(c.dims[i], rng));
    }
    text += ") => (double y) {\n  y = Einsum <equation = \"" + c.equation +
            "\"> (" + ins + ")\n}\n";
    std::unique_ptr<Model> model = parseModelText(text, c.equation);
    auto backend = createCpuBackend();
    std::vector<InferenceInput> inputs;
    for (size_t i = 0; i < ops.size(); ++i)
      inputs.push_back({"x" + std::to_string(i), ops[i], ""});
    std::vector<InferenceOutput> out =
        runInference(*model, std::move(inputs), *backend);
    Tensor want = referenceEinsum(c, ops);
    ASSERT_EQ(out.size(), 1u);
    ASSERT_EQ(out[0].value.dims, want.dims);
    for (int64_t i = 0; i < want.numel(); ++i)
      EXPECT_NEAR(out[0].value.getAsDouble(i), want.getAsDouble(i), 1e-12)
          << "element " << i;
  }
}
