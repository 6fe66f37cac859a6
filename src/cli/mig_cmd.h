// `kgpu mig`: NVIDIA mig-parted's node commands over kgpu's MIG management (docs/mig.md):
//   apply   -f FILE -c NAME [--dry-run]  change the GPUs whose layout differs from config NAME
//   assert  -f FILE -c NAME              exit 1 when config NAME is not what the GPUs have
//   export                               the GPUs' layout as a v1 config named "current"
//   defaults                             NVIDIA's default config names for this node's GPUs
//   plan [-f FILE] [--apply] [-o json]   per MIG node, the config serving the cluster's MIG requests
//                                        best (gpu/mig_plan.h); --apply sets the nodes' labels
// Without -f the built-in defaults are used. MIG_PARTED_CONFIG_FILE and MIG_PARTED_SELECTED_CONFIG
// stand in for -f and -c. Exit status: 0 done, 1 a GPU failed or the assertion does not hold, 2 a
// usage error or a config that does not load.
#pragma once

#include <CLI/CLI.hpp>

namespace kgpu::cli {

// `nvml_library` (the global --nvml-library) must outlive the parse and the run.
CLI::App* add_mig_command(CLI::App& app, const std::string& nvml_library);
int run_mig_command();

}  // namespace kgpu::cli
