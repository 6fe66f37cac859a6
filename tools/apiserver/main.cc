// kgpu-apiserver: an in-memory Kubernetes API server with the semantics kgpu and real clients
// (kubectl, client-go, the python client) depend on, for tests and demos. See README.md here.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <pthread.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "common/base64.h"
#include "common/files.h"
#include "manifest.h"
#include "server.h"
#include "tls.h"

int main(int argc, char** argv) {
  using namespace kgpu::apiserver;
  // SIGTERM and SIGINT are taken by a thread of our own (sigwait), blocked everywhere else.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  CLI::App app{"kgpu-apiserver: an in-memory Kubernetes API server for tests and demos"};
  ServerOptions options;
  std::string listen = "127.0.0.1:0", port_file, cert_dir, kubeconfig, kubeconfig_user = "token";
  std::vector<std::string> resources, loads, tls_names;
  app.add_option("--listen", listen, "HOST:PORT to listen on (port 0: any free port)");
  app.add_option("--port-file", port_file, "write the bound port here once listening");
  app.add_flag("--tls", options.tls, "serve HTTPS with certificates generated into --cert-dir");
  app.add_option("--cert-dir", cert_dir, "where generated certificates go (default: a new temporary directory)");
  app.add_option("--tls-san", tls_names, "extra DNS names or IPs in the server certificate");
  app.add_option("--token", options.tokens, "accept this bearer token (repeatable); none: anonymous access");
  app.add_option("--kubeconfig", kubeconfig, "write a kubeconfig for clients of this server here");
  app.add_option("--kubeconfig-user", kubeconfig_user, "credentials in that kubeconfig: token or client-cert")
      ->check(CLI::IsMember({"token", "client-cert"}));
  app.add_option("--history", options.history, "watch history kept, in changes (older versions get 410)");
  app.add_option("--bookmark-interval-ms", options.bookmark_interval_ms, "how often watches get BOOKMARK events");
  app.add_option("--threads", options.threads, "request threads (each open watch holds one)");
  app.add_option("--proxy-timeout-ms", options.proxy_timeout_ms,
                 "pods/proxy: milliseconds to connect to the pod and for each read (then 503)");
  app.add_option("--resource", resources, "serve another kind: group/version/plural/Kind[/cluster] (repeatable)");
  std::vector<std::string> runtime_config;
  app.add_option("--runtime-config", runtime_config,
                 "as kube-apiserver's: GROUP/VERSION=false stops serving a built-in group-version (comma-separated)")
      ->delimiter(',');
  app.add_option("--load", loads, "create the objects in these YAML/JSON files at start (repeatable)");
  CLI11_PARSE(app, argc, argv);

  const auto colon = listen.rfind(':');
  if (colon == std::string::npos) {
    fmt::print(stderr, "kgpu-apiserver: --listen {}: expected HOST:PORT\n", listen);
    return 2;
  }
  options.host = listen.substr(0, colon);
  if (options.host.starts_with('[')) options.host = options.host.substr(1, options.host.size() - 2);
  try {
    options.port = std::stoi(listen.substr(colon + 1));
  } catch (const std::exception&) {
    fmt::print(stderr, "kgpu-apiserver: --listen {}: the port is not a number\n", listen);
    return 2;
  }
  Registry registry;
  for (const auto& r : resources) {
    if (const std::string e = registry.add(r); !e.empty()) {
      fmt::print(stderr, "kgpu-apiserver: --resource {}: {}\n", r, e);
      return 2;
    }
  }
  for (const auto& rc : runtime_config) {
    const auto eq = rc.find('=');
    const std::string gv = rc.substr(0, eq);
    const std::string value = eq == std::string::npos ? "true" : rc.substr(eq + 1);
    if (value != "false" && value != "true") {
      fmt::print(stderr, "kgpu-apiserver: --runtime-config {}: the value must be true or false\n", rc);
      return 2;
    }
    if (value == "true") continue;  // every built-in group-version is served already
    if (const std::string e = registry.disable(gv); !e.empty()) {
      fmt::print(stderr, "kgpu-apiserver: --runtime-config {}: {}\n", rc, e);
      return 2;
    }
  }
  CertFiles certs;
  if (options.tls) {
    if (cert_dir.empty()) {
      char tmpl[] = "/tmp/kgpu-apiserver-XXXXXX";
      if (mkdtemp(tmpl) == nullptr) {
        fmt::print(stderr, "kgpu-apiserver: cannot create a temporary directory\n");
        return 1;
      }
      cert_dir = tmpl;
    }
    if (const std::string e = generate_certificates(cert_dir, tls_names, "kgpu-test", certs); !e.empty()) {
      fmt::print(stderr, "kgpu-apiserver: {}\n", e);
      return 1;
    }
    options.cert_file = certs.server_cert;
    options.key_file = certs.server_key;
    options.client_ca_file = certs.ca_cert;
  }
  Server server(std::move(registry), options);
  for (const auto& path : loads) {
    auto text = kgpu::read_file_limited(path, 512 << 20);  // a 100,000-pod cluster is ~150 MB of JSON
    if (!text) {
      fmt::print(stderr, "kgpu-apiserver: --load {}\n", text.error().message);
      return 2;
    }
    auto objects = parse_manifests(*text, path);
    if (!objects) {
      fmt::print(stderr, "kgpu-apiserver: --load {}\n", objects.error().message);
      return 2;
    }
    for (auto& o : *objects) {
      const ResourceInfo* r = server.registry().find_kind(o.value("apiVersion", ""), o.value("kind", ""));
      const std::string name = o.contains("metadata") ? o["metadata"].value("name", "") : "";
      if (r == nullptr) {
        fmt::print(stderr, "kgpu-apiserver: --load {}: {} {}/{} is not a kind this server serves\n", path,
                   o.value("apiVersion", "?"), o.value("kind", "?"), name);
        return 2;
      }
      std::string ns = r->namespaced && o.contains("metadata") ? o["metadata"].value("namespace", "default") : "";
      if (r->namespaced && ns != "default" && ns != "kube-system" && ns != "kube-public" && ns != "kube-node-lease") {
        const ResourceInfo* nsr = server.registry().find("", "v1", "namespaces");
        server.store().create(*nsr, "", nlohmann::json{{"metadata", {{"name", ns}}}}, false);  // 409 when it exists
      }
      // The status given in the file is kept (a snapshot's pods and nodes come with theirs).
      const nlohmann::json status = o.contains("status") ? o["status"] : nlohmann::json();
      Answer a = server.store().create(*r, ns, o, false, /*restore=*/true);
      if (a.code == 409 && a.body.value("reason", "") == "AlreadyExists") {  // e.g. namespace "default"
        nlohmann::json replacement = o;
        replacement["metadata"].erase("resourceVersion");
        replacement["metadata"].erase("uid");
        a = server.store().update(*r, ns, name, replacement, Part::kMain, false);
      }
      if (a.code >= 300) {
        fmt::print(stderr, "kgpu-apiserver: --load {}: {}\n", path, a.body.value("message", a.body.dump()));
        return 2;
      }
      if (!status.is_null() && r->has_status) {
        nlohmann::json with_status = a.body;
        with_status["status"] = status;
        server.store().update(*r, ns, name.empty() ? a.body["metadata"].value("name", "") : name, with_status,
                              Part::kStatus, false);
      }
    }
  }
  if (const std::string e = server.bind(); !e.empty()) {
    fmt::print(stderr, "kgpu-apiserver: {}\n", e);
    return 1;
  }
  if (!kubeconfig.empty()) {
    // Context "standin": the token (or the client certificate when --kubeconfig-user client-cert
    // or no token); with TLS also "standin-cert" (client certificate) and "standin-insecure"
    // (token, insecure-skip-tls-verify).
    std::ofstream out(kubeconfig);
    const bool cert_user = options.tls && (kubeconfig_user == "client-cert" || options.tokens.empty());
    out << "apiVersion: v1\nkind: Config\nclusters:\n- name: standin\n  cluster:\n    server: " << server.url() << "\n";
    if (options.tls) {
      out << "    certificate-authority-data: " << kgpu::base64_encode(read_file_text(certs.ca_cert)) << "\n";
      out << "- name: standin-insecure\n  cluster:\n    server: " << server.url()
          << "\n    insecure-skip-tls-verify: true\n";
    }
    const auto cert_creds = [&] {
      return "    client-certificate-data: " + kgpu::base64_encode(read_file_text(certs.client_cert)) +
             "\n    client-key-data: " + kgpu::base64_encode(read_file_text(certs.client_key)) + "\n";
    };
    const std::string token_creds = options.tokens.empty() ? "    {}\n" : "    token: " + options.tokens.front() + "\n";
    out << "users:\n- name: standin\n  user:\n" << (cert_user ? cert_creds() : token_creds);
    if (options.tls) out << "- name: standin-cert\n  user:\n" << cert_creds();
    out << "contexts:\n- name: standin\n  context:\n    cluster: standin\n    user: standin\n    namespace: default\n";
    if (options.tls) {
      out << "- name: standin-cert\n  context:\n    cluster: standin\n    user: standin-cert\n    namespace: default\n";
      out << "- name: standin-insecure\n  context:\n    cluster: standin-insecure\n    user: standin\n"
             "    namespace: default\n";
    }
    out << "current-context: standin\n";
    if (!out) {
      fmt::print(stderr, "kgpu-apiserver: cannot write {}\n", kubeconfig);
      return 1;
    }
  }
  if (!port_file.empty()) {
    const std::string tmp = port_file + ".tmp";
    std::ofstream(tmp) << server.port() << "\n";
    std::filesystem::rename(tmp, port_file);
  }
  // On SIGTERM/SIGINT: stop accepting, let open requests finish for up to 2 s (a keep-alive
  // connection would otherwise hold the exit for its whole timeout), then exit.
  std::thread([&server, stop_signals] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    server.stop();
    std::this_thread::sleep_for(std::chrono::seconds(2));
    std::_Exit(0);
  }).detach();
  fmt::print("kgpu-apiserver: serving {}{}\n", server.url(), options.tls ? " (certificates in " + cert_dir + ")" : "");
  std::fflush(stdout);
  server.run();
  std::fflush(stdout);
  std::_Exit(0);  // the signal thread may still hold `server`
}
