// `kgpu doctor`: explains GPU pods that are Pending, failing or not seeing their GPU, from a
// snapshot file or a live cluster through kubectl (docs/doctor.md).
#pragma once

#include <CLI/CLI.hpp>

namespace kgpu::cli {

// Adds the subcommand and its options to `app`; the options live until the process ends.
CLI::App* add_doctor_command(CLI::App& app);

// Runs the parsed subcommand. Exit codes: 0 no findings (or info only), 1 warnings, 3 critical
// findings, 2 usage errors, unreadable input or a failed collection.
int run_doctor_command();

}  // namespace kgpu::cli
