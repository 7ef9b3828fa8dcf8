// Which optimizer reads which hyper-parameter flag: a flag the chosen
// optimizer does not read (--optimizer=sgd --beta1=0.5) is refused naming
// both, rather than silently training with something else than asked.
#pragma once

#include <string>
#include <vector>

namespace mpc {

/// Throws an Error for the first flag of `givenFlags` (names before '=')
/// that is an optimizer hyper-parameter `optimizer` does not read, e.g.
/// "--beta1: is not read by --optimizer=sgd (it is adam's and adamw's)".
/// `optimizerGiven`: whether --optimizer was given (else sgd, the default).
/// An unknown optimizer passes (the optimizer pass names it).
void checkOptimizerFlags(const std::string &optimizer, bool optimizerGiven,
                         const std::vector<std::string> &givenFlags);

} // namespace mpc
