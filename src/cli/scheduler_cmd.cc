#include "cli/scheduler_cmd.h"

#include <fmt/format.h>

#include "common/log.h"
#include "framework/framework.h"
#include "scheduler/server.h"

namespace kgpu::cli {

namespace {

struct SchedulerFlags {
  scheduler::ServeOptions serve;
  std::string tie_break = "first";
  long long assume_ttl_ms = 60'000, admission_wait_ms = 30'000, workload_refresh_ms = 60'000;
  std::string log_level = "info", log_format = "text";
};

SchedulerFlags& scheduler_flags() {
  static SchedulerFlags f;
  return f;
}

}  // namespace

CLI::App* add_scheduler_command(CLI::App& app) {
  auto& f = scheduler_flags();
  auto* cmd = app.add_subcommand(
      "scheduler", "Run the GPU scheduler: a kube-scheduler extender that picks node and GPUs (docs/scheduler.md)");
  cmd->add_option("-a,--address", f.serve.address, "Address to serve the extender verbs and /metrics on ([host]:port)")
      ->capture_default_str();
  cmd->add_option("--tls-cert-file", f.serve.tls_cert_file, "Serve HTTPS with this certificate (PEM)");
  cmd->add_option("--tls-private-key-file", f.serve.tls_key_file, "The certificate's key (PEM)");
  std::string policies;
  for (const auto& [name, factory] : sched::policy_registry()) policies += (policies.empty() ? "" : ", ") + name;
  cmd->add_option("--policy", f.serve.scheduler.policy, "Placement policy: " + policies)->capture_default_str();
  cmd->add_option("--seed", f.serve.scheduler.seed, "Seed of the policies' random choices")->capture_default_str();
  cmd->add_option("--tie-break", f.tie_break, "Equal best nodes: first (in name order) or random")
      ->check(CLI::IsMember({"first", "random"}))
      ->capture_default_str();
  cmd->add_option("--kubeconfig", f.serve.kube.kubeconfig, "Kubeconfig file (default: $KUBECONFIG, ~/.kube/config, in-cluster)");
  cmd->add_option("--context", f.serve.kube.context, "Kubeconfig context");
  cmd->add_option("--kube-api-qps", f.serve.kube_qps, "Requests per second to the API server")->capture_default_str();
  cmd->add_option("--kube-api-burst", f.serve.kube_burst, "Burst of requests to the API server")->capture_default_str();
  cmd->add_option("--leader-elect", f.serve.leader_elect, "Elect a leader among replicas with a Lease")
      ->capture_default_str();
  cmd->add_option("--leader-elect-resource-namespace", f.serve.lease_namespace, "Namespace of the Lease")
      ->capture_default_str();
  cmd->add_option("--leader-elect-resource-name", f.serve.lease_name, "Name of the Lease")->capture_default_str();
  cmd->add_option("--identity", f.serve.identity, "This replica's name in the Lease (default: hostname_random)");
  cmd->add_option("--assume-ttl-ms", f.assume_ttl_ms, "Forget a filter choice not bound within this long")
      ->check(CLI::Range(100LL, 3'600'000LL))
      ->capture_default_str();
  cmd->add_option("--serialize-admission", f.serve.scheduler.serialize_admission,
                  "Hold a pod back while its node admits a pod with an equal GPU request (see docs)")
      ->capture_default_str();
  cmd->add_option("--admission-wait-ms", f.admission_wait_ms, "Longest a node is considered still admitting a pod")
      ->check(CLI::Range(0LL, 3'600'000LL))
      ->capture_default_str();
  cmd->add_option("--workload-refresh-ms", f.workload_refresh_ms, "How often FGD's target workload is recomputed")
      ->check(CLI::Range(100LL, 86'400'000LL))
      ->capture_default_str();
  cmd->add_option("--dra", f.serve.dra_claims,
                  "Allocate the DRA ResourceClaims of the pods kgpu places (watches resourceslices, deviceclasses, "
                  "resourceclaims)")
      ->capture_default_str();
  cmd->add_option_function<int64_t>(
         "--mig-plan-interval-ms", [&f](int64_t ms) { f.serve.mig_plan_interval = std::chrono::milliseconds(ms); },
         "MIG planning: every this long the leader labels MIG nodes nvidia.com/mig.config where a config serves "
         "pending MIG requests without evicting (docs/mig.md); 0: off")
      ->check(CLI::Range(int64_t{0}, int64_t{86'400'000}))
      ->default_str("0");
  cmd->add_option_function<int64_t>(
         "--gang-interval-ms", [&f](int64_t ms) { f.serve.gang_interval = std::chrono::milliseconds(ms); },
         "Gang admission: how often the leader admits gangs (pods of a PodGroup or Kueue pod group, docs/gangs.md); 0: off")
      ->check(CLI::Range(int64_t{0}, int64_t{3'600'000}))
      ->default_str("500");
  cmd->add_option_function<int64_t>(
         "--gang-timeout-ms", [&f](int64_t ms) { f.serve.gang_timeout = std::chrono::milliseconds(ms); },
         "Gang admission: a gang reserved but not placed whole within this long is released (its placed members "
         "evicted)")
      ->check(CLI::Range(int64_t{1000}, int64_t{86'400'000}))
      ->default_str("60000");
  cmd->add_option("--queue-config", f.serve.queue_config,
                  "Quota queues: the ConfigMap [NAMESPACE/]NAME whose queues.yaml defines them (docs/queues.md); "
                  "empty: off (its rounds run with the gang rounds: needs --gang-interval-ms > 0)");
  cmd->add_option("--mig-plan-config-file", f.serve.mig_plan_config_file,
                  "MIG planning: the mig-parted v1 config whose names it chooses (default: NVIDIA's default names)");
  cmd->add_option("--threads", f.serve.threads, "HTTP worker threads (the verbs, /metrics)")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  cmd->add_option("--max-queued", f.serve.max_queued,
                  "Requests that may wait for a busy worker; beyond, 503 with Retry-After at once")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  cmd->add_option("--max-connections", f.serve.max_connections,
                  "Open connections served; a request on one beyond is answered 503 and closed")
      ->check(CLI::Range(16, 1000000))
      ->capture_default_str();
  cmd->add_option_function<int>(
         "--idle-timeout", [&f](int s) { f.serve.idle_timeout = std::chrono::seconds(s); },
         "Seconds a connection may stay silent (also within a request's headers or body) before it is closed")
      ->check(CLI::Range(1, 3600))
      ->default_str("30");
  cmd->add_option("--log-level", f.log_level, "Lowest level logged: debug, info, warn or error")
      ->envname("KGPU_LOG_LEVEL")
      ->capture_default_str();
  cmd->add_option("--log-format", f.log_format, "Log lines as text (key=value) or json")
      ->envname("KGPU_LOG_FORMAT")
      ->capture_default_str();
  return cmd;
}

int run_scheduler_command() {
  auto& f = scheduler_flags();
  const auto level = log::parse_level(f.log_level);
  const auto format = log::parse_format(f.log_format);
  if (!level || !format) {
    fmt::print(stderr, "kgpu scheduler: --log-{}: {}\n", level ? "format" : "level",
               (level ? format.error() : level.error()).message);
    return 2;
  }
  log::configure(*level, *format);
  if (!sched::policy_registry().contains(f.serve.scheduler.policy)) {
    fmt::print(stderr, "kgpu scheduler: --policy: unknown policy \"{}\"\n", f.serve.scheduler.policy);
    return 2;
  }
  f.serve.scheduler.tie_break = f.tie_break == "first" ? sched::TieBreak::kFirst : sched::TieBreak::kRandom;
  f.serve.scheduler.assume_ttl = std::chrono::milliseconds(f.assume_ttl_ms);
  f.serve.scheduler.admission_wait = std::chrono::milliseconds(f.admission_wait_ms);
  f.serve.scheduler.workload_refresh = std::chrono::milliseconds(f.workload_refresh_ms);
  return scheduler::run_scheduler(f.serve);
}

}  // namespace kgpu::cli
