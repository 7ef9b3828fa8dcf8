// Optimizer hyper-parameter flags (passes/optimizer/optimizer_flags.h).
#include "passes/optimizer/optimizer_flags.h"

#include "support/diagnostics.h"

#include <algorithm>
#include <initializer_list>

namespace mpc {
namespace {

struct FlagReaders {
  const char *flag;
  std::initializer_list<const char *> optimizers;
};

// torch.optim's constructor arguments, by optimizer: SGD(momentum,
// dampening, nesterov), Adam/AdamW(betas, eps), Adafactor(beta2_decay,
// eps=(eps1, eps2), d). --lr, --weight-decay and --max-grad-norm apply to
// all of them.
const FlagReaders kReaders[] = {
    {"--momentum", {"sgd"}},
    {"--dampening", {"sgd"}},
    {"--nesterov", {"sgd"}},
    {"--beta1", {"adam", "adamw"}},
    {"--beta2", {"adam", "adamw"}},
    {"--eps", {"adam", "adamw", "adafactor"}},
    {"--beta2-decay", {"adafactor"}},
    {"--eps2", {"adafactor"}},
    {"--clip-threshold", {"adafactor"}},
};

bool known(const std::string &optimizer) {
  for (const char *o : {"sgd", "adam", "adamw", "adafactor"})
    if (optimizer == o)
      return true;
  return false;
}

} // namespace

void checkOptimizerFlags(const std::string &optimizer, bool optimizerGiven,
                         const std::vector<std::string> &givenFlags) {
  if (!known(optimizer))
    return;
  for (const std::string &flag : givenFlags)
    for (const FlagReaders &r : kReaders) {
      if (flag != r.flag)
        continue;
      if (std::find(r.optimizers.begin(), r.optimizers.end(), optimizer) !=
          r.optimizers.end())
        break;
      std::string readers;
      size_t i = 0;
      for (const char *o : r.optimizers)
        readers += std::string(i++ ? (i == r.optimizers.size() ? " and " : ", ")
                                   : "") +
                   "--optimizer=" + o;
      throw Error(flag + ": is not read by --optimizer=" + optimizer +
                  (optimizerGiven ? "" : " (the default)") +
                  "; it applies to " + readers + " only");
    }
}

} // namespace mpc
