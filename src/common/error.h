// Errors as values across module boundaries.
//
// Result<T> is std::expected<T, Error>. An Error carries a code from a small fixed set (what the
// caller can do about it) and a message written for a user: it names the file, line, field or
// device involved. Exceptions do not cross module boundaries; main() and server handlers catch.
#pragma once

#include <fmt/format.h>

#include <expected>
#include <string>
#include <utility>

namespace kgpu {

enum class ErrorCode {
  kInvalidArgument,  // bad input: a config, a flag, a file's contents
  kNotFound,         // a file, library, device or object that is not there
  kNotSupported,     // the hardware or driver does not provide this
  kPermissionDenied,
  kUnavailable,  // a peer (driver, kubelet) is not answering now; may recover
  kGpuLost,      // a GPU fell off the bus or needs a reset
  kInternal,     // a bug or an unexpected state
};

const char* error_code_name(ErrorCode code);

struct Error {
  ErrorCode code = ErrorCode::kInternal;
  std::string message;

  // Returns a copy whose message is "<context>: <message>".
  [[nodiscard]] Error wrap(std::string_view context) const {
    return Error{code, std::string(context) + ": " + message};
  }
};

template <typename T>
using Result = std::expected<T, Error>;

template <typename... Args>
[[nodiscard]] std::unexpected<Error> fail(ErrorCode code, fmt::format_string<Args...> format, Args&&... args) {
  return std::unexpected(Error{code, fmt::format(format, std::forward<Args>(args)...)});
}

}  // namespace kgpu
