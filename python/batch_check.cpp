// checkBatch (python/batch_check.h).
#include "python/batch_check.h"

#include "runtime/data/sample_check.h"
#include "support/diagnostics.h"

namespace mpc {
namespace {

std::string inputNames(const std::vector<DataInputSpec> &specs) {
  std::string names;
  for (const DataInputSpec &s : specs)
    names += (names.empty() ? "" : ", ") + s.name;
  return names;
}

} // namespace

Trainer::Batch checkBatch(std::vector<std::pair<std::string, Tensor>> arrays,
                          const std::vector<DataInputSpec> &specs,
                          int64_t samples, const std::string &what) {
  for (size_t i = 0; i < arrays.size(); ++i) {
    const std::string &name = arrays[i].first;
    bool known = false;
    for (const DataInputSpec &s : specs)
      known = known || s.name == name;
    if (!known)
      throw Error(what + ": '" + name + "' is not an input of the step (its " +
                  "inputs: " + inputNames(specs) + ")");
    for (size_t j = 0; j < i; ++j)
      if (arrays[j].first == name)
        throw Error(what + ": input '" + name + "' given twice");
  }
  for (const DataInputSpec &s : specs) {
    bool given = false;
    for (const auto &kv : arrays)
      given = given || kv.first == s.name;
    if (!given)
      throw Error(what + ": no array for input '" + s.name +
                  "' (the step's inputs: " + inputNames(specs) + ")");
  }
  const bool planned = samples > 0; // the graph's batch size, else the first's
  Trainer::Batch batch;
  for (const DataInputSpec &s : specs) {
    auto it = arrays.begin();
    while (it->first != s.name) // every input is there (above)
      ++it;
    Tensor &t = it->second;
    std::string where = what + ": input '" + s.name + "'";
    checkSamples(t, s, where);
    if (samples == 0)
      samples = t.dims[0];
    // Fewer than planned is most often a DataLoader's last, partial batch.
    if (t.dims[0] != samples)
      throw Error(where + ": holds " + std::to_string(t.dims[0]) +
                  " samples, expected " + std::to_string(samples) +
                  (planned ? std::string(" (the step's batch size") +
                                 (t.dims[0] < samples
                                      ? "; a DataLoader's last batch is "
                                        "dropped with drop_last=True)"
                                      : ")")
                           : " (as '" + batch[0].first + "')"));
    batch.emplace_back(s.name, std::move(t));
  }
  return batch;
}

} // namespace mpc
