// The API-server stand-in (tools/apiserver) as a test fixture: a kgpu-apiserver child process
// with TLS, bearer token "t0k", generated certificates and a kubeconfig in its own directory.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include "apiclient/client.h"
#include "test_env.h"

namespace kgpu::testing {

std::string slurp(const std::filesystem::path& p);

class StandIn {
 public:
  // Starts it and waits for its port file (fails the test after 10 s).
  explicit StandIn(std::vector<std::string> extra_args = {});
  std::string kubeconfig() const { return (dir_.path() / "kubeconfig").string(); }
  std::string cert(const std::string& name) const { return slurp(dir_.path() / "certs" / name); }
  std::string url() const { return "https://127.0.0.1:" + std::to_string(port_); }
  int port() const { return port_; }
  // POST /standin/v1/faults.
  void fault(const nlohmann::json& f) const;
  // PUT /standin/v1/logs/<ns>/<pod>/<container>.
  void put_log(const std::string& path, const std::string& text) const;

 private:
  TempDir dir_;
  std::unique_ptr<ChildProcess> proc_;
  int port_ = 0;
};

// A RestConfig for `s` with its CA and token.
kube::RestConfig token_config(const StandIn& s);
// A client with short back-off (tests), failing the test if it cannot be made.
std::unique_ptr<kube::Client> client_for(kube::RestConfig c, kube::ClientOptions o = {});
// An environment lookup over `env` (kube::LoadOptions::getenv); `env` must outlive it.
std::function<std::optional<std::string>(std::string_view)> env_lookup(const std::map<std::string, std::string>& env);
// A one-container pod labelled app=t.
nlohmann::json test_pod(const std::string& name);

}  // namespace kgpu::testing
