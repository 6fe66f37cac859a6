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
    // 2, not 1: for lint and doctor 1 means "findings"; an internal failure must not read as one.
    fmt::print(stderr, "kgpu: internal error: {}\n", e.what());
    return 2;
  }
}
