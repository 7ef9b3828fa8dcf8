// noteMergedInputs (passes/shape_only_input_note.h).
#include "passes/shape_only_input_note.h"

#include <string>

namespace mpc {
namespace {

/// Whether `v` is used, and only by Shape or Size nodes.
bool readOnlyForShape(const Value &v) {
  if (v.uses().empty() || v.isGraphOutput())
    return false;
  for (const Use &u : v.uses())
    if (!u.user->isOp("", "Shape") && !u.user->isOp("", "Size"))
      return false;
  return true;
}

} // namespace

void noteMergedInputs(const Graph &g, PassContext &ctx) {
  for (const Value *in : g.inputs()) {
    if (in->isInitializer() || !in->hasShape || !readOnlyForShape(*in))
      continue;
    for (const Value *twin : g.inputs()) {
      if (twin == in || twin->isInitializer() || !twin->hasShape ||
          twin->dtype != in->dtype || twin->dims != in->dims ||
          readOnlyForShape(*twin) || twin->uses().empty())
        continue;
      std::string note =
          "input '" + in->name() +
          "' is read only for its shape, never its values, while '" +
          twin->name() +
          "' (the same dtype and shape) is read: torch.export merges inputs "
          "given the same tensor (labels=input_ids), so the model reads '" +
          twin->name() + "' where it means '" + in->name() +
          "'; unless that is meant, export with a copy (" + twin->name() + "=" +
          in->name() + ".clone())";
      ctx.notes.push_back(std::move(note)); // said once (pipeline)
      break;
    }
  }
}

} // namespace mpc
