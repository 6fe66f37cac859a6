// `kgpu top nodes|pods|namespaces` and `kgpu allocations`: GPU usage as `kubectl top` shows CPU,
// from the agents' /metrics through the API server's pods/proxy, and GPU allocation per node
// (docs/top.md). Also `kubectl gpu top ...` with the binary installed as kubectl-gpu.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>

namespace kgpu::cli {

// Adds the `top` (with its nodes, pods, namespaces subcommands) and `allocations` subcommands; the
// options live until the process ends.
void add_top_commands(CLI::App& app);

// Runs whichever of them was parsed; nullopt when neither was. Exit codes: 0 shown, 1 the API
// could not be read or no node's metrics could be read, 2 usage errors.
std::optional<int> run_top_commands();

}  // namespace kgpu::cli
