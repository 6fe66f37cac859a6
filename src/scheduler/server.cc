#include "scheduler/server.h"

#include <httplib.h>
#include <unistd.h>

#include <csignal>
#include <random>
#include <thread>

#include "common/log.h"
#include "common/strings.h"
#include "kube/client.h"
#include "kube/events.h"
#include "kube/informer.h"
#include "kube/leader.h"

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

void reply(httplib::Response& res, int code, const std::string& body, const char* type = "application/json") {
  res.status = code;
  res.set_content(body, type);
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

  std::unique_ptr<httplib::Server> http;
  if (!o.tls_cert_file.empty() || !o.tls_key_file.empty()) {
    auto ssl = std::make_unique<httplib::SSLServer>(o.tls_cert_file.c_str(), o.tls_key_file.c_str());
    if (!ssl->is_valid()) {
      log::error("cannot load the TLS certificate", {log::kv("cert", o.tls_cert_file), log::kv("key", o.tls_key_file)});
      stop = true;
    }
    http = std::move(ssl);
  } else {
    http = std::make_unique<httplib::Server>();
  }
  const size_t threads = std::max<size_t>(1, o.threads);
  http->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http->set_payload_max_length(kMaxExtenderBody);
  http->set_read_timeout(std::chrono::seconds(10));
  http->set_write_timeout(std::chrono::seconds(10));
  http->set_keep_alive_max_count(100'000);
  http->set_tcp_nodelay(true);
  // A bug in a handler answers 500 with its text (kube-scheduler shows it) and is logged.
  http->set_exception_handler([](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown exception";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    log::error("internal error", {log::kv("path", req.path), log::kv("error", what)});
    reply(res, 500, nlohmann::json{{"Error", "kgpu scheduler: internal error: " + what}}.dump());
  });

  const auto ready = [&] { return leading.load() && nodes.synced() && pods.synced() && dra_synced(); };
  // Verbs are refused until this replica leads with synced caches.
  const auto gate = [&](httplib::Response& res) {
    if (ready()) return true;
    const std::string leader = elector ? elector->observed_holder() : "";
    reply(res, 503,
          nlohmann::json{{"Error", leading ? "kgpu scheduler: caches not synced yet"
                                           : "kgpu scheduler: not the leader (leader: " + leader + ")"}}
              .dump());
    return false;
  };
  const auto bad_request = [](httplib::Response& res, const Error& e) {
    reply(res, 400, nlohmann::json{{"Error", e.message}}.dump());
  };
  http->Post("/filter", [&](const httplib::Request& req, httplib::Response& res) {
    if (!gate(res)) return;
    auto args = parse_extender_args(req.body);
    if (!args) return bad_request(res, args.error());
    const auto d = s.filter(*args);
    reply(res, 200, encode_filter_result(d.result, *args));
  });
  http->Post("/prioritize", [&](const httplib::Request& req, httplib::Response& res) {
    if (!gate(res)) return;
    auto args = parse_extender_args(req.body);
    if (!args) return bad_request(res, args.error());
    reply(res, 200, encode_priorities(s.prioritize(*args)));
  });
  http->Post("/bind", [&](const httplib::Request& req, httplib::Response& res) {
    if (!gate(res)) return;
    auto args = parse_binding_args(req.body);
    if (!args) return bad_request(res, args.error());
    reply(res, 200, encode_binding_result(s.bind(*args)));
  });
  http->Post("/preempt", [&](const httplib::Request& req, httplib::Response& res) {
    if (!gate(res)) return;
    auto args = parse_preemption_args(req.body);
    if (!args) return bad_request(res, args.error());
    reply(res, 200, encode_preemption_result(s.preempt(*args).kept));
  });
  http->Get("/metrics", [&](const httplib::Request&, httplib::Response& res) {
    std::string text = s.metrics_text();
    text += fmt::format(
        "# HELP kgpu_scheduler_leader Whether this replica leads (1) or stands by (0).\n"
        "# TYPE kgpu_scheduler_leader gauge\nkgpu_scheduler_leader {}\n",
        leading ? 1 : 0);
    reply(res, 200, text, "text/plain; version=0.0.4; charset=utf-8");
  });
  // What the scheduler holds charged on a node: pod uid (or report/<node>/<uid>) -> GPU uuids.
  http->Get(R"(/debug/nodes/([A-Za-z0-9.\-]{1,253}))", [&](const httplib::Request& req, httplib::Response& res) {
    reply(res, 200, nlohmann::json(s.charges_on(req.matches[1])).dump());
  });
  http->Get("/healthz", [](const httplib::Request&, httplib::Response& res) { reply(res, 200, "ok\n", "text/plain"); });
  http->Get("/readyz", [&](const httplib::Request&, httplib::Response& res) {
    if (ready()) return reply(res, 200, "ready\n", "text/plain");
    std::string why;
    if (!leading) why += "not the leader\n";
    if (!nodes.synced()) why += "nodes not synced: " + nodes.last_error() + "\n";
    if (!pods.synced()) why += "pods not synced: " + pods.last_error() + "\n";
    for (const auto& i : dra)
      if (!i->synced()) why += "DRA objects not synced: " + i->last_error() + "\n";
    reply(res, 503, why, "text/plain");
  });

  int status = 0;
  const int bound =
      stop ? -1 : (port == 0 ? http->bind_to_any_port(host) : (http->bind_to_port(host, port) ? port : -1));
  if (bound <= 0) {
    if (!stop) log::error("cannot listen", {log::kv("address", o.address)});
    status = 1;
    stop = true;
  } else {
    log::info(fmt::format("listening on {}:{}", host, bound),
              {log::kv("address", host), log::kv("port", bound), log::kv("policy", o.scheduler.policy),
               log::kv("identity", identity)});
  }
  std::thread server_thread;
  if (status == 0) server_thread = std::thread([&] { http->listen_after_bind(); });
  while (!stop) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  http->stop();
  if (server_thread.joinable()) server_thread.join();
  if (elector_thread.joinable()) elector_thread.join();
  for (auto& i : dra) i->stop();
  pods.stop();
  nodes.stop();
  events.flush(std::chrono::seconds(2));  // what is left after that is dropped
  return status;
}

}  // namespace kgpu::scheduler
