#include "scheduler/server.h"

#include <unistd.h>

#include <csignal>
#include <random>
#include <thread>

#include "common/http_server.h"
#include "common/log.h"
#include "common/strings.h"
#include "apiclient/client.h"
#include "apiclient/events.h"
#include "apiclient/informer.h"
#include "apiclient/leader.h"
#include "gpu/mig_config.h"
#include "scheduler/gang_admission.h"
#include "scheduler/mig_planning.h"
#include "scheduler/queue_admission.h"

namespace kgpu::scheduler {

namespace {

std::atomic<bool> g_signal_stop{false};
void on_signal(int) { g_signal_stop = true; }

std::string default_identity() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) std::snprintf(host, sizeof host, "kgpu-scheduler");
  std::random_device rd;
  return fmt::format("{}_{:08x}", host, rd());
}

HttpResponse reply(int code, std::string body, const char* type = "application/json") {
  return {code, type, std::make_shared<const std::string>(std::move(body))};
}

// A verb's handler: a bug in it answers 500 with its text (kube-scheduler shows it) and is logged.
HttpServer::RequestHandler verb(std::function<HttpResponse(const HttpRequest&)> f) {
  return [f = std::move(f)](const HttpRequest& req) {
    try {
      return f(req);
    } catch (const std::exception& e) {
      log::error("internal error", {log::kv("path", req.path), log::kv("error", e.what())});
      return reply(500, nlohmann::json{{"Error", std::string("kgpu scheduler: internal error: ") + e.what()}}.dump());
    }
  };
}

bool node_name(std::string_view s) {
  return !s.empty() && s.size() <= 253 &&
         std::ranges::all_of(s, [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-'; });
}

}  // namespace

int run_scheduler(const ServeOptions& o, std::atomic<bool>* stop_flag) {
  std::atomic<bool>& stop = stop_flag != nullptr ? *stop_flag : g_signal_stop;
  if (stop_flag == nullptr) {
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
  }
  const auto address = parse_address(o.address);
  if (!address) {
    log::error(address.error().message);
    return 2;
  }
  const auto& [host, port] = *address;
  if (!o.queue_config.empty() && o.gang_interval.count() == 0) {
    log::error("--queue-config needs admission rounds: queue rounds run with the gang rounds, and "
               "--gang-interval-ms is 0");
    return 2;
  }

  auto cfg = kube::load_config(o.kube);
  if (!cfg) {
    log::error("no Kubernetes API configuration", {log::kv("error", cfg.error().message)});
    return 1;
  }
  cfg->qps = o.kube_qps;
  cfg->burst = o.kube_burst;
  cfg->user_agent = "kgpu-scheduler";
  // Below the extender's recommended httpTimeout (10 s), so a slow API write fails the bind
  // before kube-scheduler gives up on it.
  cfg->timeout = std::chrono::milliseconds(8'000);
  auto client = kube::Client::create(*cfg);
  if (!client) {
    log::error("cannot create the API client", {log::kv("error", client.error().message)});
    return 1;
  }
  const std::string identity = o.identity.empty() ? default_identity() : o.identity;
  // Events get their own client, so their writes never take the binds' QPS tokens or connections.
  auto event_client = kube::Client::create(*cfg);
  if (!event_client) {
    log::error("cannot create the API client", {log::kv("error", event_client.error().message)});
    return 1;
  }
  kube::EventRecorder events(**event_client, kube::EventRecorderOptions{"kgpu.io/scheduler", identity});
  auto sched = GpuScheduler::create(o.scheduler, client->get(), &events);
  if (!sched) {
    log::error("bad scheduler configuration", {log::kv("error", sched.error().message)});
    return 2;
  }
  GpuScheduler& s = **sched;
  std::optional<gpu::mig::ConfigFile> mig_file;
  if (o.mig_plan_interval.count() > 0 && !o.mig_plan_config_file.empty()) {
    auto parsed = gpu::mig::load_config_file(o.mig_plan_config_file);
    if (!parsed) {
      log::error("--mig-plan-config-file: " + parsed.error().message);
      return 2;
    }
    mig_file = std::move(*parsed);
  }

  kube::InformerOptions node_opts;
  node_opts.resource = kube::resources::kNodes;
  kube::Informer nodes(**client, node_opts);
  nodes.add_handlers({[&](const kube::ObjectRef& n) { s.upsert_node(*n); },
                      [&](const kube::ObjectRef&, const kube::ObjectRef& n) { s.upsert_node(*n); },
                      [&](const kube::ObjectRef& n) { s.remove_node(kube::Informer::key_of(*n)); }});
  kube::InformerOptions pod_opts;
  pod_opts.resource = kube::resources::kPods;
  // What the model reads stays; container statuses and the like go.
  pod_opts.transform = [](nlohmann::json& pod) {
    if (auto st = pod.find("status"); st != pod.end() && st->is_object()) {
      for (const char* k : {"containerStatuses", "initContainerStatuses", "conditions", "ephemeralContainerStatuses"})
        st->erase(k);
    }
  };
  kube::Informer pods(**client, pod_opts);
  pods.add_handlers({[&](const kube::ObjectRef& p) { s.upsert_pod(*p); },
                     [&](const kube::ObjectRef&, const kube::ObjectRef& p) { s.upsert_pod(*p); },
                     [&](const kube::ObjectRef& p) { s.remove_pod(*p); }});
  // DRA: the pools, classes and claims the claim allocator reads.
  std::vector<std::unique_ptr<kube::Informer>> dra;
  bool dra_claims = o.dra_claims;
  if (dra_claims) {
    // A cluster before 1.34 serves no resource.k8s.io/v1: its pods name no claims, and informers on
    // it would keep /readyz false for ever.
    auto served = (*client)->get_raw("/apis/resource.k8s.io/v1");
    if (!served && served.error().code == 404) {
      log::info("DRA claims are not allocated: the API server does not serve resource.k8s.io/v1");
      dra_claims = false;
    }
  }
  if (dra_claims) {
    ClaimAllocator& claims = s.claims();
    const auto add = [&](const kube::Resource& r, std::function<void(const nlohmann::json&)> up,
                         std::function<void(const nlohmann::json&)> down) {
      kube::InformerOptions io;
      io.resource = r;
      auto inf = std::make_unique<kube::Informer>(**client, io);
      inf->add_handlers({[up](const kube::ObjectRef& x) { up(*x); },
                         [up](const kube::ObjectRef&, const kube::ObjectRef& x) { up(*x); },
                         [down](const kube::ObjectRef& x) { down(*x); }});
      dra.push_back(std::move(inf));
    };
    add(
        kube::resources::kResourceSlices, [&](const nlohmann::json& x) { claims.upsert_slice(x); },
        [&](const nlohmann::json& x) { claims.remove_slice(x); });
    add(
        kube::resources::kDeviceClasses, [&](const nlohmann::json& x) { claims.upsert_class(x); },
        [&](const nlohmann::json& x) { claims.remove_class(x); });
    add(
        kube::resources::kResourceClaims, [&](const nlohmann::json& x) { claims.upsert_claim(x); },
        [&](const nlohmann::json& x) { claims.remove_claim(x); });
  }
  const auto dra_synced = [&] { return std::ranges::all_of(dra, [](const auto& i) { return i->synced(); }); };
  nodes.start();
  pods.start();
  for (auto& i : dra) i->start();

  std::atomic<bool> leading{!o.leader_elect};
  std::unique_ptr<kube::LeaderElector> elector;
  std::thread elector_thread;
  if (o.leader_elect) {
    kube::LeaderElectionConfig lc;
    lc.ns = o.lease_namespace;
    lc.name = o.lease_name;
    lc.identity = identity;
    lc.lease_duration = o.lease_duration;
    lc.renew_deadline = o.renew_deadline;
    lc.retry_period = o.retry_period;
    lc.on_started_leading = [&] {
      leading = true;
      log::info("leading", {log::kv("identity", identity)});
    };
    lc.on_stopped_leading = [&] {
      leading = false;
      log::info("stopped leading", {log::kv("identity", identity)});
    };
    elector = std::make_unique<kube::LeaderElector>(**client, lc);
    elector_thread = std::thread([&] { elector->run(stop); });
  }

  // A leader's rounds: fn() every `interval` until stop (checked every 20 ms); `rounds` counts
  // those that ran (fn() returns whether it did).
  const auto every = [&stop](std::chrono::milliseconds interval, std::atomic<uint64_t>& rounds, auto fn) {
    return std::thread([&stop, &rounds, interval, fn] {
      auto next = std::chrono::steady_clock::now() + interval;
      while (!stop) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        if (std::chrono::steady_clock::now() < next) continue;
        next = std::chrono::steady_clock::now() + interval;
        if (fn()) ++rounds;
      }
    });
  };
  std::atomic<uint64_t> mig_rounds{0}, admission_rounds{0};

  // MIG planning: the leader's rounds over the informers' nodes and pods.
  std::unique_ptr<MigPlanning> mig_planning;
  std::thread mig_thread;
  if (o.mig_plan_interval.count() > 0) {
    mig_planning = std::make_unique<MigPlanning>(**client, &events, std::move(mig_file));
    mig_thread = every(o.mig_plan_interval, mig_rounds, [&] {
      if (!leading || !nodes.synced() || !pods.synced()) return false;
      mig_planning->round(nodes.list(), pods.list());
      return true;
    });
  }

  // Queue and gang admission: the leader's rounds over the pods informer (queues first: a gang in
  // a queue is planned once its queue admitted it).
  std::unique_ptr<GangAdmission> gang_admission;
  std::unique_ptr<QueueAdmission> queue_admission;
  std::thread gang_thread;
  if (!o.queue_config.empty()) {
    QueueAdmissionOptions qo;
    const auto slash = o.queue_config.find('/');
    qo.config_namespace = slash == std::string::npos ? o.lease_namespace : o.queue_config.substr(0, slash);
    qo.config_name = slash == std::string::npos ? o.queue_config : o.queue_config.substr(slash + 1);
    queue_admission = std::make_unique<QueueAdmission>(**client, &events, qo);
  }
  if (o.gang_interval.count() > 0) {
    GangAdmissionOptions go;
    go.timeout = o.gang_timeout;
    gang_admission = std::make_unique<GangAdmission>(s, **client, &events, go);
    gang_thread = every(o.gang_interval, admission_rounds, [&] {
      if (!leading || !nodes.synced() || !pods.synced()) return false;
      const auto listed = pods.list();  // one snapshot for both rounds
      if (queue_admission) queue_admission->round(listed);
      gang_admission->round(listed);
      return true;
    });
  }

  HttpServerOptions http_options;
  http_options.max_body_bytes = kMaxExtenderBody;
  http_options.workers = static_cast<unsigned>(std::max<size_t>(1, o.threads));
  http_options.max_queued = o.max_queued;
  http_options.max_connections = o.max_connections;
  http_options.idle_timeout = o.idle_timeout;
  http_options.tls_cert_file = o.tls_cert_file;
  http_options.tls_key_file = o.tls_key_file;
  HttpServer http(http_options);

  const auto ready = [&] { return leading.load() && nodes.synced() && pods.synced() && dra_synced(); };
  // Verbs are refused until this replica leads with synced caches.
  const auto refused = [&]() -> std::optional<HttpResponse> {
    if (ready()) return std::nullopt;
    const std::string leader = elector ? elector->observed_holder() : "";
    return reply(503, nlohmann::json{{"Error", leading ? "kgpu scheduler: caches not synced yet"
                                                       : "kgpu scheduler: not the leader (leader: " + leader + ")"}}
                          .dump());
  };
  const auto bad_request = [](const Error& e) { return reply(400, nlohmann::json{{"Error", e.message}}.dump()); };
  http.handle("POST", "/filter", verb([&](const HttpRequest& req) {
    if (auto no = refused()) return *no;
    auto args = parse_extender_args(req.body);
    if (!args) return bad_request(args.error());
    const auto d = s.filter(*args);
    return reply(200, encode_filter_result(d.result, *args));
  }));
  http.handle("POST", "/prioritize", verb([&](const HttpRequest& req) {
    if (auto no = refused()) return *no;
    auto args = parse_extender_args(req.body);
    if (!args) return bad_request(args.error());
    return reply(200, encode_priorities(s.prioritize(*args)));
  }));
  http.handle("POST", "/bind", verb([&](const HttpRequest& req) {
    if (auto no = refused()) return *no;
    auto args = parse_binding_args(req.body);
    if (!args) return bad_request(args.error());
    return reply(200, encode_binding_result(s.bind(*args)));
  }));
  http.handle("POST", "/preempt", verb([&](const HttpRequest& req) {
    if (auto no = refused()) return *no;
    auto args = parse_preemption_args(req.body);
    if (!args) return bad_request(args.error());
    return reply(200, encode_preemption_result(s.preempt(*args).kept));
  }));
  // On a worker: the page takes the scheduler's lock.
  http.handle("GET", "/metrics", verb([&](const HttpRequest&) {
    std::string text = s.metrics_text();
    text += fmt::format(
        "# HELP kgpu_scheduler_leader Whether this replica leads (1) or stands by (0).\n"
        "# TYPE kgpu_scheduler_leader gauge\nkgpu_scheduler_leader {}\n",
        leading ? 1 : 0);
    if (queue_admission) text += queue_admission->metrics_text();
    if (gang_admission) {
      text += fmt::format(
          "# HELP kgpu_scheduler_admission_rounds_total Gang (and queue) admission rounds this replica ran as leader.\n"
          "# TYPE kgpu_scheduler_admission_rounds_total counter\nkgpu_scheduler_admission_rounds_total {}\n",
          admission_rounds.load());
    }
    if (mig_planning) {
      text += fmt::format(
          "# HELP kgpu_scheduler_mig_plan_rounds_total MIG planning rounds this replica ran as leader.\n"
          "# TYPE kgpu_scheduler_mig_plan_rounds_total counter\nkgpu_scheduler_mig_plan_rounds_total {}\n",
          mig_rounds.load());
      text += fmt::format(
          "# HELP kgpu_scheduler_mig_labels_total Nodes labelled nvidia.com/mig.config by MIG planning.\n"
          "# TYPE kgpu_scheduler_mig_labels_total counter\nkgpu_scheduler_mig_labels_total {}\n"
          "# HELP kgpu_scheduler_mig_label_failures_total MIG planning labels the API refused.\n"
          "# TYPE kgpu_scheduler_mig_label_failures_total counter\nkgpu_scheduler_mig_label_failures_total {}\n",
          mig_planning->labelled(), mig_planning->failures());
    }
    return reply(200, std::move(text), "text/plain; version=0.0.4; charset=utf-8");
  }));
  // What the scheduler holds charged on a node: pod uid (or report/<node>/<uid>) -> GPU uuids.
  http.handle("GET", "/debug/nodes/", verb([&](const HttpRequest& req) {
    if (!node_name(req.tail)) return reply(404, "not a node name\n", "text/plain");
    return reply(200, nlohmann::json(s.charges_on(std::string(req.tail))).dump());
  }), true);
  // Probes on the server's own thread: answered while every worker is busy.
  static const auto ok = std::make_shared<const std::string>("ok\n");
  http.route("/healthz", [] { return HttpResponse{200, "text/plain", ok}; });
  http.route("/readyz", [&] {
    if (ready()) return reply(200, "ready\n", "text/plain");
    std::string why;
    if (!leading) why += "not the leader\n";
    if (!nodes.synced()) why += "nodes not synced: " + nodes.last_error() + "\n";
    if (!pods.synced()) why += "pods not synced: " + pods.last_error() + "\n";
    for (const auto& i : dra)
      if (!i->synced()) why += "DRA objects not synced: " + i->last_error() + "\n";
    return reply(503, why, "text/plain");
  });

  int status = 0;
  auto bound = http.start(host, port);
  if (!bound) {
    log::error("cannot listen", {log::kv("address", o.address), log::kv("error", bound.error().message)});
    status = 1;
    stop = true;
  } else {
    log::info(fmt::format("listening on {}:{}", host, *bound),
              {log::kv("address", host), log::kv("port", *bound), log::kv("policy", o.scheduler.policy),
               log::kv("identity", identity), log::kv("tls", !o.tls_cert_file.empty())});
  }
  while (!stop) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  http.stop();
  if (mig_thread.joinable()) mig_thread.join();
  if (gang_thread.joinable()) gang_thread.join();
  if (elector_thread.joinable()) elector_thread.join();
  for (auto& i : dra) i->stop();
  pods.stop();
  nodes.stop();
  events.flush(std::chrono::seconds(2));  // what is left after that is dropped
  return status;
}

}  // namespace kgpu::scheduler
