// Bounds on YAML input, checked before yaml-cpp builds a tree from it.
//
// yaml-cpp keeps an alias as a second reference to its anchor's node, so a "billion laughs"
// document is small in memory but explodes in every reader that walks it; its nodes also cost a
// few hundred bytes each. check_yaml() runs yaml-cpp's event parser (no tree) over the text and
// stops at the first limit crossed: bytes, forbidden control bytes (NUL and C0 controls other than
// tab, line feed and carriage return), nesting depth, and nodes counted with every alias expanded
// to the size of what it names. Errors are kInvalidArgument with "<source>:<line>: <what>".
//
// Thread safety: none needed (pure function).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "common/error.h"

namespace kgpu {

struct YamlLimits {
  size_t max_bytes = 1 << 20;
  size_t max_nodes = 100'000;  // after alias expansion
  size_t max_depth = 64;
};

Result<void> check_yaml(std::string_view text, const std::string& source, const YamlLimits& limits);

// check_yaml() without the size and byte checks, for callers that make those themselves: the first
// problem as a 1-based line within `text` and a message without a source prefix.
struct YamlProblem {
  int line = 0;
  std::string message;
};
std::optional<YamlProblem> scan_yaml(std::string_view text, const YamlLimits& limits);

// Both also stop a stream that makes no progress: yaml-cpp 0.7 reads a stray top-level ',' as an
// endless run of empty documents (its LoadAll never returns); that is reported as an error.

// A byte YAML does not allow anywhere in a document: NUL, C0 controls other than tab, LF and CR,
// and DEL. yaml-cpp reports them confusingly ("unknown escape character") or not at all.
struct ForbiddenByte {
  size_t line = 0;    // 1-based within the text scanned
  size_t column = 0;  // 1-based
  unsigned char byte = 0;
  // "NUL byte (\0) at line L, column C: ..." with L counted from `first_line` for line 1.
  std::string message(size_t first_line = 1) const;
};
std::optional<ForbiddenByte> find_forbidden_byte(std::string_view text);

}  // namespace kgpu
