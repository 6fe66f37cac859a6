#include "agent/agent.h"

#include <httplib.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

namespace kgpu::agent {

namespace {

std::atomic<bool> g_signalled{false};

void on_signal(int) { g_signalled = true; }

std::string host_name() {
  if (const char* n = std::getenv("NODE_NAME"); n != nullptr && *n != '\0') return n;
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) == 0) return buf;
  return "unknown";
}

}  // namespace

Result<std::pair<std::string, int>> parse_address(const std::string& address) {
  const auto colon = address.rfind(':');
  if (colon == std::string::npos) {
    return fail(ErrorCode::kInvalidArgument, "--address '{}': expected [host]:port, e.g. :9400", address);
  }
  std::string host = address.substr(0, colon);
  if (host.starts_with('[') && host.ends_with(']')) host = host.substr(1, host.size() - 2);
  const std::string port = address.substr(colon + 1);
  int p = -1;
  try {
    size_t used = 0;
    p = std::stoi(port, &used);
    if (used != port.size()) p = -1;
  } catch (const std::exception&) {
    p = -1;
  }
  if (p < 0 || p > 65535) return fail(ErrorCode::kInvalidArgument, "--address '{}': bad port '{}'", address, port);
  return std::pair{host.empty() ? std::string("0.0.0.0") : host, p};
}

int run_agent(const AgentOptions& options, std::atomic<bool>* stop) {
  auto addr = parse_address(options.address);
  if (!addr) {
    std::fprintf(stderr, "kgpu agent: %s\n", addr.error().message.c_str());
    return 2;
  }
  metrics::SamplerOptions so = options.sampler;
  if (so.hostname.empty()) so.hostname = host_name();
  if (!options.counters_file.empty()) {
    std::ifstream in(options.counters_file);
    if (!in) {
      std::fprintf(stderr, "kgpu agent: cannot read counters file %s\n", options.counters_file.c_str());
      return 1;
    }
    std::stringstream text;
    text << in.rdbuf();
    auto set = metrics::parse_counters(text.str(), options.counters_file);
    if (!set) {
      std::fprintf(stderr, "kgpu agent: %s\n", set.error().message.c_str());
      return 1;
    }
    for (const auto& w : set->warnings) std::fprintf(stderr, "kgpu agent: warning: %s\n", w.c_str());
    so.counters = std::move(set->counters);
  }

  auto node = gpu::Node::open(nvml::resolve_library_path(options.nvml_library));
  if (!node) {
    std::fprintf(stderr, "kgpu agent: %s\n", node.error().message.c_str());
    return 1;
  }
  std::unique_ptr<DevicePluginManager> plugins;
  if (options.device_plugin) {
    DevicePluginOptions po = options.plugins;
    if (po.node_name.empty()) po.node_name = so.hostname;
    plugins = std::make_unique<DevicePluginManager>(**node, po);
    if (auto ok = plugins->start(); !ok) {
      std::fprintf(stderr, "kgpu agent: device plugin: %s\n", ok.error().message.c_str());
      return 1;
    }
  }
  metrics::Sampler sampler(**node, so);
  sampler.start();

  httplib::Server server;
  server.Get("/metrics", [&](const httplib::Request&, httplib::Response& res) {
    auto page = sampler.page();
    std::string body = page ? *page : std::string();
    if (plugins) body += plugins->metrics_text();
    res.set_content(body, "text/plain; version=0.0.4; charset=utf-8");
  });
  server.Get("/health", [&](const httplib::Request&, httplib::Response& res) {
    const bool ok = sampler.healthy();
    res.status = ok ? 200 : 503;
    res.set_content(ok ? "OK\n" : "no recent NVML sample\n", "text/plain");
  });
  int port = addr->second;
  if (port == 0) {
    port = server.bind_to_any_port(addr->first);
  } else if (!server.bind_to_port(addr->first, port)) {
    port = -1;
  }
  if (port < 0) {
    std::fprintf(stderr, "kgpu agent: cannot listen on %s\n", options.address.c_str());
    sampler.stop();
    if (plugins) plugins->stop();
    return 1;
  }
  std::fprintf(stderr, "kgpu agent: listening on %s:%d\n", addr->first.c_str(), port);
  std::thread http([&] { server.listen_after_bind(); });
  // stop() is a no-op until the server runs: wait for it, so a stop request can never be lost.
  for (int i = 0; i < 5000 && !server.is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));

  if (stop == nullptr) {
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
  }
  while (!(stop != nullptr ? stop->load() : g_signalled.load())) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  server.stop();
  http.join();
  sampler.stop();
  if (plugins) plugins->stop();
  return 0;
}

}  // namespace kgpu::agent
