// `kgpu scheduler`: the extender's HTTP endpoints, fed by informers on nodes and pods, with
// leader election so that replicas never decide at once.
//
// Endpoints (POST, JSON as kube-scheduler sends it): /filter, /prioritize, /bind, /preempt.
// GET /metrics (Prometheus), /healthz (the process answers), /readyz (200 only on the leader with
// both informers synced: a Service in front of the replicas then reaches the leader only).
// A replica that is not the leader answers the verbs with 503 and the leader's name.
//
// Serving (common/http_server.h): one event-driven thread holds every connection, so idle and slow
// clients cost a descriptor, never a worker; the verbs, /metrics and /debug run on `threads` workers
// with at most `max_queued` requests waiting (beyond: 503 with Retry-After at once); /healthz and
// /readyz are answered by the serving thread itself, also while every worker is busy. A connection
// silent for `idle_timeout` is closed. A body beyond kMaxExtenderBody is refused (413).
//
// Threads: informers (2, and 3 more for DRA), the leader elector (1), the HTTP server (1 + `threads`),
// the MIG planning round and the gang admission round (1 each, when on), the caller's thread
// waiting for `stop`.
#pragma once

#include <atomic>
#include <chrono>
#include <string>

#include "apiclient/config.h"
#include "scheduler/scheduler.h"

namespace kgpu::scheduler {

struct ServeOptions {
  std::string address = ":8888";            // [host]:port; port 0: one the system picks (logged)
  std::string tls_cert_file, tls_key_file;  // both set: HTTPS (the extender's enableHTTPS)
  size_t threads = 8;
  unsigned max_queued = 64;
  unsigned max_connections = 4096;
  std::chrono::seconds idle_timeout{30};
  SchedulerOptions scheduler;
  kube::LoadOptions kube;
  // The extender binds every GPU pod itself (kube-scheduler's own 50 QPS does not cover them):
  // 500/s leaves room above kube-scheduler's 180 pods/s for events and the Lease.
  double kube_qps = 500;
  int kube_burst = 1000;
  bool leader_elect = true;
  std::string lease_namespace = "kube-system";
  std::string lease_name = "kgpu-scheduler";
  std::string identity;  // default: hostname + "_" + a random suffix
  std::chrono::milliseconds lease_duration{15'000}, renew_deadline{10'000}, retry_period{2'000};
  std::chrono::milliseconds sync_timeout{120'000};
  // Allocate the DRA ResourceClaims of the pods kgpu places: informers on resourceslices,
  // deviceclasses and resourceclaims (resource.k8s.io/v1), part of readiness.
  bool dra_claims = true;
  // MIG planning (scheduler/mig_planning.h): every this long the leader plans the MIG nodes and
  // labels them. 0: off. `mig_plan_config_file` empty: NVIDIA's default config names.
  std::chrono::milliseconds mig_plan_interval{0};
  std::string mig_plan_config_file;
  // Gang admission (scheduler/gang_admission.h): rounds every `gang_interval` on the leader; a
  // reservation not bound whole within `gang_timeout` is released. 0 interval: off.
  std::chrono::milliseconds gang_interval{500};
  std::chrono::milliseconds gang_timeout{60'000};
  // Quota queues (scheduler/queue_admission.h): the ConfigMap "<namespace>/<name>" holding
  // queues.yaml; empty: off. Rounds run with the gang rounds, before them.
  std::string queue_config;
};

// Runs until `stop` is set (or SIGINT/SIGTERM when null). Returns the exit status.
int run_scheduler(const ServeOptions& options, std::atomic<bool>* stop = nullptr);

}  // namespace kgpu::scheduler
