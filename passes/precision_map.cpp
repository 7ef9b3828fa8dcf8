// The precision map's records (what autocast decided and why) and printers.
//
// Records are made where the decision is taken (passes/autocast.cpp calls
// the *Record functions) so that the explanation is the decision itself, not
// a later guess. The printers read the records back in graph order; a node
// without a record is described by where it is (the main graph's inference
// nodes) or marked as undecided.
#include "passes/precision_map.h"

#include "passes/loss_islands.h"

#include "ir/step_metadata.h"
#include "passes/pass.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

namespace mpc {
namespace {

/// "Gemm", "mpc.SoftmaxGrad".
std::string opLabel(const Node &n) {
  return n.domain().empty() ? n.opType() : n.domain() + "." + n.opType();
}

/// "Gemm '/fc1/Gemm'".
std::string nodeLabel(const Node &n) {
  return opLabel(n) + " '" + n.name() + "'";
}

/// The rule the table alone gives a node of class `cls`.
std::string tableRule(const Node &n, const Classification &how, DType target) {
  if (how.source == ClassSource::UnlistedOp ||
      (!how.entry && how.tableCls == PrecisionClass::Fp32))
    return "island:unlisted-op";
  switch (how.tableCls) {
  case PrecisionClass::Lower:
    return std::string("policy:") + dtypeName(target) + "-op";
  case PrecisionClass::Fp32:
    return "island:" + opLabel(n);
  case PrecisionClass::Follow:
    return "follow-inputs";
  case PrecisionClass::Keep:
    return "keep";
  case PrecisionClass::AnyType:
    return "any-type";
  }
  return "?";
}

/// What a Follow node's inputs made it: "its float inputs are fp16",
/// "float inputs fp16, fp32 promote to fp32"; with `paramsAdapted`, "its
/// computed inputs are fp16; its parameters adapt".
std::string followDetail(DType runsIn, const std::vector<DType> &promoted,
                         bool paramsAdapted) {
  if (runsIn == DType::Undefined)
    return "reads only compile-time constants: runs as before";
  std::string inputs = paramsAdapted ? "computed inputs" : "float inputs";
  std::string adapt = paramsAdapted ? "; its parameters adapt" : "";
  std::set<DType> distinct(promoted.begin(), promoted.end());
  if (distinct.size() <= 1)
    return "its " + inputs + " are " + dtypeName(runsIn) + adapt;
  std::string names;
  for (DType t : distinct)
    names += (names.empty() ? "" : ", ") + std::string(dtypeName(t));
  return inputs + " " + names + " promote to " + dtypeName(runsIn) + adapt;
}

/// "fp32->fp16".
std::string conversion(const Node &cast) {
  const Value *in = cast.input(0), *out = cast.output(0);
  return std::string(in ? dtypeName(in->dtype) : "?") + "->" +
         (out ? dtypeName(out->dtype) : "?");
}

/// A table reason without its "optimizer: " style prefix.
std::string withoutPrefix(const std::string &reason) {
  size_t colon = reason.find(": ");
  bool prefixed = colon != std::string::npos && reason.find(' ') > colon;
  return prefixed ? reason.substr(colon + 2) : reason;
}

/// The graph the map belongs to when it is still one of the model's.
const Graph *mappedGraph(const Model &model) {
  const PrecisionMap *m = model.precisionMap.get();
  if (!m)
    return nullptr;
  if (m->graph() == model.graph.get())
    return m->graph();
  if (model.training && m->graph() == model.training->algorithm.get())
    return m->graph();
  return nullptr;
}

const char *const kPrecisions[] = {"fp16", "bf16", "fp32", "fp64", "int", "-"};

/// Fill colours: low precision green/teal, fp32 blue, integers grey.
const char *precisionColour(const std::string &precision) {
  if (precision == "fp16")
    return "#a1d99b";
  if (precision == "bf16")
    return "#66c2a4";
  if (precision == "fp32")
    return "#9ecae1";
  if (precision == "fp64")
    return "#bcbddc";
  if (precision == "int")
    return "#d9d9d9";
  return "#ffffff";
}

/// A DOT string literal's body.
std::string dotEscape(const std::string &s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\';
    out += c;
  }
  return out;
}

bool isCast(const Node &n) {
  return n.domain().empty() && n.opType() == "Cast";
}

} // namespace

void PrecisionMap::record(const Node &n, PrecisionRecord r) {
  byName_[n.name()] = std::move(r);
}

const PrecisionRecord *PrecisionMap::find(const Node &n) const {
  if (n.owner() != graph_)
    return nullptr;
  const Entry *&memo = found_[&n];
  if (memo && memo->first == n.name())
    return &memo->second;
  auto it = byName_.find(n.name());
  if (it == byName_.end())
    return nullptr;
  memo = &*it;
  return &it->second;
}

PrecisionMap &startPrecisionMap(Model &model, const Graph &g) {
  model.precisionMap = std::make_shared<PrecisionMap>(g);
  return *model.precisionMap;
}

PrecisionMap *precisionMapOf(const Model &model, const Graph &g) {
  PrecisionMap *m = model.precisionMap.get();
  return m && m->graph() == &g ? m : nullptr;
}

std::optional<PrecisionRecord> recordCopyOf(const Model &model, const Graph &g,
                                            const Node &n) {
  const PrecisionMap *m = precisionMapOf(model, g);
  const PrecisionRecord *r = m ? m->find(n) : nullptr;
  return r ? std::optional<PrecisionRecord>(*r) : std::nullopt;
}

PrecisionRecord untouchedRecord(const Node &n, const Classification &how,
                                Untouched why) {
  PrecisionRecord r;
  switch (why) {
  case Untouched::AnyType:
    r.rule = "any-type";
    r.detail = how.entry ? how.entry->reason : "reads any dtype";
    break;
  case Untouched::NoFloatInputs:
    r.rule = "not-float";
    r.detail = "no float inputs (integer or shape arithmetic): nothing to cast";
    break;
  case Untouched::Fp64:
    r.rule = "fp64";
    r.detail = "reads or writes fp64: left as it is";
    break;
  case Untouched::Keep:
    r.rule = "keep";
    r.detail = how.entry ? std::string(how.entry->reason)
                         : "op of domain '" + n.domain() +
                               "' is not in the policy table: left as it is";
    break;
  }
  return r;
}

PrecisionRecord decidedRecord(const Node &n, const Classification &how,
                              DType runsIn, DType target,
                              const std::string &fp32NodesPattern,
                              const std::vector<DType> &promoted,
                              bool paramsAdapted) {
  PrecisionRecord r;
  r.dtype = runsIn;
  std::string tableSays = tableRule(n, how, target);
  std::string instead = how.tableCls == how.cls
                            ? "the table says the same (" + tableSays + ")"
                            : "instead of the table's " + tableSays;
  switch (how.source) {
  case ClassSource::Table:
    r.rule = tableSays;
    r.detail = how.cls == PrecisionClass::Follow
                   ? followDetail(runsIn, promoted, paramsAdapted)
                   : how.entry->reason;
    break;
  case ClassSource::UnlistedOp:
    r.rule = tableSays;
    r.detail = "not in the policy table: ops of unknown numerics stay fp32";
    break;
  case ClassSource::Fp32Nodes:
    r.rule = "override:--fp32-nodes=" + fp32NodesPattern;
    r.detail = "the node name matches; " + instead;
    break;
  case ClassSource::Fp16Ops:
    r.rule = "override:--fp16-ops=" + n.opType();
    r.detail = instead;
    break;
  case ClassSource::Fp32Ops:
    r.rule = "override:--fp32-ops=" + n.opType();
    r.detail = instead;
    break;
  case ClassSource::LossIsland:
    r.rule = std::string("island:") + how.island->name;
    r.detail = how.island->reason;
    break;
  }
  return r;
}

PrecisionRecord followUsersRecord(DType target) {
  return {target, "follow-users",
          std::string("a Cast commutes with it and all its users read ") +
              dtypeName(target) + ", so it reads its input's " +
              dtypeName(target) + " copy"};
}

PrecisionRecord constantConvertedRecord(DType to) {
  return {DType::Undefined, "any-type",
          std::string("constant converted to ") + dtypeName(to) +
              " at compile time for its users"};
}

PrecisionRecord insertedCastRecord(const Node &cast,
                                   const std::string &lossName) {
  PrecisionRecord r;
  r.rule = "cast-inserted";
  const Value *in = cast.input(0), *out = cast.output(0);
  std::string what = conversion(cast);
  if (out && !lossName.empty() && out->name() == lossName) {
    r.detail = what + ": the loss '" + lossName + "' stays fp32";
  } else if (out && out->isGraphOutput()) {
    r.detail = what + " so that graph output '" + out->name() + "' stays " +
               dtypeName(out->dtype);
  } else {
    r.detail = what + " of " + (in && in->isState ? "state '" : "'") +
               (in ? in->name() : "?") + "'";
    std::vector<const Node *> users;
    for (const Use &u : out ? out->uses() : std::vector<Use>{})
      if (std::find(users.begin(), users.end(), u.user) == users.end())
        users.push_back(u.user);
    if (!users.empty())
      r.detail += " for input of " + nodeLabel(*users[0]);
    if (users.size() > 1)
      r.detail += " and " + std::to_string(users.size() - 1) + " more";
  }
  return r;
}

void recordFullPrecision(Model &model, const Graph &g) {
  PrecisionMap &m = startPrecisionMap(model, g);
  for (const auto &n : g.nodes())
    m.record(*n, {DType::Undefined, "precision:fp32",
                  "--precision=fp32: autocast changes nothing"});
}

void recordNodesAddedBy(const Model &model, const std::string &pass) {
  const Graph *g = mappedGraph(model);
  if (!g)
    return;
  PrecisionMap &m = *model.precisionMap;
  for (const auto &n : g->nodes()) {
    if (m.find(*n))
      continue;
    std::string detail = "added by " + pass + " after autocast";
    if (isCast(*n))
      detail += ": " + conversion(*n) + " of '" +
                (n->input(0) ? n->input(0)->name() : "?") + "'";
    else if (const PolicyEntry *e = findPolicyEntry(n->domain(), n->opType()))
      detail += ": " + withoutPrefix(e->reason);
    m.record(*n, {DType::Undefined, "training-support", detail});
  }
}

std::string nodePrecision(const Node &n, const PrecisionRecord *r) {
  if (r && r->dtype != DType::Undefined)
    return dtypeName(r->dtype);
  bool anyTyped = false;
  for (const Value *o : n.outputs()) {
    if (!o || o->dtype == DType::Undefined)
      continue;
    if (isFloating(o->dtype))
      return dtypeName(o->dtype);
    anyTyped = true;
  }
  return anyTyped ? "int" : "-";
}

namespace {

/// n's record as printed: an inserted Cast is described from its users as
/// they are now, since passes after autocast (fold-transpose folding the
/// Transpose it fed, say) may have changed who reads it.
const PrecisionRecord *printedRecord(const Model &model, const Node &n,
                                     const PrecisionRecord *r,
                                     PrecisionRecord &scratch) {
  if (!r || r->rule != "cast-inserted")
    return r;
  const std::string *loss = readMeta(model, meta::kLoss);
  scratch = insertedCastRecord(n, loss ? *loss : "");
  scratch.dtype = r->dtype;
  return &scratch;
}

} // namespace

std::string explainPrecision(const Model &model) {
  const PrecisionMap *m = model.precisionMap.get();
  const Graph *mapped = mappedGraph(model);
  const std::string *precision = readMeta(model, meta::kPrecision);
  std::ostringstream os;

  auto section = [&](const Graph &g, const std::string &what) {
    struct Row {
      std::string cells[5];
    };
    std::vector<Row> rows;
    rows.push_back({{"node", "op", "precision", "rule", "detail"}});
    std::map<std::string, int> perPrecision;
    int castsInserted = 0;
    for (const auto &n : g.nodes()) {
      PrecisionRecord described;
      const PrecisionRecord *r = printedRecord(
          model, *n, &g == mapped ? m->find(*n) : nullptr, described);
      if (!r && model.training && &g == model.graph.get())
        described = {DType::Undefined, "inference",
                     "the inference graph runs as exported; autocast "
                     "rewrites the training step"};
      else if (!r)
        described = {DType::Undefined, "none",
                     "no decision recorded: autocast did not run on this "
                     "graph"};
      if (!r)
        r = &described;
      std::string p = nodePrecision(*n, r);
      ++perPrecision[p];
      castsInserted += r->rule == "cast-inserted";
      rows.push_back({{n->name(), opLabel(*n), p, r->rule, r->detail}});
    }
    size_t width[4] = {0, 0, 0, 0};
    for (const Row &row : rows)
      for (int c = 0; c < 4; ++c)
        width[c] = std::max(width[c], row.cells[c].size());

    os << "precision map of the " << what << " '" << g.name() << "'";
    if (precision && &g == mapped)
      os << " (--precision=" << *precision << ")";
    os << "\n";
    for (const Row &row : rows) {
      for (int c = 0; c < 4; ++c)
        os << row.cells[c]
           << std::string(width[c] - row.cells[c].size() + 2, ' ');
      os << row.cells[4] << "\n";
    }
    os << g.numNodes() << " nodes:";
    bool first = true;
    for (const char *p : kPrecisions) {
      auto it = perPrecision.find(p);
      if (it == perPrecision.end())
        continue;
      os << (first ? " " : ", ") << it->second << " " << p;
      first = false;
    }
    if (castsInserted)
      os << "; " << castsInserted << " casts inserted by autocast";
    os << "\n";
  };

  if (model.training) {
    section(*model.training->algorithm, "training step");
    os << "\n";
  }
  section(*model.graph, model.training ? "main graph" : "graph");
  return os.str();
}

std::string precisionDot(const Model &model) {
  const PrecisionMap *m = model.precisionMap.get();
  const Graph *mapped = mappedGraph(model);
  const Graph &g = mapped           ? *mapped
                   : model.training ? *model.training->algorithm
                                    : *model.graph;
  const std::string *precision = readMeta(model, meta::kPrecision);

  std::ostringstream os;
  os << "// mpc-opt --dot: graph '" << g.name()
     << "' coloured by precision (render with dot -Tsvg or -Tpng)\n";
  os << "digraph \"" << dotEscape(g.name()) << "\" {\n";
  os << "  graph [rankdir=TB, fontname=\"Helvetica\", labelloc=t, label=\""
     << dotEscape(g.name()) << ": precision map"
     << (precision ? " (--precision=" + *precision + ")" : std::string())
     << "\"];\n";
  os << "  node [fontname=\"Helvetica\", fontsize=10, shape=box, "
        "style=filled];\n";
  os << "  edge [fontname=\"Helvetica\", fontsize=8];\n";

  // The legend: one swatch per precision and one per kind of node.
  os << "  subgraph cluster_legend {\n"
        "    label=\"legend\"; style=dashed; fontsize=10;\n";
  std::string previous;
  for (const char *p : kPrecisions) {
    std::string id = std::string("legend_") + (p[0] == '-' ? "none" : p);
    std::string text = p[0] == '-' ? "untyped" : p;
    if (std::string(p) == "int")
      text = "int / bool / shape";
    os << "    " << id << " [label=\"" << text << "\", fillcolor=\""
       << precisionColour(p) << "\"];\n";
    if (!previous.empty())
      os << "    " << previous << " -> " << id << " [style=invis];\n";
    previous = id;
  }
  os << "    legend_cast [label=\"Cast inserted by autocast\", shape=cds, "
        "style=\"filled,bold\", color=\"#e6550d\", penwidth=2, "
        "fillcolor=\"#ffffff\"];\n"
        "    legend_other_cast [label=\"other Cast\", shape=cds, "
        "style=\"filled,dashed\", color=\"#e6550d\", penwidth=2, "
        "fillcolor=\"#ffffff\"];\n"
        "    legend_input [label=\"graph input\", shape=ellipse, "
        "fillcolor=\"#ffffff\"];\n"
        "    legend_state [label=\"state (parameters, optimizer)\", "
        "shape=cylinder, fillcolor=\"#ffffff\"];\n"
        "    legend_constant [label=\"constant\", shape=ellipse, "
        "style=\"filled,dashed\", fillcolor=\"#ffffff\"];\n"
        "    legend_output [label=\"graph output\", shape=ellipse, "
        "peripheries=2, fillcolor=\"#ffffff\"];\n";
  for (const char *id : {"legend_cast", "legend_other_cast", "legend_input",
                         "legend_state", "legend_constant", "legend_output"}) {
    os << "    " << previous << " -> " << id << " [style=invis];\n";
    previous = id;
  }
  os << "  }\n";

  // Values that no node produces: graph inputs, state and constants.
  std::map<const Value *, std::string> sourceIds;
  auto valueNode = [&](const Value *v) -> std::string {
    auto it = sourceIds.find(v);
    if (it != sourceIds.end())
      return it->second;
    std::string id = "v" + std::to_string(sourceIds.size());
    sourceIds.emplace(v, id);
    os << "  " << id << " [label=\"" << dotEscape(v->name()) << "\\n"
       << v->typeString() << "\", fillcolor=\"#ffffff\", ";
    if (v->isGraphInput())
      os << "shape=ellipse";
    else if (v->isState)
      os << "shape=cylinder";
    else
      os << "shape=ellipse, style=\"filled,dashed\"";
    os << "];\n";
    return id;
  };

  std::map<const Node *, std::string> nodeIds;
  for (const auto &n : g.nodes())
    nodeIds.emplace(n.get(), "n" + std::to_string(nodeIds.size()));
  auto sourceOf = [&](const Value *v) {
    return v->producer() ? nodeIds.at(v->producer()) : valueNode(v);
  };

  for (const auto &n : g.nodes()) {
    PrecisionRecord current;
    const PrecisionRecord *r =
        printedRecord(model, *n, &g == mapped ? m->find(*n) : nullptr, current);
    std::string p = nodePrecision(*n, r);
    std::string rule = r ? r->rule : "none";
    os << "  " << nodeIds.at(n.get()) << " [label=\"" << dotEscape(n->name())
       << "\\n"
       << dotEscape(opLabel(*n)) << "\\n"
       << p << ", " << dotEscape(rule) << "\", fillcolor=\""
       << precisionColour(p) << "\"";
    if (r)
      os << ", tooltip=\"" << dotEscape(r->detail) << "\"";
    if (isCast(*n))
      os << ", shape=cds, color=\"#e6550d\", penwidth=2, style=\""
         << (rule == "cast-inserted" ? "filled,bold" : "filled,dashed") << "\"";
    os << "];\n";
    for (const Value *v : n->inputs()) {
      if (!v)
        continue;
      // First: a value's own node is declared before the edge's line.
      std::string from = sourceOf(v);
      os << "  " << from << " -> " << nodeIds.at(n.get()) << " [label=\""
         << v->typeString() << "\"];\n";
    }
  }
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    const Value *v = g.outputs()[i];
    std::string id = "out" + std::to_string(i), from = sourceOf(v);
    os << "  " << id << " [label=\"" << dotEscape(v->name()) << "\\n"
       << v->typeString()
       << "\", shape=ellipse, peripheries=2, fillcolor=\"#ffffff\"];\n";
    os << "  " << from << " -> " << id << " [label=\"" << v->typeString()
       << "\"];\n";
  }
  os << "}\n";
  return os.str();
}

} // namespace mpc
