// Classification metrics of a validation set (runtime/eval_metrics.h).
#include "runtime/eval_metrics.h"

#include "ir/step_metadata.h"
#include "support/diagnostics.h"

#include <array>
#include <cmath>
#include <limits>
#include <unordered_set>

namespace mpc {
namespace {

bool isIntegerType(DType t) {
  return t == DType::I64 || t == DType::I32 || t == DType::I8 || t == DType::U8;
}

/// The graph input `v` is, through ops that only reshape or cast it
/// (nullptr when it is computed).
const Value *throughReshapes(const Value *v) {
  static const std::unordered_set<std::string> kReshapes = {
      "Reshape", "Flatten", "Cast", "Squeeze", "Unsqueeze", "Identity"};
  for (int hops = 0; v && hops < 32; ++hops) {
    if (v->isGraphInput())
      return v;
    const Node *p = v->producer();
    if (!p || !p->domain().empty() || !kReshapes.count(p->opType()))
      return nullptr;
    v = p->input(0);
  }
  return nullptr;
}

std::string namesOf(const std::vector<Value *> &values) {
  std::string out;
  for (const Value *v : values)
    out += (out.empty() ? "" : ", ") + v->name();
  return out.empty() ? "none" : out;
}

} // namespace

std::vector<EvalMetric> parseEvalMetrics(const std::string &list) {
  const std::string flag = "--eval-metrics: ";
  std::vector<EvalMetric> metrics;
  for (size_t at = 0;;) {
    size_t comma = list.find(',', at);
    std::string name = list.substr(at, comma - at);
    EvalMetric m;
    m.name = name;
    if (name.empty())
      throw Error(flag +
                  "expected accuracy or topK (K a number), "
                  "comma-separated; an empty name in '" +
                  list + "'");
    if (name == "accuracy") {
      m.k = 1;
    } else if (name.size() > 3 && name.compare(0, 3, "top") == 0) {
      // Digits only (no sign, no blank), at most 7 of them.
      std::string digits = name.substr(3);
      int64_t k = 0;
      bool ok = digits.size() <= 7;
      for (char c : digits) {
        ok = ok && c >= '0' && c <= '9';
        if (ok) // at most 7 digits: k stays far from overflowing
          k = k * 10 + (c - '0');
      }
      if (!ok || k < 1 || k > 1000000)
        throw Error(flag + "'" + name +
                    "': K of topK must be a number from 1 to 1000000");
      m.k = k;
    } else {
      throw Error(flag + "unknown metric '" + name +
                  "' (expected accuracy or topK, e.g. top5)");
    }
    for (const EvalMetric &other : metrics)
      if (other.name == name)
        throw Error(flag + "'" + name + "' is given twice");
    metrics.push_back(m);
    if (metrics.size() > kMaxEvalMetrics)
      throw Error(flag + "at most " + std::to_string(kMaxEvalMetrics) +
                  " metrics, got more in '" + list + "'");
    if (comma == std::string::npos)
      break;
    at = comma + 1;
  }
  return metrics;
}

void countTopK(const Tensor &logits, const Tensor &labels,
               const std::vector<EvalMetric> &metrics,
               std::optional<int64_t> ignoreIndex, TopKCounts &counts,
               const std::string &outputName, const std::string &labelsName) {
  counts.correct.resize(metrics.size(), 0);
  if (logits.dims.empty() || logits.dims.back() < 1)
    throw Error("--eval-metrics: " + outputName +
                " has no class axis (its last dim) to rank");
  const int64_t classes = logits.dims.back();
  const int64_t rows = logits.numel() / classes;
  if (labels.numel() != rows)
    throw Error("--eval-metrics: " + labelsName + " holds " +
                std::to_string(labels.numel()) + " labels, but " + outputName +
                " has " + std::to_string(rows) + " rows of " +
                std::to_string(classes) + " classes");
  for (int64_t i = 0; i < rows; ++i) {
    double l = labels.getAsDouble(i);
    if (ignoreIndex && l == double(*ignoreIndex))
      continue;
    if (!(l >= 0 && l < double(classes)))
      throw Error("--eval-metrics: " + labelsName + ": label " +
                  std::to_string(int64_t(l)) + " of row " + std::to_string(i) +
                  " is not a class of " + outputName + " (0 to " +
                  std::to_string(classes - 1) + ")");
    const int64_t label = int64_t(l);
    const int64_t base = i * classes;
    const double x = logits.getAsDouble(base + label);
    // The label's place among the classes: those above it, ties to the
    // lower class; a NaN is above every number (and a NaN label is last).
    int64_t rank = 0;
    if (std::isnan(x)) {
      rank = classes;
    } else {
      for (int64_t c = 0; c < classes; ++c) {
        double y = logits.getAsDouble(base + c);
        if (std::isnan(y) || y > x || (y == x && c < label))
          ++rank;
      }
    }
    ++counts.counted;
    for (size_t m = 0; m < metrics.size(); ++m)
      if (rank < metrics[m].k)
        ++counts.correct[m];
  }
}

EvalMetrics::EvalMetrics(const Trainer &trainer, const Evaluator &evaluator,
                         int64_t batch, std::vector<EvalMetric> metrics,
                         const std::string &output)
    : metrics_(std::move(metrics)), batch_(batch) {
  const Graph &g = evaluator.forward();
  // The loss: the output the step names, else the only scalar one.
  const std::string *lossName = readMeta(trainer.model(), meta::kLoss);
  const Value *loss = nullptr;
  for (Value *out : g.outputs())
    if ((lossName && out->name() == *lossName) ||
        (!lossName && isFloating(out->dtype) && out->hasShape &&
         out->rank() == 0))
      loss = out;
  if (!loss)
    throw Error("--eval-metrics: the model's forward has no scalar loss "
                "output");
  loss_ = loss->name();

  auto isLogits = [&](const Value *v) {
    return v != loss && isFloating(v->dtype) && v->hasShape && v->rank() >= 2;
  };
  const Value *logits = nullptr;
  if (!output.empty()) {
    for (Value *out : g.outputs())
      if (out->name() == output)
        logits = out;
    const std::string flag = "--eval-output=" + output + ": ";
    if (!logits)
      throw Error(flag + "the model's forward has no output " + output +
                  " (its outputs: " + namesOf(g.outputs()) + ")");
    if (logits == loss)
      throw Error(flag + "is the loss; name the output of class scores");
    if (!isLogits(logits))
      throw Error(flag + "is " + logits->typeString() +
                  "; the metrics rank a floating output of rank >= 2, its "
                  "classes last");
  } else {
    std::vector<Value *> candidates;
    for (Value *out : g.outputs())
      if (isLogits(out))
        candidates.push_back(out);
    if (candidates.empty())
      throw Error("--eval-metrics: the model's forward has no output of "
                  "class scores to rank (a floating output of rank >= 2 "
                  "besides the loss; its outputs: " +
                  namesOf(g.outputs()) + ")");
    if (candidates.size() > 1)
      throw Error("--eval-metrics: the model's forward has several outputs "
                  "of class scores (" +
                  namesOf(candidates) + "); choose one with --eval-output");
    logits = candidates[0];
  }
  output_ = logits->name();

  // The labels: the integer input a classification loss reads.
  const Value *labels = nullptr;
  for (const auto &node : g.nodes()) {
    if (!node->domain().empty() ||
        (node->opType() != "SoftmaxCrossEntropyLoss" &&
         node->opType() != "NegativeLogLikelihoodLoss"))
      continue;
    const Value *in = throughReshapes(node->input(1));
    if (!in || !isIntegerType(in->dtype))
      continue;
    if (labels && labels != in)
      throw Error("--eval-metrics: the model's losses read two label "
                  "inputs, " +
                  labels->name() + " and " + in->name());
    labels = in;
    if (node->hasAttr("ignore_index"))
      ignoreIndex_ = node->attrInt("ignore_index", 0);
  }
  if (!labels)
    throw Error("--eval-metrics: no integer input of the model's forward is "
                "the labels of a SoftmaxCrossEntropyLoss or "
                "NegativeLogLikelihoodLoss, to compare " +
                output_ + " with");
  labels_ = labels->name();
}

EvalWithMetrics EvalMetrics::evaluate(Evaluator &evaluator,
                                      const Trainer &trainer,
                                      const Dataset &data,
                                      const std::string &source,
                                      Collective *world) const {
  evaluator.requireOneBatch(data, source);
  const int64_t batches = data.numSamples() / batch_;
  const int ranks = world ? world->size() : 1;
  const int rank = world ? world->rank() : 0;
  // Every rank binds (gathers sharded masters) here, once: in the last
  // round a rank may have no batch, and a gather per batch left the ranks
  // in different collectives.
  evaluator.bindState(trainer);
  // One rank's batch of a round, as every rank learns it.
  struct Round {
    double loss = std::numeric_limits<double>::quiet_NaN();
    int64_t counted = 0;
    std::array<int64_t, kMaxEvalMetrics> correct{};
  };
  double sum = 0;
  TopKCounts total;
  total.correct.assign(metrics_.size(), 0);
  for (int64_t first = 0; first < batches; first += ranks) {
    Round mine;
    if (first + rank < batches) {
      const Tensor *logits = nullptr, *labels = nullptr;
      Trainer::Batch batch = data.batch(first + rank, batch_, false, 0);
      std::vector<std::pair<std::string, Tensor>> outputs =
          evaluator.outputsOfBound(batch);
      for (const auto &[name, tensor] : outputs) {
        if (name == loss_)
          mine.loss = tensor.getAsDouble(0);
        if (name == output_)
          logits = &tensor;
      }
      for (const auto &[name, tensor] : batch)
        if (name == labels_)
          labels = &tensor;
      if (!logits || !labels)
        throw Error("--eval-metrics: " + source + ": a batch without " +
                    (logits ? labels_ : output_));
      TopKCounts counts;
      countTopK(*logits, *labels, metrics_, ignoreIndex_, counts, output_,
                labels_);
      mine.counted = counts.counted;
      for (size_t m = 0; m < metrics_.size(); ++m)
        mine.correct[m] = counts.correct[m];
    }
    std::vector<Round> all =
        ranks > 1 ? gatherFromRanks(*world, mine) : std::vector<Round>{mine};
    for (int64_t r = 0; r < ranks && first + r < batches; ++r) {
      const Round &got = all[size_t(r)];
      sum += got.loss;
      total.counted += got.counted;
      for (size_t m = 0; m < metrics_.size(); ++m)
        total.correct[m] += got.correct[m];
    }
  }
  EvalWithMetrics result;
  result.eval = {sum / double(batches), batches * batch_};
  for (size_t m = 0; m < metrics_.size(); ++m)
    result.values.emplace_back(
        metrics_[m].name, total.counted
                              ? double(total.correct[m]) / double(total.counted)
                              : std::numeric_limits<double>::quiet_NaN());
  return result;
}

} // namespace mpc
