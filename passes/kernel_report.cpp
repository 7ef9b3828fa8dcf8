// Kernel launches and bytes per kernel class of a compiled step
// (passes/kernel_report.h).
#include "passes/kernel_report.h"

#include "ir/mpc_ops.h"
#include "passes/memory_plan.h"
#include "support/saturating.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <unordered_set>

namespace mpc {
namespace {

/// Bytes of a value (the planner's valueByteSize), or -1 when its shape is
/// not concrete or its size does not fit in int64 (counted as unsized).
int64_t valueBytes(const Value *v) {
  size_t bytes = 0;
  return v && valueByteSize(*v, bytes) ? int64_t(bytes) : -1;
}

bool contains(const std::string &s, const char *part) {
  return s.find(part) != std::string::npos;
}

} // namespace

std::string kernelClass(const Node &n) {
  static const std::unordered_set<std::string> views = {
      "Reshape",  "Squeeze", "Unsqueeze", "Flatten",
      "Identity", "Shape",   "Size",      "Constant"};
  static const std::unordered_set<std::string> copies = {
      "Transpose",       "Gather",          "Slice", "Concat",
      "Split",           "Expand",          "Pad",   "Tile",
      "GatherND",        "ScatterND",       "Where", "GatherElements",
      "ScatterElements", "ConstantOfShape", "Range", "EyeLike",
      "DepthToSpace",    "SpaceToDepth",    "Trilu"};
  const std::string &op = n.opType();
  bool onnx = n.domain().empty();
  if (onnx && views.count(op))
    return "";
  if (op == "Cast" || op == "CastLike" || contains(op, "CastTo"))
    return "cast";
  if (op == "MatMul" || op == "Gemm" || contains(op, "FusedMatMul") ||
      contains(op, "Conv"))
    return "matmul";
  if (!onnx && (op == "Adam" || op == "AdamW" || op == "SGD" ||
                contains(op, "Gradients") || contains(op, "LossScale") ||
                contains(op, "ClipGradNorm") || op == "IncrementStep" ||
                op == "LearningRate" || contains(op, "Ema")))
    return "optimizer";
  if (!onnx && (op == "AllReduce" || op == "AllGather" ||
                op == "ReduceScatter" || op == "RankShard"))
    return "collective";
  if (contains(op, "Loss"))
    return "loss";
  if (contains(op, "Pool"))
    return "pooling";
  if (contains(op, "Norm")) // LayerNormalization, RMSNormalization, BatchNorm
    return "normalization";
  if (contains(op, "Softmax"))
    return "softmax";
  if (contains(op, "Gelu") || op == "Relu" || contains(op, "Sigmoid") ||
      op == "Tanh" || op == "Erf" || contains(op, "Swish") ||
      contains(op, "Silu"))
    return "activation";
  if (contains(op, "Reduce") || contains(op, "SumToShape") ||
      contains(op, "ArgM") || op == "TopK" || op == "CumSum")
    return "reduction";
  if (onnx && copies.count(op))
    return "copy";
  if (!onnx && (contains(op, "GatherGrad") || contains(op, "Scatter")))
    return "copy";
  return "elementwise";
}

KernelReport reportKernels(const Model &model) {
  const Graph &g = model.training ? *model.training->algorithm : *model.graph;
  std::map<std::string, KernelClassCount> byClass;
  for (const Node *n : g.nodeList()) {
    std::string cls = kernelClass(*n);
    if (cls.empty())
      continue;
    KernelClassCount &c = byClass[cls];
    c.name = cls;
    ++c.launches;
    int64_t read = 0, written = 0;
    bool sized = true;
    for (size_t i = 0; i < n->numInputs(); ++i) {
      const Value *v = n->input(i);
      if (!v)
        continue; // an omitted optional input
      int64_t b = valueBytes(v);
      sized = sized && b >= 0;
      read = saturatingAdd(read, std::max<int64_t>(b, 0));
    }
    for (size_t i = 0; i < n->numOutputs(); ++i) {
      const Value *v = n->output(i);
      if (!v)
        continue;
      int64_t b = valueBytes(v);
      sized = sized && b >= 0;
      written = saturatingAdd(written, std::max<int64_t>(b, 0));
    }
    if (!sized)
      ++c.unsized;
    c.bytesRead = saturatingAdd(c.bytesRead, read);
    c.bytesWritten = saturatingAdd(c.bytesWritten, written);
  }
  KernelReport r;
  r.total.name = "total";
  for (auto &kv : byClass) {
    r.classes.push_back(kv.second);
    r.total.launches += kv.second.launches;
    r.total.bytesRead = saturatingAdd(r.total.bytesRead, kv.second.bytesRead);
    r.total.bytesWritten =
        saturatingAdd(r.total.bytesWritten, kv.second.bytesWritten);
    r.total.unsized += kv.second.unsized;
  }
  std::stable_sort(r.classes.begin(), r.classes.end(),
                   [](const KernelClassCount &a, const KernelClassCount &b) {
                     return double(a.bytesRead) + double(a.bytesWritten) >
                            double(b.bytesRead) + double(b.bytesWritten);
                   });
  return r;
}

std::string KernelReport::table() const {
  std::string out;
  char line[160];
  double all = double(total.bytesRead) + double(total.bytesWritten);
  // One unit for the whole table: KiB for a small step, else MiB.
  bool mib = all >= 64.0 * 1048576.0;
  double unit = mib ? 1048576.0 : 1024.0;
  const char *u = mib ? "MiB" : "KiB";
  std::snprintf(line, sizeof line, "%-14s %9s %9s read %9s written %7s\n",
                "kernel class", "launches", u, u, "bytes");
  out += line;
  auto row = [&](const KernelClassCount &c) {
    double bytes = double(c.bytesRead) + double(c.bytesWritten);
    std::snprintf(line, sizeof line, "%-14s %9lld %14.1f %17.1f %6.1f%%\n",
                  c.name.c_str(), (long long)c.launches,
                  double(c.bytesRead) / unit, double(c.bytesWritten) / unit,
                  all > 0 ? 100.0 * bytes / all : 0.0);
    out += line;
  };
  for (const KernelClassCount &c : classes)
    row(c);
  row(total);
  if (total.unsized > 0) {
    std::snprintf(line, sizeof line,
                  "%lld launches have shapes that are not concrete: their "
                  "bytes are not counted\n",
                  (long long)total.unsized);
    out += line;
  }
  return out;
}

std::string KernelReport::json() const {
  auto object = [](const KernelClassCount &c) {
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "{\"class\": \"%s\", \"launches\": %lld, \"bytes_read\": "
                  "%lld, \"bytes_written\": %lld, \"unsized\": %lld}",
                  c.name.c_str(), (long long)c.launches, (long long)c.bytesRead,
                  (long long)c.bytesWritten, (long long)c.unsized);
    return std::string(buf);
  };
  std::string out = "{\"classes\": [";
  for (size_t i = 0; i < classes.size(); ++i)
    out += (i ? ", " : "") + object(classes[i]);
  out += "], \"total\": " + object(total) + "}\n";
  return out;
}

} // namespace mpc
