// Finds aten arguments torch's dynamo exporter dropped
// (torch_dropped_arguments.h).
#include "passes/onnx/torch_dropped_arguments.h"

#include "passes/onnx/metadata_props.h"
#include "support/diagnostics.h"

#include <cstdlib>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace mpc {
namespace {

constexpr std::string_view kFxNodeKey = "pkg.torch.onnx.fx_node";

std::string trim(std::string_view s) {
  size_t b = s.find_first_not_of(' '), e = s.find_last_not_of(' ');
  return b == std::string_view::npos ? "" : std::string(s.substr(b, e - b + 1));
}

/// The comma-separated items of the bracketed list that opens at `open` in
/// s (the FX printout: "(a, b, [c, d], None)" or "{k: v}"), split at the
/// top level only.
std::vector<std::string> listItems(const std::string &s, size_t open) {
  std::vector<std::string> items;
  if (open == std::string::npos || open >= s.size())
    return items;
  int depth = 0;
  size_t start = open + 1;
  for (size_t i = open; i < s.size(); ++i) {
    char c = s[i];
    if (c == '(' || c == '[' || c == '{')
      ++depth;
    else if (c == ')' || c == ']' || c == '}') {
      if (--depth == 0) {
        std::string last = trim(std::string_view(s).substr(start, i - start));
        if (!last.empty())
          items.push_back(last);
        return items;
      }
    } else if (c == ',' && depth == 1) {
      items.push_back(trim(std::string_view(s).substr(start, i - start)));
      start = i + 1;
    }
  }
  return {}; // unbalanced: not a printout this reads
}

/// aten.cross_entropy_loss's label_smoothing: its sixth positional
/// argument (self, target, weight, reduction, ignore_index,
/// label_smoothing) or a keyword; 0 when neither is there or it is no
/// number.
double labelSmoothing(const std::string &fx) {
  std::vector<std::string> args = listItems(fx, fx.find("args = ("));
  std::string value;
  if (args.size() >= 6)
    value = args[5];
  for (const std::string &kw : listItems(fx, fx.find("kwargs = {")))
    if (kw.rfind("label_smoothing:", 0) == 0)
      value = trim(std::string_view(kw).substr(16));
  if (value.empty())
    return 0;
  char *end = nullptr;
  double e = std::strtod(value.c_str(), &end);
  return end && *end == '\0' ? e : 0;
}

/// The node of g that writes `output`, for the error's location.
const Node *writerOf(const Graph &g, const std::string &output) {
  for (const auto &n : g.nodes())
    for (size_t i = 0; i < n->numOutputs(); ++i)
      if (n->output(i) && n->output(i)->name() == output)
        return n.get();
  return nullptr;
}

} // namespace

void checkDroppedTorchArguments(const onnx::GraphProto &gp, const Graph &g) {
  for (const onnx::NodeProto &np : gp.node()) {
    if (np.op_type() != "SoftmaxCrossEntropyLoss" || np.output_size() < 1)
      continue;
    std::string fx = metadataValue(np, kNodeMetadataField, kFxNodeKey);
    if (fx.find("aten.cross_entropy_loss") == std::string::npos)
      continue;
    double e = labelSmoothing(fx);
    if (e == 0)
      continue;
    std::ostringstream msg;
    msg << "was traced from CrossEntropyLoss with label_smoothing=" << e
        << " (its pkg.torch.onnx.fx_node), which torch's exporter dropped: "
           "the file computes the unsmoothed loss. Spell the smoothing out "
           "in the model, e.g. (1 - e) * F.cross_entropy(x, y) + e * "
           "-F.log_softmax(x, 1).mean(1).mean(), and export again";
    if (const Node *n = writerOf(g, np.output(0)))
      errorAt(*n) << msg.str();
    throw Error("node '" + np.name() +
                "' (SoftmaxCrossEntropyLoss): " + msg.str());
  }
}

} // namespace mpc
