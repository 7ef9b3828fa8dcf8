// Classification metrics of a validation set beside its loss (mpc-run
// --eval-metrics=accuracy,top5): the share of samples whose label is among
// the K largest logits of a forward output (--eval-output=NAME; default the
// one floating output of rank >= 2 besides the loss, its classes last).
//
// The labels are the integer input the forward's SoftmaxCrossEntropyLoss or
// NegativeLogLikelihoodLoss reads (through reshapes and casts); a sample
// whose label is that loss's ignore_index is not counted, as the loss does
// not count it. Ties go to the lower class (argmax's first maximum); a NaN
// logit ranks above every number, as torch.topk ranks it.
//
// One forward per batch gives the loss and the metrics (the Evaluator
// keeping every output); data parallel, the ranks take the batches in turn
// as Evaluator::evaluate does and every rank gets every batch's counts, so
// any number of ranks reports one process's numbers.
#pragma once

#include "kernels/collective.h"
#include "runtime/data/dataset.h"
#include "runtime/evaluator.h"
#include "runtime/trainer.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mpc {

/// One metric: top-K accuracy (accuracy is top1).
struct EvalMetric {
  std::string name; ///< as given: "accuracy", "top5"
  int64_t k = 1;
};

/// The most metrics one run reports.
constexpr size_t kMaxEvalMetrics = 8;

/// Parses --eval-metrics' comma-separated list: accuracy, topK (1 <= K <=
/// 1000000). Throws Error naming the flag and the bad entry (unknown, empty,
/// given twice, too many).
std::vector<EvalMetric> parseEvalMetrics(const std::string &list);

/// Samples counted and, per metric, those whose label is in the top K.
struct TopKCounts {
  int64_t counted = 0;
  std::vector<int64_t> correct;
};

/// Adds one batch to `counts`: `logits` [..., C] (floating) against
/// `labels` (integer) holding one class per row of C logits. Labels equal to
/// `ignoreIndex` are not counted. Throws Error (naming `outputName` and
/// `labelsName`) when the element counts do not match or a label is not a
/// class.
void countTopK(const Tensor &logits, const Tensor &labels,
               const std::vector<EvalMetric> &metrics,
               std::optional<int64_t> ignoreIndex, TopKCounts &counts,
               const std::string &outputName, const std::string &labelsName);

/// A validation run's loss and metrics.
struct EvalWithMetrics {
  EvalResult eval;
  /// (metric name, share of the counted samples; NaN when none counted).
  std::vector<std::pair<std::string, double>> values;
};

class EvalMetrics {
public:
  /// Resolves the logits output (`output`, "" for the default) and the
  /// labels input in the forward of `evaluator` (built with allOutputs,
  /// for batches of `batch`). Throws Error naming --eval-output or
  /// --eval-metrics and what is wrong (no such output, not logits, no labels
  /// input).
  EvalMetrics(const Trainer &trainer, const Evaluator &evaluator, int64_t batch,
              std::vector<EvalMetric> metrics, const std::string &output);

  const std::string &output() const { return output_; }
  const std::string &labels() const { return labels_; }
  const std::vector<EvalMetric> &metrics() const { return metrics_; }

  /// The loss (as Evaluator::evaluate reports it) and the metrics of
  /// `data`; every rank must call it.
  EvalWithMetrics evaluate(Evaluator &evaluator, const Trainer &trainer,
                           const Dataset &data, const std::string &source,
                           Collective *world) const;

private:
  std::vector<EvalMetric> metrics_;
  std::string output_, labels_, loss_;
  std::optional<int64_t> ignoreIndex_;
  int64_t batch_ = 0;
};

} // namespace mpc
