// The typed accessors of the step's metadata (ir/step_metadata.h).
#include "ir/step_metadata.h"

#include "support/diagnostics.h"

namespace mpc {
namespace {

/// Comma-separated names; empty items are skipped (as the passes write none).
std::vector<std::string> splitNames(const std::string *text) {
  std::vector<std::string> items;
  if (!text)
    return items;
  const std::string &s = *text;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(',', start);
    if (end == std::string::npos)
      end = s.size();
    if (end > start)
      items.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return items;
}

std::string joinNames(const std::vector<std::string> &items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i)
      out += ',';
    out += items[i];
  }
  return out;
}

} // namespace

const MetaKeyInfo *stepMetadataKey(std::string_view name) {
  for (const MetaKeyInfo &k : kStepMetadata)
    if (k.name == name)
      return &k;
  return nullptr;
}

const std::string *readMeta(const Model &model, ValueKey key) {
  return model.meta(std::string(key.name));
}
const std::string *readMeta(const Model &model, TextKey key) {
  return model.meta(std::string(key.name));
}
const std::string *readMeta(const Model &model, ValuePairsKey key) {
  return model.meta(std::string(key.name));
}
std::vector<std::pair<std::string, std::string>>
readMetaPairs(const Model &model, ValuePairsKey key) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const std::string &pair : splitNames(readMeta(model, key))) {
    size_t eq = pair.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == pair.size())
      throw Error(std::string(key.name) + ": expected name=name pairs, got '" +
                  pair + "'");
    out.emplace_back(pair.substr(0, eq), pair.substr(eq + 1));
  }
  return out;
}
std::vector<std::string> readMeta(const Model &model, ValueListKey key) {
  return splitNames(model.meta(std::string(key.name)));
}
std::vector<std::string> readMeta(const Model &model, NameListKey key) {
  return splitNames(model.meta(std::string(key.name)));
}

void writeMeta(Model &model, ValueKey key, const std::string &value) {
  model.setMeta(std::string(key.name), value);
}
void writeMeta(Model &model, TextKey key, const std::string &text) {
  model.setMeta(std::string(key.name), text);
}
void writeMeta(Model &model, ValuePairsKey key, const std::string &pairs) {
  model.setMeta(std::string(key.name), pairs);
}
void writeMeta(Model &model, ValueListKey key,
               const std::vector<std::string> &values) {
  model.setMeta(std::string(key.name), joinNames(values));
}
void writeMeta(Model &model, NameListKey key,
               const std::vector<std::string> &names) {
  model.setMeta(std::string(key.name), joinNames(names));
}

} // namespace mpc
