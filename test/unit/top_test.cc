// kgpu top's pieces below the API: the exposition reader (syntax, escapes, bounds and their
// messages), the reading of an agent page into devices, holders and shares, and the allocation
// and namespace views over decoded API objects.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "top/cluster.h"
#include "top/exposition.h"
#include "top/node_metrics.h"
#include "top/allocations.h"
#include "top/views.h"

namespace kgpu::top {
namespace {

using nlohmann::json;
using k8s::api::decode_claim;
using k8s::api::decode_slice;
using PodInfo = k8s::api::PodObject;

// The read model's decoders (k8s/api/objects.h); the test objects always decode.
k8s::api::NodeObject decode_node(const json& j) { return k8s::api::decode_node(j).value(); }
k8s::api::PodObject decode_pod(const json& j) { return k8s::api::decode_pod(j).value(); }

TEST(Exposition, ReadsSamplesLabelsEscapesAndSpecialValues) {
  const std::string page =
      "# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).\n"
      "# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n"
      "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-1\",err_msg=\"a \\\"quoted\\\" \\\\ back\\nline\",} 42\n"
      "\n"
      "up 1 1700000000000\n"
      "x_total{a=\"1\"} +Inf\n"
      "y{a = \"1\" , b=\"2\"}\t-1.5e3\r\n"
      "z NaN\n";
  auto s = parse_exposition(page, "page");
  ASSERT_TRUE(s) << s.error().message;
  ASSERT_EQ(s->size(), 5u);
  EXPECT_EQ((*s)[0].name, "DCGM_FI_DEV_GPU_UTIL");
  EXPECT_EQ((*s)[0].value, 42);
  ASSERT_NE((*s)[0].label("err_msg"), nullptr);
  EXPECT_EQ(*(*s)[0].label("err_msg"), "a \"quoted\" \\ back\nline");
  EXPECT_EQ(*(*s)[0].label("UUID"), "GPU-1");
  EXPECT_EQ((*s)[1].name, "up");
  EXPECT_TRUE(std::isinf((*s)[2].value));
  EXPECT_EQ((*s)[3].value, -1500);
  EXPECT_EQ(*(*s)[3].label("b"), "2");
  EXPECT_TRUE(std::isnan((*s)[4].value));
}

TEST(Exposition, KeepsOnlyWantedNamesButChecksEveryLine) {
  auto s = parse_exposition("a 1\nb 2\nc{x=\"1\"} 3\n", "p", {}, [](std::string_view n) { return n == "b"; });
  ASSERT_TRUE(s);
  ASSERT_EQ(s->size(), 1u);
  EXPECT_EQ((*s)[0].value, 2);
  auto bad = parse_exposition("a 1\nb 2\nc{x=1} 3\n", "p", {}, [](std::string_view n) { return n == "b"; });
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("p:3: a label value must be in double quotes"), std::string::npos)
      << bad.error().message;
}

TEST(Exposition, MalformedLinesNameSourceAndLine) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"ok 1\n9bad 1\n", "node n1 /metrics:2: expected a metric name"},
      {"a{x=\"1\" 2\n", ":1: expected ',' or '}' after a label value"},
      {"a{x=\"1} 2\n", ":1: a label value is not closed"},
      {"a{x=\"\\q\"} 2\n", ":1: unknown escape \\q"},
      {"a{x=\"1\",x=\"2\"} 2\n", ":1: label x given twice"},
      {"a\n", ":1: expected a value"},
      {"a one\n", ":1: the value is not a number"},
      {"a 1 2 3\n", ":1: unexpected text after the value"},
      {"a{=\"1\"} 1\n", ":1: expected a label name or '}'"},
  };
  for (const auto& [text, want] : cases) {
    auto s = parse_exposition(text, "node n1 /metrics");
    ASSERT_FALSE(s) << text;
    EXPECT_NE(s.error().message.find(want), std::string::npos) << text << " -> " << s.error().message;
  }
}

TEST(Exposition, BoundsSizeLineLengthSamplesAndLabels) {
  ParseLimits l;
  l.max_bytes = 100;
  auto big = parse_exposition(std::string(101, '#'), "p", l);
  ASSERT_FALSE(big);
  EXPECT_NE(big.error().message.find("p: the page has 101 bytes, more than the limit of 100"), std::string::npos);

  l = {};
  l.max_line = 50;
  auto line = parse_exposition("a 1\nb{x=\"" + std::string(60, 'y') + "\"} 1\n", "p", l);
  ASSERT_FALSE(line);
  EXPECT_NE(line.error().message.find("p:2: the line has"), std::string::npos) << line.error().message;

  l = {};
  l.max_samples = 3;
  auto many = parse_exposition("a 1\nb 1\nc 1\nd 1\n", "p", l, [](std::string_view) { return false; });
  ASSERT_FALSE(many);
  EXPECT_NE(many.error().message.find("p:4: more than 3 samples"), std::string::npos) << many.error().message;

  l = {};
  l.max_labels = 2;
  auto labels = parse_exposition("a{x=\"1\",y=\"2\",z=\"3\"} 1\n", "p", l);
  ASSERT_FALSE(labels);
  EXPECT_NE(labels.error().message.find("more than 2 labels"), std::string::npos);
}

// An agent page: GPU 0 held by one container (its series carry the pod), GPU 1 shared by two
// containers (the GPU's series without pod labels, theirs with), a MIG instance held by a pod.
const char* kPage =
    R"(DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-a",device="nvidia0",modelName="NVIDIA L4",container="main",namespace="team-a",pod="trainer"} 40
DCGM_FI_DEV_GPU_UTIL{gpu="1",UUID="GPU-b",device="nvidia1",modelName="NVIDIA L4"} 80
DCGM_FI_DEV_GPU_UTIL{gpu="1",UUID="GPU-b",device="nvidia1",modelName="NVIDIA L4",container="jupyter",namespace="team-b",pod="nb"} 30
DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-a",device="nvidia0",modelName="NVIDIA L4",container="main",namespace="team-a",pod="trainer"} 6000
DCGM_FI_DEV_FB_FREE{gpu="0",UUID="GPU-a",device="nvidia0",modelName="NVIDIA L4",container="main",namespace="team-a",pod="trainer"} 16778
DCGM_FI_DEV_FB_RESERVED{gpu="0",UUID="GPU-a",device="nvidia0",modelName="NVIDIA L4",container="main",namespace="team-a",pod="trainer"} 256
DCGM_FI_DEV_FB_USED{gpu="1",UUID="GPU-b",device="nvidia1",modelName="NVIDIA L4"} 4500
DCGM_FI_DEV_FB_USED{gpu="1",UUID="GPU-b",device="nvidia1",modelName="NVIDIA L4",container="jupyter",namespace="team-b",pod="nb"} 1000
DCGM_FI_DEV_FB_USED{gpu="2",UUID="GPU-c",device="nvidia2",modelName="NVIDIA A100-SXM4-40GB",GPU_I_PROFILE="3g.20gb",GPU_I_ID="1",container="model",namespace="team-d",pod="infer"} 4000
DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{gpu="2",UUID="GPU-c",device="nvidia2",modelName="NVIDIA A100-SXM4-40GB",GPU_I_PROFILE="3g.20gb",GPU_I_ID="1",container="model",namespace="team-d",pod="infer"} 0.25
kgpu_gpu_up{gpu="1",UUID="GPU-b",device="nvidia1",modelName="NVIDIA L4"} 0
kgpu_device_allocated{gpu="0",UUID="GPU-a",device="nvidia0",modelName="NVIDIA L4",resource="nvidia.com/gpu",device_id="GPU-a",container="main",namespace="team-a",pod="trainer"} 1
kgpu_device_allocated{gpu="1",UUID="GPU-b",device="nvidia1",modelName="NVIDIA L4",resource="nvidia.com/gpu.shared",device_id="GPU-b::0",container="jupyter",namespace="team-b",pod="nb"} 1
kgpu_container_gpu_processes{gpu="1",UUID="GPU-b",device="nvidia1",modelName="NVIDIA L4",container="jupyter",namespace="team-b",pod="nb"} 2
DCGM_FI_DEV_SM_CLOCK{gpu="0",UUID="GPU-a"} 1500
)";

TEST(NodeMetrics, TellsTheGpusOwnSeriesFromAContainersShare) {
  auto s = parse_exposition(kPage, "page", {}, wanted_metric);
  ASSERT_TRUE(s) << s.error().message;
  const NodeMetrics nm = node_metrics(*s);
  ASSERT_EQ(nm.devices.size(), 3u);
  const Device& a = nm.devices.at("GPU-a");
  EXPECT_EQ(a.util_pct, 40);
  EXPECT_EQ(a.fb_used_mib, 6000);
  EXPECT_EQ(a.fb_total_mib(), 23034);
  ASSERT_TRUE(a.owner);
  EXPECT_EQ(a.owner->pod, "trainer");
  EXPECT_EQ(a.minor, "0");
  const Device& b = nm.devices.at("GPU-b");
  EXPECT_EQ(b.util_pct, 80);  // the GPU's, not the container's 30
  EXPECT_EQ(b.fb_used_mib, 4500);
  EXPECT_EQ(b.up, false);
  EXPECT_FALSE(b.owner);
  const Device& c = nm.devices.at("GPU-c/gi1");
  EXPECT_EQ(c.mig_profile, "3g.20gb");
  EXPECT_EQ(c.tensor_active, 0.25);
  EXPECT_FALSE(c.util_pct);
  ASSERT_EQ(nm.uses.size(), 1u);
  EXPECT_EQ(nm.uses[0].who.pod, "nb");
  EXPECT_EQ(nm.uses[0].util_pct, 30);
  EXPECT_EQ(nm.uses[0].fb_used_mib, 1000);
  EXPECT_EQ(nm.uses[0].processes, 2);
  ASSERT_EQ(nm.allocations.size(), 2u);
  EXPECT_FALSE(nm.allocations[0].replica);
  EXPECT_TRUE(nm.allocations[1].replica);
  EXPECT_EQ(nm.allocations[1].device_key, "GPU-b");
}

TEST(NodeMetrics, ReadsOldAndPrometheusLabelSpellings) {
  auto s = parse_exposition(
      "kgpu_container_gpu_processes{uuid=\"GPU-b\",exported_pod=\"nb\",exported_namespace=\"t\","
      "exported_container=\"c\"} 1\n"
      "DCGM_FI_DEV_GPU_UTIL{uuid=\"GPU-b\",exported_pod=\"nb\",exported_namespace=\"t\",exported_container=\"c\"} 12\n"
      "DCGM_FI_DEV_GPU_UTIL{uuid=\"GPU-b\"} 70\n",
      "p", {}, wanted_metric);
  ASSERT_TRUE(s);
  const NodeMetrics nm = node_metrics(*s);
  EXPECT_EQ(nm.devices.at("GPU-b").util_pct, 70);
  ASSERT_EQ(nm.uses.size(), 1u);
  EXPECT_EQ(nm.uses[0].who, (ContainerRef{"t", "nb", "c"}));
  EXPECT_EQ(nm.uses[0].util_pct, 12);
}

json node_json(const std::string& name, json capacity, json allocatable, json extra = json::object()) {
  json n = {{"metadata", {{"name", name}, {"labels", json::object()}}},
            {"status", {{"capacity", capacity}, {"allocatable", allocatable}}}};
  n.merge_patch(extra);
  return n;
}

json pod_json(const std::string& ns, const std::string& name, const std::string& node, json limits,
              const std::string& phase = "Running") {
  return {{"metadata", {{"namespace", ns}, {"name", name}}},
          {"spec",
           {{"nodeName", node}, {"containers", json::array({{{"name", "c"}, {"resources", {{"limits", limits}}}}})}}},
          {"status", {{"phase", phase}}}};
}

TEST(Allocations, CountsPerNodeAndClusterAndFindsWhatNobodyCanUse) {
  Cluster c;
  k8s::NodeGpuReport report;
  report.gpus.push_back(
      {0, "GPU-0", "NVIDIA L4", 23034, true, "nvidia.com/gpu.shared", 4, {}, {{"t", "p1", "", "c", 3}}});
  report.gpus.push_back(
      {1, "GPU-1", "NVIDIA L4", 23034, true, "nvidia.com/gpu.shared", 4, {}, {{"t", "p2", "", "c", 1}}});
  report.gpus.push_back({2, "GPU-2", "NVIDIA L4", 23034, true, "nvidia.com/gpu.shared", 4, {}, {}});
  json shared = node_json("shared", {{"nvidia.com/gpu.shared", "12"}}, {{"nvidia.com/gpu.shared", "12"}});
  shared["metadata"]["annotations"] = {{"kgpu.io/gpus", k8s::format_node_report(report)}};
  c.nodes.push_back(decode_node(shared));
  c.nodes.push_back(decode_node(node_json("sick", {{"nvidia.com/gpu", "8"}}, {{"nvidia.com/gpu", "6"}})));
  c.nodes.push_back(decode_node(node_json("cordoned", {{"nvidia.com/gpu", "4"}}, {{"nvidia.com/gpu", "4"}},
                                          {{"spec", {{"unschedulable", true}}}})));
  c.nodes.push_back(decode_node(node_json("noplugin", json::object(), json::object(),
                                          {{"metadata", {{"labels", {{"nvidia.com/gpu.count", "2"}}}}}})));
  c.pods.push_back(decode_pod(pod_json("t", "p1", "shared", {{"nvidia.com/gpu.shared", 3}})));
  c.pods.push_back(decode_pod(pod_json("t", "p2", "shared", {{"nvidia.com/gpu.shared", "1"}})));
  c.pods.push_back(decode_pod(pod_json("u", "big", "sick", {{"nvidia.com/gpu", "5"}})));
  c.pods.push_back(decode_pod(pod_json("u", "one", "cordoned", {{"nvidia.com/gpu", "1"}})));
  const Allocations a = allocations(c);
  ASSERT_EQ(a.rows.size(), 3u);
  EXPECT_EQ(a.rows[0].node, "shared");
  EXPECT_EQ(a.rows[0].replicas, 4);
  EXPECT_EQ(a.rows[0].requested, 4);
  EXPECT_EQ(a.rows[0].holders.size(), 2u);
  EXPECT_EQ(a.rows[1].node, "sick");
  EXPECT_EQ(a.rows[1].requested, 5);
  const auto& gpu = a.totals.at("nvidia.com/gpu");
  EXPECT_EQ(gpu.capacity, 12);
  EXPECT_EQ(gpu.allocatable, 10);
  EXPECT_EQ(gpu.requested, 6);
  std::map<std::string, double> unusable;
  for (const auto& u : a.unusable) unusable[u.node + " " + u.reason] = u.count;
  EXPECT_EQ(unusable["sick unhealthy"], 2);
  EXPECT_EQ(unusable["cordoned cordoned"], 3);
  EXPECT_EQ(unusable["shared fragmented"], 4);  // GPU 0: 1 free, GPU 1: 3 free; GPU 2 is whole
  EXPECT_EQ(unusable["noplugin not-advertised"], 2);
  EXPECT_EQ(unusable.size(), 4u);
  const std::string text = allocations_text(a, false);
  EXPECT_NE(text.find("(cluster)"), std::string::npos) << text;
  EXPECT_NE(text.find("GPU 1 3/4 free"), std::string::npos) << text;
}

TEST(Views, PodRequestsCountInitContainersAndSidecarsAsTheKubeletDoes) {
  json pod = pod_json("t", "p", "n", {{"nvidia.com/gpu", 1}});
  pod["spec"]["initContainers"] = json::array(
      {{{"name", "side"}, {"restartPolicy", "Always"}, {"resources", {{"limits", {{"nvidia.com/gpu", 1}}}}}},
       {{"name", "init"}, {"resources", {{"limits", {{"nvidia.com/gpu", 3}}}}}}});
  const PodInfo p = decode_pod(pod);
  EXPECT_EQ(p.requests.at("nvidia.com/gpu"), 4);  // init (3) beside the sidecar (1) > app (1) + sidecar (1)
}

TEST(Views, DraClaimsHoldTheGpuOfTheirDeviceMinorAndCountInAllocations) {
  Cluster c;
  c.nodes.push_back(decode_node(node_json("d", json::object(), json::object(),
                                          {{"metadata", {{"labels", {{"nvidia.com/gpu.present", "true"}}}}}})));
  c.slices.push_back(decode_slice(json::parse(R"({"metadata":{"name":"d-gpu.nvidia.com-0"},
      "spec":{"driver":"gpu.nvidia.com","pool":{"name":"d","generation":1,"resourceSliceCount":1},"nodeName":"d",
              "devices":[{"name":"gpu-0"},{"name":"gpu-1","taints":[{"key":"k","effect":"NoExecute"}]}]}})")));
  c.claims.push_back(decode_claim(json::parse(R"({"metadata":{"namespace":"a","name":"c1"},
      "status":{"allocation":{"devices":{"results":[{"request":"gpu","driver":"gpu.nvidia.com","pool":"d","device":"gpu-0"}]}},
                "reservedFor":[{"resource":"pods","name":"p","uid":"u"}]}})")));
  json pod = pod_json("a", "p", "d", json::object());
  pod["status"]["resourceClaimStatuses"] = json::array({{{"name", "gpu"}, {"resourceClaimName", "c1"}}});
  c.pods.push_back(decode_pod(pod));
  ASSERT_EQ(c.pods[0].claims, std::vector<std::string>{"c1"});
  Metrics m;
  NodeMetrics nm;
  Device d0;
  d0.key = "GPU-0";
  d0.uuid = "GPU-0";
  d0.index = "0";
  d0.minor = "0";
  d0.model = "NVIDIA H100 80GB HBM3";
  d0.util_pct = 55;
  nm.devices["GPU-0"] = d0;
  m["d"].metrics = nm;
  const auto rows = pod_rows(c, m, false);
  ASSERT_EQ(rows.size(), 1u);
  ASSERT_EQ(rows[0].holds.size(), 1u);
  EXPECT_EQ(rows[0].holds[0].what, "claim c1: GPU 0 (NVIDIA H100 80GB HBM3)");
  EXPECT_EQ(rows[0].util, 55);
  EXPECT_EQ(rows[0].gpu_equiv, 1);
  const auto nodes = node_rows(c, m);
  ASSERT_EQ(nodes.size(), 1u);
  ASSERT_EQ(nodes[0].resources.size(), 1u);
  EXPECT_EQ(nodes[0].resources[0].name, "dra:gpu.nvidia.com");
  EXPECT_EQ(nodes[0].resources[0].allocatable, 2);
  EXPECT_EQ(nodes[0].resources[0].requested, 1);
  const Allocations a = allocations(c);
  ASSERT_EQ(a.rows.size(), 1u);
  EXPECT_EQ(a.rows[0].capacity, 2);
  EXPECT_EQ(a.rows[0].allocatable, 1);  // the tainted device is not
  EXPECT_EQ(a.rows[0].requested, 1);
  ASSERT_EQ(a.rows[0].holders.size(), 1u);
  EXPECT_EQ(a.rows[0].holders[0].pod, "p");
  ASSERT_EQ(a.unusable.size(), 1u);
  EXPECT_EQ(a.unusable[0].reason, "unhealthy");
  EXPECT_EQ(a.unusable[0].resource, "dra:gpu.nvidia.com");
}

TEST(Views, NamespacesSumRequestsAgainstTheirQuota) {
  Cluster c;
  c.nodes.push_back(decode_node(node_json("n", {{"nvidia.com/gpu", "4"}}, {{"nvidia.com/gpu", "4"}})));
  c.pods.push_back(decode_pod(pod_json("a", "p1", "n", {{"nvidia.com/gpu", "2"}})));
  c.pods.push_back(decode_pod(pod_json("a", "pending", "", {{"nvidia.com/gpu", "1"}}, "Pending")));
  c.quotas.push_back(decode_quota({{"metadata", {{"namespace", "a"}, {"name", "q"}}},
                                   {"spec", {{"hard", {{"requests.nvidia.com/gpu", "4"}, {"cpu", "10"}}}}}}));
  c.quotas.push_back(decode_quota(
      {{"metadata", {{"namespace", "a"}, {"name", "q2"}}}, {"spec", {{"hard", {{"requests.nvidia.com/gpu", 3}}}}}}));
  Metrics m;
  m["n"].error = "no kgpu agent pod on this node";
  auto rows = namespace_rows(c, m);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].pods, 1);  // the pending pod holds nothing yet
  EXPECT_EQ(rows[0].gpu_equiv, 2);
  EXPECT_EQ(rows[0].requested.at("nvidia.com/gpu"), 3);
  EXPECT_EQ(rows[0].quota.at("requests.nvidia.com/gpu"), 3);  // the tighter quota
  EXPECT_EQ(rows[0].quota.size(), 1u);
  EXPECT_NE(namespaces_table(rows).find("gpu 3/3"), std::string::npos) << namespaces_table(rows);
  auto bad = sort_namespaces(rows, "cpu");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("--sort-by cpu: expected one of name"), std::string::npos);
}

}  // namespace
}  // namespace kgpu::top
