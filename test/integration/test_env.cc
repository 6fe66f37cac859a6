#include "test_env.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>
#include <set>
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

std::unique_ptr<gpu::NodeGpus> open_fake() {
  auto node = gpu::NodeGpus::open(fake_library());
  EXPECT_TRUE(node) << (node ? "" : node.error().message);
  return node ? std::move(*node) : nullptr;
}

ChildProcess::ChildProcess(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                           const std::string& log_path) {
  // Everything the child needs is built before fork(): a child of a multi-threaded process (gRPC
  // peers run threads here) may only make async-signal-safe calls until it execs — a malloc there
  // can deadlock on a lock another thread held at fork time.
  std::set<std::string> overridden;
  for (const auto& e : env) overridden.insert(e.substr(0, e.find('=')));
  std::vector<std::string> environment;
  for (char** p = environ; *p != nullptr; ++p) {
    const std::string entry(*p);
    if (!overridden.contains(entry.substr(0, entry.find('=')))) environment.push_back(entry);
  }
  environment.insert(environment.end(), env.begin(), env.end());
  std::vector<char*> envp, args;
  for (auto& e : environment) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  for (auto& a : argv_copy) args.push_back(a.data());
  args.push_back(nullptr);
  const int log_fd =
      log_path.empty() ? -1 : open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  pid_ = fork();
  if (pid_ == 0) {
    if (log_fd >= 0) {
      dup2(log_fd, 1);  // the duplicates do not inherit O_CLOEXEC
      dup2(log_fd, 2);
    }
    execve(args[0], args.data(), envp.data());
    _exit(127);
  }
  if (log_fd >= 0) close(log_fd);
}

ChildProcess::~ChildProcess() {
  if (pid_ <= 0) return;
  kill(pid_, SIGTERM);
  for (int i = 0; i < 50; ++i) {
    if (waitpid(pid_, nullptr, WNOHANG) == pid_) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
}

std::optional<int> ChildProcess::wait(std::chrono::milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (pid_ > 0) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return status;
    }
    if (std::chrono::steady_clock::now() >= end) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return std::nullopt;
}

bool ChildProcess::running() { return pid_ > 0 && waitpid(pid_, nullptr, WNOHANG) == 0; }

int agent_port(const std::string& log_path, std::chrono::milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  const std::regex re("listening on [^:\\s]+:([0-9]+)");
  while (true) {
    std::ifstream in(log_path);
    std::stringstream text;
    text << in.rdbuf();
    const std::string s = text.str();
    std::smatch m;
    if (std::regex_search(s, m, re)) return std::stoi(m[1].str());
    if (std::chrono::steady_clock::now() >= end) return 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

std::vector<int> listening_ports(int pid) {
  const std::string proc = "/proc/" + std::to_string(pid);
  std::set<std::string> inodes;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(proc + "/fd", ec), end; !ec && it != end; it.increment(ec)) {
    const auto target = std::filesystem::read_symlink(it->path(), ec);
    if (ec) {
      ec.clear();
      continue;
    }
    const std::string t = target.string();
    if (t.starts_with("socket:[") && t.ends_with("]")) inodes.insert(t.substr(8, t.size() - 9));
  }
  std::set<int> ports;
  for (const char* table : {"/net/tcp", "/net/tcp6"}) {
    std::ifstream in(proc + table);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream row(line);
      std::string sl, local, remote, state, queues, timer, retransmit, uid, timeout, inode;
      row >> sl >> local >> remote >> state >> queues >> timer >> retransmit >> uid >> timeout >> inode;
      if (state != "0A" || !inodes.contains(inode)) continue;  // 0A: LISTEN
      const auto colon = local.rfind(':');
      if (colon != std::string::npos) ports.insert(std::stoi(local.substr(colon + 1), nullptr, 16));
    }
  }
  return {ports.begin(), ports.end()};
}

int wait_for_listening_port(int pid, std::chrono::milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (auto ports = listening_ports(pid); !ports.empty()) return ports.front();
    if (std::chrono::steady_clock::now() >= end) return 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

TempDir::TempDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "kgpu-test-XXXXXX").string();
  dir_ = mkdtemp(tmpl.data());
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

std::string TempDir::write(const std::string& relative, const std::string& content) const {
  const auto p = dir_ / relative;
  std::filesystem::create_directories(p.parent_path());
  std::ofstream out(p);
  out << content;
  return p.string();
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
