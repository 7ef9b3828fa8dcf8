// master-weights: the trainable state is an fp32 master copy of every
// parameter, and every gradient is in its master's dtype.
//
// Runs after autodiff (it needs mpc.params and mpc.grads), autocast and
// loss-scale, before optimizer. Guarantees to the optimizer pass, for every
// i: parameter mpc.params[i] is a state initializer of dtype fp32 (fp64
// parameters stay fp64), and gradient mpc.grads[i] has exactly that dtype, so
// the update math runs on the masters and the state keeps its dtype across
// steps.
//
// A parameter imported as fp16/bf16 gets an fp32 master initializer (the same
// values, exactly representable) in the training algorithm and in the main
// graph, and one Cast back to its original dtype in front of all its uses, so
// the forward and backward compute exactly what they did before. Parameters
// that autocast already reads through a Cast (fp32 state -> fp16 working copy)
// need nothing. Gradients that are not in their master's dtype are cast (an
// existing Cast is reused). mpc.master_params records the parameters; with
// --precision=fp32 and fp32 parameters the pass changes nothing.
#include "ir/step_metadata.h"
#include "passes/pass.h"
#include "passes/registry.h"
#include "passes/training_support.h"
#include "support/diagnostics.h"

namespace mpc {
namespace {

constexpr const char *kPass = "master-weights";

bool isLowPrecision(DType t) { return t == DType::F16 || t == DType::BF16; }

/// Makes initializer p hold `master` (fp32) and reads it through one Cast to
/// its old dtype at every former use.
void useMasterIn(Graph &g, Value *p, const TensorPtr &master) {
  DType original = p->dtype;
  std::vector<Use> uses = p->uses();
  p->setInitializer(master);
  p->dtype = DType::F32;
  if (uses.empty())
    return;
  // A fresh Cast, never a reused one: an existing Cast of p is one of the
  // uses being redirected, and reusing it would feed it its own output.
  Node *cast = createNamedNode(g, "Cast", "", {p},
                               {p->name() + "_" + dtypeName(original)},
                               "cast_" + p->name(), firstUser(g, p));
  cast->setAttr("to", Attribute::ofInt(toOnnxDataType(original)));
  Value *copy = cast->output(0);
  copy->copyTypeFrom(*p);
  copy->dtype = original;
  for (const Use &u : uses)
    u.user->setInput(size_t(u.index), copy);
}

} // namespace

void runMasterWeights(Model &model, PassContext &ctx) {
  checkPassOrder(model, kPass);
  TrainingValues tv = requireGradients(model, kPass);
  Graph &g = *tv.algorithm;

  int64_t converted = 0, gradCasts = 0;
  std::vector<Value *> grads = tv.grads;
  std::vector<std::string> names;
  for (size_t i = 0; i < tv.params.size(); ++i) {
    Value *p = tv.params[i];
    if (!isFloating(p->dtype))
      throw Error(std::string(kPass) + ": parameter '" + p->name() +
                  "' has type " + dtypeName(p->dtype) +
                  ", not a floating-point type");
    if (isLowPrecision(p->dtype)) {
      DType original = p->dtype;
      auto master =
          std::make_shared<Tensor>(p->initializer()->castTo(DType::F32));
      useMasterIn(g, p, master);
      // The main graph holds the same state under the same name; it is what
      // gets exported, so it must become the fp32 master as well.
      Value *inMain = model.graph->findValue(p->name());
      if (inMain && inMain != p && inMain->isInitializer() &&
          inMain->dtype == original)
        useMasterIn(*model.graph, inMain, master);
      ++converted;
    }
    Value *grad = grads[i];
    if (grad->dtype != p->dtype) {
      if (!isFloating(grad->dtype))
        throw Error(std::string(kPass) + ": gradient '" + grad->name() +
                    "' of parameter '" + p->name() + "' has type " +
                    dtypeName(grad->dtype) + ", not a floating-point type");
      grads[i] = castOrReuse(g, grad, p->dtype, nullptr, gradCasts);
    }
    names.push_back(p->name());
  }
  replaceGradients(model, tv, grads);

  bool changed = converted > 0 || gradCasts > 0;
  if (changed || ctx.options.precision != DType::F32)
    writeMeta(model, meta::kMasterParams, names);
  ctx.stats["master-params"] += int64_t(names.size());
  ctx.stats["params-converted-to-fp32"] += converted;
  ctx.stats["gradient-casts"] += gradCasts;
}

} // namespace mpc
