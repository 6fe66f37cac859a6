// Shared fixtures for tests that load the fake libnvidia-ml.so.1 through the production dlopen path.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "gpu/node.h"

namespace kgpu::testing {

// Path of the fake library built with the project.
std::string fake_library();

// A node description in a temporary file, named by $KGPU_FAKE_NVML_CONFIG while the object lives.
class FakeNodeFile {
 public:
  explicit FakeNodeFile(const std::string& yaml);
  ~FakeNodeFile();
  // Replaces the file's contents (the fake notices on its next call).
  void rewrite(const std::string& yaml);
  const std::string& path() const { return path_; }

 private:
  std::filesystem::path dir_;
  std::string path_;
};

// Opens the fake through gpu::Node::open; fails the test on error.
std::unique_ptr<gpu::Node> open_fake();

// Runs a command, returning exit status and combined output.
struct Output {
  int status = -1;
  std::string text;
};
Output run_command(const std::string& command);

}  // namespace kgpu::testing
