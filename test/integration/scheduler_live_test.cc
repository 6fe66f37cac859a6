// `kgpu scheduler` as kube-scheduler sees it: the real binary against the API-server stand-in,
// called over HTTP with the JSON kube-scheduler sends (Go field names, capitalised).
#include <gtest/gtest.h>
#include <httplib.h>

#include <unistd.h>

#include <atomic>
#include <fstream>
#include <set>
#include <thread>

#include "k8s/gpu_assignment.h"
#include "raw_http.h"
#include "standin.h"
#include "test_env.h"

namespace kgpu::testing {
namespace {

using nlohmann::json;
namespace res = kube::resources;

// A node whose agent reported `gpus` GPUs under `resource` (replicas each), NVLink in pairs.
json gpu_node(const std::string& name, int gpus, const std::string& resource = "nvidia.com/gpu", int replicas = 1,
              const std::vector<k8s::GpuUse>& used0 = {}) {
  k8s::NodeGpuReport r;
  r.observed_at = "2026-12-01T00:00:00.000000Z";
  for (int i = 0; i < gpus; ++i) {
    k8s::ReportedGpu g;
    g.index = i;
    g.uuid = "GPU-" + name + "-" + std::to_string(i);
    g.model = "NVIDIA H100 80GB HBM3";
    g.memory_mib = 81559;
    g.resource = resource;
    g.replicas = replicas;
    g.nvlink_peers = {i ^ 1};
    if (i == 0) g.used = used0;
    r.gpus.push_back(g);
  }
  return json{{"metadata",
               {{"name", name},
                {"labels", {{"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"}}},
                {"annotations", {{k8s::kAnnotationNodeGpus, k8s::format_node_report(r)}}}}},
              {"status",
               {{"allocatable", {{"cpu", "64"}, {"memory", "512Gi"}, {"pods", "110"}, {resource, std::to_string(gpus * replicas)}}},
                {"capacity", {{"cpu", "64"}, {"memory", "512Gi"}, {"pods", "110"}, {resource, std::to_string(gpus * replicas)}}}}}};
}

json gpu_pod(const std::string& name, int gpus, const std::string& resource = "nvidia.com/gpu") {
  json c{{"name", "main"}, {"image", "i:1"}, {"resources", {{"limits", {{resource, std::to_string(gpus)}}}}}};
  return json{{"metadata", {{"name", name}, {"namespace", "default"}}}, {"spec", {{"containers", json::array({c})}}}};
}

class Scheduler {
 public:
  Scheduler(const StandIn& s, std::vector<std::string> extra = {}) {
    std::vector<std::string> argv{KGPU_BINARY, "scheduler", "--kubeconfig", s.kubeconfig(), "--address", "127.0.0.1:0",
                                  "--log-level", "debug"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    log_ = (dir_.path() / "log").string();
    proc_ = std::make_unique<ChildProcess>(argv, std::vector<std::string>{}, log_);
    port_ = agent_port(log_, std::chrono::seconds(20));
    EXPECT_GT(port_, 0) << slurp(log_);
  }
  httplib::Result post(const std::string& verb, const json& body) {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(std::chrono::seconds(10));
    return c.Post("/" + verb, body.dump(), "application/json");
  }
  httplib::Result post_raw(const std::string& verb, const std::string& body) {
    httplib::Client c("127.0.0.1", port_);
    return c.Post("/" + verb, body, "application/json");
  }
  httplib::Result get(const std::string& path) {
    httplib::Client c("127.0.0.1", port_);
    return c.Get(path);
  }
  bool ready() {
    auto r = get("/readyz");
    return r && r->status == 200;
  }
  std::string log() const { return slurp(log_); }
  int port() const { return port_; }
  // Resident memory of the process, KiB (0 when unreadable).
  long rss_kib() const {
    std::ifstream f("/proc/" + std::to_string(proc_->pid()) + "/status");
    for (std::string line; std::getline(f, line);)
      if (line.starts_with("VmRSS:")) return std::stol(line.substr(6));
    return 0;
  }
  // SIGTERM, and time to hand the lease over.
  void stop() {
    ::kill(proc_->pid(), SIGTERM);
    EXPECT_TRUE(proc_->wait(std::chrono::seconds(10)).has_value()) << log();
    proc_.reset();
  }

 private:
  TempDir dir_;
  std::string log_;
  std::unique_ptr<ChildProcess> proc_;
  int port_ = 0;
};

class SchedulerLive : public ::testing::Test {
 protected:
  void SetUp() override { client_ = client_for(token_config(standin_)); }

  json create(const kube::Resource& r, const json& obj) {
    auto out = client_->create(r, r.namespaced ? "default" : "", obj);
    EXPECT_TRUE(out) << out.error().text();
    return out ? *out : json();
  }
  json pod(const std::string& name) {
    auto p = client_->get(res::kPods, "default", name);
    EXPECT_TRUE(p) << p.error().text();
    return p ? *p : json();
  }
  // filter with NodeNames (nodeCacheCapable: true): the chosen node, or "" with the reply in `reply`.
  // kube-scheduler's objects come from typed informers: no apiVersion or kind.
  static json untyped(json obj) {
    obj.erase("apiVersion");
    obj.erase("kind");
    return obj;
  }
  std::string filter(Scheduler& s, const json& pod_obj, const std::vector<std::string>& nodes, json* reply = nullptr) {
    auto r = s.post("filter", json{{"Pod", untyped(pod_obj)}, {"Nodes", nullptr}, {"NodeNames", nodes}});
    EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "no answer") << s.log();
    if (!r) return "";
    json j = json::parse(r->body);
    if (reply != nullptr) *reply = j;
    EXPECT_TRUE(j.contains("FailedNodes"));
    if (!j["NodeNames"].is_array() || j["NodeNames"].empty()) return "";
    EXPECT_EQ(j["NodeNames"].size(), 1u) << j.dump();
    return j["NodeNames"][0];
  }
  std::string bind(Scheduler& s, const json& pod_obj, const std::string& node) {
    auto r = s.post("bind", json{{"PodName", pod_obj["metadata"]["name"]}, {"PodNamespace", "default"},
                                 {"PodUID", pod_obj["metadata"]["uid"]}, {"Node", node}});
    EXPECT_TRUE(r && r->status == 200) << (r ? std::to_string(r->status) + r->body : "no answer");
    return r ? json::parse(r->body)["Error"].get<std::string>() : "no answer";
  }
  static std::vector<std::string> assigned(const json& p) {
    std::vector<std::string> out;
    auto a = k8s::parse_assignment(p["metadata"]["annotations"][k8s::kAnnotationGpuAssignment].get<std::string>());
    EXPECT_TRUE(a);
    for (const auto& c : *a) out.insert(out.end(), c.uuids.begin(), c.uuids.end());
    return out;
  }
  // Lets the scheduler's informers catch up with what the test wrote.
  void settle(Scheduler& s, const std::string& metric_line) {
    EXPECT_TRUE(eventually([&] {
      auto r = s.get("/metrics");
      return r && r->body.find(metric_line) != std::string::npos;
    }, std::chrono::seconds(10)))
        << metric_line;
  }

  StandIn standin_;
  std::unique_ptr<kube::Client> client_;
};

TEST_F(SchedulerLive, FilterChoosesOneNodeAndNvlinkedGpusAndBindWritesThemWithTheNode) {
  // n1's GPU 0 is held by a pod of another scheduler (reported by the agent).
  create(res::kNodes, gpu_node("n1", 4, "nvidia.com/gpu", 1, {{"default", "other", "uid-other", "c", 1}}));
  create(res::kNodes, gpu_node("n2", 4));
  Scheduler s(standin_, {"--leader-elect=false"});
  ASSERT_TRUE(eventually([&] { return s.ready(); }, std::chrono::seconds(10))) << s.log();
  settle(s, "kgpu_scheduler_gpu_allocated{resource=\"nvidia.com/gpu\"} 1");
  const json p = create(res::kPods, gpu_pod("train", 2));
  json reply;
  const std::string node = filter(s, p, {"n1", "n2"}, &reply);
  ASSERT_FALSE(node.empty()) << reply.dump();
  EXPECT_TRUE(reply["FailedNodes"].empty()) << reply.dump();  // only a pod that fits nowhere is explained
  // prioritize: the chosen node gets kube-scheduler's maximum.
  auto pr = s.post("prioritize", json{{"Pod", p}, {"Nodes", nullptr}, {"NodeNames", {"n1", "n2"}}});
  ASSERT_TRUE(pr && pr->status == 200);
  for (const auto& h : json::parse(pr->body)) EXPECT_EQ(h["Score"], h["Host"] == node ? 10 : 0) << pr->body;
  EXPECT_EQ(bind(s, p, node), "");
  const json bound = pod("train");
  EXPECT_EQ(bound["spec"]["nodeName"], node);
  const auto gpus = assigned(bound);
  ASSERT_EQ(gpus.size(), 2u);
  EXPECT_EQ(bound["metadata"]["annotations"][k8s::kAnnotationGpuResource], "nvidia.com/gpu");
  EXPECT_TRUE(bound["metadata"]["annotations"].contains(k8s::kAnnotationBoundAt));
  // The pair is NVLinked (0-1 or 2-3) and never n1's GPU 0.
  const auto idx = [](const std::string& u) { return u.back() - '0'; };
  EXPECT_EQ(idx(gpus[0]) ^ 1, idx(gpus[1])) << gpus[0] << " " << gpus[1];
  EXPECT_NE(gpus[0], "GPU-n1-0");
  EXPECT_NE(gpus[1], "GPU-n1-0");
  // nodeCacheCapable: false: full Node objects in, the chosen one's object out.
  const json p2 = create(res::kPods, gpu_pod("train2", 1));
  json items = json::array();
  for (const char* n : {"n1", "n2"}) items.push_back(untyped(*client_->get(res::kNodes, "", n)));
  auto r = s.post("filter", json{{"Pod", untyped(p2)}, {"Nodes", {{"items", items}}}, {"NodeNames", nullptr}});
  ASSERT_TRUE(r && r->status == 200);
  const json out = json::parse(r->body);
  ASSERT_EQ(out["Nodes"]["items"].size(), 1u) << r->body;
  EXPECT_TRUE(out["NodeNames"].is_null());
  EXPECT_EQ(out["Nodes"]["items"][0]["metadata"].value("name", "").substr(0, 1), "n");
  EXPECT_TRUE(out["FailedNodes"].empty());
}

TEST_F(SchedulerLive, NeverGivesAGpuTwiceAcrossARestartAndTellsWhyNot) {
  create(res::kNodes, gpu_node("n1", 2));
  // No agent allocates here: equal pods need not wait for admission.
  const std::vector<std::string> flags{"--leader-elect=false", "--serialize-admission=false"};
  auto s = std::make_unique<Scheduler>(standin_, flags);
  ASSERT_TRUE(eventually([&] { return s->ready(); }, std::chrono::seconds(10))) << s->log();
  settle(*s, "kgpu_scheduler_gpu_capacity{resource=\"nvidia.com/gpu\"} 2");
  std::set<std::string> taken;
  const json a = create(res::kPods, gpu_pod("a", 1));
  ASSERT_EQ(filter(*s, a, {"n1"}), "n1");
  ASSERT_EQ(bind(*s, a, "n1"), "");
  taken.insert(assigned(pod("a"))[0]);
  // The scheduler restarts between two pods: it rebuilds what is taken from the API.
  s = std::make_unique<Scheduler>(standin_, flags);
  ASSERT_TRUE(eventually([&] { return s->ready(); }, std::chrono::seconds(10))) << s->log();
  settle(*s, "kgpu_scheduler_gpu_allocated{resource=\"nvidia.com/gpu\"} 1");
  const json b = create(res::kPods, gpu_pod("b", 1));
  ASSERT_EQ(filter(*s, b, {"n1"}), "n1");
  ASSERT_EQ(bind(*s, b, "n1"), "");
  taken.insert(assigned(pod("b"))[0]);
  EXPECT_EQ(taken.size(), 2u);
  // A third finds no GPU, in kube-scheduler's words with the GPU detail; an event says so.
  const json c = create(res::kPods, gpu_pod("c", 1));
  json reply;
  EXPECT_EQ(filter(*s, c, {"n1"}, &reply), "");
  const std::string why = reply["FailedNodes"].value("n1", "");
  EXPECT_NE(why.find("Insufficient nvidia.com/gpu"), std::string::npos) << reply.dump();
  EXPECT_NE(why.find("0 of 2 GPUs free"), std::string::npos) << reply.dump();
  EXPECT_TRUE(eventually([&] {
    auto ev = client_->list(res::kEventsV1, "default");
    return ev && ev->dump().find("FailedScheduling") != std::string::npos && ev->dump().find("kgpu") != std::string::npos;
  }));
  auto m = s->get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_NE(m->body.find("kgpu_scheduler_attempts_total{verb=\"filter\",result=\"unschedulable\"} 1"), std::string::npos);
  // Pending pods are counted from the informer's view, which sees "c" created (and "b" bound) a
  // moment after the API answered.
  settle(*s, "kgpu_scheduler_pending_gpu_pods{reason=\"Insufficient nvidia.com/gpu\"} 1");
  // Deleting a pod gives its GPU back.
  ASSERT_TRUE(client_->remove(res::kPods, "default", "a"));
  settle(*s, "kgpu_scheduler_gpu_allocated{resource=\"nvidia.com/gpu\"} 1");
  EXPECT_EQ(filter(*s, c, {"n1"}), "n1");
}

TEST_F(SchedulerLive, PodsOfOtherSchedulersAreCountedAndTheReportPlacesThem) {
  create(res::kNodes, gpu_node("n1", 2));
  // Bound by someone else, no kgpu assignment, not yet in the agent's report.
  json other = gpu_pod("other", 1);
  other["spec"]["nodeName"] = "n1";
  other = create(res::kPods, other);
  Scheduler s(standin_, {"--leader-elect=false"});
  ASSERT_TRUE(eventually([&] { return s.ready(); }, std::chrono::seconds(10))) << s.log();
  settle(s, "kgpu_scheduler_gpu_allocated{resource=\"nvidia.com/gpu\"} 1");
  // The agent then reports where it really is: GPU 1.
  json node = gpu_node("n1", 2);
  auto report = *k8s::parse_node_report(node["metadata"]["annotations"][k8s::kAnnotationNodeGpus].get<std::string>());
  report.gpus[1].used = {{"default", "other", other["metadata"]["uid"], "main", 1}};
  ASSERT_TRUE(client_->patch(res::kNodes, "", "n1", kube::PatchType::kMerge,
                             json{{"metadata", {{"annotations", {{k8s::kAnnotationNodeGpus, k8s::format_node_report(report)}}}}}}));
  const std::string other_uid = other["metadata"]["uid"];
  EXPECT_TRUE(eventually([&] {
    auto r = s.get("/debug/nodes/n1");
    return r && r->status == 200 && json::parse(r->body).value(other_uid, json()) == json::array({"GPU-n1-1"});
  })) << s.get("/debug/nodes/n1")->body;
  const json p = create(res::kPods, gpu_pod("mine", 1));
  ASSERT_EQ(filter(s, p, {"n1"}), "n1");
  ASSERT_EQ(bind(s, p, "n1"), "");
  EXPECT_EQ(assigned(pod("mine")), std::vector<std::string>{"GPU-n1-0"});
}

TEST_F(SchedulerLive, ConcurrentCallersNeverGetOneGpuTwice) {
  // Two kube-schedulers (say, two profiles' instances) call one extender at once: 8 pods, 4 GPUs.
  create(res::kNodes, gpu_node("n1", 2));
  create(res::kNodes, gpu_node("n2", 2));
  Scheduler s(standin_, {"--leader-elect=false", "--serialize-admission=false"});
  ASSERT_TRUE(eventually([&] { return s.ready(); }, std::chrono::seconds(10))) << s.log();
  settle(s, "kgpu_scheduler_gpu_capacity{resource=\"nvidia.com/gpu\"} 4");
  std::vector<json> pods;
  for (int i = 0; i < 8; ++i) pods.push_back(create(res::kPods, gpu_pod("p" + std::to_string(i), 1)));
  std::vector<std::thread> callers;
  std::atomic<int> bound{0};
  for (int t = 0; t < 4; ++t) {
    callers.emplace_back([&, t] {
      for (int i = t; i < 8; i += 4) {
        auto f = s.post("filter", json{{"Pod", untyped(pods[i])}, {"NodeNames", {"n1", "n2"}}});
        if (!f || f->status != 200) continue;
        const json names = json::parse(f->body)["NodeNames"];
        if (!names.is_array() || names.empty()) continue;
        auto b = s.post("bind", json{{"PodName", pods[i]["metadata"]["name"]}, {"PodNamespace", "default"},
                                     {"PodUID", pods[i]["metadata"]["uid"]}, {"Node", names[0]}});
        if (b && b->status == 200 && json::parse(b->body)["Error"] == "") ++bound;
      }
    });
  }
  for (auto& c : callers) c.join();
  EXPECT_EQ(bound.load(), 4);
  std::set<std::string> gpus;
  int with_node = 0;
  for (int i = 0; i < 8; ++i) {
    const json p = pod("p" + std::to_string(i));
    if (!p["spec"].contains("nodeName")) continue;
    ++with_node;
    for (const auto& g : assigned(p)) EXPECT_TRUE(gpus.insert(g).second) << g << " given twice";
  }
  EXPECT_EQ(with_node, 4);
  EXPECT_EQ(gpus.size(), 4u);
}

TEST_F(SchedulerLive, ALostRaceIsAnErrorAndFreesTheChoice) {
  create(res::kNodes, gpu_node("n1", 1));
  Scheduler s(standin_, {"--leader-elect=false"});
  ASSERT_TRUE(eventually([&] { return s.ready(); }, std::chrono::seconds(10))) << s.log();
  settle(s, "kgpu_scheduler_gpu_capacity{resource=\"nvidia.com/gpu\"} 1");
  const json a = create(res::kPods, gpu_pod("a", 1));
  ASSERT_EQ(filter(s, a, {"n1"}), "n1");
  // The API server refuses the binding (another writer won).
  standin_.fault(json{{"status", 409}, {"path", "/binding"}, {"method", "POST"}, {"times", 1}});
  const std::string err = bind(s, a, "n1");
  EXPECT_NE(err.find("409"), std::string::npos) << err;
  EXPECT_FALSE(pod("a")["spec"].contains("nodeName"));
  // The choice was dropped: the retry finds the GPU free again and binds.
  ASSERT_EQ(filter(s, a, {"n1"}), "n1");
  ASSERT_EQ(bind(s, a, "n1"), "");
  // Bind without a filter choice: refused, nothing written.
  const json b = create(res::kPods, gpu_pod("b", 1));
  EXPECT_NE(bind(s, b, "n1").find("no GPU choice"), std::string::npos);
  EXPECT_FALSE(pod("b")["spec"].contains("nodeName"));
}

TEST_F(SchedulerLive, SharesPackOnOneGpuAndAnEqualPodWaitsForAdmission) {
  create(res::kNodes, gpu_node("n1", 2, "nvidia.com/gpu.shared", 4));
  Scheduler s(standin_, {"--leader-elect=false"});
  ASSERT_TRUE(eventually([&] { return s.ready(); }, std::chrono::seconds(10))) << s.log();
  settle(s, "kgpu_scheduler_gpu_capacity{resource=\"nvidia.com/gpu.shared\"} 2");
  const json a = create(res::kPods, gpu_pod("a", 2, "nvidia.com/gpu.shared"));
  ASSERT_EQ(filter(s, a, {"n1"}), "n1");
  ASSERT_EQ(bind(s, a, "n1"), "");
  // An equal request on the node while "a" is not yet allocated by the agent: held back.
  const json b = create(res::kPods, gpu_pod("b", 2, "nvidia.com/gpu.shared"));
  ASSERT_EQ(filter(s, b, {"n1"}), "n1");
  EXPECT_NE(bind(s, b, "n1").find("still admitting pod default/a"), std::string::npos);
  // The agent allocated "a": "b" binds, on the same GPU (packing: half of it was free).
  const auto ga = assigned(pod("a"));
  ASSERT_TRUE(client_->patch(res::kPods, "default", "a", kube::PatchType::kMerge,
                             json{{"metadata", {{"annotations", {{k8s::kAnnotationGpuAllocated, "main:" + ga[0]}}}}}}));
  // kube-scheduler retries until the scheduler's informer has seen the allocation.
  ASSERT_TRUE(eventually([&] { return filter(s, b, {"n1"}) == "n1" && bind(s, b, "n1").empty(); }));
  EXPECT_EQ(assigned(pod("b")), ga);
  settle(s, "kgpu_scheduler_gpu_allocated{resource=\"nvidia.com/gpu.shared\"} 1");
}

TEST_F(SchedulerLive, PreemptKeepsOnlyVictimSetsThatFreeAGpu) {
  create(res::kNodes, gpu_node("n1", 1));
  create(res::kNodes, gpu_node("n2", 1));
  json g1 = gpu_pod("gpu-victim", 1);
  g1["spec"]["nodeName"] = "n1";
  g1 = create(res::kPods, g1);
  json g2 = gpu_pod("gpu-holder", 1);
  g2["spec"]["nodeName"] = "n2";
  create(res::kPods, g2);
  json cpu = test_pod("cpu-victim");
  cpu["spec"]["nodeName"] = "n2";
  cpu = create(res::kPods, cpu);
  Scheduler s(standin_, {"--leader-elect=false"});
  ASSERT_TRUE(eventually([&] { return s.ready(); }, std::chrono::seconds(10))) << s.log();
  settle(s, "kgpu_scheduler_gpu_allocated{resource=\"nvidia.com/gpu\"} 2");
  const json p = create(res::kPods, gpu_pod("urgent", 1));
  auto r = s.post("preempt", json{{"Pod", p},
                                  {"NodeNameToMetaVictims",
                                   {{"n1", {{"Pods", {{{"UID", g1["metadata"]["uid"]}}}}, {"NumPDBViolations", 0}}},
                                    {"n2", {{"Pods", {{{"UID", cpu["metadata"]["uid"]}}}}, {"NumPDBViolations", 0}}}}}});
  ASSERT_TRUE(r && r->status == 200);
  const json kept = json::parse(r->body)["NodeNameToMetaVictims"];
  EXPECT_TRUE(kept.contains("n1")) << kept.dump();
  EXPECT_FALSE(kept.contains("n2")) << kept.dump();
  // Full victim pods (NodeNameToVictims) are read too.
  r = s.post("preempt", json{{"Pod", p}, {"NodeNameToVictims", {{"n1", {{"Pods", {g1}}, {"NumPDBViolations", 0}}}}}});
  ASSERT_TRUE(r && r->status == 200);
  EXPECT_TRUE(json::parse(r->body)["NodeNameToMetaVictims"].contains("n1")) << r->body;
}

TEST_F(SchedulerLive, TwoReplicasOneLeaderAndHostileBodies) {
  create(res::kNodes, gpu_node("n1", 1));
  Scheduler a(standin_, {"--identity", "a", "--leader-elect-resource-namespace", "default"});
  ASSERT_TRUE(eventually([&] { return a.ready(); }, std::chrono::seconds(10))) << a.log();
  Scheduler b(standin_, {"--identity", "b", "--leader-elect-resource-namespace", "default"});
  const json p = create(res::kPods, gpu_pod("x", 1));
  std::string seen;
  EXPECT_TRUE(eventually([&] {
    auto r = b.post("filter", json{{"Pod", p}, {"NodeNames", {"n1"}}});
    seen = r ? std::to_string(r->status) + " " + r->body : "";
    return seen.starts_with("503") && seen.find("not the leader (leader: a)") != std::string::npos;
  })) << seen;
  EXPECT_FALSE(b.ready());
  for (const std::string& body : {std::string(), std::string("[]"), std::string("{\"Pod\": 3}"), std::string(100000, '['),
                                 std::string("{\"Pod\":{\"metadata\":{}}}"), std::string("{\"Pod\":{\"metadata\":{\"name\":1}}}")}) {
    auto rr = a.post_raw("filter", body);
    ASSERT_TRUE(rr);
    EXPECT_EQ(rr->status, 400) << body.substr(0, 40) << " " << rr->body;
  }
  auto rb = a.post_raw("bind", "{\"PodName\":\"x\"}");
  ASSERT_TRUE(rb);
  EXPECT_EQ(rb->status, 400);
  EXPECT_NE(rb->body.find("PodNamespace: missing"), std::string::npos) << rb->body;
  // Every verb says where its body breaks, as /filter does.
  for (const std::string verb : {"bind", "preempt", "filter", "prioritize"}) {
    auto rt = a.post_raw(verb, "{\"PodName\": \"x\", \"Node\": }");
    ASSERT_TRUE(rt) << verb;
    EXPECT_EQ(rt->status, 400) << verb;
    EXPECT_NE(rt->body.find("body is not JSON"), std::string::npos) << verb << ": " << rt->body;
    EXPECT_NE(rt->body.find("byte"), std::string::npos) << verb << ": " << rt->body;
  }
  auto rn = a.post_raw("bind", "{\"PodName\":\"x\",\"PodNamespace\":7,\"Node\":\"n1\"}");
  ASSERT_TRUE(rn);
  EXPECT_EQ(rn->status, 400);
  EXPECT_NE(rn->body.find("PodNamespace: a number, not a string"), std::string::npos) << rn->body;
  // The leader goes away: the other takes over.
  a.stop();
  EXPECT_TRUE(eventually([&] { return b.ready(); }, std::chrono::seconds(30))) << b.log();
}

// kube-apiserver refuses these pods; an extender that meets one anyway (a stale or hand-written
// call) must say so, never read the value as 0 GPUs and pass every node.
TEST_F(SchedulerLive, InvalidGpuQuantitiesAreThePodsErrorNeverZero) {
  create(res::kNodes, gpu_node("n1", 2));
  Scheduler s(standin_);
  ASSERT_TRUE(eventually([&] { return s.ready(); }, std::chrono::seconds(10))) << s.log();
  const std::vector<std::pair<json, std::string>> cases{
      {"1e999999999", "out of range"},
      {"-1", "negative"},
      {"NaN", "NaN"},
      {"+Inf", "Inf"},
      {"abc", "abc"},
      {"", "quantity"},
      {nullptr, "null is not a quantity"},
      {std::string(5001, '9'), "out of range"},
      {"0.5", "not a whole number"},
      {"500m", "not a whole number"},
      {0.5, "not a whole number"},
  };
  for (const auto& [value, why] : cases) {
    json p = gpu_pod("bad", 1);
    p["metadata"]["uid"] = "u-bad";
    p["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = value;
    auto r = s.post("filter", json{{"Pod", p}, {"NodeNames", {"n1"}}});
    ASSERT_TRUE(r && r->status == 200) << value.dump();
    const json j = json::parse(r->body);
    EXPECT_TRUE(j["NodeNames"].empty()) << value.dump() << " " << r->body;
    const std::string error = j["Error"];
    EXPECT_NE(error.find("spec.containers[0] (main): resources.limits[nvidia.com/gpu]"), std::string::npos)
        << value.dump() << " " << error;
    EXPECT_NE(error.find(why), std::string::npos) << value.dump() << " " << error;
  }
  // Requests unequal to limits, in an init container: refused as Kubernetes does, naming it.
  json p = gpu_pod("uneven", 1);
  p["spec"]["initContainers"] = json::array(
      {{{"name", "warm"}, {"image", "i:1"}, {"resources", {{"requests", {{"nvidia.com/gpu", "1"}}}, {"limits", {{"nvidia.com/gpu", "2"}}}}}}});
  auto r = s.post("filter", json{{"Pod", p}, {"NodeNames", {"n1"}}});
  ASSERT_TRUE(r && r->status == 200);
  EXPECT_NE(json::parse(r->body)["Error"].get<std::string>().find("spec.initContainers[0] (warm): resources.requests[nvidia.com/gpu]: 1 differs from the limit 2"),
            std::string::npos)
      << r->body;
  // A valid pod still places.
  EXPECT_EQ(filter(s, create(res::kPods, gpu_pod("good", 1)), {"n1"}), "n1");
}

// Idle and half-sent connections hold no worker: with 500 idle and 100 slow-loris sockets open,
// every verb and probe is answered as before (the bound here is the test's patience, not a target:
// the latencies are in bench/RESULTS.md).
TEST_F(SchedulerLive, IdleAndSlowClientsLeaveTheVerbsAnswered) {
  create(res::kNodes, gpu_node("n1", 8));
  Scheduler s(standin_);
  ASSERT_TRUE(eventually([&] { return s.ready(); }, std::chrono::seconds(10))) << s.log();
  std::vector<int> held;
  for (int i = 0; i < 500; ++i) held.push_back(connect_to(s.port()));
  for (int i = 0; i < 100; ++i) {
    const int fd = connect_to(s.port());
    const std::string part = "POST /filter HTTP/1.1\r\nHost: a\r\nContent-Length: 1000\r\n\r\n{\"Pod\":";
    ASSERT_EQ(::write(fd, part.data(), part.size()), static_cast<ssize_t>(part.size()));
    held.push_back(fd);
  }
  for (int i = 0; i < 20; ++i) {
    const json p = create(res::kPods, gpu_pod("p" + std::to_string(i), 1));
    const std::string body = json{{"Pod", untyped(p)}, {"NodeNames", {"n1"}}}.dump();
    const auto r = ask(s.port(),
                       "POST /filter HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nConnection: close\r\n"
                       "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body,
                       std::chrono::seconds(5));
    ASSERT_EQ(status_of(r), 200) << i << " " << r.value_or("no answer");
    EXPECT_EQ(status_of(get(s.port(), "/readyz")), 200) << i;
  }
  // A flood of 50 concurrent filters on top: each is answered (placed, or 503 with Retry-After when
  // the workers' queue is full), none hangs.
  const json p = create(res::kPods, gpu_pod("flood", 1));
  const std::string body = json{{"Pod", untyped(p)}, {"NodeNames", {"n1"}}}.dump();
  std::vector<std::thread> callers;
  std::atomic<int> answered{0}, placed{0};
  for (int i = 0; i < 50; ++i) {
    callers.emplace_back([&] {
      const auto r = ask(s.port(),
                         "POST /filter HTTP/1.1\r\nHost: a\r\nConnection: close\r\nContent-Length: " +
                             std::to_string(body.size()) + "\r\n\r\n" + body,
                         std::chrono::seconds(5));
      const int st = status_of(r);
      if (st == 200) ++placed;
      if (st == 200 || (st == 503 && r->find("Retry-After: 1") != std::string::npos)) ++answered;
    });
  }
  for (auto& t : callers) t.join();
  EXPECT_EQ(answered.load(), 50);
  EXPECT_GT(placed.load(), 0);
  for (int fd : held) close(fd);
}

// A large request's memory goes back once it is answered (body, parser, decoded objects).
TEST_F(SchedulerLive, LargeBodiesLeaveNoMemoryBehind) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "ASan's allocator keeps freed memory in quarantine: RSS is measured in the plain build";
#endif
  create(res::kNodes, gpu_node("n1", 1));
  Scheduler s(standin_);
  ASSERT_TRUE(eventually([&] { return s.ready(); }, std::chrono::seconds(10))) << s.log();
  const json p = create(res::kPods, gpu_pod("x", 1));
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(s.post("filter", json{{"Pod", untyped(p)}, {"NodeNames", {"n1"}}}));
  const long resting = s.rss_kib();
  ASSERT_GT(resting, 0);
  json big{{"Pod", untyped(p)}, {"NodeNames", {"n1"}}, {"Padding", std::string(50u << 20, 'x')}};
  const std::string body = big.dump();
  for (int i = 0; i < 3; ++i) {
    auto r = s.post_raw("filter", body);
    ASSERT_TRUE(r) << i;
    EXPECT_EQ(r->status, 200) << r->body.substr(0, 200);
  }
  long after = 0;
  EXPECT_TRUE(eventually([&] {
    after = s.rss_kib();
    return after - resting < 10 * 1024;
  }, std::chrono::seconds(10)))
      << "resting " << resting << " KiB, after " << after << " KiB";
}

// ---- DRA: ResourceClaims allocated and reserved by kgpu before the Binding (KEP-4381) ----

json dra_device(const std::string& name, const std::string& product, const std::string& memory) {
  return {{"name", name},
          {"attributes",
           {{"type", {{"string", "gpu"}}},
            {"productName", {{"string", product}}},
            {"driverVersion", {{"version", "580.105.8"}}}}},
          {"capacity", {{"memory", {{"value", memory}}}}}};
}

json dra_slice(const std::string& node, const std::vector<json>& devices) {
  return {{"metadata", {{"name", node + "-gpu.nvidia.com-0"}}},
          {"spec",
           {{"driver", "gpu.nvidia.com"},
            {"nodeName", node},
            {"pool", {{"name", node}, {"generation", 1}, {"resourceSliceCount", 1}}},
            {"devices", devices}}}};
}

json dra_claim(const std::string& name, const std::vector<std::string>& selectors) {
  json sels = json::array();
  for (const auto& e : selectors) sels.push_back({{"cel", {{"expression", e}}}});
  return {{"metadata", {{"name", name}}},
          {"spec",
           {{"devices",
             {{"requests",
               json::array(
                   {{{"name", "gpu"},
                     {"exactly", {{"deviceClassName", "gpu.nvidia.com"}, {"count", 1}, {"selectors", sels}}}}})}}}}}};
}

json claim_pod(const std::string& name, const std::string& claim) {
  json c{{"name", "main"}, {"image", "i:1"}, {"resources", {{"claims", json::array({{{"name", "gpu"}}})}}}};
  json rc = claim.starts_with("template:") ? json{{"name", "gpu"}, {"resourceClaimTemplateName", claim.substr(9)}}
                                           : json{{"name", "gpu"}, {"resourceClaimName", claim}};
  return {{"metadata", {{"name", name}, {"namespace", "default"}}},
          {"spec", {{"containers", json::array({c})}, {"resourceClaims", json::array({rc})}}}};
}

TEST_F(SchedulerLive, AllocatesAndReservesDraClaimsBeforeTheBinding) {
  for (const char* n : {"n1", "n2"}) create(res::kNodes, json{{"metadata", {{"name", n}}}});
  create(res::kDeviceClasses,
         {{"metadata", {{"name", "gpu.nvidia.com"}}},
          {"spec",
           {{"selectors", json::array({{{"cel",
                                         {{"expression",
                                           "device.driver == \"gpu.nvidia.com\" && "
                                           "device.attributes[\"gpu.nvidia.com\"].type == \"gpu\""}}}}})}}}});
  create(res::kResourceSlices,
         dra_slice("n1", {dra_device("gpu-0", "NVIDIA L4", "23034Mi"), dra_device("gpu-1", "NVIDIA L4", "23034Mi")}));
  create(res::kResourceSlices, dra_slice("n2", {dra_device("gpu-0", "NVIDIA H100 80GB HBM3", "81559Mi"),
                                                dra_device("gpu-1", "NVIDIA H100 80GB HBM3", "81559Mi")}));
  const std::string mem40 = "device.capacity[\"gpu.nvidia.com\"].memory.compareTo(quantity(\"40Gi\")) >= 0";
  create(res::kResourceClaims, dra_claim("big", {mem40}));
  create(res::kResourceClaims, dra_claim("shared", {mem40}));
  create(res::kResourceClaims,
         dra_claim("huge", {"device.capacity[\"gpu.nvidia.com\"].memory.compareTo(quantity(\"100Gi\")) >= 0"}));
  create(res::kResourceClaims, dra_claim("solo", {}));
  const json p1 = create(res::kPods, claim_pod("p1", "big"));
  const json p2 = create(res::kPods, claim_pod("p2", "shared"));
  const json p3 = create(res::kPods, claim_pod("p3", "shared"));
  Scheduler s(standin_, {"--leader-elect=false"});
  ASSERT_TRUE(eventually([&] { return s.ready(); }, std::chrono::seconds(10))) << s.log();

  // A claim for one big GPU: only n2 has one; allocated, reserved, then the pod bound.
  json reply;
  ASSERT_EQ(filter(s, p1, {"n1", "n2"}, &reply), "n2") << reply.dump() << s.log();
  auto pr = s.post("prioritize", json{{"Pod", untyped(p1)}, {"Nodes", nullptr}, {"NodeNames", {"n1", "n2"}}});
  ASSERT_TRUE(pr && pr->status == 200);
  for (const auto& h : json::parse(pr->body)) EXPECT_EQ(h["Score"], h["Host"] == "n2" ? 10 : 0) << pr->body;
  ASSERT_EQ(bind(s, p1, "n2"), "") << s.log();
  EXPECT_EQ(pod("p1")["spec"]["nodeName"], "n2");
  json big = *client_->get(res::kResourceClaims, "default", "big");
  EXPECT_EQ(big["metadata"]["finalizers"], json::array({"resource.kubernetes.io/delete-protection"})) << big.dump();
  const json& alloc = big["status"]["allocation"];
  EXPECT_EQ(alloc["devices"]["results"],
            json::array({{{"request", "gpu"}, {"driver", "gpu.nvidia.com"}, {"pool", "n2"}, {"device", "gpu-0"}}}))
      << big.dump();
  EXPECT_EQ(alloc["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0],
            (json{{"key", "metadata.name"}, {"operator", "In"}, {"values", {"n2"}}}));
  EXPECT_FALSE(alloc.value("allocationTimestamp", "").empty());
  EXPECT_EQ(big["status"]["reservedFor"],
            json::array({{{"resource", "pods"}, {"name", "p1"}, {"uid", p1["metadata"]["uid"]}}}));

  // A claim shared by two pods: the first allocates it (through one injected 409, re-read and
  // retried), the second is pinned to its node and only added to reservedFor.
  standin_.fault({{"status", 409}, {"path", "/resourceclaims/shared/status"}, {"method", "PUT"}, {"times", 1}});
  ASSERT_EQ(filter(s, p2, {"n1", "n2"}, &reply), "n2") << reply.dump();
  ASSERT_EQ(bind(s, p2, "n2"), "") << s.log();
  const json shared1 = *client_->get(res::kResourceClaims, "default", "shared");
  EXPECT_EQ(shared1["status"]["allocation"]["devices"]["results"][0]["device"], "gpu-1") << shared1.dump();
  ASSERT_EQ(filter(s, p3, {"n1", "n2"}, &reply), "n2") << reply.dump();
  ASSERT_EQ(bind(s, p3, "n2"), "") << s.log();
  const json shared = *client_->get(res::kResourceClaims, "default", "shared");
  EXPECT_EQ(shared["status"]["allocation"], shared1["status"]["allocation"]);
  ASSERT_EQ(shared["status"]["reservedFor"].size(), 2u) << shared.dump();
  EXPECT_EQ(shared["status"]["reservedFor"][1]["name"], "p3");
  EXPECT_EQ(pod("p3")["spec"]["nodeName"], "n2");
  // Elsewhere the shared claim cannot follow.
  const json p3b = create(res::kPods, claim_pod("p3b", "shared"));
  EXPECT_EQ(filter(s, p3b, {"n1"}, &reply), "");
  EXPECT_NE(reply["FailedAndUnresolvableNodes"].value("n1", "").find("allocated on node n2"), std::string::npos)
      << reply.dump();

  // No device satisfies: every node says why, naming the selector; an event tells the pod.
  const json p4 = create(res::kPods, claim_pod("p4", "huge"));
  EXPECT_EQ(filter(s, p4, {"n1", "n2"}, &reply), "");
  const std::string why = reply["FailedAndUnresolvableNodes"].value("n2", "");
  EXPECT_NE(why.find("wants 1 device(s), 0 free"), std::string::npos) << reply.dump();
  EXPECT_NE(why.find("quantity(\"100Gi\")"), std::string::npos) << reply.dump();
  EXPECT_TRUE(eventually([&] {
    auto ev = client_->list(res::kEventsV1, "default");
    return ev && ev->dump().find("cannot allocate all claims") != std::string::npos;
  }));

  // A template's claim not created yet: the pod waits, saying so.
  const json p5 = create(res::kPods, claim_pod("p5", "template:gpu-template"));
  EXPECT_EQ(filter(s, p5, {"n1", "n2"}, &reply), "");
  EXPECT_NE(reply["FailedAndUnresolvableNodes"].value("n1", "").find("template gpu-template"), std::string::npos)
      << reply.dump();

  // The Binding fails (a conflict): the claim's allocation, reservation and finalizer are undone.
  const json p6 = create(res::kPods, claim_pod("p6", "solo"));
  const std::string node6 = filter(s, p6, {"n1", "n2"}, &reply);
  ASSERT_FALSE(node6.empty()) << reply.dump();
  standin_.fault({{"status", 409}, {"path", "/pods/p6/binding"}, {"method", "POST"}, {"times", 1}});
  EXPECT_NE(bind(s, p6, node6), "");
  const json solo = *client_->get(res::kResourceClaims, "default", "solo");
  const json solo_status = solo.value("status", json::object());
  EXPECT_FALSE(solo_status.contains("allocation")) << solo.dump();
  EXPECT_TRUE(solo_status.value("reservedFor", json::array()).empty()) << solo.dump();
  EXPECT_TRUE(solo["metadata"].value("finalizers", json::array()).empty()) << solo.dump();
  // It was allocated and reserved in between: the claim's status was written twice (allocation,
  // then its undoing) and the claim itself twice (finalizer added, then removed).
  httplib::SSLClient h("127.0.0.1", standin_.port());
  h.enable_server_certificate_verification(false);
  auto log = h.Get("/standin/v1/requests");
  ASSERT_TRUE(log && log->status == 200);
  size_t status_writes = 0, claim_writes = 0;
  for (const auto& e : json::parse(log->body)) {
    if (e.value("method", "") != "PUT") continue;
    const std::string path = e.value("path", "");
    status_writes += path.ends_with("/resourceclaims/solo/status");
    claim_writes += path.ends_with("/resourceclaims/solo");
  }
  EXPECT_EQ(status_writes, 2u);
  EXPECT_EQ(claim_writes, 2u);

  auto m = s.get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_NE(m->body.find("kgpu_scheduler_attempts_total{verb=\"bind\",result=\"bound\"} 3"), std::string::npos)
      << m->body;
}

// A cluster before 1.34 serves no resource.k8s.io/v1: the scheduler says so, is ready without the
// DRA informers, and places GPU pods as before.
TEST(SchedulerLiveNoDra, ReadyAndPlacingWhereResourceK8sIoIsNotServed) {
  StandIn standin({"--runtime-config", "resource.k8s.io/v1=false"});
  auto client = client_for(token_config(standin));
  auto claims = client->list(res::kResourceClaims, "default");
  ASSERT_FALSE(claims);
  EXPECT_EQ(claims.error().code, 404);
  ASSERT_TRUE(client->create(res::kNodes, "", gpu_node("n1", 2)));
  Scheduler s(standin, {"--leader-elect=false"});
  ASSERT_TRUE(eventually([&] { return s.ready(); }, std::chrono::seconds(10))) << s.log();
  EXPECT_NE(s.log().find("DRA claims are not allocated: the API server does not serve resource.k8s.io/v1"),
            std::string::npos)
      << s.log();
  auto p = client->create(res::kPods, "default", gpu_pod("train", 1));
  ASSERT_TRUE(p);
  ASSERT_TRUE(eventually([&] {
    auto r = s.post("filter", json{{"Pod", *p}, {"Nodes", nullptr}, {"NodeNames", {"n1"}}});
    return r && r->status == 200 && json::parse(r->body)["NodeNames"] == json::array({"n1"});
  }, std::chrono::seconds(10))) << s.log();
}

}  // namespace
}  // namespace kgpu::testing
