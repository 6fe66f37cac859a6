// `kgpu agent`: the node agent. Serves GPU metrics (dcgm-exporter compatible) on /metrics and its
// health on /health; runs the kubelet device plugins and writes the node feature labels
// (DevicePluginManager).
#pragma once

#include <atomic>
#include <chrono>
#include <string>

#include "agent/dra_service.h"
#include "agent/plugin_manager.h"
#include "agent/mig_manager.h"
#include "agent/remediation_service.h"
#include "common/clock.h"
#include "common/http_server.h"
#include "common/strings.h"
#include "metrics/dcgm_source.h"
#include "metrics/sampler.h"

namespace kgpu::agent {

struct AgentOptions {
  std::string address = ":9400";  // [host]:port
  std::string nvml_library;
  std::string counters_file;  // dcgm-exporter CSV; empty = the 26 defaults
  metrics::SamplerOptions sampler;
  metrics::DcgmOptions dcgm;  // profiling fields through DCGM (docs/metrics.md, "Profiling fields")
  bool device_plugin = true;  // serve the kubelet device plugins and write labels
  DevicePluginOptions plugins;
  // Which kubelet API serves the GPUs: "device-plugin" or "dra" (the DRA driver, docs/dra.md). The
  // node label kgpu.io/gpu-api, read with API access at start, wins. Never both for the same GPUs:
  // in DRA mode the device plugins (and their labels) are not served.
  std::string gpu_api = "device-plugin";
  DraServiceOptions dra;  // node_name, client, plugins and mps are filled in by run_agent
  // API access for the device plugins (docs/scheduler.md, "The node honours the choice"): used
  // with an explicit kubeconfig, or inside a pod (the service account); otherwise none, and
  // Allocate gives the kubelet's device IDs. Without a node name ($NODE_NAME) there is none either.
  std::string kubeconfig;
  std::string node_name;  // "" = $NODE_NAME
  // This agent's Pod (the downward API's POD_NAME and POD_NAMESPACE; "" namespace = the service
  // account's). With API access, SIGTERM/SIGINT asks whether the agent is being uninstalled, and
  // only then removes the node labels file and the kgpu.io/gpus annotation (src/agent/uninstall.h);
  // without a pod name, or without API access, they are kept.
  std::string pod_name, pod_namespace;
  // GPU fault classification, node conditions and (opt-in) remediation (docs/remediation.md);
  // device-plugin mode with API access only.
  RemediationOptions remediation;
  // The MIG manager (docs/mig.md): applies the layout the node label nvidia.com/mig.config names;
  // device-plugin mode with API access only.
  bool mig_manager = false;
  MigManagerOptions mig;
  HttpServerOptions http;  // connection, header and idle limits of :9400 (docs/metrics.md)
  // With failOnInitError false, how often NVML is tried again while it cannot initialise.
  std::chrono::milliseconds nvml_retry{std::chrono::seconds(30)};
  // After SIGTERM/SIGINT, the process exits by this deadline even if a peer or NVML call hangs. The
  // uninstall question's API requests are bounded to a fifth of it each (three at most).
  std::chrono::milliseconds shutdown_grace{900};
  // Time for the main loop, the sampler and the plugins (not owned; must outlive run_agent). The
  // shutdown watchdog always runs on real time.
  Clock* clock = &Clock::real();
};

// Runs until `stop` becomes true (or SIGINT/SIGTERM when `stop` is null). Returns the exit status.
// Logs "listening on <host>:<port>" (with fields address= and port=) once serving: the port is the
// real one when 0 was asked for, so a caller that cannot pick a free port asks for 0 and reads it.
//
// Endpoints: /metrics; /health (liveness: the sampler completed a sample within three intervals,
// whatever NVML answered); /ready (200 "ready", or 503 with one line per problem: NVML not up, a
// GPU not answering, a resource not registered or with Unhealthy devices).
// When NVML cannot initialise and failOnInitError is false, the agent serves /metrics (empty),
// /health (200) and /ready (503) and retries NVML every `nvml_retry`.
int run_agent(const AgentOptions& options, std::atomic<bool>* stop = nullptr);

}  // namespace kgpu::agent
