// "How many GPUs does this pod hold" has one answer (k8s/api/objects.h): the pod decoder's table
// of Kubernetes' rules, then one cluster read through `kgpu top`'s and `allocations`' views,
// `kgpu report`'s cluster and the live scheduler's model, which must all count the same.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "report/cluster.h"
#include "k8s/api/objects.h"
#include "k8s/gpu_assignment.h"
#include "scheduler/scheduler.h"
#include "top/cluster.h"
#include "top/allocations.h"
#include "top/views.h"

namespace kgpu {
namespace {

using nlohmann::json;

json container(const std::string& name, const json& resources, bool sidecar = false) {
  json c{{"name", name}, {"image", "trainer:1"}, {"resources", resources}};
  if (sidecar) c["restartPolicy"] = "Always";
  return c;
}

json gpus(const json& n) { return json{{"limits", {{"nvidia.com/gpu", n}}}}; }

json pod(const std::string& name, json containers, json init = json::array(), const std::string& node = "n") {
  json p{{"metadata", {{"namespace", "ml"}, {"name", name}, {"uid", "uid-" + name}}},
         {"spec", {{"containers", std::move(containers)}}},
         {"status", {{"phase", node.empty() ? "Pending" : "Running"}}}};
  if (!init.empty()) p["spec"]["initContainers"] = std::move(init);
  if (!node.empty()) p["spec"]["nodeName"] = node;
  return p;
}

struct Case {
  const char* name;
  json pod;
  int64_t gpus;           // the effective request of nvidia.com/gpu
  const char* invalid;    // a part of the refusal, or nullptr when kube-apiserver accepts the pod
};

TEST(PodDecoder, OneEffectiveRequestForEveryShapeOfPod) {
  const std::vector<Case> cases = {
      {"app containers add up", pod("a", json::array({container("a", gpus("1")), container("b", gpus(2))})), 3,
       nullptr},
      {"an init container bigger than the app",
       pod("b", json::array({container("main", gpus("2"))}), json::array({container("load", gpus("4"))})), 4, nullptr},
      {"a sidecar runs beside the app and the later init containers",
       pod("c", json::array({container("main", gpus("2"))}),
           json::array({container("proxy", gpus("1"), true), container("warm", gpus("2"))})),
       3, nullptr},
      {"an init container before the sidecar runs without it",
       pod("d", json::array({container("main", gpus("1"))}),
           json::array({container("load", gpus("3")), container("proxy", gpus("1"), true)})),
       3, nullptr},
      {"limits only: the request defaults to the limit", pod("e", json::array({container("m", gpus("2"))})), 2,
       nullptr},
      {"requests equal to limits",
       pod("f", json::array({container("m", {{"requests", {{"nvidia.com/gpu", "2"}}}, {"limits", {{"nvidia.com/gpu", 2}}}})})),
       2, nullptr},
      {"requests different from limits are refused",
       pod("g", json::array({container("m", {{"requests", {{"nvidia.com/gpu", "1"}}}, {"limits", {{"nvidia.com/gpu", "2"}}}})})),
       1, "differs from the limit"},
      {"a request without a limit is refused", pod("h", json::array({container("m", {{"requests", {{"nvidia.com/gpu", "1"}}}})})),
       1, "needs a limit"},
      {"a malformed quantity is refused and counts nothing", pod("i", json::array({container("m", gpus("two"))})), 0,
       "resources.limits[nvidia.com/gpu]"},
      {"a fraction of an extended resource is refused", pod("j", json::array({container("m", gpus("0.5"))})), 1,
       "not a whole number"},
      {"no GPU at all", pod("k", json::array({container("m", {{"limits", {{"cpu", "2"}}}})})), 0, nullptr},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto p = k8s::api::decode_pod(c.pod);
    ASSERT_TRUE(p) << p.error().message;
    EXPECT_EQ(p->request("nvidia.com/gpu"), c.gpus);
    EXPECT_EQ(p->gpu_resource(), c.gpus > 0 ? "nvidia.com/gpu" : "");
    if (c.invalid == nullptr) {
      EXPECT_FALSE(p->invalid) << *p->invalid;
    } else {
      ASSERT_TRUE(p->invalid);
      EXPECT_NE(p->invalid->find(c.invalid), std::string::npos) << *p->invalid;
    }
  }
}

TEST(PodDecoder, OverheadAndCpuMemoryFollowTheSameRule) {
  json p = pod("o", json::array({container("m", {{"requests", {{"cpu", "500m"}, {"memory", "1Gi"}}}})}),
               json::array({container("init", {{"requests", {{"cpu", "2"}, {"memory", "100Mi"}}}})}));
  p["spec"]["overhead"] = {{"cpu", "250m"}, {"memory", "1Mi"}};
  auto d = k8s::api::decode_pod(p);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->cpu_milli, 2250);   // the init container's 2 cores, then overhead
  EXPECT_EQ(d->memory_mib, 1025);  // the app's 1 GiB, then overhead
  EXPECT_FALSE(k8s::api::decode_pod(json::array()));
  EXPECT_FALSE(k8s::api::decode_pod(json{{"kind", 3}}));
}

// One node of 8 GPUs and three pods on it that the old readers counted differently: an init
// container bigger than the app (report counted the app's 2), a sidecar beside the app (report
// counted 2 of 3), and a plain pod. Every view must say 4 + 3 + 1 = 8.
struct Fixture {
  json node;
  std::vector<json> pods;
  Fixture() {
    k8s::NodeGpuReport r;
    for (int i = 0; i < 8; ++i) {
      k8s::ReportedGpu g;
      g.index = i;
      g.uuid = "GPU-" + std::to_string(i);
      g.model = "NVIDIA H100 80GB HBM3";
      g.resource = "nvidia.com/gpu";
      r.gpus.push_back(g);
    }
    node = {{"metadata",
             {{"name", "n"},
              {"labels", {{"nvidia.com/gpu.count", "8"}, {"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"}}},
              {"annotations", {{k8s::kAnnotationNodeGpus, k8s::format_node_report(r)}}}}},
            {"status",
             {{"capacity", {{"nvidia.com/gpu", "8"}, {"cpu", "64"}, {"memory", "512Gi"}}},
              {"allocatable", {{"nvidia.com/gpu", "8"}, {"cpu", "64"}, {"memory", "512Gi"}}}}}};
    pods.push_back(pod("loader", json::array({container("main", gpus("2"))}), json::array({container("load", gpus("4"))})));
    pods.push_back(
        pod("served", json::array({container("main", gpus("2"))}), json::array({container("proxy", gpus("1"), true)})));
    pods.push_back(pod("plain", json::array({container("main", gpus(1))})));
  }
};

TEST(GpuCount, TopAllocationsReportAndTheSchedulerAgree) {
  const Fixture f;
  const std::map<std::string, int64_t> want = {{"loader", 4}, {"served", 3}, {"plain", 1}};

  top::Cluster c;
  c.nodes.push_back(k8s::api::decode_node(f.node).value());
  for (const auto& p : f.pods) c.pods.push_back(k8s::api::decode_pod(p).value());
  for (const auto& p : c.pods) EXPECT_EQ(p.requests.at("nvidia.com/gpu"), want.at(p.name)) << "top: " << p.name;
  const auto a = top::allocations(c);
  ASSERT_EQ(a.rows.size(), 1u);
  EXPECT_EQ(a.rows[0].requested, 8) << "allocations";
  for (const auto& h : a.rows[0].holders) EXPECT_EQ(h.count, want.at(h.pod)) << "allocations: " << h.pod;

  cost::ClusterObjects o;
  o.nodes.push_back(f.node);
  o.pods = f.pods;
  const auto report = cost::cluster_from_objects(o, "team");
  ASSERT_EQ(report.pods.size(), 3u);
  for (const auto& p : report.pods) EXPECT_EQ(p.units, want.at(p.name)) << "report: " << p.name;

  FakeClock clock;
  scheduler::SchedulerOptions so;
  so.clock = &clock;
  auto s = scheduler::GpuScheduler::create(so, nullptr, nullptr);
  ASSERT_TRUE(s);
  (*s)->reset({f.node}, f.pods);
  EXPECT_EQ((*s)->allocation("nvidia.com/gpu"), (std::pair<int64_t, int64_t>{8000, 8000})) << "scheduler";
}

}  // namespace
}  // namespace kgpu
