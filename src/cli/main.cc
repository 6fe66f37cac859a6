// kgpu: one binary, subcommands. Exceptions stop here; everything below returns Result.
#include <fmt/format.h>

#include <csignal>
#include <exception>

#include "cli/commands.h"

int main(int argc, char** argv) {
  // A peer that goes away (a child's stdin, a closed socket) is an error return, never a signal.
  std::signal(SIGPIPE, SIG_IGN);
  try {
    return kgpu::cli::run(argc, argv);
  } catch (const std::exception& e) {
    fmt::print(stderr, "kgpu: {}\n", e.what());
    return 1;
  }
}
