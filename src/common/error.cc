#include "common/error.h"

namespace kgpu {

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
      return "invalid argument";
    case ErrorCode::kNotFound:
      return "not found";
    case ErrorCode::kNotSupported:
      return "not supported";
    case ErrorCode::kPermissionDenied:
      return "permission denied";
    case ErrorCode::kUnavailable:
      return "unavailable";
    case ErrorCode::kGpuLost:
      return "GPU lost";
    case ErrorCode::kInternal:
      return "internal error";
  }
  return "error";
}

}  // namespace kgpu
