// User-facing errors: one line naming the node (or file) and what is wrong.
//
// Passes and importers throw mpc::Error for bad input; the tools catch it,
// prefix the file name, print one line and exit 1. Internal invariants use
// assert; they are bugs, not user errors.
#pragma once

#include <cstddef>
#include <sstream>
#include <stdexcept>
#include <string>

namespace mpc {

class Node;

/// The longest error line (bytes): longer messages lose their middle.
constexpr size_t kMaxErrorLine = 4096;

/// `message` with line breaks and other control characters escaped ("\n",
/// "\x01"), so that names taken from the input cannot split an error line,
/// and at most about kMaxErrorLine bytes: the middle of a longer one is
/// replaced by " ... [N characters left out] ... ".
std::string oneLine(const std::string &message);

/// A user-input error (bad model, flag, data file or checkpoint). Its
/// message is always one line (see oneLine).
class Error : public std::runtime_error {
public:
  explicit Error(const std::string &message)
      : std::runtime_error(oneLine(message)) {}
  explicit Error(const char *message) : Error(std::string(message)) {}
};

/// "node '/fc1/Gemm' (Gemm)".
std::string describeNode(const Node &n);

/// Builds an error message with <<, then throws it: `ErrorAt(node) << "...";`
/// The message starts with the node's description when one is given.
class ErrorBuilder {
public:
  ErrorBuilder() = default;
  explicit ErrorBuilder(const Node &n);
  template <typename T> ErrorBuilder &operator<<(const T &v) {
    os_ << v;
    return *this;
  }
  [[noreturn]] void raise() const { throw Error(os_.str()); }
  // Throwing from a destructor is how the streaming form ends; it is marked
  // noexcept(false) so that it is allowed.
  ~ErrorBuilder() noexcept(false) {
    if (!std::uncaught_exceptions())
      throw Error(os_.str());
  }

private:
  std::ostringstream os_;
};

/// Usage: `errorAt(node) << "expects a scalar loss, got " << shape;` throws
/// at the end of the full expression.
inline ErrorBuilder errorAt(const Node &n) { return ErrorBuilder(n); }
inline ErrorBuilder error() { return ErrorBuilder(); }

} // namespace mpc
