// Classification metrics (runtime/eval_metrics.h) on hand-made logits and
// labels: top-K counts with ties to the lower class, NaN logits, the
// ignored label, rows of a rank-3 output; and the flag's parser.
#include "runtime/eval_metrics.h"

#include "support/diagnostics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace mpc {
namespace {

std::vector<EvalMetric> topKs(std::vector<int64_t> ks) {
  std::vector<EvalMetric> out;
  for (int64_t k : ks)
    out.push_back({"top" + std::to_string(k), k});
  return out;
}

std::string errorOf(const std::function<void()> &f) {
  try {
    f();
  } catch (const Error &e) {
    return e.what();
  }
  return "";
}

TEST(EvalMetrics, TopKCountsOnHandMadeLogits) {
  // Row 0: label 1 is the maximum. Row 1: label 2 is second. Row 2: label
  // 1 ties class 0, which comes first (argmax's first maximum): second.
  // Row 3: label 0 is last. Row 4: the ignored label (not counted).
  Tensor logits = Tensor::fromFloats({5, 3}, {0.1f, 2.0f, 0.3f, //
                                              3.0f, 1.0f, 2.0f, //
                                              1.0f, 1.0f, 0.0f, //
                                              0.0f, 1.0f, 5.0f, //
                                              9.0f, 0.0f, 0.0f});
  Tensor labels = Tensor::fromInt64s({5}, {1, 2, 1, 0, -100});
  TopKCounts counts;
  countTopK(logits, labels, topKs({1, 2, 3}), -100, counts, "logits", "y");
  EXPECT_EQ(counts.counted, 4);
  EXPECT_EQ(counts.correct, (std::vector<int64_t>{1, 3, 4}));
  // Batches add up.
  countTopK(logits, labels, topKs({1, 2, 3}), -100, counts, "logits", "y");
  EXPECT_EQ(counts.counted, 8);
  EXPECT_EQ(counts.correct, (std::vector<int64_t>{2, 6, 8}));
}

TEST(EvalMetrics, NaNRanksAboveNumbers) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // Row 0: a NaN beside the label's maximum puts it second; row 1: the
  // label's own NaN logit is never right.
  Tensor logits = Tensor::fromFloats({2, 3}, {nan, 1.0f, 0.0f, //
                                              0.0f, nan, 1.0f});
  Tensor labels = Tensor::fromInt64s({2}, {1, 1});
  TopKCounts counts;
  countTopK(logits, labels, topKs({1, 2, 3}), std::nullopt, counts, "logits",
            "y");
  EXPECT_EQ(counts.counted, 2);
  EXPECT_EQ(counts.correct, (std::vector<int64_t>{0, 1, 1}));
}

TEST(EvalMetrics, RowsOfARankThreeOutput) {
  // [2 sequences, 2 tokens, 2 classes] against [2, 2] labels.
  Tensor logits = Tensor::fromFloats(
      {2, 2, 2}, {1.0f, 0.0f, 0.0f, 1.0f, 1.0f, 0.0f, 1.0f, 0.0f});
  Tensor labels = Tensor::fromInt64s({2, 2}, {0, 1, 1, 0});
  TopKCounts counts;
  countTopK(logits, labels, topKs({1}), std::nullopt, counts, "logits", "y");
  EXPECT_EQ(counts.counted, 4);
  EXPECT_EQ(counts.correct, (std::vector<int64_t>{3}));
}

TEST(EvalMetrics, BadLabelsAreErrors) {
  Tensor logits = Tensor::fromFloats({2, 3}, {0, 1, 2, 3, 4, 5});
  TopKCounts counts;
  std::string e = errorOf([&] {
    countTopK(logits, Tensor::fromInt64s({3}, {0, 1, 2}), topKs({1}),
              std::nullopt, counts, "logits", "y");
  });
  EXPECT_NE(e.find("y holds 3 labels, but logits has 2 rows of 3 classes"),
            std::string::npos)
      << e;
  e = errorOf([&] {
    countTopK(logits, Tensor::fromInt64s({2}, {0, 3}), topKs({1}), std::nullopt,
              counts, "logits", "y");
  });
  EXPECT_NE(e.find("y: label 3 of row 1 is not a class of logits (0 to 2)"),
            std::string::npos)
      << e;
  // -100 is a label like any other without an ignore_index.
  e = errorOf([&] {
    countTopK(logits, Tensor::fromInt64s({2}, {-100, 0}), topKs({1}),
              std::nullopt, counts, "logits", "y");
  });
  EXPECT_NE(e.find("label -100 of row 0"), std::string::npos) << e;
}

TEST(EvalMetrics, ParsesTheFlag) {
  std::vector<EvalMetric> m = parseEvalMetrics("accuracy,top5,top1000000");
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[0].name, "accuracy");
  EXPECT_EQ(m[0].k, 1);
  EXPECT_EQ(m[1].name, "top5");
  EXPECT_EQ(m[1].k, 5);
  EXPECT_EQ(m[2].k, 1000000);
  for (const char *bad : {"", "acc", "accuracy,", ",top5", "top", "top0",
                          "top-1", "top+1", "top 5", "top5x", "top1000001",
                          "top99999999999999999999", "top5,top5", "Accuracy",
                          "top1,top2,top3,top4,top5,top6,top7,top8,"
                          "top9"}) {
    std::string e = errorOf([&] { parseEvalMetrics(bad); });
    EXPECT_EQ(e.rfind("--eval-metrics: ", 0), 0u) << bad << ": " << e;
  }
}

} // namespace
} // namespace mpc
