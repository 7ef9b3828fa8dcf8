// Numbers from the command line: every integer flag of mpc-opt and mpc-run
// (and each dimension of --input-shape) is parsed here, once, against the
// range the flag documents, so that no absurd value (2^40 steps, a rank
// count that wraps to 2 in an int) reaches the code behind the flag; every
// decimal flag (--lr, --beta1, ...) is a finite number written in decimal.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace mpc {

/// The largest step count any flag takes (--steps, --total-steps,
/// --warmup-steps, --save-every, ...): 10^12, far past any run, and small
/// enough that step x batch x micro-batches stays inside 64 bits.
constexpr int64_t kMaxStepsFlag = 1000000000000;
/// The largest dimension --batch and --input-shape take: 2^31 - 1.
constexpr int64_t kMaxDimFlag = 2147483647;

/// `text` as a decimal integer in [min, max]: an optional sign and digits,
/// nothing else (no blanks, no "0x", no fraction, no suffix). Anything
/// else, including a value past 64 bits or out of the range, throws an
/// Error "FLAG: expected an integer in [min, max], got 'text'".
int64_t parseIntFlag(const std::string &flag, const std::string &text,
                     int64_t min, int64_t max);

/// `text` as a finite decimal number: an optional sign, digits with an
/// optional fraction, an optional exponent (0.1, -3, 1e-4, .5). strtod's
/// other spellings (nan, inf, hex floats, leading blanks) and values past
/// the double range throw an Error "FLAG: expected a decimal number, got
/// 'text'". The flag's own range is checked where its meaning is.
double parseNumberFlag(const std::string &flag, const std::string &text);
/// The same rule without the error: nullopt where parseNumberFlag throws,
/// for a flag whose own message states its range and format together.
std::optional<double> parseDecimal(const std::string &text);

/// "268435456", "256M", "1.5G": bytes with an optional K, M or G suffix
/// (KiB, MiB, GiB; a trailing "iB" or "B" is accepted). Throws Error naming
/// `flag` on anything else or on a size beyond 2^63.
size_t parseByteSize(const std::string &flag, const std::string &text);

/// "[1, 1024]", or ">= 0" when max is INT64_MAX: the range as the error
/// lines and --help state it.
std::string describeIntRange(int64_t min, int64_t max);

} // namespace mpc
