// The credentials a request carries, refreshed as their sources require: a token file re-read
// when its modification time changes (projected service-account tokens rotate), and exec plugins
// (client.authentication.k8s.io ExecCredential) run again when their answer expires or the server
// answered 401.
//
// Thread safety: current() and invalidate() may be called from any thread; a plugin runs once for
// concurrent callers.
#pragma once

#include <chrono>
#include <mutex>
#include <optional>
#include <string>

#include "common/clock.h"
#include "common/error.h"
#include "apiclient/config.h"

namespace kgpu::kube {

struct Auth {
  std::string bearer;                // empty: none
  std::string cert_pem, key_pem;     // client certificate; empty: none
};

class Credentials {
 public:
  // `clock` judges an exec credential's expiry (system time); it must outlive this object.
  explicit Credentials(const RestConfig& config, const Clock& clock = Clock::real());
  // The credentials to use now; errors name the token file or the plugin (with its install hint).
  Result<Auth> current();
  // The server refused the credentials: re-read / re-run on the next current(). Returns whether
  // anything can change (a plugin or a token file), i.e. whether a retry makes sense.
  bool invalidate();
  // Times the exec plugin ran (tests).
  int exec_runs() const;

 private:
  Result<void> run_plugin();

  const RestConfig& config_;
  const Clock& clock_;
  mutable std::mutex mu_;
  Auth static_;
  std::string file_token_;
  std::optional<std::chrono::system_clock::time_point> file_mtime_;
  bool file_stale_ = true;
  Auth exec_;
  std::optional<std::chrono::system_clock::time_point> exec_expiry_;
  bool exec_valid_ = false;
  int exec_runs_ = 0;
};

// Runs `argv` with `env` added to the environment, `stdin` closed; returns stdout, or an error with
// the exit status and stderr's first line. Output is limited to `max_bytes`, time to `timeout`.
Result<std::string> run_command(const std::vector<std::string>& argv,
                                const std::vector<std::pair<std::string, std::string>>& env, size_t max_bytes,
                                std::chrono::milliseconds timeout);

}  // namespace kgpu::kube
