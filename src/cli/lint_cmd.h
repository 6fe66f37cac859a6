// `kgpu lint` (also `kubectl gpu lint`): checks manifests against the GPU guide's rules.
//
// add_lint_command() registers the subcommand and its options on `app`; after app.parse(),
// run_lint_command() runs it when it was chosen and returns the exit status: 0 clean (or info
// findings only), 1 error or warning findings, 2 bad input (an unreadable path, a YAML/JSON error,
// an unknown rule id); findings of the documents that loaded are printed in every case. Output
// goes to stdout, load errors of the text format too (one report for CI logs). Single-threaded;
// the options live in a static owned by this module.
#pragma once

#include <CLI/CLI.hpp>

namespace kgpu::cli {

CLI::App* add_lint_command(CLI::App& app);
int run_lint_command();

}  // namespace kgpu::cli
