#include "agent/agent.h"

#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <future>
#include <iterator>
#include <csignal>
#include <mutex>
#include <optional>
#include <thread>

#include "agent/cluster_view.h"
#include "agent/uninstall.h"
#include "common/files.h"
#include "common/http_server.h"
#include "common/log.h"
#include "apiclient/client.h"
#include "apiclient/config.h"
#include "k8s/gpu_assignment.h"

namespace kgpu::agent {

namespace {

std::atomic<bool> g_signalled{false};

constexpr const char* kMetricsContentType = "text/plain; version=0.0.4; charset=utf-8";

void on_signal(int) { g_signalled = true; }

std::string host_name() {
  if (const char* n = std::getenv("NODE_NAME"); n != nullptr && *n != '\0') return n;
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) == 0) return buf;
  return "unknown";
}

// API access for the device plugins; none (null view) when the agent runs without it.
struct ApiAccess {
  std::unique_ptr<ClusterView> view;
  // The writes of the remediation service and the MIG manager (a client is thread-safe).
  std::unique_ptr<kube::Client> writer_client;
  // Short timeouts and no retries: the uninstall question at shutdown (AgentOptions::shutdown_grace).
  // Shared with the start probe's thread, which may outlive this struct.
  std::shared_ptr<kube::Client> shutdown_client;
  std::string pod_namespace;  // AgentOptions::pod_namespace, else the config's namespace
  // Set by `probe` once the agent could read its pod and DaemonSet (owner_readable); false until
  // then, and for good when it could not.
  std::shared_ptr<std::atomic<bool>> owner_readable_at_start = std::make_shared<std::atomic<bool>>(false);
  std::jthread probe;  // declared last: stopped and joined first
};

// Asks owner_readable up to five times, a second apart, on ApiAccess::probe (the start does not
// wait for it; destroying the ApiAccess stops it within one request).
void probe_owner_access(ApiAccess& access, const std::string& pod) {
  if (!access.shutdown_client || pod.empty()) return;
  access.probe = std::jthread([client = access.shutdown_client, ns = access.pod_namespace, pod,
                               out = access.owner_readable_at_start](std::stop_token stop) {
    for (int attempt = 0; attempt < 5 && !stop.stop_requested(); ++attempt) {
      if (owner_readable(*client, ns, pod)) {
        *out = true;
        log::info("the agent can read its pod and its DaemonSet: at shutdown, a refused read means an uninstall",
                  {log::kv("pod", ns + "/" + pod)});
        return;
      }
      std::mutex mu;
      std::unique_lock lock(mu);
      std::condition_variable_any().wait_for(lock, stop, std::chrono::seconds(1), [] { return false; });
    }
    if (!stop.stop_requested()) {
      log::info("the agent cannot read its pod and its DaemonSet: at shutdown, a refused read keeps the node labels",
                {log::kv("pod", ns + "/" + pod)});
    }
  });
}

// An error only when API access was asked for explicitly (--kubeconfig) and cannot be had.
Result<ApiAccess> open_cluster_view(const AgentOptions& options) {
  const char* service_host = std::getenv("KUBERNETES_SERVICE_HOST");
  const bool in_pod = service_host != nullptr && *service_host != '\0';
  if (options.kubeconfig.empty() && !in_pod) return ApiAccess{};
  std::string node = options.node_name;
  if (const char* n = std::getenv("NODE_NAME"); node.empty() && n != nullptr) node = n;
  auto fail_or_none = [&](const Error& e) -> Result<ApiAccess> {
    if (!options.kubeconfig.empty()) return std::unexpected(e);
    log::warn(e.message + ": Allocate uses the kubelet's device IDs");
    return ApiAccess{};
  };
  if (node.empty()) {
    return fail_or_none(Error{ErrorCode::kInvalidArgument,
                              "API access needs the node's name: pass --node-name or set NODE_NAME (the downward API's "
                              "spec.nodeName)"});
  }
  kube::LoadOptions lo;
  lo.kubeconfig = options.kubeconfig;
  auto config = kube::load_config(lo);
  if (!config) return fail_or_none(config.error().wrap("API access"));
  config->user_agent = "kgpu-agent";
  ApiAccess access;
  access.pod_namespace = options.pod_namespace.empty() ? config->namespace_ : options.pod_namespace;
  kube::RestConfig short_config = *config;
  short_config.timeout = std::max(std::chrono::milliseconds(20), options.shutdown_grace / 5);
  kube::ClientOptions no_retries;
  no_retries.max_retries = 0;
  auto short_client = kube::Client::create(std::move(short_config), no_retries);
  if (!short_client) return fail_or_none(short_client.error().wrap("API access"));
  access.shutdown_client = std::move(*short_client);
  auto writer_client = kube::Client::create(*config);
  if (!writer_client) return fail_or_none(writer_client.error().wrap("API access"));
  access.writer_client = std::move(*writer_client);
  auto client = kube::Client::create(std::move(*config));
  if (!client) return fail_or_none(client.error().wrap("API access"));
  log::info(options.device_plugin ? "API access: honouring GPU assignments" : "API access: pod labels and UIDs for metrics",
            {log::kv("node", node)});
  access.view = make_kube_cluster_view(std::move(*client), node, std::chrono::seconds(5),
                                       !options.plugins.config_dir.dir.empty() || options.mig_manager);
  return access;
}

// API access for the GPU API choice and the DRA driver's ResourceClaim reads (kubeconfig, or in a
// pod its service account): a client for the claims and one with a short timeout and no retries
// for the node label at start (a slow API server must not hold the agent's start). Both null
// without API access; errors only for a kubeconfig that does not load.
struct DraApi {
  std::shared_ptr<kube::Client> claims;
  std::unique_ptr<kube::Client> label;
};
Result<DraApi> dra_api(const AgentOptions& options) {
  const char* service_host = std::getenv("KUBERNETES_SERVICE_HOST");
  if (options.kubeconfig.empty() && (service_host == nullptr || *service_host == '\0')) return DraApi{};
  kube::LoadOptions lo;
  lo.kubeconfig = options.kubeconfig;
  auto config = kube::load_config(lo);
  if (!config) return std::unexpected(config.error().wrap("API access"));
  config->user_agent = "kgpu-agent";
  kube::RestConfig short_config = *config;
  short_config.timeout = std::chrono::seconds(2);
  kube::ClientOptions no_retries;
  no_retries.max_retries = 0;
  auto label = kube::Client::create(std::move(short_config), no_retries);
  auto claims = kube::Client::create(std::move(*config));
  if (!label) return std::unexpected(label.error().wrap("API access"));
  if (!claims) return std::unexpected(claims.error().wrap("API access"));
  return DraApi{std::shared_ptr<kube::Client>(std::move(*claims)), std::move(*label)};
}

// The GPU API for this node: the kgpu.io/gpu-api label when the node has one, else the flag.
Result<std::string> choose_gpu_api(const AgentOptions& options, kube::Client* client, const std::string& node) {
  std::string api = options.gpu_api;
  if (client != nullptr && !node.empty()) {
    auto n = client->get(kube::resources::kNodes, "", node);
    if (!n) {
      log::warn("node labels not read (" + n.error().text() + "): using --gpu-api=" + api);
    } else if (const auto labels = (*n)["metadata"].value("labels", nlohmann::json::object());
               labels.contains(kGpuApiLabel) && labels[kGpuApiLabel].is_string()) {
      api = labels[kGpuApiLabel].get<std::string>();
      log::info("GPU API chosen by the node label", {log::kv("label", kGpuApiLabel), log::kv("value", api)});
      if (api != "device-plugin" && api != "dra") {
        return fail(ErrorCode::kInvalidArgument, "node {}: label {}={}: want device-plugin or dra", node, kGpuApiLabel,
                    api);
      }
    }
  }
  if (api != "device-plugin" && api != "dra") {
    return fail(ErrorCode::kInvalidArgument, "--gpu-api={}: want device-plugin or dra", api);
  }
  return api;
}

// The informer's pods as the sampler wants them (name, UID, labels).
std::vector<metrics::PodInfo> pods_of(const std::vector<nlohmann::json>& pods) {
  std::vector<metrics::PodInfo> out;
  out.reserve(pods.size());
  for (const auto& p : pods) {
    const auto m = p.find("metadata");
    if (m == p.end() || !m->is_object()) continue;
    auto str = [&](const char* key) {
      const auto it = m->find(key);
      return it != m->end() && it->is_string() ? it->get<std::string>() : std::string();
    };
    metrics::PodInfo info;
    info.ns = str("namespace");
    info.name = str("name");
    info.uid = str("uid");
    if (const auto l = m->find("labels"); l != m->end() && l->is_object()) {
      for (const auto& [k, v] : l->items()) {
        if (v.is_string()) info.labels[k] = v.get<std::string>();
      }
    }
    out.push_back(std::move(info));
  }
  return out;
}

// The uninstall question (src/agent/uninstall.h), or why it cannot be asked.
UninstallVerdict ask_uninstall(const ApiAccess& api, const AgentOptions& options) {
  if (!api.shutdown_client) return {false, "no API access to tell an uninstall from a restart"};
  if (options.pod_name.empty()) return {false, "no pod name (--pod-name, POD_NAME) to tell an uninstall from a restart"};
  return uninstall_verdict(*api.shutdown_client, api.pod_namespace, options.pod_name, *api.owner_readable_at_start);
}

}  // namespace

namespace {

// What the HTTP handlers read. The sampler and plugins appear once NVML is up (at start, or later
// when failOnInitError is false and NVML initialises on a retry).
struct Serving {
  mutable std::mutex mu;
  metrics::Sampler* sampler = nullptr;
  DevicePluginManager* plugins = nullptr;
  RemediationService* remediation = nullptr;
  std::string nvml_error;  // why NVML is not up yet ("" once it is)
};

HttpResponse text_response(int status, std::string body) {
  return {status, "text/plain; charset=utf-8", std::make_shared<const std::string>(std::move(body))};
}

// Readiness: NVML up, every GPU answering, every advertised resource registered with all its
// devices Healthy. One line per problem.
std::vector<std::string> readiness_problems(const Serving& s) {
  std::lock_guard lock(s.mu);
  std::vector<std::string> out;
  if (!s.nvml_error.empty()) out.push_back("NVML: " + s.nvml_error);
  if (s.sampler != nullptr) std::ranges::move(s.sampler->problems(), std::back_inserter(out));
  if (s.plugins != nullptr) {
    const auto st = s.plugins->status();
    if (!st.last_reload_error.empty() && st.resources.empty()) out.push_back("device plugin: " + st.last_reload_error);
    for (const auto& r : st.resources) {
      if (!r.registered) out.push_back(fmt::format("device plugin {}: not registered with the kubelet", r.name));
      if (r.healthy < r.devices) {
        out.push_back(fmt::format("device plugin {}: {} of {} devices Unhealthy", r.name, r.devices - r.healthy, r.devices));
      }
    }
  }
  return out;
}

// Exits the process when an orderly shutdown has not finished `grace` after the first signal (a
// stuck NVML call or kubelet must not keep a terminating pod alive).
class ShutdownWatchdog {
 public:
  explicit ShutdownWatchdog(std::chrono::milliseconds grace) : grace_(grace) {
    thread_ = std::thread([this] {
      std::unique_lock lock(mu_);
      // A signal handler cannot notify: poll the flag.
      while (!done_ && !g_signalled.load()) cv_.wait_for(lock, std::chrono::milliseconds(50));
      if (done_) return;
      if (!cv_.wait_for(lock, grace_, [this] { return done_; })) {
        log::error(fmt::format("shutdown did not finish within {} ms: exiting now", grace_.count()));
        std::_Exit(0);
      }
    });
  }
  ~ShutdownWatchdog() {
    {
      std::lock_guard lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
 private:
  std::chrono::milliseconds grace_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace

int run_agent(const AgentOptions& options, std::atomic<bool>* stop) {
  auto addr = parse_address(options.address);
  if (!addr) {
    log::error(addr.error().message);
    return 2;
  }
  // SIGTERM/SIGINT are caught from the start; shutdown then finishes within options.shutdown_grace.
  std::optional<ShutdownWatchdog> watchdog;
  if (stop == nullptr) {
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    watchdog.emplace(options.shutdown_grace);
  }
  auto stopping = [&] { return stop != nullptr ? stop->load() : g_signalled.load(); };

  Clock& clock = options.clock != nullptr ? *options.clock : Clock::real();
  metrics::SamplerOptions so = options.sampler;
  so.clock = &clock;
  // The Hostname label names the node: --node-name when given (its value is $NODE_NAME otherwise),
  // else $NODE_NAME, else the host name, so `top --prometheus` and `report` find the node's series.
  if (so.hostname.empty()) so.hostname = options.node_name.empty() ? host_name() : options.node_name;
  if (!options.counters_file.empty()) {
    // A counters file is a ConfigMap too: 1 MiB at most.
    const auto text = read_file_limited(options.counters_file, 1 << 20);
    if (!text) {
      log::error("counters file: " + text.error().message, {log::kv("file", options.counters_file)});
      return 1;
    }
    auto set = metrics::parse_counters(*text, options.counters_file);
    if (!set) {
      log::error(set.error().message, {log::kv("file", options.counters_file)});
      return 1;
    }
    for (const auto& w : set->warnings) log::warn(w, {log::kv("file", options.counters_file)});
    so.counters = std::move(set->counters);
  }
  DevicePluginOptions po = options.plugins;
  if (po.node_name.empty()) po.node_name = options.node_name.empty() ? so.hostname : options.node_name;
  // The GPU API: one per node, never both for the same GPUs (docs/dra.md).
  std::string node_name = options.node_name;
  if (const char* n = std::getenv("NODE_NAME"); node_name.empty() && n != nullptr) node_name = n;
  if (node_name.empty()) node_name = so.hostname;
  DraApi dra_access;
  if (auto c = dra_api(options)) {
    dra_access = std::move(*c);
  } else if (options.gpu_api == "dra") {
    log::error("DRA: " + c.error().message);
    return 1;
  }
  auto gpu_api = choose_gpu_api(options, dra_access.label.get(), node_name);
  dra_access.label.reset();
  if (!gpu_api) {
    log::error(gpu_api.error().message);
    return 2;
  }
  const bool dra_mode = *gpu_api == "dra";
  if (dra_mode && options.device_plugin) log::info("GPU API dra: the device plugins are not served");
  if (dra_mode) {
    // Our claims' devices in PodResources are attributed to their containers (docs/dra.md).
    so.dra_driver = options.dra.driver_name;
    so.dra_pool = node_name;
  }
  AgentOptions effective = options;
  effective.device_plugin = options.device_plugin && !dra_mode;
  const AgentOptions& opts = effective;
  po.clock = &clock;
  ApiAccess api;
  if (opts.device_plugin) {
    auto view = open_cluster_view(opts);
    if (!view) {
      log::error(view.error().message);
      return 1;
    }
    api = std::move(*view);
    probe_owner_access(api, options.pod_name);
    po.cluster = api.view.get();
    if (po.pod_resources_socket.empty()) po.pod_resources_socket = so.pod_resources_socket;
    po.pod_resources_timeout = so.pod_resources_timeout;
  } else if (so.pod_labels) {
    // Pod labels come from the API server; without the device plugin the view is opened for them alone.
    if (auto view = open_cluster_view(opts)) api = std::move(*view);
  }
  if (api.view) {
    so.pods = [view = api.view.get()] { return pods_of(view->cached_pods()); };
  } else if (so.pod_labels) {
    log::warn("DCGM_EXPORTER_KUBERNETES_ENABLE_POD_LABELS is not honoured: pod labels need API access (in a pod with "
              "a service account that may list pods, or --kubeconfig, and NODE_NAME)");
  }

  Serving serving;
  std::unique_ptr<gpu::NodeGpus> node;
  std::unique_ptr<DevicePluginManager> plugins;
  // Remediation (device-plugin mode with API access). The plugins' event thread reaches it through
  // the slot (holding a reference for the call). Its worker calls the plugins and the API client:
  // the guard below (declared after the plugins, destroyed before them) stops it and lets it go
  // while both still exist.
  auto remediation_slot = std::make_shared<std::atomic<std::shared_ptr<RemediationService>>>();
  po.on_fault = [remediation_slot](const gpu::Event& e) {
    if (auto r = remediation_slot->load()) r->on_fault(e);
  };
  std::shared_ptr<RemediationService> remediation;
  std::unique_ptr<MigManager> mig_manager;
  struct RemediationGuard {
    std::shared_ptr<RemediationService>& service;
    std::atomic<std::shared_ptr<RemediationService>>& slot;
    std::unique_ptr<MigManager>& mig;
    ~RemediationGuard() {
      if (mig) mig->stop();
      mig.reset();
      if (service) service->stop();
      slot.store(nullptr);
      service.reset();
    }
  } remediation_guard{remediation, *remediation_slot, mig_manager};
  RealMpsControl dra_mps;  // outlives the DRA service that calls it
  // The pool's ResourceSlices (DRA mode with API access); outlives `dra`, which feeds it.
  std::unique_ptr<dra::SlicePublisher> slices;
  std::unique_ptr<DraService> dra;
  std::unique_ptr<dcgm::Profiler> profiler;  // outlives the sampler that calls it
  std::unique_ptr<metrics::Sampler> sampler;
  // Opens NVML and starts the plugins and the sampler. An error with `node` still null means NVML
  // could not be opened; any other error is fatal (the plugins already applied failOnInitError).
  auto bring_up = [&]() -> Result<void> {
    auto opened = gpu::NodeGpus::open(nvml::resolve_library_path(options.nvml_library));
    if (!opened) return std::unexpected(opened.error());
    node = std::move(*opened);
    if (opts.device_plugin) {
      plugins = std::make_unique<DevicePluginManager>(*node, po);
      if (auto ok = plugins->start(); !ok) return std::unexpected(ok.error().wrap("device plugin"));
      if (api.view && api.writer_client) {
        RemediationOptions ro = options.remediation;
        if (ro.budget_namespace.empty()) ro.budget_namespace = api.pod_namespace.empty() ? "default" : api.pod_namespace;
        ro.clock = &clock;
        ro.cdi_root = po.cdi_root;
        auto r = RemediationService::create(*node, *plugins, *api.writer_client, *api.view, std::move(ro));
        if (!r) return std::unexpected(r.error());
        remediation = std::shared_ptr<RemediationService>(std::move(*r));
        remediation->start();
        remediation_slot->store(remediation);
      } else if (options.remediation.policy.mode != health::Mode::kOff) {
        log::warn("remediation needs API access (a pod's service account, or --kubeconfig, and NODE_NAME): off");
      }
      if (options.mig_manager && api.view && api.writer_client) {
        MigManagerOptions mo = options.mig;
        mo.clock = &clock;
        mig_manager = std::make_unique<MigManager>(*node, *plugins, *api.writer_client, *api.view, std::move(mo));
        mig_manager->start();
      } else if (options.mig_manager) {
        log::warn("the MIG manager needs API access (a pod's service account, or --kubeconfig, and NODE_NAME): off");
      }
    }
    if (dra_mode) {
      DraServiceOptions d = options.dra;
      d.node_name = node_name;
      d.plugins = po;
      d.client = dra_access.claims;
      d.mps = &dra_mps;
      d.inventory_interval = po.health_interval;
      if (!d.client) {
        log::warn("DRA: no API access (--kubeconfig, or a pod's service account): claims cannot be prepared, "
                  "no ResourceSlices are published");
      } else {
        if (!slices) {
          dra::PublisherOptions so_dra;
          so_dra.driver = d.driver_name;
          so_dra.node_name = node_name;
          slices = std::make_unique<dra::SlicePublisher>(*d.client, so_dra);
          slices->start();
        }
        d.publish = [p = slices.get()](std::vector<dra::PublishedDevice> pool, std::vector<dra::CounterSet> sets) {
          p->update(std::move(pool), std::move(sets));
        };
        d.counters_dropped = [p = slices.get()] { return p->stats().counters_dropped; };
      }
      dra = std::make_unique<DraService>(*node, std::move(d));
      if (auto ok = dra->start(); !ok) return std::unexpected(ok.error());
    }
    if (plugins && po.cluster != nullptr) {
      so.translate = [p = plugins.get()](const std::vector<kubelet::ContainerDevice>& listed) {
        return p->translate_devices(listed);
      };
    }
    so.enrich = nullptr;
    profiler.reset();
    if (auto inv = node->inventory()) {
      profiler = metrics::start_profiling(options.dcgm, so.counters, *inv, so.interval, &clock);
      if (profiler) so.enrich = [p = profiler.get()](std::vector<gpu::Telemetry>& ts) { p->fill(ts); };
    }
    sampler = std::make_unique<metrics::Sampler>(*node, so);
    sampler->start();
    std::lock_guard lock(serving.mu);
    serving.sampler = sampler.get();
    serving.plugins = plugins.get();
    serving.remediation = remediation.get();
    serving.nvml_error.clear();
    return {};
  };
  bool waiting_for_nvml = false;
  if (auto up = bring_up(); !up) {
    const bool nvml_failed = node == nullptr;
    const std::string config_file = initial_config_file(po);
    const std::string config_text =
        config_file.empty() ? "" : read_file_limited(config_file, sharing::kMaxConfigBytes).value_or("");
    if (!nvml_failed || fails_on_init_error(po, config_text)) {
      log::error(up.error().message);
      return 1;
    }
    log::warn(fmt::format("{}; failOnInitError is false: serving without GPUs, retrying NVML every {:.1f} s",
                          up.error().message, std::chrono::duration<double>(options.nvml_retry).count()));
    serving.nvml_error = up.error().message;
    waiting_for_nvml = true;
  }

  HttpServer server(options.http);
  server.route("/metrics", [&] {
    std::lock_guard lock(serving.mu);
    auto page = serving.sampler != nullptr ? serving.sampler->page() : nullptr;
    if (serving.plugins == nullptr) {
      return HttpResponse{200, kMetricsContentType, page ? page : std::make_shared<const std::string>()};
    }
    auto body = std::make_shared<std::string>(page ? *page : std::string());
    *body += serving.plugins->metrics_text();
    if (serving.remediation != nullptr) *body += serving.remediation->metrics_text();
    return HttpResponse{200, kMetricsContentType, std::move(body)};
  });
  server.route("/health", [&] {
    std::lock_guard lock(serving.mu);
    // Alive: sampling (or, without NVML, waiting for it on the main loop).
    if (serving.sampler == nullptr || serving.sampler->healthy()) return text_response(200, "OK\n");
    return text_response(503, "sampling stalled: no sample in three intervals\n");
  });
  server.route("/ready", [&] {
    const auto problems = readiness_problems(serving);
    if (problems.empty()) return text_response(200, "ready\n");
    std::string body;
    for (const auto& p : problems) body += p + "\n";
    return text_response(503, std::move(body));
  });
  auto port = server.start(addr->first, addr->second);
  if (!port) {
    log::error(port.error().message);
    if (sampler) sampler->stop();
    if (plugins) plugins->stop();
    if (dra) dra->stop();
    if (slices) slices->stop();
    return 1;
  }
  // Tests and tools read the bound port from this line (the real one when port 0 was asked for).
  log::info(fmt::format("listening on {}:{}", addr->first, *port),
            {log::kv("address", addr->first), log::kv("port", *port)});

  auto next_retry = clock.steady_now() + options.nvml_retry;
  int status = 0;
  while (!stopping()) {
    clock.sleep_for(std::chrono::milliseconds(100));
    if (waiting_for_nvml && clock.steady_now() >= next_retry) {
      next_retry = clock.steady_now() + options.nvml_retry;
      if (auto up = bring_up(); up) {
        waiting_for_nvml = false;
        log::info("NVML is up: serving GPUs");
      } else if (node != nullptr) {
        log::error(up.error().message);
        status = 1;
        break;
      } else {
        std::lock_guard lock(serving.mu);
        serving.nvml_error = up.error().message;
      }
    }
  }
  // Asked while the rest stops; the answer is awaited after the plugins stopped (they no longer
  // write the labels then).
  std::future<UninstallVerdict> uninstall;
  if (plugins && po.labels) uninstall = std::async(std::launch::async, [&] { return ask_uninstall(api, options); });
  server.stop();
  {
    std::lock_guard lock(serving.mu);
    serving.sampler = nullptr;
    serving.plugins = nullptr;
    serving.remediation = nullptr;
  }
  if (mig_manager) mig_manager->stop();
  if (remediation) remediation->stop();
  // Each side waits up to one NVML event timeout for its watcher: stop them side by side.
  std::thread sampler_stop([&] {
    if (sampler) sampler->stop();
  });
  if (plugins) plugins->stop();
  if (dra) dra->stop();
  if (slices) slices->stop();
  sampler_stop.join();
  if (uninstall.valid()) {
    const auto verdict = uninstall.get();
    if (verdict.uninstall) {
      log::info("uninstall: " + verdict.reason + ": removing the node labels");
      plugins->remove_labels();
      remove_node_annotation(*api.shutdown_client, api.view->node_name(), k8s::kAnnotationNodeGpus);
    } else {
      log::info("node labels kept: " + verdict.reason);
    }
  }
  return status;
}

}  // namespace kgpu::agent
