// Shared fixtures for tests that load the fake libnvidia-ml.so.1 through the production dlopen path.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "gpu/node.h"
#include "paths.h"

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
std::unique_ptr<gpu::NodeGpus> open_fake();

// A child process (started with execve), killed and reaped on destruction.
class ChildProcess {
 public:
  // argv[0] is the program path; env entries "NAME=value" are added to this process's environment.
  ChildProcess(const std::vector<std::string>& argv, const std::vector<std::string>& env = {},
               const std::string& log_path = "");
  ~ChildProcess();
  bool running();
  int pid() const { return pid_; }
  // Waits up to `timeout` for the process to exit and reaps it; its wait status, or nullopt while
  // it still runs.
  std::optional<int> wait(std::chrono::milliseconds timeout);

 private:
  int pid_ = -1;
};

// Servers under test bind port 0 and the test reads back the port they got (no free-port guess
// that another process could take between the check and the bind).
//
// The port a `kgpu agent` logged in its "listening on <host>:<port>" line in `log_path`; waits up
// to `timeout` for the line; 0 when it never came.
int agent_port(const std::string& log_path, std::chrono::milliseconds timeout = std::chrono::seconds(10));
// TCP ports process `pid` listens on (from /proc/<pid>/fd and /proc/<pid>/net/tcp{,6}).
std::vector<int> listening_ports(int pid);
// Waits up to `timeout` for process `pid` to listen on a TCP port; the lowest one, or 0.
int wait_for_listening_port(int pid, std::chrono::milliseconds timeout = std::chrono::seconds(30));

// Polls `cond` every 5 ms (real time) until it holds or `timeout` passes; returns the last
// answer. For work done by other threads or processes; code on a Clock is driven by FakeClock.
template <typename F>
bool eventually(F cond, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return cond();
}

// A temporary directory removed on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::filesystem::path& path() const { return dir_; }
  // Writes `content` to path()/relative, creating directories.
  std::string write(const std::string& relative, const std::string& content) const;

 private:
  std::filesystem::path dir_;
};

// Runs a command, returning exit status and combined output.
struct Output {
  int status = -1;
  std::string text;
};
Output run_command(const std::string& command);

}  // namespace kgpu::testing
