// shrink-saved: the forward values the backward reads, kept in the smallest
// form that gives the backward the same bits.
//
// A value made at or before the loss node and read after it is saved for
// the backward: it lives from the forward into the backward, and those
// values are most of a step's memory (the activations). After autocast and
// cleanup (which merges a backward Cast into the forward's Cast of the same
// value) the step can keep more of them than PyTorch's autocast keeps:
//
//   two precisions of one value: Y (fp32) for an fp32 island's gradient and
//     Ylow = Cast<to = fp16>(Y) (a Cast, or a softmax island's Ylow) for a
//     matrix product's gradient; or an fp32 master weight (state, there all
//     step) and its fp16 working copy that the gradient of the product's
//     input reads. Ylow's backward readers read a Cast of Y made in the
//     backward instead, so only Y is kept (Ylow's bytes);
//   an exact widening: X32 = Cast<to = FLOAT>(X16) (the fp32 copy of a
//     convolution's output that an fp32 batch norm reads) read by the
//     backward. Its backward readers read X16 widened again in the backward,
//     so X16 is saved instead (half the bytes).
//
// (A wide value that the backward reads only through a Cast down is already
// saved as the forward's Cast: cleanup merges the backward's Cast into it.)
//
// A Cast gives the same bits wherever it runs, and a softmax island's Ylow is
// written by the Cast kernel from the stored Y (kernels/cpu/fused.cpp,
// kernels/cuda/softmax.cu), so every loss, gradient and update is unchanged
// bit for bit; the backward pays one elementwise Cast per rewrite.
//
// Runs on the training step after cleanup (which would merge a Cast made
// again in the backward into the forward's) and before recompute and
// plan-memory. Without a training step or a loss node it does nothing.
#include "passes/shrink_saved.h"

#include "ir/mpc_ops.h"
#include "ir/step_metadata.h"
#include "passes/memory_plan.h"
#include "support/saturating.h"

#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace mpc {
namespace {

/// The step's node order, and where the forward ends (the loss node).
class StepOrder {
public:
  StepOrder(const Graph &g, const Value *loss) {
    int64_t i = 0;
    for (const auto &n : g.nodes())
      at_[n.get()] = i++;
    if (loss && loss->producer())
      loss_ = at_.at(loss->producer());
  }
  bool valid() const { return loss_ >= 0; }
  /// A node made after the order was taken (a Cast made in the backward
  /// here) is after every other.
  int64_t at(const Node *n) const {
    auto it = at_.find(n);
    return it == at_.end() ? INT64_MAX : it->second;
  }
  /// Made by a node at or before the loss node.
  bool madeInForward(const Value *v) const {
    return v->producer() && at(v->producer()) <= loss_;
  }
  bool inBackward(const Node *n) const { return at(n) > loss_; }
  /// v's readers after the loss node, each once, in step order.
  std::vector<Node *> backwardReaders(const Value *v) const {
    std::vector<Node *> readers;
    for (const Use &u : v->uses())
      if (inBackward(u.user) &&
          std::find(readers.begin(), readers.end(), u.user) == readers.end())
        readers.push_back(u.user);
    std::sort(readers.begin(), readers.end(),
              [&](const Node *a, const Node *b) { return at(a) < at(b); });
    return readers;
  }

private:
  std::unordered_map<const Node *, int64_t> at_;
  int64_t loss_ = -1;
};

size_t bytesOf(const Value &v) {
  size_t bytes = 0;
  return valueByteSize(v, bytes) ? bytes : 0;
}

/// A Cast of x to `to` made just before `before` (with `like`'s attributes
/// when that is a Cast), typed as x in dtype `to`.
Value *castBefore(Graph &g, Value *x, DType to, const Node *like, Node *before,
                  const std::string &hint) {
  Node *cast = g.createNodeWithOutputHint("Cast", {x}, hint, hint, "", before);
  if (like && like->isOp("", "Cast"))
    cast->setAttrs(like->attributes());
  cast->setAttr("to", Attribute::ofInt(toOnnxDataType(to)));
  cast->output(0)->copyTypeFrom(*x);
  cast->output(0)->dtype = to;
  return cast->output(0);
}

/// Points every read of `from` by a node after the loss node at `to`.
void redirectBackwardReads(const StepOrder &order, Value *from, Value *to) {
  std::vector<Use> uses = from->uses();
  for (const Use &u : uses)
    if (order.inBackward(u.user))
      u.user->setInput(size_t(u.index), to);
}

bool isCastNode(const Node *n) { return n && n->isOp("", "Cast"); }

/// A Cast to a float type of fewer bytes than its input's.
bool isNarrowingCast(const Node *n) {
  if (!isCastNode(n) || !n->input(0) || !n->output(0))
    return false;
  DType from = n->input(0)->dtype, to = n->output(0)->dtype;
  return isFloating(from) && isFloating(to) && dtypeSize(to) < dtypeSize(from);
}

/// The wide value `low` is the Cast of, when low is its forward producer's
/// narrow copy of a value that producer also writes or reads: a narrowing
/// Cast's input, or a softmax island's or a layer norm's Y next to
/// its Ylow.
Value *wideTwinOf(const Value *low) {
  Node *p = low->producer();
  if (isNarrowingCast(p))
    return p->input(0);
  // A softmax island's or a post-LN block's norm's fp32 Y and its Ylow.
  const int at = p ? lowCopyOutput(p->domain(), p->opType()) : -1;
  if (at > 0 && p->output(size_t(at)) == low && p->output(0) &&
      p->output(0)->dtype == DType::F32)
    return p->output(0);
  return nullptr;
}

struct Stats {
  int64_t castAgain = 0, widenAgain = 0;
  int64_t bytes = 0; ///< saved bytes dropped (values of known size)
};

/// Whether v's bytes live into the backward whatever this pass does: state,
/// a graph input or a constant (they persist through the step), or a
/// forward value the backward reads.
bool livesIntoBackward(const StepOrder &order, const Value *v) {
  if (!v->producer())
    return true;
  return order.madeInForward(v) && !order.backwardReaders(v).empty();
}

/// A value saved in a wide and a narrow precision keeps the wide one; the
/// backward casts it down again where it reads the narrow one. The wide one
/// may be state: the fp32 master weight whose fp16 working copy the
/// backward's products read (the optimizer's update of the master comes
/// after every gradient, and the plan writes it over the master only once
/// every reader has run), or the batch whose fp16 copy a weight gradient
/// reads.
void castNarrowTwinsAgain(Graph &g, const StepOrder &order, Stats &s) {
  // Found first, then rewritten: the order knows the step's nodes as they
  // were (a Cast made here reads a wide value another candidate may read).
  std::vector<std::pair<Value *, Node *>> lows; // and its first reader
  for (const auto &n : g.nodes())
    for (Value *o : n->outputs())
      if (o && !o->isGraphOutput() && order.madeInForward(o))
        if (Value *wide = wideTwinOf(o); wide &&
                                         livesIntoBackward(order, wide) &&
                                         !order.backwardReaders(o).empty())
          lows.emplace_back(o, order.backwardReaders(o).front());
  for (auto [low, first] : lows) {
    Value *wide = wideTwinOf(low);
    Value *again = castBefore(g, wide, low->dtype, low->producer(), first,
                              low->name() + "_again");
    redirectBackwardReads(order, low, again);
    ++s.castAgain;
    s.bytes = saturatingAdd(s.bytes, int64_t(bytesOf(*low)));
  }
}

/// An exact widening of a narrow value, read by the backward, is widened
/// again in the backward: the narrow value is what is saved.
void widenAgain(Graph &g, const StepOrder &order, Stats &s) {
  struct Candidate {
    Value *wide;
    Node *firstReader;
    int64_t gain; ///< the wide bytes, less the narrow ones if newly saved
  };
  std::vector<Candidate> wides;
  for (const auto &n : g.nodes()) {
    Value *wide = n->output(0);
    if (!isCastNode(n.get()) || !wide || !n->input(0) ||
        wide->isGraphOutput() || !order.madeInForward(wide))
      continue;
    DType from = n->input(0)->dtype;
    if (from == wide->dtype || !widensExactly(from, wide->dtype) ||
        order.backwardReaders(wide).empty())
      continue;
    // The narrow value is saved now, unless it was already (a graph
    // input or a state value lives through the step anyway).
    const Value *narrow = n->input(0);
    bool narrowSaved =
        !narrow->producer() || !order.backwardReaders(narrow).empty();
    wides.push_back({wide, order.backwardReaders(wide).front(),
                     int64_t(bytesOf(*wide)) -
                         int64_t(narrowSaved ? 0 : bytesOf(*narrow))});
  }
  for (const Candidate &c : wides) {
    Node *cast = c.wide->producer();
    Value *again = castBefore(g, cast->input(0), c.wide->dtype, cast,
                              c.firstReader, c.wide->name() + "_again");
    redirectBackwardReads(order, c.wide, again);
    ++s.widenAgain;
    s.bytes = saturatingAdd(s.bytes, c.gain);
  }
}

} // namespace

void runShrinkSaved(Model &model, PassContext &ctx) {
  ctx.changedNothing = true;
  if (!model.training)
    return;
  Graph &g = *model.training->algorithm;
  const std::string *lossName = readMeta(model, meta::kLoss);
  auto order = [&] {
    return StepOrder(g, lossName ? g.findValue(*lossName) : nullptr);
  };
  if (!order().valid())
    return;
  Stats s;
  // Each rewrite sees the order the previous one left.
  castNarrowTwinsAgain(g, order(), s);
  widenAgain(g, order(), s);
  ctx.stats["narrow-copies-cast-again"] += s.castAgain;
  ctx.stats["widenings-widened-again"] += s.widenAgain;
  ctx.stats["saved-bytes-dropped"] += s.bytes;
  ctx.changedNothing = s.castAgain + s.widenAgain == 0;
}

} // namespace mpc
