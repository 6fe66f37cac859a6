// How kgpu finds and authenticates to the Kubernetes API, as kubectl does.
//
// Precedence: an explicit kubeconfig path (`--kubeconfig`, one file, no merging); else
// `$KUBECONFIG` (a colon-separated list, merged the way kubectl merges it: for clusters, users and
// contexts the first file that names an entry wins, and the first file that sets current-context
// wins); else `~/.kube/config` when it exists; else, inside a pod (KUBERNETES_SERVICE_HOST and
// _PORT set), the service account's token, CA and namespace. Relative paths in a kubeconfig are
// relative to the file that holds them. `--context` picks another context.
//
// Errors name the file and the entry (kInvalidArgument for a malformed file or a dangling
// reference, kNotFound when no configuration exists at all).
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/error.h"

namespace kgpu::kube {

// A client.authentication.k8s.io exec credential plugin (`users[].user.exec`).
struct ExecConfig {
  std::string api_version;  // client.authentication.k8s.io/v1 or v1beta1
  std::string command;      // resolved against the kubeconfig's directory when relative with a '/'
  std::vector<std::string> args;
  std::vector<std::pair<std::string, std::string>> env;
  bool provide_cluster_info = false;
  std::string install_hint;
};

struct RestConfig {
  std::string server;  // "https://host:port" (no trailing slash)
  std::string ca_pem;  // CA bundle; empty: the system's
  bool insecure_skip_tls_verify = false;
  std::string tls_server_name;
  std::string proxy_url;
  std::string client_cert_pem, client_key_pem;
  std::string token;
  std::string token_file;  // re-read when it changes (service-account tokens rotate)
  std::optional<ExecConfig> exec;
  std::string namespace_ = "default";
  std::string context;  // the context used; "(in-cluster)" inside a pod
  std::string source;   // what it came from, for messages

  // Client behaviour (not from the kubeconfig).
  double qps = 20;
  int burst = 40;
  std::chrono::milliseconds timeout{30'000};
  std::string user_agent = "kgpu";
};

struct LoadOptions {
  std::string kubeconfig;  // --kubeconfig
  std::string context;     // --context
  // Environment and file-system seams (tests); defaults read the process's.
  std::function<std::optional<std::string>(std::string_view)> getenv;
  std::string service_account_dir = "/var/run/secrets/kubernetes.io/serviceaccount";
};

Result<RestConfig> load_config(const LoadOptions& options);

// Parses one kubeconfig text (`path` names it in errors and resolves relative paths) and picks
// `context` (empty: its current-context). Exposed for tests and `kgpu doctor --kubeconfig -`.
Result<RestConfig> config_from_kubeconfig_files(const std::vector<std::string>& paths, const std::string& context);

}  // namespace kgpu::kube
