#include "apiclient/credentials.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cstring>
#include <ctime>

#include "common/base64.h"
#include "common/files.h"
#include "common/timestamp.h"

extern char** environ;

namespace kgpu::kube {

using nlohmann::json;

namespace {

constexpr auto kExpiryMargin = std::chrono::seconds(10);
constexpr size_t kMaxPluginOutput = 1 << 20;
constexpr std::chrono::seconds kPluginTimeout{60};

std::optional<std::chrono::system_clock::time_point> mtime_of(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return std::nullopt;
  return std::chrono::system_clock::time_point(std::chrono::seconds(st.st_mtim.tv_sec) +
                                               std::chrono::nanoseconds(st.st_mtim.tv_nsec));
}

std::string first_line(std::string_view s) {
  const auto nl = s.find('\n');
  return std::string(s.substr(0, nl));
}

}  // namespace

Result<std::string> run_command(const std::vector<std::string>& argv,
                                const std::vector<std::pair<std::string, std::string>>& env, size_t max_bytes,
                                std::chrono::milliseconds timeout) {
  if (argv.empty()) return fail(ErrorCode::kInvalidArgument, "no command");
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0) return fail(ErrorCode::kUnavailable, "pipe: {}", std::strerror(errno));
  if (pipe2(err, O_CLOEXEC) != 0) {
    close(out[0]);
    close(out[1]);
    return fail(ErrorCode::kUnavailable, "pipe: {}", std::strerror(errno));
  }
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view kv(*e);
    const auto name = kv.substr(0, kv.find('='));
    const bool overridden = std::any_of(env.begin(), env.end(), [&](const auto& p) { return p.first == name; });
    if (!overridden) env_strings.emplace_back(kv);
  }
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp, args;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  for (auto& a : argv_copy) args.push_back(a.data());
  args.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err[1], 2);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  close(out[1]);
  close(err[1]);
  if (rc != 0) {
    close(out[0]);
    close(err[0]);
    return fail(rc == ENOENT ? ErrorCode::kNotFound : ErrorCode::kUnavailable, "cannot run {}: {}", argv[0],
                std::strerror(rc));
  }
  std::string stdout_text, stderr_text;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool out_open = true, err_open = true, too_big = false, timed_out = false;
  while (out_open || err_open) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd fds[2] = {{out_open ? out[0] : -1, POLLIN, 0}, {err_open ? err[0] : -1, POLLIN, 0}};
    if (poll(fds, 2, static_cast<int>(std::min<int64_t>(left.count(), 1000))) < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      char buf[4096];
      const ssize_t n = read(i == 0 ? out[0] : err[0], buf, sizeof buf);
      if (n <= 0) {
        (i == 0 ? out_open : err_open) = false;
        continue;
      }
      std::string& target = i == 0 ? stdout_text : stderr_text;
      if (target.size() + static_cast<size_t>(n) > max_bytes) {
        too_big = true;
        out_open = err_open = false;
        break;
      }
      target.append(buf, static_cast<size_t>(n));
    }
  }
  close(out[0]);
  close(err[0]);
  if (timed_out || too_big) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) return fail(ErrorCode::kUnavailable, "{} did not finish within {} s", argv[0], timeout.count() / 1000);
  if (too_big) return fail(ErrorCode::kInvalidArgument, "{} wrote more than {} bytes", argv[0], max_bytes);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return fail(ErrorCode::kUnavailable, "{} failed ({}){}", argv[0],
                WIFEXITED(status) ? fmt::format("exit status {}", WEXITSTATUS(status))
                                  : fmt::format("signal {}", WTERMSIG(status)),
                stderr_text.empty() ? "" : ": " + first_line(stderr_text));
  }
  return stdout_text;
}

Credentials::Credentials(const RestConfig& config, const Clock& clock) : config_(config), clock_(clock) {
  static_.bearer = config.token;
  static_.cert_pem = config.client_cert_pem;
  static_.key_pem = config.client_key_pem;
}

int Credentials::exec_runs() const {
  std::lock_guard lock(mu_);
  return exec_runs_;
}

bool Credentials::invalidate() {
  std::lock_guard lock(mu_);
  if (config_.exec) {
    exec_valid_ = false;
    return true;
  }
  if (!config_.token_file.empty()) {
    file_stale_ = true;
    return true;
  }
  return false;
}

Result<void> Credentials::run_plugin() {
  const ExecConfig& e = *config_.exec;
  json info{{"apiVersion", e.api_version}, {"kind", "ExecCredential"}, {"spec", {{"interactive", false}}}};
  if (e.provide_cluster_info) {
    json cluster{{"server", config_.server}, {"insecure-skip-tls-verify", config_.insecure_skip_tls_verify}};
    if (!config_.ca_pem.empty()) cluster["certificate-authority-data"] = base64_encode(config_.ca_pem);
    if (!config_.tls_server_name.empty()) cluster["tls-server-name"] = config_.tls_server_name;
    if (!config_.proxy_url.empty()) cluster["proxy-url"] = config_.proxy_url;
    info["spec"]["cluster"] = std::move(cluster);
  }
  auto env = e.env;
  env.emplace_back("KUBERNETES_EXEC_INFO", info.dump());
  std::vector<std::string> argv{e.command};
  argv.insert(argv.end(), e.args.begin(), e.args.end());
  ++exec_runs_;
  auto out = run_command(argv, env, kMaxPluginOutput, kPluginTimeout);
  if (!out) {
    Error err = out.error().wrap("exec credential plugin");
    if (out.error().code == ErrorCode::kNotFound && !e.install_hint.empty()) err.message += "\n" + e.install_hint;
    return std::unexpected(err);
  }
  const json cred = json::parse(*out, nullptr, false);
  if (!cred.is_object() || !cred.contains("status") || !cred["status"].is_object()) {
    return fail(ErrorCode::kInvalidArgument, "exec credential plugin {}: the output is not an ExecCredential with a status",
                e.command);
  }
  if (cred.value("apiVersion", "") != e.api_version) {
    return fail(ErrorCode::kInvalidArgument, "exec credential plugin {}: answered apiVersion \"{}\", expected \"{}\"",
                e.command, cred.value("apiVersion", ""), e.api_version);
  }
  const json& st = cred["status"];
  Auth a;
  a.bearer = st.value("token", "");
  a.cert_pem = st.value("clientCertificateData", "");
  a.key_pem = st.value("clientKeyData", "");
  if (a.bearer.empty() && a.cert_pem.empty()) {
    return fail(ErrorCode::kInvalidArgument, "exec credential plugin {}: the status has neither a token nor a client certificate",
                e.command);
  }
  if (a.cert_pem.empty() != a.key_pem.empty()) {
    return fail(ErrorCode::kInvalidArgument, "exec credential plugin {}: clientCertificateData needs clientKeyData",
                e.command);
  }
  exec_expiry_.reset();
  if (const std::string exp = st.value("expirationTimestamp", ""); !exp.empty()) {
    exec_expiry_ = parse_rfc3339(exp);
    if (!exec_expiry_) {
      return fail(ErrorCode::kInvalidArgument, "exec credential plugin {}: expirationTimestamp \"{}\" is not RFC 3339",
                  e.command, exp);
    }
  }
  exec_ = std::move(a);
  exec_valid_ = true;
  return {};
}

Result<Auth> Credentials::current() {
  std::lock_guard lock(mu_);
  if (config_.exec) {
    const bool expired = exec_expiry_ && clock_.system_now() + kExpiryMargin >= *exec_expiry_;
    if (!exec_valid_ || expired) {
      if (auto ok = run_plugin(); !ok) return std::unexpected(ok.error());
    }
    Auth a = exec_;
    if (a.cert_pem.empty()) {  // a token plugin may be combined with a kubeconfig client certificate
      a.cert_pem = static_.cert_pem;
      a.key_pem = static_.key_pem;
    }
    return a;
  }
  Auth a = static_;
  if (!config_.token_file.empty()) {
    const auto mtime = mtime_of(config_.token_file);
    if (file_stale_ || mtime != file_mtime_) {
      auto text = read_file_limited(config_.token_file, 1 << 20);
      if (!text) {
        if (file_token_.empty()) return std::unexpected(text.error().wrap("token file"));
      } else {
        std::string t = *text;
        while (!t.empty() && (t.back() == '\n' || t.back() == '\r' || t.back() == ' ')) t.pop_back();
        file_token_ = std::move(t);
        file_mtime_ = mtime;
        file_stale_ = false;
      }
    }
    a.bearer = file_token_;
  }
  return a;
}

}  // namespace kgpu::kube
