// `kgpu report`: GPU cost and waste over a window, from the live cluster (API server) and the
// agents' metrics in Prometheus (docs/report.md).
#pragma once

#include <CLI/CLI.hpp>

namespace kgpu::cli {

// Adds the subcommand and its options to `app`; the options live until the process ends.
CLI::App* add_report_command(CLI::App& app);

// Runs the parsed subcommand. Exit codes: 0 report written, 1 the cluster or Prometheus could not
// be read, 2 usage errors (a bad flag, price file or duration).
int run_report_command();

}  // namespace kgpu::cli
