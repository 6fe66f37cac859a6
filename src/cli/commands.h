// The kgpu command line. run() parses argv, dispatches to a subcommand, and returns the exit
// status: 0 success, 1 failure (message on stderr), 2 usage error.
#pragma once

namespace kgpu::cli {

int run(int argc, char** argv);

}  // namespace kgpu::cli
