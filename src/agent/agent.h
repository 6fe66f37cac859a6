// `kgpu agent`: the node agent. Serves GPU metrics (dcgm-exporter compatible) on /metrics and its
// health on /health; runs the kubelet device plugins and writes the node feature labels
// (DevicePluginManager).
#pragma once

#include <atomic>
#include <string>

#include "agent/device_plugins.h"
#include "metrics/sampler.h"

namespace kgpu::agent {

struct AgentOptions {
  std::string address = ":9400";  // [host]:port
  std::string nvml_library;
  std::string counters_file;  // dcgm-exporter CSV; empty = the 26 defaults
  metrics::SamplerOptions sampler;
  bool device_plugin = true;  // serve the kubelet device plugins and write labels
  DevicePluginOptions plugins;
};

// Splits "[host]:port" (host empty = all interfaces). Errors name the bad address.
Result<std::pair<std::string, int>> parse_address(const std::string& address);

// Runs until `stop` becomes true (or SIGINT/SIGTERM when `stop` is null). Returns the exit status.
// Prints "listening on <host>:<port>" on stderr once serving (the port is the real one when 0
// was asked for).
int run_agent(const AgentOptions& options, std::atomic<bool>* stop = nullptr);

}  // namespace kgpu::agent
