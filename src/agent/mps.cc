#include "agent/mps.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <filesystem>

extern char** environ;

namespace kgpu::agent {

namespace {

std::string dir_for(const std::string& mps_root, const std::string& resource, const char* leaf) {
  return fmt::format("{}/{}/{}", mps_root, resource, leaf);
}

// PATH lookup (posix_spawnp would do it, but we want a clear error before starting).
std::string find_program(const std::string& program) {
  if (program.find('/') != std::string::npos) return ::access(program.c_str(), X_OK) == 0 ? program : "";
  const char* path = std::getenv("PATH");
  std::string p = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= p.size()) {
    const size_t end = p.find(':', start);
    const std::string dir = p.substr(start, end == std::string::npos ? std::string::npos : end - start);
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return "";
}

std::vector<std::string> visible_uuids(const sharing::PlannedResource& r) {
  std::vector<std::string> out;
  for (const auto& l : r.mps) out.push_back(l.uuid);
  return out;
}

}  // namespace

std::vector<std::string> mps_commands(const sharing::PlannedResource& r) {
  std::vector<std::string> out;
  int thread_pct = 100;
  for (size_t i = 0; i < r.mps.size(); ++i) {
    // Memory unknown (NVML did not say): no limit rather than a 0 MiB one.
    if (r.mps[i].pinned_memory_mib == 0) continue;
    out.push_back(fmt::format("set_default_device_pinned_mem_limit {} {}M", i, r.mps[i].pinned_memory_mib));
    thread_pct = std::min(thread_pct, r.mps[i].active_thread_percentage);
  }
  // One active-thread percentage per daemon: the smallest share among its GPUs.
  out.push_back(fmt::format("set_default_active_thread_percentage {}", thread_pct));
  return out;
}

Result<void> RealMpsControl::run(const std::map<std::string, std::string>& env, const std::vector<std::string>& args,
                                 const std::string& input) {
  const std::string exe = find_program(program_);
  if (exe.empty()) {
    return fail(ErrorCode::kNotFound,
                "{} is not installed (not on PATH): MPS memory and thread limits are NOT enforced; install the "
                "CUDA MPS tools in the agent image or mount them from the driver root",
                program_);
  }
  int pipe_fds[2];
  if (::pipe(pipe_fds) != 0) return fail(ErrorCode::kInternal, "pipe: {}", std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[0], 0);
  posix_spawn_file_actions_addclose(&actions, pipe_fds[1]);
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv = *e;
    if (!env.contains(kv.substr(0, kv.find('=')))) env_strings.push_back(kv);
  }
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp, argv;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> arg_strings{exe};
  arg_strings.insert(arg_strings.end(), args.begin(), args.end());
  for (auto& s : arg_strings) argv.push_back(s.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, exe.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipe_fds[0]);
  if (rc != 0) {
    ::close(pipe_fds[1]);
    return fail(ErrorCode::kInternal, "cannot run {}: {}", exe, std::strerror(rc));
  }
  size_t off = 0;
  while (off < input.size()) {
    const ssize_t n = ::write(pipe_fds[1], input.data() + off, input.size() - off);
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
  ::close(pipe_fds[1]);
  // Bounded: a control tool that hangs (daemon wedged) must not stall the agent's control thread.
  int status = 0;
  bool exited = false;
  for (int i = 0; i < 1000 && !exited; ++i) {
    exited = ::waitpid(pid, &status, WNOHANG) == pid;
    if (!exited) ::usleep(10000);
  }
  if (!exited) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    return fail(ErrorCode::kUnavailable, "{} {} did not finish within 10 s", exe, fmt::join(args, " "));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return fail(ErrorCode::kUnavailable, "{} {} failed (status {})", exe, fmt::join(args, " "), status);
  }
  return {};
}

Result<void> RealMpsControl::apply(const std::string& mps_root, const sharing::PlannedResource& r) {
  const auto commands = mps_commands(r);
  const std::string text = fmt::format("{}\n", fmt::join(commands, "\n"));
  if (auto it = applied_.find(r.name); it != applied_.end() && it->second == text) return {};
  const std::string pipe = dir_for(mps_root, r.name, "pipe"), log = dir_for(mps_root, r.name, "log");
  std::error_code ec;
  for (const auto& d : {pipe, log, mps_root + "/shm"}) {
    std::filesystem::create_directories(d, ec);
    if (ec) return fail(ErrorCode::kPermissionDenied, "MPS: cannot create {}: {}", d, ec.message());
  }
  const std::map<std::string, std::string> env{
      {"CUDA_MPS_PIPE_DIRECTORY", pipe},
      {"CUDA_MPS_LOG_DIRECTORY", log},
      {"CUDA_VISIBLE_DEVICES", fmt::format("{}", fmt::join(visible_uuids(r), ","))},
  };
  // The daemon is started once per resource and never restarted for new limits: set_default_*
  // apply to the MPS servers it starts from then on, and restarting it would cut off running
  // clients. "-d" on a running daemon fails harmlessly (it is already there).
  if (!started_.contains(r.name)) {
    if (auto ok = run(env, {"-d"}, ""); ok) started_.insert(r.name);
  }
  if (auto ok = run(env, {}, text); !ok) return ok;
  applied_[r.name] = text;
  return {};
}

void RealMpsControl::remove(const std::string& mps_root, const std::string& resource) {
  started_.erase(resource);
  if (applied_.erase(resource) == 0) return;
  const std::map<std::string, std::string> env{{"CUDA_MPS_PIPE_DIRECTORY", dir_for(mps_root, resource, "pipe")},
                                               {"CUDA_MPS_LOG_DIRECTORY", dir_for(mps_root, resource, "log")}};
  (void)run(env, {}, "quit\n");
}

}  // namespace kgpu::agent
