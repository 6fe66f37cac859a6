// One severity scale for every kgpu diagnosis (kgpu lint's and kgpu doctor's findings), least
// severe first, and the exit status both commands derive from it (docs/lint.md, docs/doctor.md).
// Each command keeps its own word for the top level: lint says "error" (SARIF's level), doctor
// says "critical"; both are Severity::kError.
#pragma once

#include <cstdint>
#include <optional>

namespace kgpu {

enum class Severity : uint8_t {
  kInfo,
  kWarning,
  kError,
  kCritical = kError,  // kgpu doctor's name for the same level
};

// Exit status of a diagnosis command:
//   0  no finding worse than info (info findings do not fail a CI step)
//   1  the worst finding is a warning
//   2  usage error, or input that could not be read or decoded (kExitInputError)
//   3  at least one error (doctor: critical) finding
inline constexpr int kExitInputError = 2;

constexpr int exit_code_for(std::optional<Severity> worst) {
  if (!worst || *worst == Severity::kInfo) return 0;
  return *worst == Severity::kWarning ? 1 : 3;
}

}  // namespace kgpu
