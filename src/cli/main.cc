// kgpu: one binary, subcommands. Exceptions stop here; everything below returns Result.
#include <fmt/format.h>

#include <exception>

#include "cli/commands.h"

int main(int argc, char** argv) {
  try {
    return kgpu::cli::run(argc, argv);
  } catch (const std::exception& e) {
    fmt::print(stderr, "kgpu: {}\n", e.what());
    return 1;
  }
}
