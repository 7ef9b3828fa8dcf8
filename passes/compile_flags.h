// The compile flags: every flag that sets a field of CompileOptions
// (--precision, --optimizer, --lr, ...), parsed and range-checked in one
// place, for mpc-opt's command line and for --passes=name{key=value}.
#pragma once

#include "passes/pass.h"

#include <string>

namespace mpc {

/// Applies the compile flag `key` ("--lr") with `value` (nullptr: given
/// without '=') to `o`. Returns false, changing nothing, when `key` is not a
/// compile flag; throws Error naming the flag for a missing, malformed or
/// out-of-range value. A switch (--nesterov, --data-parallel,
/// --sync-batchnorm) is given bare or as true/false.
bool applyCompileFlag(CompileOptions &o, const std::string &key,
                      const std::string *value);

/// Whether `key` is a switch of applyCompileFlag (it takes no value).
bool isBooleanCompileFlag(const std::string &key);

} // namespace mpc
