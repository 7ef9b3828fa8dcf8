// Metadata that names values follows those values through rewrites.
//
// Passes record facts about the step in model metadata by value name:
// mpc.grads lists each parameter's gradient, mpc.loss the loss, and so on.
// Any later pass may rewrite the graph: cleanup drops an Identity whose
// output is a gradient (torch's weight_norm, a parameter read whole through
// Transpose<perm=[0,1]>), a fusion replaces the node that computed it. A
// pass cannot be expected to know every key that might name what it
// replaces, so the model keeps, for each value-naming entry, the values it
// named (Model::setMeta records them; an entry found with other text is
// read afresh), and updateValueReferences, which the pipeline runs after
// every pass, mends each name that no value holds any more: a renamed
// value is named by its new name, and one that was replaced
// (Graph::replaceAllUsesWith) and then removed by its replacement. A name
// some value holds stands: passes hand a name on to the value that takes
// the old one's place on purpose. A value removed with no replacement keeps
// its name, and the verifier reports it against the pass that removed it.
// The training step's update_binding names its outputs (each state's new
// value) and is mended the same way (Model::updateValueReferences).
#include "ir/graph.h"
#include "ir/step_metadata.h"

#include <algorithm>
#include <optional>
#include <string_view>

namespace mpc {
namespace {

/// A metadata key whose value names values of the model's graphs, and how:
/// a comma-separated list of names, or of name=name pairs (mpc.ema:
/// parameter=average). These are the Value, ValueList and ValuePairs keys of
/// ir/step_metadata.h; not mpc.buffers: those are the module's state_dict
/// names, and a buffer folded away is an error (runtime/state_dict.cpp), not
/// a name to move.
struct ValueNamingKey {
  std::string_view key;
  bool pairs;
};

std::optional<ValueNamingKey> valueNamingKey(std::string_view key) {
  const MetaKeyInfo *k = stepMetadataKey(key);
  if (!k || (k->form != MetaForm::Value && k->form != MetaForm::ValueList &&
             k->form != MetaForm::ValuePairs))
    return std::nullopt;
  return ValueNamingKey{k->name, k->form == MetaForm::ValuePairs};
}

/// The names in `text` as (offset, length) spans, in order: split at ','
/// (and at '=' for pairs). Empty names are spans of length 0.
std::vector<std::pair<size_t, size_t>> nameSpans(std::string_view text,
                                                 bool pairs) {
  std::vector<std::pair<size_t, size_t>> spans;
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i)
    if (i == text.size() || text[i] == ',' || (pairs && text[i] == '=')) {
      spans.emplace_back(start, i - start);
      start = i + 1;
    }
  return spans;
}

} // namespace

Model::ValueRef Model::findValueRef(const std::string &name) const {
  Graph *working = training ? training->algorithm.get() : graph.get();
  for (Graph *g : {working, graph.get()})
    if (g)
      if (Value *v = g->findValue(name))
        return {g->uid(), v};
  return {};
}

void Model::recordValueRefs(MetadataValueRefs &r, const std::string &text) {
  r.text = text;
  r.refs.clear();
  std::optional<ValueNamingKey> k = valueNamingKey(r.key);
  for (auto [offset, length] : nameSpans(text, k && k->pairs))
    r.refs.push_back(length ? findValueRef(text.substr(offset, length))
                            : ValueRef{});
}

void Model::setMeta(const std::string &key, const std::string &value) {
  auto it = std::find_if(metadata.begin(), metadata.end(),
                         [&](const auto &kv) { return kv.first == key; });
  if (it != metadata.end())
    it->second = value;
  else
    metadata.emplace_back(key, value);
  if (!valueNamingKey(key))
    return;
  auto r =
      std::find_if(valueRefs_.begin(), valueRefs_.end(),
                   [&](const MetadataValueRefs &m) { return m.key == key; });
  if (r == valueRefs_.end()) {
    valueRefs_.push_back({key, {}, {}});
    r = std::prev(valueRefs_.end());
  }
  recordValueRefs(*r, value);
}

void Model::updateValueReferences() {
  Graph *graphs[] = {graph.get(),
                     training ? training->algorithm.get() : nullptr};
  // The graph a reference's value belongs to, while it is one of the
  // model's (its values are alive as long as it is).
  auto graphOf = [&](uint64_t uid) -> Graph * {
    for (Graph *g : graphs)
      if (g && g->uid() == uid)
        return g;
    return nullptr;
  };
  // The value that `name` (recorded as `ref`) should name now, or nullptr
  // when the name stands (or nothing better is known); keeps ref current.
  auto mend = [&](ValueRef &ref, std::string_view name) -> Value * {
    Graph *g = ref.value ? graphOf(ref.graphUid) : nullptr;
    if (!g) {
      // Not found when recorded, or its graph was replaced: by name.
      if (!name.empty())
        ref = findValueRef(std::string(name));
      return nullptr;
    }
    // A name some value of that graph holds stands, whether or not it is
    // the value recorded: a pass that computes a value anew hands the old
    // one's name to the new one (autocast's fp32 copy of a half gradient,
    // ValueTakeovers), and the name is how it says so.
    if (Value *holder = g->findValue(name)) {
      ref.value = holder;
      return nullptr;
    }
    // The name is free: the value it named was renamed, or replaced
    // (Graph::replaceAllUsesWith) and then removed, and is named by where
    // its uses went (a chain of such rewrites is followed; the bound guards
    // against a cycle of replacements).
    Value *v = ref.value;
    for (size_t hops = 0;
         !v->isLive() && v->replacedBy() && v->replacedBy()->owner() == g &&
         hops < g->numValueIds();
         ++hops)
      v = v->replacedBy();
    if (!v->isLive())
      return nullptr; // gone with nothing in its place: verify reports it
    ref.value = v;
    return v;
  };
  // The record for `key`, made when missing.
  auto recordFor = [&](std::string_view key) -> MetadataValueRefs & {
    auto it =
        std::find_if(valueRefs_.begin(), valueRefs_.end(),
                     [&](const MetadataValueRefs &r) { return r.key == key; });
    if (it != valueRefs_.end())
      return *it;
    valueRefs_.push_back({std::string(key), {}, {}});
    return valueRefs_.back();
  };

  for (const MetaKeyInfo &entry : kStepMetadata) {
    std::optional<ValueNamingKey> named = valueNamingKey(entry.name);
    if (!named)
      continue;
    const ValueNamingKey &k = *named;
    const std::string *text = meta(std::string(k.key));
    if (!text) {
      valueRefs_.erase(std::remove_if(valueRefs_.begin(), valueRefs_.end(),
                                      [&](const MetadataValueRefs &r) {
                                        return r.key == k.key;
                                      }),
                       valueRefs_.end());
      continue;
    }
    MetadataValueRefs &r = recordFor(k.key);
    std::vector<std::pair<size_t, size_t>> spans = nameSpans(*text, k.pairs);
    if (r.text != *text || r.refs.size() != spans.size()) {
      // Written without setMeta: the names are what the entry says.
      recordValueRefs(r, *text);
      continue;
    }
    std::string updated;
    size_t copied = 0; // *text up to here is in `updated`
    bool changed = false;
    for (size_t i = 0; i < spans.size(); ++i) {
      std::string_view name(text->data() + spans[i].first, spans[i].second);
      Value *v = mend(r.refs[i], name);
      if (!v)
        continue;
      updated.append(*text, copied, spans[i].first - copied);
      updated += v->name();
      copied = spans[i].first + spans[i].second;
      changed = true;
    }
    if (!changed)
      continue;
    updated.append(*text, copied, std::string::npos);
    setMeta(r.key, updated);
  }

  // update_binding names the step's outputs the same way: each state's new
  // value. (Its record's key is no metadata key.)
  if (!training)
    return;
  std::string names;
  for (const auto &binding : training->updateBinding)
    (names += binding.second) += '\n';
  MetadataValueRefs &r = recordFor("update_binding");
  if (r.text != names || r.refs.size() != training->updateBinding.size()) {
    r.text = names;
    r.refs.clear();
    for (const auto &binding : training->updateBinding)
      r.refs.push_back(findValueRef(binding.second));
    return;
  }
  bool mended = false;
  for (size_t i = 0; i < r.refs.size(); ++i)
    if (Value *v = mend(r.refs[i], training->updateBinding[i].second)) {
      training->updateBinding[i].second = v->name();
      mended = true;
    }
  if (!mended)
    return;
  r.text.clear();
  for (const auto &binding : training->updateBinding)
    (r.text += binding.second) += '\n';
}

} // namespace mpc
