// `kgpu validate`: the validation chain of a node (agent/validate.h) from the command line; exit 0
// when every step passed or was skipped, 1 when one failed, 2 on a usage error. With
// --label-node (and API access) it also sets the node labels kgpu.io/validation.<step> =
// passed|failed for the other operands to select on.
#pragma once

#include <CLI/CLI.hpp>

namespace kgpu::cli {

// `nvml_library` (the global --nvml-library) must outlive the parse and the run.
CLI::App* add_validate_command(CLI::App& app, const std::string& nvml_library);

int run_validate_command();

}  // namespace kgpu::cli
