// Whole-file reads and atomic replacement, shared by the agent's outputs (labels, CDI spec) and
// the config readers.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>

#include "common/error.h"

namespace kgpu {

// The contents of `path`; nullopt when it cannot be opened or read.
std::optional<std::string> read_file(const std::string& path);

// The contents of `path`, refusing more than `max_bytes` before reading them (kInvalidArgument,
// naming the size and the limit). Errors name the path and the system's reason (kNotFound,
// kPermissionDenied, else kUnavailable); a directory is kInvalidArgument.
Result<std::string> read_file_limited(const std::string& path, size_t max_bytes);

// Replaces `path` with `content` atomically: creates the directory, writes a hidden temporary file
// (".<name>.tmp.XXXXXX", which NFD and CDI loaders skip) in the same directory, sets `mode`, fsyncs
// it, renames it over `path` and fsyncs the directory. On failure `path` is left as it was, no
// temporary file remains, and the error names the path, the failed step and the system's reason
// (kPermissionDenied, kNotFound, else kUnavailable).
Result<void> write_file_atomically(const std::string& path, std::string_view content, mode_t mode = 0644);

}  // namespace kgpu
