#include "test_env.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>

namespace kgpu::testing {

std::string fake_library() { return KGPU_FAKE_NVML; }

FakeNodeFile::FakeNodeFile(const std::string& yaml) {
  std::string tmpl = (std::filesystem::temp_directory_path() / "kgpu-test-XXXXXX").string();
  dir_ = mkdtemp(tmpl.data());
  path_ = (dir_ / "node.yaml").string();
  rewrite(yaml);
  setenv("KGPU_FAKE_NVML_CONFIG", path_.c_str(), 1);
}

FakeNodeFile::~FakeNodeFile() {
  unsetenv("KGPU_FAKE_NVML_CONFIG");
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

void FakeNodeFile::rewrite(const std::string& yaml) {
  // Write then rename, as a ConfigMap update would; the size or mtime always changes.
  static int generation = 0;
  const auto tmp = (dir_ / ("next-" + std::to_string(++generation))).string();
  {
    std::ofstream out(tmp);
    out << yaml << "\n# generation " << generation << "\n";
  }
  std::filesystem::rename(tmp, path_);
}

std::unique_ptr<gpu::Node> open_fake() {
  auto node = gpu::Node::open(fake_library());
  EXPECT_TRUE(node) << (node ? "" : node.error().message);
  return node ? std::move(*node) : nullptr;
}

Output run_command(const std::string& command) {
  Output out;
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  if (p == nullptr) return out;
  std::array<char, 4096> buf{};
  size_t n = 0;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.text.append(buf.data(), n);
  const int st = pclose(p);
  out.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

}  // namespace kgpu::testing
