#include "apiclient/config.h"

#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <filesystem>
#include <map>

#include "common/base64.h"
#include "common/files.h"
#include "common/yaml_guard.h"

namespace kgpu::kube {

namespace {

constexpr size_t kMaxKubeconfigBytes = 4 << 20;

struct Entry {
  YAML::Node node;
  std::string file;  // the kubeconfig it came from
};

struct Merged {
  std::map<std::string, Entry> clusters, users, contexts;
  std::string current_context;
  std::string current_context_file;
};

std::string dir_of(const std::string& file) { return std::filesystem::path(file).parent_path().string(); }

std::string resolve(const std::string& path, const std::string& file) {
  if (path.empty() || path.front() == '/') return path;
  const std::string dir = dir_of(file);
  return (dir.empty() ? std::filesystem::path(path) : std::filesystem::path(dir) / path).lexically_normal().string();
}

std::string scalar(const YAML::Node& n, const char* key) {
  const YAML::Node v = n[key];
  return v && v.IsScalar() ? v.Scalar() : std::string();
}

Result<void> merge_file(const std::string& path, Merged& m) {
  auto text = read_file_limited(path, kMaxKubeconfigBytes);
  if (!text) return std::unexpected(text.error());
  YamlLimits limits;
  limits.max_bytes = kMaxKubeconfigBytes;
  limits.max_nodes = 200'000;
  limits.max_depth = 32;
  if (auto ok = check_yaml(*text, path, limits); !ok) return std::unexpected(ok.error());
  YAML::Node root;
  try {
    root = YAML::Load(*text);
  } catch (const YAML::Exception& e) {
    return fail(ErrorCode::kInvalidArgument, "{}:{}: {}", path, e.mark.line + 1, e.msg);
  }
  if (root.IsNull()) return {};  // an empty kubeconfig is allowed
  if (!root.IsMap()) return fail(ErrorCode::kInvalidArgument, "{}: a kubeconfig is a mapping", path);
  for (const auto& [list, target] : {std::pair<const char*, std::map<std::string, Entry>*>{"clusters", &m.clusters},
                                     {"users", &m.users},
                                     {"contexts", &m.contexts}}) {
    const YAML::Node items = root[list];
    if (!items) continue;
    if (!items.IsSequence()) return fail(ErrorCode::kInvalidArgument, "{}: {} must be a list", path, list);
    for (const auto& item : items) {
      const std::string name = item.IsMap() ? scalar(item, "name") : std::string();
      if (name.empty()) {
        return fail(ErrorCode::kInvalidArgument, "{}:{}: an entry of {} without a name", path, item.Mark().line + 1,
                    list);
      }
      target->try_emplace(name, Entry{item, path});  // the first file to name an entry wins
    }
  }
  if (m.current_context.empty()) {
    m.current_context = scalar(root, "current-context");
    if (!m.current_context.empty()) m.current_context_file = path;
  }
  return {};
}

// `<field>-data` (base64) or `<field>` (a file path relative to the kubeconfig).
Result<std::string> pem(const YAML::Node& n, const std::string& field, const Entry& e, const std::string& what) {
  if (const std::string data = scalar(n, (field + "-data").c_str()); !data.empty()) {
    auto decoded = base64_decode(data);
    if (!decoded) return fail(ErrorCode::kInvalidArgument, "{}: {}: {}-data is not valid base64", e.file, what, field);
    return *decoded;
  }
  if (const std::string file = scalar(n, field.c_str()); !file.empty()) {
    auto text = read_file_limited(resolve(file, e.file), 1 << 20);
    if (!text) return std::unexpected(text.error().wrap(fmt::format("{}: {}: {}", e.file, what, field)));
    return *text;
  }
  return std::string();
}

std::optional<std::string> process_env(std::string_view name) {
  const char* v = std::getenv(std::string(name).c_str());
  return v == nullptr ? std::nullopt : std::optional<std::string>(v);
}

Result<RestConfig> in_cluster(const LoadOptions& o, const std::string& host, const std::string& port) {
  RestConfig c;
  const bool v6 = host.find(':') != std::string::npos;
  c.server = "https://" + (v6 ? "[" + host + "]" : host) + ":" + port;
  c.token_file = o.service_account_dir + "/token";
  auto token = read_file_limited(c.token_file, 1 << 20);
  if (!token) return std::unexpected(token.error().wrap("in-cluster configuration: the service account token"));
  c.token = std::string(*token);
  while (!c.token.empty() && (c.token.back() == '\n' || c.token.back() == '\r')) c.token.pop_back();
  auto ca = read_file_limited(o.service_account_dir + "/ca.crt", 1 << 20);
  if (!ca) return std::unexpected(ca.error().wrap("in-cluster configuration: the service account CA"));
  c.ca_pem = *ca;
  if (auto ns = read_file_limited(o.service_account_dir + "/namespace", 4096); ns && !ns->empty()) {
    c.namespace_ = *ns;
    while (!c.namespace_.empty() && c.namespace_.back() == '\n') c.namespace_.pop_back();
  }
  c.context = "(in-cluster)";
  c.source = "the pod's service account (" + o.service_account_dir + ")";
  return c;
}

}  // namespace

Result<RestConfig> config_from_kubeconfig_files(const std::vector<std::string>& paths, const std::string& context) {
  Merged m;
  for (const auto& p : paths) {
    if (auto ok = merge_file(p, m); !ok) return std::unexpected(ok.error());
  }
  const std::string files = fmt::format("{}", fmt::join(paths, ":"));
  const std::string ctx_name = context.empty() ? m.current_context : context;
  if (ctx_name.empty()) {
    return fail(ErrorCode::kInvalidArgument, "{}: no current-context is set and no --context was given", files);
  }
  const auto ctx = m.contexts.find(ctx_name);
  if (ctx == m.contexts.end()) return fail(ErrorCode::kInvalidArgument, "{}: context \"{}\" does not exist", files, ctx_name);
  const YAML::Node cn = ctx->second.node["context"];
  if (!cn || !cn.IsMap()) {
    return fail(ErrorCode::kInvalidArgument, "{}: context \"{}\" has no context mapping", ctx->second.file, ctx_name);
  }
  RestConfig c;
  c.context = ctx_name;
  c.source = files;
  if (const std::string ns = scalar(cn, "namespace"); !ns.empty()) c.namespace_ = ns;
  const std::string cluster_name = scalar(cn, "cluster");
  const auto cluster = m.clusters.find(cluster_name);
  if (cluster == m.clusters.end()) {
    return fail(ErrorCode::kInvalidArgument, "{}: context \"{}\" names cluster \"{}\", which does not exist",
                ctx->second.file, ctx_name, cluster_name);
  }
  const YAML::Node cl = cluster->second.node["cluster"];
  const std::string what_cluster = fmt::format("cluster \"{}\"", cluster_name);
  if (!cl || !cl.IsMap() || scalar(cl, "server").empty()) {
    return fail(ErrorCode::kInvalidArgument, "{}: {} has no server", cluster->second.file, what_cluster);
  }
  c.server = scalar(cl, "server");
  while (c.server.ends_with('/')) c.server.pop_back();
  if (!c.server.starts_with("https://") && !c.server.starts_with("http://")) {
    return fail(ErrorCode::kInvalidArgument, "{}: {}: server \"{}\" is not an http(s) URL", cluster->second.file,
                what_cluster, c.server);
  }
  auto ca = pem(cl, "certificate-authority", cluster->second, what_cluster);
  if (!ca) return std::unexpected(ca.error());
  c.ca_pem = *ca;
  c.insecure_skip_tls_verify = scalar(cl, "insecure-skip-tls-verify") == "true";
  c.tls_server_name = scalar(cl, "tls-server-name");
  c.proxy_url = scalar(cl, "proxy-url");

  const std::string user_name = scalar(cn, "user");
  if (user_name.empty()) return c;  // anonymous
  const auto user = m.users.find(user_name);
  if (user == m.users.end()) {
    return fail(ErrorCode::kInvalidArgument, "{}: context \"{}\" names user \"{}\", which does not exist",
                ctx->second.file, ctx_name, user_name);
  }
  const YAML::Node u = user->second.node["user"];
  if (!u || !u.IsMap()) return c;
  const std::string what_user = fmt::format("user \"{}\"", user_name);
  auto cert = pem(u, "client-certificate", user->second, what_user);
  if (!cert) return std::unexpected(cert.error());
  auto key = pem(u, "client-key", user->second, what_user);
  if (!key) return std::unexpected(key.error());
  if (cert->empty() != key->empty()) {
    return fail(ErrorCode::kInvalidArgument, "{}: {}: a client certificate needs both the certificate and the key",
                user->second.file, what_user);
  }
  c.client_cert_pem = *cert;
  c.client_key_pem = *key;
  c.token = scalar(u, "token");
  if (const std::string tf = scalar(u, "tokenFile"); !tf.empty()) c.token_file = resolve(tf, user->second.file);
  if (const YAML::Node ex = u["exec"]; ex && ex.IsMap()) {
    ExecConfig e;
    e.api_version = scalar(ex, "apiVersion");
    e.command = scalar(ex, "command");
    if (e.command.empty()) {
      return fail(ErrorCode::kInvalidArgument, "{}: {}: exec has no command", user->second.file, what_user);
    }
    if (e.api_version != "client.authentication.k8s.io/v1" && e.api_version != "client.authentication.k8s.io/v1beta1") {
      return fail(ErrorCode::kInvalidArgument,
                  "{}: {}: exec apiVersion \"{}\" is not client.authentication.k8s.io/v1 or v1beta1", user->second.file,
                  what_user, e.api_version);
    }
    if (e.command.find('/') != std::string::npos) e.command = resolve(e.command, user->second.file);
    if (const YAML::Node args = ex["args"]; args && args.IsSequence()) {
      for (const auto& a : args) e.args.push_back(a.as<std::string>(""));
    }
    if (const YAML::Node env = ex["env"]; env && env.IsSequence()) {
      for (const auto& kv : env) e.env.emplace_back(scalar(kv, "name"), scalar(kv, "value"));
    }
    e.provide_cluster_info = scalar(ex, "provideClusterInfo") == "true";
    e.install_hint = scalar(ex, "installHint");
    c.exec = std::move(e);
  }
  return c;
}

Result<RestConfig> load_config(const LoadOptions& o) {
  const auto env = o.getenv ? o.getenv : process_env;
  if (!o.kubeconfig.empty()) return config_from_kubeconfig_files({o.kubeconfig}, o.context);
  if (const auto kc = env("KUBECONFIG"); kc && !kc->empty()) {
    std::vector<std::string> paths;
    size_t start = 0;
    while (start <= kc->size()) {
      const size_t colon = kc->find(':', start);
      const std::string p = kc->substr(start, colon == std::string::npos ? std::string::npos : colon - start);
      // kubectl skips files of the list that do not exist.
      if (!p.empty() && std::filesystem::exists(p)) paths.push_back(p);
      if (colon == std::string::npos) break;
      start = colon + 1;
    }
    if (!paths.empty()) return config_from_kubeconfig_files(paths, o.context);
  }
  if (const auto home = env("HOME"); home && std::filesystem::exists(*home + "/.kube/config")) {
    return config_from_kubeconfig_files({*home + "/.kube/config"}, o.context);
  }
  const auto host = env("KUBERNETES_SERVICE_HOST");
  const auto port = env("KUBERNETES_SERVICE_PORT");
  if (host && port && !host->empty() && !port->empty()) return in_cluster(o, *host, *port);
  return fail(ErrorCode::kNotFound,
              "no Kubernetes configuration: no --kubeconfig, $KUBECONFIG or ~/.kube/config, and not in a pod "
              "(KUBERNETES_SERVICE_HOST is not set)");
}

}  // namespace kgpu::kube
