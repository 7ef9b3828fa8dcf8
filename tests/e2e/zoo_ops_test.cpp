// End to end: model-zoo patterns that need Sign, TopK and ArgMax
// (models/make_zoo_ops_models.py), exported by torch's dynamo exporter,
// compiled by the full pipeline and trained on the CPU.
//
// AdaptiveAvgPool2d with sizes that do not divide (torchvision's AlexNet and
// VGG-11-BN classes at narrow widths and small inputs, and a CNN whose bins
// overlap): the exporter computes the bins' edges with Div, Abs, Floor and
// Sign and gathers the windows; with static shapes all of that folds away
// and the step keeps no Sign. CLIP's text pooling at the argmax of the token
// ids (ArgMax on int64), ViT-MAE's random masking by argsort of a given noise
// (TopK over a whole axis, then GatherElements), and k-max pooling whose
// gradient goes through TopK's values. fp32 SGD and Adam match PyTorch's own
// training to 1e-4 relative loss at every one of 30 steps (ViT-MAE with its
// fixed position tables frozen, as PyTorch's requires_grad=False keeps
// them); fp16 and bf16 compile with int64 indices, start within 1% (3%) of
// fp32 and end, over the last ten steps, within 15% of it.
#include "tests/e2e/parity_harness.h"

#include <set>

using namespace mpc;
using namespace mpc::parity;

namespace {

struct Zoo {
  const char *name;
  /// Ops of the export that must be in the step (run each step) ...
  std::vector<std::string> kept;
  /// ... and ops that must not be (folded over constants).
  std::vector<std::string> gone;
  /// How far fp16 / bf16 may stray from fp32, relative.
  double fp16, bf16;
  /// --frozen: parameters PyTorch does not train (requires_grad=False),
  /// which the exporter does not record.
  std::string frozen = "";
  /// How far fp32 may stray from PyTorch's fp32, relative, at any step:
  /// 1e-4, and 1e-3 for the CNNs, as the other parity tests allow (batch
  /// norms amplify the summation order of oneDNN's products and
  /// convolutions against PyTorch's over 30 steps).
  double fp32 = 1e-4;
};

const std::vector<Zoo> &zooModels() {
  static const std::vector<Zoo> models = {
      {"alexnet_small", {}, {"Sign", "Abs", "Floor"}, 0.01, 0.03, "", 1e-3},
      {"vgg11_bn_small", {}, {"Sign", "Abs", "Floor"}, 0.01, 0.03, "", 1e-3},
      {"adaptive_cnn", {}, {"Sign", "Abs", "Floor"}, 0.01, 0.03, "", 1e-3},
      {"clip_text_tiny", {"ArgMax"}, {}, 0.01, 0.03},
      // ViT-MAE's fixed sin-cos position tables.
      {"mae_tiny",
       {"TopK"},
       {},
       0.01,
       0.03,
       "mae\\.vit\\.embeddings\\.position_embeddings|"
       "mae\\.decoder\\.decoder_pos_embed"},
      {"topk_pool", {"TopK"}, {}, 0.01, 0.03},
  };
  return models;
}

std::string file(const Zoo &m, const std::string &suffix) {
  return std::string(m.name) + suffix;
}

CompileOptions zooOptions(const Zoo &m, const std::string &optimizer,
                          DType precision) {
  CompileOptions o = options(optimizer, precision);
  o.frozen = m.frozen;
  return o;
}

/// 30 steps of the model at `precision`, batches in order; `skipped`
/// counts the steps the loss scale skipped.
std::vector<double> losses(const Zoo &m, const std::string &optimizer,
                           DType precision, int *skipped = nullptr) {
  std::vector<double> out;
  for (const StepRecord &r :
       train(compile(file(m, ".onnx"), zooOptions(m, optimizer, precision)),
             file(m, "_data.npz"), 30)) {
    if (skipped)
      *skipped += r.skipped;
    else
      EXPECT_FALSE(r.skipped);
    out.push_back(r.loss);
  }
  return out;
}

double meanOfLast(const std::vector<double> &v, size_t n) {
  double sum = 0;
  for (size_t i = v.size() - n; i < v.size(); ++i)
    sum += v[i];
  return sum / double(n);
}

std::set<std::string> stepOps(const Model &model) {
  std::set<std::string> ops;
  for (const Node *n : model.training->algorithm->nodeList())
    ops.insert(n->opType());
  return ops;
}

} // namespace

TEST(ZooOpsParity, SgdAndAdamMatchPyTorch) {
  for (const Zoo &m : zooModels()) {
    SCOPED_TRACE(m.name);
    for (const char *optimizer : {"sgd", "adam"}) {
      std::vector<double> ref =
          readReference(file(m, std::string("_ref_") + optimizer + ".csv"));
      std::vector<double> run = losses(m, optimizer, DType::F32);
      ASSERT_EQ(ref.size(), run.size());
      for (size_t i = 0; i < ref.size(); ++i)
        EXPECT_LT(std::fabs(run[i] - ref[i]), m.fp32 * std::fabs(ref[i]))
            << optimizer << " step " << i << ": mpc " << run[i] << " torch "
            << ref[i];
    }
  }
}

TEST(ZooOpsParity, StepsKeepTheSelectionOpsAndFoldTheBinArithmetic) {
  for (const Zoo &m : zooModels()) {
    SCOPED_TRACE(m.name);
    auto model = compile(file(m, ".onnx"), zooOptions(m, "adam", DType::F16));
    std::set<std::string> ops = stepOps(*model);
    for (const std::string &op : m.kept)
      EXPECT_EQ(ops.count(op), 1u) << op << " is not in the step";
    for (const std::string &op : m.gone)
      EXPECT_EQ(ops.count(op), 0u) << op << " is left in the step";
    // Selection's indices stay int64 whatever the precision.
    for (const Node *n : model->training->algorithm->nodeList())
      if (n->opType() == "TopK" || n->opType() == "ArgMax") {
        const Value *indices = n->output(n->opType() == "TopK" ? 1 : 0);
        ASSERT_TRUE(indices);
        EXPECT_EQ(indices->dtype, DType::I64) << n->name();
      }
  }
}

TEST(ZooOpsMixedPrecision, Fp16AndBf16FollowFp32) {
  for (const Zoo &m : zooModels()) {
    SCOPED_TRACE(m.name);
    std::vector<double> fp32 = losses(m, "adam", DType::F32);
    for (DType t : {DType::F16, DType::BF16}) {
      int skipped = 0;
      std::vector<double> run = losses(m, "adam", t, &skipped);
      double tolerance = t == DType::F16 ? m.fp16 : m.bf16;
      // The first step runs the same weights: only the precision differs.
      EXPECT_LT(std::fabs(run[0] - fp32[0]), tolerance * std::fabs(fp32[0]))
          << dtypeName(t) << ": " << run[0] << " vs fp32 " << fp32[0];
      // Later steps drift apart on these tiny, noisy runs (batch norm over
      // four samples of 1x1 maps, a 30-step text model), so the runs are
      // compared where they end: the mean loss of the last ten steps.
      EXPECT_LT(std::fabs(meanOfLast(run, 10) - meanOfLast(fp32, 10)),
                0.15 * meanOfLast(fp32, 10))
          << dtypeName(t);
      // Dynamic loss scaling may skip a few steps while it finds its scale.
      EXPECT_LE(skipped, 3) << dtypeName(t);
    }
  }
}
