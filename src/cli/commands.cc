#include "cli/commands.h"

#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <iostream>
#include <mutex>
#include <thread>

#include "agent/agent.h"
#include "gpu/dcgm/library.h"
#include "cli/lint_cmd.h"
#include "common/log.h"
#include "gpu/node.h"
#include "gpu/report.h"
#include "cli/doctor_cmd.h"
#include "cli/report_cmd.h"
#include "cli/mig_cmd.h"
#include "cli/validate_cmd.h"
#include "cli/scheduler_cmd.h"
#include "cli/top_cmd.h"
#include "sim/mig_eval.h"
#include "sim/queue_eval.h"
#include "sim/report.h"
#include "sim/trace.h"

namespace kgpu::cli {

namespace {

struct GlobalOptions {
  std::string nvml_library;
};

Result<std::unique_ptr<gpu::NodeGpus>> open_node(const GlobalOptions& g) {
  return gpu::NodeGpus::open(nvml::resolve_library_path(g.nvml_library));
}

int report(const Error& e) {
  fmt::print(stderr, "kgpu: {}\n", e.message);
  return 1;
}

int cmd_inventory(const GlobalOptions& g, bool as_json) {
  auto node = open_node(g);
  if (!node) return report(node.error());
  auto inv = (*node)->inventory();
  if (!inv) return report(inv.error());
  if (as_json) {
    std::cout << gpu::to_json(*inv).dump(2) << "\n";
  } else {
    std::cout << gpu::inventory_table(*inv);
  }
  return 0;
}

int cmd_telemetry(const GlobalOptions& g, bool as_json, int samples, int interval_ms) {
  auto node = open_node(g);
  if (!node) return report(node.error());
  std::vector<gpu::Telemetry> ts;
  for (int i = 0; i < samples; ++i) {
    if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(interval_ms));
    ts = (*node)->telemetry();
  }
  if (as_json) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& t : ts) j.push_back(gpu::to_json(t));
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << gpu::telemetry_table(ts);
  }
  return 0;
}

int cmd_processes(const GlobalOptions& g, bool as_json) {
  auto node = open_node(g);
  if (!node) return report(node.error());
  auto count = (*node)->device_count();
  if (!count) return report(count.error());
  nlohmann::json j = nlohmann::json::array();
  int status = 0;
  for (unsigned i = 0; i < *count; ++i) {
    auto ps = (*node)->processes(i);
    if (!ps) {
      fmt::print(stderr, "kgpu: {}\n", ps.error().message);
      status = 1;
      continue;
    }
    for (const auto& p : *ps) {
      if (as_json) {
        auto pj = gpu::to_json(p);
        pj["gpu"] = i;
        j.push_back(std::move(pj));
      } else {
        std::cout << fmt::format("GPU {}  pid {:>8}  {:>8} MiB{}\n", i, p.pid,
                                 p.used_memory_bytes ? fmt::format("{}", *p.used_memory_bytes >> 20) : "-",
                                 p.gpu_instance_id ? fmt::format("  GI {}", *p.gpu_instance_id) : "");
      }
    }
  }
  if (as_json) std::cout << j.dump(2) << "\n";
  return status;
}

int cmd_events(const GlobalOptions& g, double duration_s, int max_count) {
  auto node = open_node(g);
  if (!node) return report(node.error());
  std::mutex mu;
  std::condition_variable cv;
  int seen = 0;
  auto watcher = gpu::EventWatcher::start(
      **node,
      [&](const gpu::Event& e) {
        std::lock_guard lock(mu);
        std::cout << gpu::to_json(e).dump() << std::endl;
        ++seen;
        cv.notify_all();
      },
      std::chrono::milliseconds(200));
  if (!watcher) return report(watcher.error());
  for (const auto& e : (*watcher)->registration_errors()) fmt::print(stderr, "kgpu: warning: {}\n", e);
  std::unique_lock lock(mu);
  cv.wait_for(lock, std::chrono::duration<double>(duration_s), [&] { return max_count > 0 && seen >= max_count; });
  lock.unlock();
  (*watcher)->stop();
  return 0;
}

struct SimOptions {
  std::string nodes, pods, mode = "fgd", output = "table", svg_path, csv_path;
  std::vector<std::string> policies = {"Random",  "DotProduct", "GpuClustering", "GpuPacking",
                                       "BestFit", "FGD",        "FGDPack"};
  int seeds = 10;
  uint64_t first_seed = 1;
  double target = 1.3;
  std::string tie_break = "first";
  std::string pending = "queue";
  double arrival_speedup = 1;
  int pod_copies = 1;
  bool mig_layouts = false;
  bool queue_eval = false;
  std::string tenants = "qos";
};

int cmd_sim_mig(const SimOptions& o, const std::vector<sched::NodeState>& nodes, const std::vector<sched::Pod>& pods) {
  const auto ev = sim::evaluate_mig_layouts(nodes, pods, {o.mode == "time", o.arrival_speedup, o.pod_copies});
  if (o.output == "json") {
    nlohmann::json layouts = nlohmann::json::array();
    for (const auto& l : ev.layouts) {
      layouts.push_back({{"layout", l.layout},
                         {"served", l.served},
                         {"pods", l.pods},
                         {"slicesUsed", l.slices_used},
                         {"peakSlices", l.peak_slices}});
    }
    fmt::print("{}\n", nlohmann::json{{"mode", o.mode == "time" ? "time" : "instant"},
                                      {"nodes", ev.nodes},
                                      {"gpus", ev.gpus},
                                      {"gpuPods", ev.gpu_pods},
                                      {"instancesAsked", ev.instances_asked},
                                      {"layouts", layouts},
                                      {"planSeconds", ev.plan_seconds},
                                      {"plannerChoices", ev.planner_choices}}
                                .dump(2));
    return 0;
  }
  const bool csv = o.output == "csv";
  if (!csv) {
    fmt::print("MIG layouts, {} mode: {} H100-80GB nodes, {} GPUs, {} GPU pods asking {} instances\n",
               ev.time_mode ? "time" : "instant", ev.nodes, ev.gpus, ev.gpu_pods, ev.instances_asked);
    fmt::print("{:<14} {:>12} {:>9} {:>22} {:>12}\n", "layout", "pods served", "of pods",
               ev.time_mode ? "compute slices (mean)" : "compute slices used", "peak");
  } else {
    fmt::print("layout,served,pods,slices_used,peak_slices\n");
  }
  for (const auto& l : ev.layouts) {
    const double share = l.pods ? 100.0 * static_cast<double>(l.served) / static_cast<double>(l.pods) : 0;
    if (csv) {
      fmt::print("{},{},{},{:.4f},{:.4f}\n", l.layout, l.served, l.pods, l.slices_used, l.peak_slices);
    } else {
      fmt::print("{:<14} {:>12} {:>8.1f}% {:>21.1f}% {:>11.1f}%\n", l.layout, l.served, share, 100 * l.slices_used,
                 100 * l.peak_slices);
    }
  }
  if (!csv) {
    std::string mix;
    for (const auto& [c, n] : ev.planner_choices) mix += fmt::format("{}{} x{}", mix.empty() ? "" : ", ", c, n);
    fmt::print("planner: {:.3f} s; chose {}\n", ev.plan_seconds, mix);
  }
  return 0;
}

int cmd_sim(const SimOptions& o) {
  for (const auto& p : o.policies) {
    if (!sched::policy_registry().contains(p)) {
      auto fw = sched::make_framework(p, {});  // for its message listing the known policies
      return report(fw.error());
    }
  }
  auto nodes = sim::load_nodes(o.nodes);
  if (!nodes) return report(nodes.error());
  std::vector<std::string> qos;  // --queue-eval's default tenants
  auto pods = sim::load_pods(o.pods, o.queue_eval ? &qos : nullptr);
  if (!pods) return report(pods.error());
  if (o.mig_layouts) return cmd_sim_mig(o, *nodes, *pods);
  if (o.queue_eval) {
    auto ev = sim::evaluate_queues(*nodes, *pods, qos, {o.tenants, o.arrival_speedup, o.pod_copies, o.first_seed});
    if (!ev) return report(ev.error());
    std::cout << (o.output == "json" ? sim::queue_eval_json(*ev) + "\n" : sim::queue_eval_table(*ev));
    return 0;
  }
  std::vector<sim::RunResult> runs;
  const int total = static_cast<int>(o.policies.size()) * o.seeds;
  int done = 0;
  for (const auto& policy : o.policies) {
    for (int k = 0; k < o.seeds; ++k) {
      sim::RunOptions ro;
      ro.policy = policy;
      ro.seed = o.first_seed + static_cast<uint64_t>(k);
      ro.target_arrived = o.target;
      ro.tie_break = o.tie_break == "first" ? sched::TieBreak::kFirst : sched::TieBreak::kRandom;
      ro.pending = o.pending == "drop" ? sim::Pending::kDrop : sim::Pending::kQueue;
      ro.arrival_speedup = o.arrival_speedup;
      ro.pod_copies = o.pod_copies;
      if (isatty(2))
        ro.progress = [&](double f) {
          fmt::print(stderr, "\r{} seed {}: {:3.0f}%  ({}/{} runs)", policy, ro.seed, 100 * f, done, total);
        };
      auto r = o.mode == "time" ? sim::run_time_driven(*nodes, *pods, ro) : sim::run_fgd_protocol(*nodes, *pods, ro);
      if (!r) return report(r.error());
      runs.push_back(std::move(*r));
      ++done;
    }
  }
  if (isatty(2)) fmt::print(stderr, "\r{:60}\r", "");
  auto summary = sim::summarize(runs);
  if (o.output == "csv") {
    std::cout << sim::csv(runs);
  } else if (o.output == "json") {
    std::cout << sim::json(summary, runs);
  } else {
    std::cout << sim::table(summary);
  }
  if (!o.csv_path.empty()) {
    std::ofstream out(o.csv_path);
    out << sim::csv(runs);
    if (!out) return report(Error{ErrorCode::kInvalidArgument, "cannot write " + o.csv_path});
  }
  if (!o.svg_path.empty()) {
    std::ofstream out(o.svg_path);
    out << sim::svg(summary, fmt::format("GPU allocation vs arrived demand ({})", o.pods));
    if (!out) return report(Error{ErrorCode::kInvalidArgument, "cannot write " + o.svg_path});
  }
  return 0;
}

}  // namespace

int run(int argc, char** argv) {
  CLI::App app{"kgpu: the GPU layer of Kubernetes (scheduling, sharing and monitoring of NVIDIA GPUs)"};
  // Installed as kubectl-gpu, kubectl runs us for `kubectl gpu ...`: say so in usage lines.
  if (argc > 0 && std::string_view(argv[0]).ends_with("kubectl-gpu")) app.name("kubectl gpu");
  // "kgpu <version>" on stdout, exit 0; the version is the CMake project's (the image tag).
  app.set_version_flag("--version", "kgpu " KGPU_VERSION);
  app.require_subcommand(1);
  app.fallthrough();  // global options are accepted after the subcommand too
  GlobalOptions g;
  app.add_option("--nvml-library", g.nvml_library,
                 "NVML library to load (default: $KGPU_NVML_LIBRARY, else libnvidia-ml.so.1)")
      ->envname("")
      ->type_name("PATH");

  bool json = false;
  auto* inventory = app.add_subcommand("inventory", "List the node's GPUs, MIG devices and interconnect");
  inventory->add_flag("--json", json, "Print JSON (fields documented in docs/inventory-json.md)");

  int samples = 2, interval_ms = 200;
  auto* telemetry = app.add_subcommand("telemetry", "Read every GPU's telemetry once");
  telemetry->add_flag("--json", json, "Print JSON");
  telemetry->add_option("--samples", samples, "Samples to take (GPM ratios need two)")->check(CLI::Range(1, 1000));
  telemetry->add_option("--interval-ms", interval_ms, "Time between samples")->check(CLI::Range(0, 600000));

  auto* processes = app.add_subcommand("processes", "List the compute processes on every GPU");
  processes->add_flag("--json", json, "Print JSON");

  double duration_s = 10;
  int max_count = 0;
  auto* events = app.add_subcommand("events", "Print XID and ECC events as JSON lines");
  events->add_option("--duration", duration_s, "Seconds to watch")->check(CLI::Range(0.0, 1e9));
  events->add_option("--count", max_count, "Stop after this many events (0: no limit)")->check(CLI::NonNegativeNumber);

  agent::AgentOptions ao;
  long long collect_ms = 5000, pr_interval_ms = 10000;
  auto* agent_cmd =
      app.add_subcommand("agent", "Run the node agent: GPU metrics on /metrics (dcgm-exporter compatible)");
  agent_cmd->add_option("-a,--address", ao.address, "Address to serve /metrics and /health on ([host]:port)")
      ->envname("DCGM_EXPORTER_LISTEN")
      ->capture_default_str();
  agent_cmd
      ->add_option(
          "--web-config-file", ao.http.web_config_file,
          "TLS and basic-auth config of the metrics port, Prometheus exporter-toolkit format (docs/metrics.md)")
      ->envname("DCGM_EXPORTER_WEB_CONFIG_FILE")
      ->type_name("PATH");
  std::string log_level = "info", log_format = "text";
  agent_cmd->add_option("--log-level", log_level, "Lowest level logged: debug, info, warn or error")
      ->envname("KGPU_LOG_LEVEL")
      ->capture_default_str();
  agent_cmd->add_option("--log-format", log_format, "Log lines as text (key=value) or json")
      ->envname("KGPU_LOG_FORMAT")
      ->capture_default_str();
  // A duration flag in milliseconds, within [min, max].
  auto ms_option = [&](const std::string& name, long long& value, const std::string& help, long long min,
                       long long max = 3600000LL) {
    return agent_cmd->add_option(name, value, help)->check(CLI::Range(min, max))->capture_default_str();
  };
  agent_cmd->add_option("-c,--collect-interval", collect_ms, "Collection interval in milliseconds")
      ->envname("DCGM_EXPORTER_INTERVAL")
      ->check(CLI::Range(100LL, 3600000LL))
      ->capture_default_str();
  agent_cmd->add_option("-f,--collectors", ao.counters_file, "Counters file in dcgm-exporter's CSV format")
      ->envname("DCGM_EXPORTER_COLLECTORS");
  // DCGM for profiling fields NVML lacks before Hopper: dcgm-exporter's -r and its variable.
  agent_cmd
      ->add_option("-r,--remote-hostengine-info", ao.dcgm.remote,
                   "Read DCGM profiling fields from the host engine at <HOST>:<PORT> (IPv6: [<ADDR>]:<PORT>) or "
                   "unix:///<socket> (default: DCGM embedded in the agent, when libdcgm is installed)")
      ->envname("DCGM_REMOTE_HOSTENGINE_INFO");
  agent_cmd->add_option("--dcgm-library", ao.dcgm.library,
                        "DCGM library to load (default: $KGPU_DCGM_LIBRARY, else libdcgm.so.4, then libdcgm.so.3)")
      ->type_name("PATH");
  std::string dcgm_mode = "auto";
  agent_cmd
      ->add_option("--dcgm", dcgm_mode,
                   "auto: read profiling fields through DCGM where NVML lacks them and DCGM is there; off: never "
                   "load DCGM")
      ->envname("KGPU_DCGM")
      ->check(CLI::IsMember({"auto", "off"}))
      ->capture_default_str();
  agent_cmd
      ->add_option("--pod-resources-socket", ao.sampler.pod_resources_socket,
                   "Kubelet PodResources socket (empty: no pod attribution)")
      ->capture_default_str();
  ms_option("--pod-resources-interval", pr_interval_ms, "PodResources poll interval in milliseconds", 100);
  agent_cmd->add_option("--proc-root", ao.sampler.proc_root, "Where /proc is (processes of shared GPUs)")
      ->capture_default_str();
  agent_cmd
      ->add_option("--container-log-dir", ao.sampler.container_log_dir,
                   "The kubelet's container log symlinks (container id -> pod, namespace, container)")
      ->capture_default_str();
  agent_cmd->add_option("--pod-log-dir", ao.sampler.pod_log_dir, "The kubelet's pod log directories (pod UID -> name)")
      ->capture_default_str();
  bool kubernetes = true;
  agent_cmd
      ->add_flag("-k,--kubernetes", kubernetes,
                 "Accepted for dcgm-exporter compatibility: pod attribution is on whenever the PodResources "
                 "socket is reachable")
      ->envname("DCGM_EXPORTER_KUBERNETES");
  agent_cmd->add_option("--gpu-resource", ao.sampler.extra_resources,
                        "Extra extended-resource names whose devices are GPUs (renamed shared resources)")
      ->envname("NVIDIA_RESOURCE_NAMES")
      ->delimiter(',');
  // dcgm-exporter's exporter options, under its flag and variable names (docs/metrics.md).
  auto& sx = ao.sampler;
  long long xid_window_ms = 300000, clock_window_ms = 300000;
  ms_option("-x,--xid-count-window-size", xid_window_ms, "DCGM_EXP_XID_ERRORS_COUNT's window in milliseconds", 1,
            86400000LL)
      ->envname("DCGM_EXPORTER_XID_COUNT_WINDOW_SIZE");
  ms_option("--clock-events-count-window-size", clock_window_ms,
            "DCGM_EXP_CLOCK_EVENTS_COUNT's window in milliseconds", 1, 86400000LL)
      ->envname("DCGM_EXPORTER_CLOCK_EVENTS_COUNT_WINDOW_SIZE");
  agent_cmd->add_flag("-o,--use-old-namespace", sx.style.old_namespace, "dcgm-exporter 1.x label names")
      ->envname("DCGM_EXPORTER_USE_OLD_NAMESPACE");
  bool no_hostname = false;
  agent_cmd->add_flag("-n,--no-hostname", no_hostname, "No Hostname label")->envname("DCGM_EXPORTER_NO_HOSTNAME");
  agent_cmd->add_flag("--kubernetes-enable-pod-uid", sx.pod_uid, "A pod_uid label on attributed series")
      ->envname("DCGM_EXPORTER_KUBERNETES_ENABLE_POD_UID");
  agent_cmd->add_flag("--kubernetes-enable-pod-labels", sx.pod_labels, "The pods' labels on attributed series")
      ->envname("DCGM_EXPORTER_KUBERNETES_ENABLE_POD_LABELS");
  agent_cmd
      ->add_option("--kubernetes-pod-label-allowlist-regex", sx.pod_label_allowlist,
                   "Only pod labels whose names match one of these regexes (comma-separated)")
      ->envname("DCGM_EXPORTER_KUBERNETES_POD_LABEL_ALLOWLIST_REGEX")
      ->delimiter(',');
  agent_cmd->add_option("--kubernetes-gpu-id-type", sx.gpu_id_type, "How PodResources names GPUs: uid or device-name")
      ->envname("DCGM_EXPORTER_KUBERNETES_GPU_ID_TYPE")
      ->capture_default_str();
  agent_cmd->add_flag("--mig-parent-series", sx.mig_parent_series,
                      "Also export a MIG-enabled GPU's own series (dcgm-exporter exports only its instances')");

  // Device plugin and labels: NVIDIA k8s-device-plugin / GFD flag and variable names where they exist.
  auto& dp = ao.plugins;
  auto& ov = dp.overrides;
  std::string health_recovery = "10m";
  agent_cmd->add_option("--device-plugin", ao.device_plugin, "Serve the kubelet device plugins and write node labels")
      ->capture_default_str();
  // DRA (docs/dra.md): the GPUs through NVIDIA's DRA driver interface instead of the device plugins.
  agent_cmd->add_option("--gpu-api", ao.gpu_api,
                        "device-plugin or dra (the node label kgpu.io/gpu-api wins); never both for the same GPUs")
      ->envname("KGPU_GPU_API")
      ->capture_default_str();
  agent_cmd->add_option("--dra-driver-name", ao.dra.driver_name, "DRA driver name")->capture_default_str();
  agent_cmd->add_option("--dra-registry-dir", ao.dra.dirs.registry_dir, "The kubelet's plugin registration directory")
      ->capture_default_str();
  agent_cmd->add_option("--dra-plugins-dir", ao.dra.dirs.plugins_dir,
                        "The kubelet's plugins directory (the DRA socket and checkpoint go in <dir>/<driver>)")
      ->capture_default_str();
  agent_cmd
      ->add_flag("--dra-dynamic-mig", ao.dra.dynamic_mig,
                 "DRA: publish GPUs in MIG mode as partitionable devices; a claim's MIG instance is created when it is "
                 "prepared and destroyed when unprepared (docs/dra.md, Dynamic MIG)")
      ->envname("KGPU_DRA_DYNAMIC_MIG");
  agent_cmd->add_option("--device-plugin-dir", dp.plugin_dir, "The kubelet's device-plugin directory")
      ->envname("KGPU_DEVICE_PLUGIN_DIR")
      ->capture_default_str();
  agent_cmd->add_option("--config-file", dp.config_file, "Sharing config file (NVIDIA device plugin format, version v1)")
      ->envname("CONFIG_FILE");
  // Several named configs (NVIDIA's config.map, mounted as a directory), one chosen per node.
  std::string config_fallback = "named,single";
  agent_cmd
      ->add_option("--config-dir", dp.config_dir.dir,
                   "Directory of named sharing configs, one chosen per node by its label (wins over --config-file)")
      ->envname("CONFIG_FILE_SRCDIR");
  agent_cmd->add_option("--config-default", dp.config_dir.default_name, "Config used when the node has no label")
      ->envname("DEFAULT_CONFIG");
  agent_cmd->add_option("--config-node-label", dp.config_dir.node_label, "Node label naming the node's config")
      ->envname("NODE_LABEL")
      ->capture_default_str();
  agent_cmd
      ->add_option("--config-fallback", config_fallback,
                   "Without label or default: named (a config named \"default\"), single (the only one), empty (the "
                   "built-in defaults), tried in order")
      ->envname("FALLBACK_STRATEGIES")
      ->capture_default_str();
  agent_cmd->add_option("--mig-strategy", ov.mig_strategy, "none, single or mixed")->envname("MIG_STRATEGY");
  agent_cmd->add_flag("--fail-on-init-error{true}", ov.fail_on_init_error, "Exit when the GPUs cannot be read or planned (default true)")->envname("FAIL_ON_INIT_ERROR");
  agent_cmd->add_option("--nvidia-driver-root", ov.nvidia_driver_root, "Root of the driver installation on the host")
      ->envname("NVIDIA_DRIVER_ROOT");
  agent_cmd->add_option("--dev-root", ov.nvidia_dev_root, "Root of /dev on the host (default: the driver root)")
      ->envname("NVIDIA_DEV_ROOT");
  agent_cmd->add_option("--mps-root", ov.mps_root, "Host directory for MPS pipes and shm")->envname("MPS_ROOT");
  agent_cmd->add_flag("--pass-device-specs{true}", ov.pass_device_specs, "Add /dev/nvidia* DeviceSpecs to Allocate")
      ->envname("PASS_DEVICE_SPECS");
  agent_cmd
      ->add_option("--device-list-strategy", ov.device_list_strategy,
                   "envvar, volume-mounts, cdi-annotations, cdi-cri (comma-separated; default cdi-cri)")
      ->envname("DEVICE_LIST_STRATEGY");
  agent_cmd->add_option("--device-id-strategy", ov.device_id_strategy, "uuid or index")->envname("DEVICE_ID_STRATEGY");
  agent_cmd->add_option("--cdi-annotation-prefix", ov.cdi_annotation_prefix, "Prefix of cdi-annotations keys")
      ->envname("CDI_ANNOTATION_PREFIX");
  agent_cmd->add_option("--container-driver-root", ov.container_driver_root,
                        "Where the host's driver root is mounted in this container")
      ->envname("CONTAINER_DRIVER_ROOT");
  agent_cmd->add_option("--shared-devices-allocation-policy", ov.shared_devices_allocation_policy,
                        "distributed or packed (replicas and MIG devices)")
      ->envname("SHARED_DEVICES_ALLOCATION_POLICY");
  agent_cmd->add_flag("--gds-enabled{true}", ov.gds_enabled, "Give GPU containers GPUDirect Storage (NVIDIA_GDS, CDI gds=all)")
      ->envname("GDS_ENABLED");
  agent_cmd->add_flag("--mofed-enabled{true}", ov.mofed_enabled, "Give GPU containers the InfiniBand devices (NVIDIA_MOFED, CDI mofed=all)")
      ->envname("MOFED_ENABLED");
  agent_cmd->add_flag("--gdrcopy-enabled{true}", ov.gdrcopy_enabled, "Give GPU containers GDRCopy (NVIDIA_GDRCOPY, CDI gdrcopy=all)")
      ->envname("GDRCOPY_ENABLED");
  agent_cmd->add_option("--imex-channel-ids", ov.imex_channel_ids, "IMEX channels every GPU container gets ([] or 0)")
      ->envname("IMEX_CHANNEL_IDS");
  agent_cmd->add_flag("--imex-required{true}", ov.imex_required, "Fail when a configured IMEX channel does not exist")
      ->envname("IMEX_REQUIRED");
  agent_cmd->add_option("--cdi-root", dp.cdi_root, "Where to write the CDI spec (empty: do not write)")
      ->envname("KGPU_CDI_ROOT")
      ->capture_default_str();
  agent_cmd
      ->add_option("--health-recovery", health_recovery,
                   "Healthy again after this long without a fault (0: never, as NVIDIA's plugin)")
      ->envname("KGPU_HEALTH_RECOVERY")
      ->capture_default_str();
  long long nvml_retry_ms = 30000;
  ms_option("--nvml-retry-interval", nvml_retry_ms,
            "Milliseconds between NVML initialisation attempts while it fails (failOnInitError false)", 100);
  long long health_interval_ms = 5000;
  ms_option("--health-interval", health_interval_ms, "Milliseconds between GPU health probes", 50);
  agent_cmd->add_option("--labels", dp.labels, "Write the GPU Feature Discovery labels file")->capture_default_str();
  agent_cmd->add_option("--output-file", ov.gfd_output_file, "NFD features.d file for the labels")
      ->envname("GFD_OUTPUT_FILE");
  agent_cmd->add_option("--sleep-interval", ov.gfd_sleep_interval, "Time between label refreshes (60s)")
      ->envname("GFD_SLEEP_INTERVAL");
  agent_cmd->add_flag("--no-timestamp{true}", ov.gfd_no_timestamp, "No nvidia.com/gfd.timestamp label")
      ->envname("GFD_NO_TIMESTAMP");
  agent_cmd->add_flag("--oneshot{true}", ov.gfd_oneshot, "Write the labels once (at start and on config changes), not every interval")->envname("GFD_ONESHOT");
  agent_cmd->add_option("--machine-type-file", ov.gfd_machine_type_file, "Source of nvidia.com/gpu.machine")
      ->envname("GFD_MACHINE_TYPE_FILE");
  // API access: honour kgpu scheduler's GPU assignments (docs/scheduler.md, "The node honours the choice").
  agent_cmd->add_option("--kubeconfig", ao.kubeconfig,
                        "Kubeconfig for API access (inside a pod the service account is used without it)");
  agent_cmd->add_option("--node-name", ao.node_name, "This node's name, for API access")->envname("NODE_NAME");
  agent_cmd
      ->add_option("--pod-name", ao.pod_name,
                   "This agent's pod (downward API), to tell an uninstall from a restart on SIGTERM")
      ->envname("POD_NAME");
  agent_cmd->add_option("--pod-namespace", ao.pod_namespace, "This agent's namespace (downward API)")
      ->envname("POD_NAMESPACE");
  // GPU fault remediation (docs/remediation.md).
  std::string remediation_mode = "off", flap = "3/1h";
  agent_cmd->add_option("--remediation", remediation_mode,
                        "GPU remediation: off (conditions and Events only), dry-run (also says what it would do), on")
      ->envname("KGPU_REMEDIATION")
      ->capture_default_str();
  agent_cmd->add_option("--fault-actions", ao.remediation.fault_actions_file,
                        "A fault action file whose entries replace the built-in table's (deploy/health/xid-actions.yaml)")
      ->envname("KGPU_FAULT_ACTIONS");
  agent_cmd->add_option("--remediation-max-unavailable", ao.remediation.max_unavailable,
                        "GPUs under remediation at once, cluster-wide (the ConfigMap kgpu-remediation's maxUnavailable wins)")
      ->capture_default_str();
  agent_cmd->add_option("--remediation-namespace", ao.remediation.budget_namespace,
                        "Namespace of the kgpu-remediation budget ConfigMap (default: the agent's)");
  agent_cmd->add_option("--remediation-flap", flap,
                        "N/DURATION: N faults within DURATION quarantine a GPU instead of cycling it")
      ->capture_default_str();
  agent_cmd->add_option("--remediation-evict", ao.remediation.policy.evict,
                        "Evict the pods of a GPU being remediated (false: wait for them to leave)")
      ->capture_default_str();
  agent_cmd->add_option("--boot-id-file", ao.remediation.boot_id_file,
                        "The kernel's boot ID (a reboot-class remediation resumes when it changes)")
      ->capture_default_str();
  // The MIG manager (docs/mig.md).
  agent_cmd->add_option("--mig-manager", ao.mig_manager,
                        "Apply the MIG layout the node label nvidia.com/mig.config names (NVIDIA MIG Manager's contract)")
      ->capture_default_str();
  agent_cmd->add_option("--mig-config-file", ao.mig.config_file,
                        "mig-parted v1 config file (default: NVIDIA's default config names for the node's GPUs)");
  agent_cmd->add_option("--mig-evict", ao.mig.evict,
                        "Evict the pods of a GPU whose MIG layout changes (false: wait for them to leave)")
      ->capture_default_str();
  agent_cmd->add_option("--mig-lock-file", ao.mig.lock_file, "Held while a MIG change runs (one changer per host)")
      ->capture_default_str();
  long long mig_drain_ms = 300000;
  ms_option("--mig-drain-timeout", mig_drain_ms, "Milliseconds a MIG change waits for the GPUs' pods to leave", 100);
  long long remediation_interval_ms = 1000;
  ms_option("--remediation-interval", remediation_interval_ms, "Milliseconds between remediation rounds", 50);
  long long report_interval_ms = 30000;
  ms_option("--node-report-interval", report_interval_ms,
            "Milliseconds between rebuilds of the node's kgpu.io/gpus annotation (with API access)", 50);
  long long allocation_grace_ms = 60000;
  ms_option("--allocation-grace", allocation_grace_ms,
            "Milliseconds an allocation is kept before the kubelet's PodResources lists its container", 0, 86400000LL);

  auto* lint_cmd = add_lint_command(app);

  SimOptions so;
  auto* sim_cmd = app.add_subcommand("sim", "Simulate scheduling policies on a cluster trace (Alibaba openb CSV)");
  sim_cmd->add_option("--nodes", so.nodes, "Node list CSV (sn,cpu_milli,memory_mib,gpu,model)")->required();
  sim_cmd->add_option("--pods", so.pods, "Pod list CSV (openb format, any variant)")->required();
  sim_cmd->add_option("--policy", so.policies, "Policies to run (repeatable)")->capture_default_str();
  sim_cmd->add_option("--seeds", so.seeds, "Seeds per policy")->check(CLI::Range(1, 1000))->capture_default_str();
  sim_cmd->add_option("--first-seed", so.first_seed, "First seed")->capture_default_str();
  sim_cmd->add_option("--mode", so.mode, "fgd (arrivals only, to --target of capacity) or time (creation/deletion)")
      ->check(CLI::IsMember({"fgd", "time"}))
      ->capture_default_str();
  sim_cmd->add_option("--target", so.target,
                      "Arrived GPU demand to stop at, as a fraction of capacity (fgd mode; time mode runs the trace)")
      ->check(CLI::Range(0.01, 10.0))
      ->capture_default_str();
  sim_cmd->add_option("--output", so.output, "table, csv or json")
      ->check(CLI::IsMember({"table", "csv", "json"}))
      ->capture_default_str();
  sim_cmd
      ->add_option("--tie-break", so.tie_break,
                   "Among equally scored nodes: random (kube-scheduler) or first (in a per-seed node order)")
      ->check(CLI::IsMember({"random", "first"}))
      ->capture_default_str();
  sim_cmd
      ->add_option("--pending", so.pending,
                   "Time mode, a pod that fits nowhere: queue (wait and retry as kube-scheduler) or drop")
      ->check(CLI::IsMember({"queue", "drop"}))
      ->capture_default_str();
  sim_cmd
      ->add_option("--arrival-speedup", so.arrival_speedup,
                   "Time mode: arrivals this many times as fast (creation times divided), lifetimes unchanged")
      ->check(CLI::Range(0.001, 1e6))
      ->capture_default_str();
  sim_cmd
      ->add_option("--pod-copies", so.pod_copies,
                   "Time mode: every trace pod arrives this many times (load x N, same arrival pattern)")
      ->check(CLI::Range(1, 10000))
      ->capture_default_str();
  sim_cmd->add_option("--csv", so.csv_path, "Also write every run as CSV to this file");
  sim_cmd->add_flag("--mig-layouts", so.mig_layouts,
                    "Compare MIG layouts instead (the planner, all-balanced, all-1g.10gb) on the trace mapped to H100 "
                    "MIG profiles; --mode fgd: every pod pending at once, --mode time: arrivals and departures "
                    "(docs/mig.md)");
  sim_cmd->add_flag("--queue-eval", so.queue_eval,
                    "Compare admission in time instead: pod by pod (FGDPack), gangs + quota queues (FGDPack), FIFO "
                    "MostAllocated; waiting, completion time, utilisation, tenant fairness (docs/queues.md)");
  sim_cmd->add_option("--tenants", so.tenants, "With --queue-eval: tenants by the qos column, or hash:<n> of the pod name")
      ->capture_default_str();
  sim_cmd->add_option("--svg", so.svg_path, "Write a plot of allocation vs arrived ratio per policy");

  auto* doctor_cmd = add_doctor_command(app);
  auto* scheduler_cmd = add_scheduler_command(app);
  auto* report_cmd = add_report_command(app);
  auto* validate_cmd = add_validate_command(app, g.nvml_library);
  auto* mig_cmd = add_mig_command(app, g.nvml_library);
  add_top_commands(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (*inventory) return cmd_inventory(g, json);
  if (*telemetry) return cmd_telemetry(g, json, samples, interval_ms);
  if (*processes) return cmd_processes(g, json);
  if (*events) return cmd_events(g, duration_s, max_count);
  if (*doctor_cmd) return run_doctor_command();
  if (*lint_cmd) return run_lint_command();
  if (*sim_cmd) return cmd_sim(so);
  if (*scheduler_cmd) return run_scheduler_command();
  if (*report_cmd) return run_report_command();
  if (*validate_cmd) return run_validate_command();
  if (*mig_cmd) return run_mig_command();
  if (auto rc = run_top_commands()) return *rc;
  if (*agent_cmd) {
    const auto level = log::parse_level(log_level);
    const auto format = log::parse_format(log_format);
    if (!level || !format) {
      fmt::print(stderr, "kgpu agent: --log-{}: {}\n", level ? "format" : "level",
                 (level ? format.error() : level.error()).message);
      return 2;
    }
    log::configure(*level, *format);
    // The same settings for code that reads them from the environment (the fake NVML's diagnostics).
    ::setenv("KGPU_LOG_LEVEL", log_level.c_str(), 1);
    ::setenv("KGPU_LOG_FORMAT", log_format.c_str(), 1);
    ao.nvml_library = g.nvml_library;
    ao.dcgm.enabled = dcgm_mode != "off";
    if (auto e = dcgm::parse_endpoint(ao.dcgm.remote); !e) {
      log::error(e.error().message);
      return 2;
    }
    ao.sampler.interval = std::chrono::milliseconds(collect_ms);
    ao.sampler.pod_resources_interval = std::chrono::milliseconds(pr_interval_ms);
    ao.plugins.proc_root = ao.sampler.proc_root;
    ao.plugins.health_interval = std::chrono::milliseconds(health_interval_ms);
    ao.plugins.report_interval = std::chrono::milliseconds(report_interval_ms);
    ao.plugins.allocation_grace = std::chrono::milliseconds(allocation_grace_ms);
    ao.nvml_retry = std::chrono::milliseconds(nvml_retry_ms);
    if (const char* v = std::getenv("DP_DISABLE_HEALTHCHECKS")) ao.plugins.disable_health_checks = v;
    if (const char* v = std::getenv("DP_ENABLE_HEALTHCHECKS")) ao.plugins.enable_health_checks = v;
    if (health_recovery == "0") {
      ao.plugins.health_recovery = std::chrono::milliseconds(0);
    } else if (auto d = sharing::parse_duration(health_recovery)) {
      ao.plugins.health_recovery = *d;
    } else {
      log::error("--health-recovery: " + d.error().message);
      return 2;
    }
    if (auto m = health::parse_mode(remediation_mode)) {
      ao.remediation.policy.mode = *m;
    } else {
      log::error(fmt::format("--remediation: '{}': off, dry-run or on", remediation_mode));
      return 2;
    }
    {
      const auto slash = flap.find('/');
      int n = 0;
      const auto [end, ec] = std::from_chars(flap.data(), flap.data() + std::min(slash, flap.size()), n);
      auto window = slash == std::string::npos ? std::nullopt : std::optional(sharing::parse_duration(flap.substr(slash + 1)));
      if (ec != std::errc() || end != flap.data() + slash || n < 1 || !window || !*window) {
        log::error(fmt::format("--remediation-flap: '{}': expected N/DURATION, e.g. 3/1h", flap));
        return 2;
      }
      ao.remediation.policy.flap_faults = n;
      ao.remediation.policy.flap_window = **window;
    }
    if (ao.remediation.max_unavailable < 0) {
      log::error("--remediation-max-unavailable: must not be negative");
      return 2;
    }
    ao.remediation.interval = std::chrono::milliseconds(remediation_interval_ms);
    ao.mig.drain_timeout = std::chrono::milliseconds(mig_drain_ms);
    if (auto f = agent::parse_config_fallbacks(config_fallback)) {
      ao.plugins.config_dir.fallbacks = std::move(*f);
    } else {
      log::error("--config-fallback: " + f.error().message);
      return 2;
    }
    if (ao.plugins.config_dir.node_label.empty()) {
      log::error("--config-node-label: must not be empty");
      return 2;
    }
    if (ao.gpu_api == "dra" && agent_cmd->count("--device-plugin") > 0 && ao.device_plugin) {
      log::error("--gpu-api=dra with --device-plugin=true: the agent serves one GPU API, never both for the same GPUs");
      return 2;
    }
    ao.sampler.xid_count_window = std::chrono::milliseconds(xid_window_ms);
    ao.sampler.clock_events_count_window = std::chrono::milliseconds(clock_window_ms);
    ao.sampler.style.hostname = !no_hostname;
    if (ao.sampler.gpu_id_type != "uid" && ao.sampler.gpu_id_type != "device-name") {
      log::warn(fmt::format("DCGM_EXPORTER_KUBERNETES_GPU_ID_TYPE (--kubernetes-gpu-id-type) '{}' is neither uid nor "
                            "device-name; using uid",
                            ao.sampler.gpu_id_type));
      ao.sampler.gpu_id_type = "uid";
    }
    // dcgm-exporter's Kubernetes options that kgpu does not provide: said once, never refused.
    for (const auto& [var, what] :
         {std::pair{"DCGM_EXPORTER_KUBERNETES_ENABLE_DRA",
                    "DRA claims are not mapped to series (dra_* labels); devices the kubelet lists are attributed"},
          std::pair{"KUBERNETES_VIRTUAL_GPUS",
                    "shared GPUs always get per-container DCGM_FI_DEV_GPU_UTIL and DCGM_FI_DEV_FB_USED series from "
                    "each container's own processes, and the GPU's series stay without pod labels"}}) {
      const char* v = std::getenv(var);
      if (v != nullptr && (std::string_view(v) == "true" || std::string_view(v) == "1")) {
        log::warn(fmt::format("{} is not honoured: {}", var, what));
      }
    }
    return agent::run_agent(ao);
  }
  return 2;
}

}  // namespace kgpu::cli
