// `kgpu scheduler`: the kube-scheduler extender (docs/scheduler.md).
#pragma once

#include <CLI/CLI.hpp>

namespace kgpu::cli {

// Adds the subcommand and its options to `app`; the options live until the process ends.
CLI::App* add_scheduler_command(CLI::App& app);

// Runs the parsed subcommand: 0 after a clean stop, 1 when it cannot serve (no API access, port
// taken), 2 for usage errors.
int run_scheduler_command();

}  // namespace kgpu::cli
