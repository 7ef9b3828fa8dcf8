// The compile flags: every flag that sets a field of CompileOptions
// (--precision, --optimizer, --lr, ...), in one table with its help and the
// passes that read it. mpc-opt's command line, --passes=name{key=value},
// mpc-opt --help and the flag reference (docs/flags.md) all read the table.
#pragma once

#include "passes/pass.h"
#include "support/flag_table.h"

#include <string>
#include <vector>

namespace mpc {

/// The compile flags, each applying its value to `o`. A flag's marks are
/// the passes that read it, the first the one to name when it is missing
/// (registry.h's passesReadingFlag); a flag no pass reads has none.
std::vector<Flag> compileFlags(CompileOptions &o);

/// The same table to read (names, help, readers), bound to no options.
const std::vector<Flag> &compileFlagTable();

/// Applies the compile flag `key` ("--lr") with `value` (nullptr: given
/// without '=') to `o`, as the command line does. Returns false, changing
/// nothing, when `key` is not a compile flag; throws Error naming the flag
/// for a missing, malformed or out-of-range value. A switch (--nesterov,
/// --data-parallel, --sync-batchnorm) is given bare or as true/false.
bool applyCompileFlag(CompileOptions &o, const std::string &key,
                      const std::string *value);

/// The checks of the compile flags together, before any model is read
/// (mpc-opt's command line and mpc.compile alike): a hyper-parameter the
/// chosen optimizer does not read, a name pattern that does not compile, a
/// memory budget beside an explicit --recompute other than auto. `given`:
/// the flags the user gave, by name. Throws Error naming the flag.
void checkCompileFlags(const CompileOptions &o,
                       const std::vector<std::string> &given);

} // namespace mpc
