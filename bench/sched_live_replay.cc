// `kgpu scheduler` driven as kube-scheduler drives it, on the openb trace (a program: the real
// binaries as their own processes). It starts the API-server stand-in and the scheduler, creates
// the trace's nodes with agent reports, then replays the arrivals of `kgpu sim`'s FGD protocol
// (sim::fgd_arrivals: same seed, same order) one pod at a time: create the pod, POST /filter with
// every node name (percentageOfNodesToScore: 100), POST /bind to the node chosen. Pods that fit
// nowhere stay pending, as the FGD protocol leaves them unscheduled.
//
// Model (docs/scheduler.md, "Replay and benchmark"): every GPU is advertised as
// nvidia.com/gpu.shared with 1000 replicas, so one GPU holds shares and whole-GPU pods alike as in
// the simulator; a trace pod asks gpu_milli replicas (a share) or 1000·num_gpu (whole GPUs), with
// its CPU and memory, and its GPU models as required node affinity on nvidia.com/gpu.product.
// CPU-only trace pods are kube-scheduler's alone (the extender never sees them); the replay leaves
// them out, and the simulator reference is run in-process on the same GPU pods.
//
// Modes:
//   replay (default): all trace pods are created (pending) before the first decision, so FGD's
//     target workload, which the scheduler computes from the pods it sees, is the trace's; the
//     allocation ratio at the end is compared with sim::run_fgd_protocol on the same input.
//   throughput: each pod is created just before its decision; per-decision latency (filter+bind)
//     and pods per second end to end (create+filter+bind).
//
// Usage: sched_live_replay [--mode replay|throughput] [--policy FGDPack] [--seed 1] [--nodes N]
//                          [--target 1.3] [--data DIR] [--limit PODS] [--kube-api-qps 1000]
// --nodes N > the trace's node count replicates the trace's nodes (in sim's per-seed order) up to N.
#include <fmt/format.h>
#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "integration/test_env.h"
#include "k8s/gpu_assignment.h"
#include "apiclient/client.h"
#include "apiclient/config.h"
#include "framework/fragmentation.h"
#include "scheduler/metrics.h"
#include "framework/framework.h"
#include "sim/simulator.h"
#include "sim/trace.h"

using nlohmann::json;
using SteadyClock = std::chrono::steady_clock;
namespace res = kgpu::kube::resources;

namespace {

constexpr int kReplicas = 1000;  // replicas per GPU: one per milli-GPU
constexpr const char* kShared = "nvidia.com/gpu.shared";
constexpr size_t kMaxNodes = 100'000;

struct Options {
  std::string mode = "replay", policy = "FGDPack", data;
  uint64_t seed = 1;
  size_t nodes = 0;  // 0: the trace's
  double target = 1.3;
  size_t limit = 0;     // 0: every arrival
  int kube_qps = 1000;  // the scheduler's --kube-api-qps and --kube-api-burst (its default, 50/100, caps binds)
};

kgpu::Result<Options> parse_args(int argc, char** argv) {
  Options o;
  const char* env = std::getenv("KGPU_OPENB_DIR");
  o.data = env != nullptr ? env : "../shared/data/openb";
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) return kgpu::fail(kgpu::ErrorCode::kInvalidArgument, "{}: needs a value", flag);
    const std::string v = argv[++i];
    try {
      if (flag == "--mode" && (v == "replay" || v == "throughput"))
        o.mode = v;
      else if (flag == "--policy")
        o.policy = v;
      else if (flag == "--data")
        o.data = v;
      else if (flag == "--seed")
        o.seed = std::stoull(v);
      else if (flag == "--nodes" && std::stoull(v) <= kMaxNodes)
        o.nodes = std::stoull(v);
      else if (flag == "--target" && std::stod(v) > 0 && std::stod(v) <= 10)
        o.target = std::stod(v);
      else if (flag == "--limit")
        o.limit = std::stoull(v);
      else if (flag == "--kube-api-qps" && std::stoi(v) > 0)
        o.kube_qps = std::stoi(v);
      else
        return kgpu::fail(kgpu::ErrorCode::kInvalidArgument, "{} {}: unknown flag or value out of range", flag, v);
    } catch (const std::exception&) {
      return kgpu::fail(kgpu::ErrorCode::kInvalidArgument, "{} {}: not a number", flag, v);
    }
  }
  return o;
}

std::string node_name(size_t i) { return fmt::format("replay-node-{:05}", i); }

// A node as its agent reports it: every GPU shared, kReplicas replicas each.
json node_object(const kgpu::sched::NodeState& n, const std::string& name, bool with_report) {
  kgpu::k8s::NodeGpuReport r;
  r.observed_at = "2026-12-01T00:00:00.000000Z";
  for (int i = 0; i < n.gpus(); ++i) {
    kgpu::k8s::ReportedGpu g;
    g.index = i;
    g.uuid = fmt::format("GPU-{}-{}", name, i);
    g.model = n.gpu_model;
    g.resource = kShared;
    g.replicas = kReplicas;
    r.gpus.push_back(std::move(g));
  }
  const std::string units = std::to_string(static_cast<int64_t>(n.gpus()) * kReplicas);
  const json resources{{"cpu", fmt::format("{}m", n.cpu_milli)},
                       {"memory", fmt::format("{}Mi", n.memory_mib)},
                       {"pods", "10000"},
                       {kShared, units}};
  json o{{"apiVersion", "v1"},
         {"kind", "Node"},
         {"metadata", {{"name", name}, {"labels", {{"nvidia.com/gpu.product", n.gpu_model}}}}},
         {"status", {{"allocatable", resources}, {"capacity", resources}}}};
  if (with_report) o["metadata"]["annotations"][kgpu::k8s::kAnnotationNodeGpus] = kgpu::k8s::format_node_report(r);
  return o;
}

json pod_object(const kgpu::sched::Pod& p, const std::string& name) {
  const int64_t units = p.sharing() ? p.gpu_milli : static_cast<int64_t>(p.num_gpu) * kReplicas;
  json c{{"name", "main"},
         {"image", "replay:1"},
         {"resources",
          {{"requests",
            {{"cpu", fmt::format("{}m", p.cpu_milli)},
             {"memory", fmt::format("{}Mi", p.memory_mib)},
             {kShared, std::to_string(units)}}},
           {"limits", {{kShared, std::to_string(units)}}}}}};
  json o{{"apiVersion", "v1"},
         {"kind", "Pod"},
         {"metadata", {{"name", name}, {"namespace", "default"}}},
         {"spec", {{"schedulerName", "default-scheduler"}, {"containers", json::array({c})}}}};
  if (!p.gpu_models.empty()) {
    json expr{{"key", "nvidia.com/gpu.product"}, {"operator", "In"}, {"values", p.gpu_models}};
    o["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] =
        json::array({json{{"matchExpressions", json::array({expr})}}});
  }
  return o;
}

// The sum of the samples of `family` whose labels contain `labels` (e.g. `resource="x"`).
std::optional<double> metric(const std::string& text, const std::string& family, const std::string& labels = "") {
  std::optional<double> sum;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    const std::string_view line(text.data() + pos, end - pos);
    pos = end + 1;
    if (!line.starts_with(family) || line.size() <= family.size()) continue;
    const char next = line[family.size()];
    if (next != '{' && next != ' ') continue;
    const size_t space = line.rfind(' ');
    if (!labels.empty() && line.substr(0, space).find(labels) == std::string_view::npos) continue;
    sum = sum.value_or(0) + std::strtod(std::string(line.substr(space + 1)).c_str(), nullptr);
  }
  return sum;
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto rank = static_cast<size_t>(std::max(1.0, std::ceil(q * static_cast<double>(v.size()))));
  return v[std::min(rank, v.size()) - 1];
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

int fail_with(const std::string& what) {
  fmt::print(stderr, "sched_live_replay: {}\n", what);
  return 1;
}

class Scheduler {
 public:
  explicit Scheduler(int port) : http_("127.0.0.1", port) {
    http_.set_keep_alive(true);
    http_.set_tcp_nodelay(true);
    http_.set_read_timeout(std::chrono::seconds(10));
  }
  std::optional<std::string> get(const std::string& path) {
    auto r = http_.Get(path);
    if (!r || r->status != 200) return std::nullopt;
    return r->body;
  }
  // The body of a 200 answer, or an error naming the verb.
  kgpu::Result<json> post(const std::string& verb, const std::string& body) {
    auto r = http_.Post("/" + verb, body, "application/json");
    if (!r)
      return kgpu::fail(kgpu::ErrorCode::kUnavailable, "/{}: no answer ({})", verb, httplib::to_string(r.error()));
    if (r->status != 200) return kgpu::fail(kgpu::ErrorCode::kInternal, "/{}: HTTP {}: {}", verb, r->status, r->body);
    auto j = json::parse(r->body, nullptr, false);
    if (j.is_discarded()) return kgpu::fail(kgpu::ErrorCode::kInternal, "/{}: not JSON: {}", verb, r->body);
    return j;
  }
  // Polls /metrics until `ok` holds for it or `timeout` passes.
  template <typename F>
  bool wait_metrics(F ok, std::chrono::seconds timeout) {
    return kgpu::testing::eventually(
        [&] {
          auto m = get("/metrics");
          return m && ok(*m);
        },
        timeout);
  }

 private:
  httplib::Client http_;
};

}  // namespace

int main(int argc, char** argv) {
  auto opt = parse_args(argc, argv);
  if (!opt) return fail_with(opt.error().message);
  const Options& o = *opt;
  auto trace_nodes = kgpu::sim::load_nodes(o.data + "/openb_node_list_gpu_node.csv");
  if (!trace_nodes) return fail_with(trace_nodes.error().message);
  auto all_pods = kgpu::sim::load_pods(o.data + "/openb_pod_list_default.csv");
  if (!all_pods) return fail_with(all_pods.error().message);
  std::vector<kgpu::sched::Pod> pods;
  for (const auto& p : *all_pods)
    if (p.num_gpu > 0) pods.push_back(p);
  // Replicas of the trace's nodes (in trace order) up to --nodes.
  std::vector<kgpu::sched::NodeState> nodes = *trace_nodes;
  for (size_t i = trace_nodes->size(); i < o.nodes; ++i) {
    nodes.push_back((*trace_nodes)[i % trace_nodes->size()]);
    nodes.back().name += fmt::format("-copy{}", i / trace_nodes->size());
  }
  auto arrivals = kgpu::sim::fgd_arrivals(nodes, pods, o.seed, o.target);
  if (!arrivals) return fail_with(arrivals.error().message);
  const size_t decisions = o.limit > 0 ? std::min(o.limit, arrivals->pods.size()) : arrivals->pods.size();
  // Replay mode creates every trace pod first (FGD's workload is then the trace's, also under --limit).
  const size_t ahead = o.mode == "replay" ? std::min(arrivals->pods.size(), pods.size()) : 0;
  int64_t arrived = 0;
  for (size_t k = 0; k < decisions; ++k) arrived += pods[arrivals->pods[k]].gpu_request();
  fmt::print(
      "{} nodes ({} GPUs), {} GPU pods in the trace ({} CPU-only left out), {} arrivals ({:.3f} of capacity), "
      "policy {}, seed {}, mode {}\n",
      nodes.size(), arrivals->gpu_capacity / 1000, pods.size(), all_pods->size() - pods.size(), decisions,
      static_cast<double>(arrived) / static_cast<double>(arrivals->gpu_capacity), o.policy, o.seed, o.mode);

  kgpu::testing::TempDir dir;
  const std::string kubeconfig = (dir.path() / "kubeconfig").string(), port_file = (dir.path() / "port").string();
  kgpu::testing::ChildProcess apiserver(
      {KGPU_APISERVER, "--kubeconfig", kubeconfig, "--port-file", port_file, "--history", "100000"}, {},
      (dir.path() / "apiserver.log").string());
  if (!kgpu::testing::eventually(
          [&] { return std::filesystem::exists(port_file) && std::filesystem::file_size(port_file) > 0; },
          std::chrono::seconds(20)))
    return fail_with("kgpu-apiserver did not start: " + slurp((dir.path() / "apiserver.log").string()));
  auto cfg = kgpu::kube::config_from_kubeconfig_files({kubeconfig}, "");
  if (!cfg) return fail_with("kubeconfig: " + cfg.error().message);
  cfg->qps = 0;  // the driver stands for every user creating pods: no client-side rate limit
  auto client = kgpu::kube::Client::create(*cfg);
  if (!client) return fail_with("API client: " + client.error().message);
  auto& api = **client;

  // Nodes named in sim's per-seed order (the scheduler breaks ties by name order, sim by that
  // order). The last one's report comes after the trace pods (see below).
  std::vector<std::string> names;
  for (size_t i = 0; i < arrivals->nodes.size(); ++i) {
    names.push_back(node_name(i));
    const bool report = i + 1 < arrivals->nodes.size() || ahead == 0;
    if (auto r = api.create(res::kNodes, "", node_object(arrivals->nodes[i], names.back(), report)); !r)
      return fail_with("creating node " + names.back() + ": " + r.error().text());
  }
  const std::string node_names = json(names).dump();
  const auto pod_name = [](size_t k) { return fmt::format("replay-{:06}", k); };
  std::vector<json> created(std::max(ahead, decisions));
  const auto t_ahead = SteadyClock::now();
  for (size_t k = 0; k < ahead; ++k) {
    auto r = api.create(res::kPods, "default", pod_object(pods[arrivals->pods[k]], pod_name(k)));
    if (!r) return fail_with("creating pod " + pod_name(k) + ": " + r.error().text());
    created[k] = std::move(*r);
  }
  if (ahead > 0)
    fmt::print("created {} pods ahead in {:.1f} s\n", ahead,
               std::chrono::duration<double>(SteadyClock::now() - t_ahead).count());

  const std::string sched_log = (dir.path() / "scheduler.log").string();
  kgpu::testing::ChildProcess scheduler_proc(
      {KGPU_BINARY, "scheduler", "--kubeconfig", kubeconfig, "--address", "127.0.0.1:0", "--leader-elect=false",
       "--serialize-admission=false", "--policy", o.policy, "--seed", std::to_string(o.seed), "--workload-refresh-ms",
       "86400000", "--kube-api-qps", std::to_string(o.kube_qps), "--kube-api-burst", std::to_string(o.kube_qps)},
      {}, sched_log);
  const int port = kgpu::testing::agent_port(sched_log, std::chrono::seconds(30));
  if (port <= 0) return fail_with("kgpu scheduler did not start: " + slurp(sched_log));
  Scheduler s(port);
  // Every node and every pod created ahead seen; then the last node's report, which makes the
  // scheduler rebuild its model and compute FGD's target workload from the pods it has seen.
  const double reported_first = static_cast<double>(names.size() - (ahead > 0 ? 1 : 0));
  if (!s.wait_metrics(
          [&](const std::string& m) {
            return metric(m, "kgpu_scheduler_nodes", "report=\"present\"") == reported_first &&
                   metric(m, "kgpu_scheduler_pending_gpu_pods").value_or(0) == static_cast<double>(ahead);
          },
          std::chrono::seconds(120)))
    return fail_with("the scheduler did not see the cluster within 120 s; /metrics: " +
                     s.get("/metrics").value_or("(no answer)"));
  if (ahead > 0) {
    const std::string last = names.back();
    json patch = node_object(arrivals->nodes.back(), last, true);
    if (auto r = api.patch(res::kNodes, "", last, kgpu::kube::PatchType::kMerge,
                           json{{"metadata", {{"annotations", patch["metadata"]["annotations"]}}}});
        !r)
      return fail_with("patching node " + last + ": " + r.error().text());
    if (!s.wait_metrics(
            [&](const std::string& m) {
              return metric(m, "kgpu_scheduler_nodes", "report=\"present\"") == static_cast<double>(names.size());
            },
            std::chrono::seconds(60)))
      return fail_with("the scheduler did not see node " + last + "'s report within 60 s");
  }

  // The simulator in lockstep (replay mode): its choice for each arrival, to find the first
  // decision where the live scheduler differs (after it the two clusters differ anyway).
  const auto workload = kgpu::sched::target_workload(pods);
  kgpu::sched::SchedulingContext ctx{workload, kgpu::sched::TieBreak::kFirst};
  auto sim_fw = kgpu::sched::make_framework(o.policy, ctx);
  if (!sim_fw) return fail_with("sim framework: " + sim_fw.error().message);
  kgpu::sched::Cluster sim_cluster(arrivals->nodes);
  std::mt19937_64 sim_rng(kgpu::sim::scheduling_seed(o.seed));
  size_t differ = 0;
  std::optional<size_t> first_differ;
  std::string first_differ_text;

  std::vector<double> decision_ms, create_ms, filter_ms;
  double filter_bytes = 0;
  size_t bound = 0, unschedulable = 0;
  const auto t0 = SteadyClock::now();
  for (size_t k = 0; k < decisions; ++k) {
    const auto tc = SteadyClock::now();
    if (k >= ahead) {
      auto r = api.create(res::kPods, "default", pod_object(pods[arrivals->pods[k]], pod_name(k)));
      if (!r) return fail_with("creating pod " + pod_name(k) + ": " + r.error().text());
      created[k] = std::move(*r);
    }
    const auto td = SteadyClock::now();
    const json& p = created[k];
    auto f = s.post("filter", R"({"Pod":)" + p.dump() + R"(,"Nodes":null,"NodeNames":)" + node_names + "}");
    if (!f) return fail_with(pod_name(k) + ": " + f.error().message);
    if (!f->value("Error", "").empty()) return fail_with(pod_name(k) + ": filter error: " + f->value("Error", ""));
    filter_ms.push_back(std::chrono::duration<double, std::milli>(SteadyClock::now() - td).count());
    filter_bytes += static_cast<double>(f->dump().size());
    const json& chosen = (*f)["NodeNames"];
    if (!chosen.is_array() || chosen.empty()) {
      ++unschedulable;
    } else {
      const json args{{"PodName", p["metadata"]["name"]},
                      {"PodNamespace", "default"},
                      {"PodUID", p["metadata"]["uid"]},
                      {"Node", chosen[0]}};
      auto b = s.post("bind", args.dump());
      if (!b) return fail_with(pod_name(k) + ": " + b.error().message);
      if (!b->value("Error", "").empty()) return fail_with(pod_name(k) + ": bind error: " + b->value("Error", ""));
      ++bound;
    }
    const auto te = SteadyClock::now();
    if (o.mode == "replay") {
      const auto& pod = pods[arrivals->pods[k]];
      const auto out = sim_fw->schedule(pod, sim_cluster, sim_rng);
      const std::string want = out.placement ? names[out.placement->node] : "";
      const std::string got = chosen.is_array() && !chosen.empty() ? chosen[0].get<std::string>() : "";
      if (want != got) {
        ++differ;
        if (!first_differ) {
          first_differ = k;
          first_differ_text =
              fmt::format("arrival {} ({}, cpu {}m): sim {}, live {}", k, kgpu::sim::shape_name(pod), pod.cpu_milli,
                          want.empty() ? "(unscheduled)" : want, got.empty() ? "(unschedulable)" : got);
        }
      }
    }
    decision_ms.push_back(std::chrono::duration<double, std::milli>(te - td).count());
    create_ms.push_back(std::chrono::duration<double, std::milli>(td - tc).count());
  }
  const double seconds = std::chrono::duration<double>(SteadyClock::now() - t0).count();
  const auto m = s.get("/metrics").value_or("");
  const auto live = metric(m, "kgpu_scheduler_gpu_allocation_ratio", fmt::format("resource=\"{}\"", kShared));

  fmt::print("decisions {}: bound {}, unschedulable {}; {:.1f} s, {:.0f} pods/s{}\n", decisions, bound, unschedulable,
             seconds, static_cast<double>(decisions) / seconds,
             ahead > 0 ? " (filter+bind; pods created ahead)" : " (create+filter+bind)");
  fmt::print("filter+bind per decision: p50 {:.2f} ms, p99 {:.2f} ms, max {:.2f} ms; create p50 {:.2f} ms\n",
             percentile(decision_ms, 0.5), percentile(decision_ms, 0.99), percentile(decision_ms, 1.0),
             percentile(create_ms, 0.5));
  fmt::print("  of which /filter round trip: p50 {:.2f} ms, p99 {:.2f} ms; request {} kB, reply {:.0f} kB on average\n",
             percentile(filter_ms, 0.5), percentile(filter_ms, 0.99), node_names.size() / 1000,
             filter_bytes / static_cast<double>(std::max<size_t>(1, decisions)) / 1000);
  for (const char* verb : {"filter", "bind"}) {
    const std::string l = fmt::format("verb=\"{}\"", verb);
    const double n = metric(m, "kgpu_scheduler_attempt_duration_seconds_count", l).value_or(0);
    const double sum = metric(m, "kgpu_scheduler_attempt_duration_seconds_sum", l).value_or(0);
    // The histogram's bucket at or above the 99th percentile (cumulative buckets, all results).
    std::string p99 = "-";
    for (double le : kgpu::scheduler::Metrics::kBuckets) {
      const std::string le_label = fmt::format("le=\"{}\"", le);
      double below = 0;
      for (size_t pos = 0; pos < m.size();) {
        size_t end = m.find('\n', pos);
        if (end == std::string::npos) end = m.size();
        const std::string_view line(m.data() + pos, end - pos);
        pos = end + 1;
        if (line.starts_with("kgpu_scheduler_attempt_duration_seconds_bucket{") && line.find(l) != line.npos &&
            line.find(le_label) != line.npos)
          below += std::strtod(std::string(line.substr(line.rfind(' ') + 1)).c_str(), nullptr);
      }
      if (n > 0 && below >= 0.99 * n) {
        p99 = fmt::format("<= {:g} ms", le * 1000);
        break;
      }
    }
    fmt::print("  inside the scheduler, {}: mean {:.2f} ms, p99 {} over {}\n", verb, n > 0 ? 1000 * sum / n : 0.0, p99,
               n);
  }
  fmt::print("live allocation ratio ({}): {}\n", kShared, live ? fmt::format("{:.4f}", *live) : "(no metric)");
  if (o.mode == "replay")
    fmt::print("decisions that differ from the simulator in lockstep: {}{}\n", differ,
               first_differ ? "; first: " + first_differ_text : "");
  if (o.mode == "replay" && decisions == arrivals->pods.size()) {
    kgpu::sim::RunOptions ro;
    ro.policy = o.policy;
    ro.seed = o.seed;
    ro.target_arrived = o.target;
    ro.tie_break = kgpu::sched::TieBreak::kFirst;
    auto sim = kgpu::sim::run_fgd_protocol(nodes, pods, ro);
    if (!sim) return fail_with("sim: " + sim.error().message);
    fmt::print("sim allocation ratio: {:.4f} (scheduled {} of {}); live - sim = {:+.2f} points\n", sim->final_allocated,
               sim->scheduled, sim->arrivals, live ? 100 * (*live - sim->final_allocated) : 0.0);
  }
  return 0;
}
