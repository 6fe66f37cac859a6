// `kgpu top` and `kgpu allocations` end to end: the stand-in holds the cluster (nodes, pods, a
// quota, the agent pods), real `kgpu agent` processes run on fake NVML nodes with configured
// readings and a kubelet peer, and the `kgpu` binary reads them through the stand-in's pods/proxy.
// The numbers are checked against values computed by hand from the node descriptions below.
// Also the stand-in's pods/proxy itself: passthrough, unknown pod, no address, unreachable, timeout.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <ctime>
#include <nlohmann/json.hpp>

#include "../peers/kubelet_peer.h"
#include "agent_fixture.h"
#include "k8s/gpu_assignment.h"
#include "node_fixture.h"
#include "prom_fixture.h"
#include "standin.h"
#include "test_env.h"

namespace kgpu::testing {
namespace {

using fixture::kGpu0;
using fixture::kGpu1;
using fixture::kGpu2;
using nlohmann::json;

constexpr const char* kGpuB = "GPU-00000000-0000-0000-0000-0000000000b0";

// gpu-a: GPU 0 (L4) held by team-a/trainer-a, GPU 1 (L4) shared by team-b/notebook-b (1 of 4
// replicas, pid 1001: 1000 MiB, 30 %) and team-c/svc-c (2 of 4, pid 1002: 3000 MiB, 50 %) plus a
// process outside pods (500 MiB), GPU 2 (A100 40GB) in MIG mode with two 3g.20gb instances (20096
// MiB each), the first held by team-d/infer-d (4000 MiB).
std::string node_a() {
  return std::string("gpus:\n  - model: L4\n    uuid: ") + kGpu0 +
         "\n    telemetry: {gpuUtil: 40, gpuTemp: 50, powerW: 30}\n"
         "    processes: [{pid: 3001, usedMemoryMiB: 6000, smUtil: 40}]\n"
         "  - model: L4\n    uuid: " +
         kGpu1 +
         "\n    telemetry: {gpuUtil: 80, gpuTemp: 60, powerW: 50}\n"
         "    processes:\n"
         "      - {pid: 1001, usedMemoryMiB: 1000, smUtil: 30}\n"
         "      - {pid: 1002, usedMemoryMiB: 3000, smUtil: 50}\n"
         "      - {pid: 1003, usedMemoryMiB: 500, smUtil: 0}\n"
         "  - model: A100-SXM4-40GB\n    uuid: " +
         kGpu2 +
         "\n    telemetry: {gpuTemp: 45, powerW: 100}\n"
         "    mig: {instances: [{profile: 3g.20gb}, {profile: 3g.20gb}]}\n"
         "    processes: [{pid: 2001, usedMemoryMiB: 4000, gpuInstanceId: 1}]\n";
}

// gpu-b: one H100 (81559 MiB) with 20000 MiB used and GPM readings.
std::string node_b() {
  return std::string("gpus:\n  - model: H100-SXM-80GB\n    uuid: ") + kGpuB +
         "\n    usedMiB: 20000\n"
         "    telemetry: {gpuUtil: 90, grEngineActive: 50, tensorActive: 30, gpuTemp: 70, powerW: 500}\n";
}

// A TCP port nothing listens on.
int closed_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

class Cluster {
 public:
  explicit Cluster(StandIn& s) : client_(client_for(token_config(s))) {}

  void ns(const std::string& name) {
    ASSERT_TRUE(client_->create(kube::resources::kNamespaces, "", json{{"metadata", {{"name", name}}}}));
  }
  void node(const std::string& name, json labels, json resources, json extra = json::object()) {
    json n{{"metadata", {{"name", name}, {"labels", labels}}}};
    n.merge_patch(extra);
    auto made = client_->create(kube::resources::kNodes, "", n);
    ASSERT_TRUE(made) << made.error().text();
    json status{{"status",
                 {{"capacity", resources.value("capacity", resources)},
                  {"allocatable", resources.value("allocatable", resources)}}}};
    auto st = client_->patch(kube::resources::kNodes, "", name, kube::PatchType::kMerge, status, "status");
    ASSERT_TRUE(st) << st.error().text();
  }
  void pod(const std::string& ns, const std::string& name, const std::string& node, const std::string& container,
           json limits, json status = {{"phase", "Running"}}, json extra = json::object()) {
    json c{{"name", container}, {"image", "i:1"}, {"resources", {{"limits", limits}}}};
    json p{{"metadata", {{"name", name}}}, {"spec", {{"containers", json::array({c})}}}};
    if (!node.empty()) p["spec"]["nodeName"] = node;
    p.merge_patch(extra);
    auto made = client_->create(kube::resources::kPods, ns, p);
    ASSERT_TRUE(made) << made.error().text();
    auto st = client_->patch(kube::resources::kPods, ns, name, kube::PatchType::kMerge, {{"status", status}}, "status");
    ASSERT_TRUE(st) << st.error().text();
  }
  void agent(const std::string& name, const std::string& node, int port) {
    pod("kgpu-system", name, node, "agent", json::object(),
        {{"phase", "Running"},
         {"podIP", "127.0.0.1"},
         {"conditions", json::array({{{"type", "Ready"}, {"status", "True"}}})}},
        {{"metadata", {{"labels", {{"app.kubernetes.io/name", "kgpu-agent"}, {"app.kubernetes.io/instance", "kgpu"}}}}},
         {"spec",
          {{"containers",
            json::array({{{"name", "agent"},
                          {"image", "ghcr.io/kgpu/kgpu:0.1.0"},
                          {"ports", json::array({{{"name", "metrics"}, {"containerPort", port}}})}}})}}}});
  }
  kube::Client& client() { return *client_; }

 private:
  std::unique_ptr<kube::Client> client_;
};

Output kgpu(const StandIn& s, const std::string& args) {
  return run_command(std::string(KGPU_BINARY) + " " + args + " --kubeconfig " + s.kubeconfig());
}

// The JSON document of a command's output (stderr lines before it are notes).
json json_of(const Output& o) {
  size_t start = 0;
  while (start < o.text.size() && o.text[start] != '[' && o.text[start] != '{') {
    const size_t nl = o.text.find('\n', start);
    if (nl == std::string::npos) return nullptr;
    start = nl + 1;
  }
  return json::parse(o.text.substr(start), nullptr, false);
}

const json* find(const json& rows, const std::string& key, const std::string& value) {
  for (const auto& r : rows) {
    if (r.value(key, "") == value) return &r;
  }
  return nullptr;
}

class TopTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string mig0;
    {
      FakeNodeFile probe{node_a()};
      auto node = open_fake();
      ASSERT_TRUE(node);
      mig0 = node->inventory()->gpus[2].mig_devices[0].uuid;
    }
    fixture::fabricate_host(host_);
    peer_ = std::make_unique<KubeletPeer>((host_.path() / "kubelet.sock").string());
    peer_->set_pods({
        PeerPod{"team-a", "trainer-a", {{"main", "nvidia.com/gpu", {kGpu0}}}},
        PeerPod{"team-b", "notebook-b", {{"jupyter", "nvidia.com/gpu.shared", {std::string(kGpu1) + "::0"}}}},
        PeerPod{"team-c",
                "svc-c",
                {{"server", "nvidia.com/gpu.shared", {std::string(kGpu1) + "::2", std::string(kGpu1) + "::3"}}}},
        PeerPod{"team-d", "infer-d", {{"model", "nvidia.com/mig-3g.20gb", {mig0}}}},
    });
    peer_->start();
    agent_a_ = std::make_unique<PluginAgent>(
        node_a(), "",
        std::vector<std::string>{
            "--device-plugin", "false", "-c", "200", "--pod-resources-socket", peer_->socket_path(),
            "--pod-resources-interval", "200", "--proc-root", (host_.path() / "proc").string(), "--container-log-dir",
            (host_.path() / "containers").string(), "--pod-log-dir", (host_.path() / "pods").string()},
        std::vector<std::string>{"NODE_NAME=gpu-a"});
    agent_b_ =
        std::make_unique<PluginAgent>(node_b(), "", std::vector<std::string>{"--device-plugin", "false", "-c", "200"},
                                      std::vector<std::string>{"NODE_NAME=gpu-b"});
    ASSERT_GT(agent_a_->port(), 0) << agent_a_->log();
    ASSERT_GT(agent_b_->port(), 0) << agent_b_->log();

    Cluster c(standin_);
    for (const char* n : {"team-a", "team-b", "team-c", "team-d", "team-e", "kgpu-system"}) c.ns(n);
    k8s::NodeGpuReport report;
    report.gpus.push_back(
        {0, kGpu0, "NVIDIA L4", 23034, true, "nvidia.com/gpu", 1, {}, {{"team-a", "trainer-a", "", "main", 1}}});
    report.gpus.push_back({1,
                           kGpu1,
                           "NVIDIA L4",
                           23034,
                           true,
                           "nvidia.com/gpu.shared",
                           4,
                           {},
                           {{"team-b", "notebook-b", "", "jupyter", 1}, {"team-c", "svc-c", "", "server", 2}}});
    report.gpus.push_back({2, kGpu2, "NVIDIA A100-SXM4-40GB", 40960, true, "", 1, {}, {}});
    c.node("gpu-a", {{"nvidia.com/gpu.present", "true"}},
           {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpu.shared", "4"}, {"nvidia.com/mig-3g.20gb", "2"}, {"cpu", "64"}},
           {{"metadata", {{"annotations", {{"kgpu.io/gpus", k8s::format_node_report(report)}}}}}});
    c.node("gpu-b", {{"nvidia.com/gpu.present", "true"}}, {{"nvidia.com/gpu", "1"}});
    c.node("gpu-c", {{"nvidia.com/gpu.present", "true"}}, {{"nvidia.com/gpu", "2"}},
           {{"spec", {{"unschedulable", true}}}});
    c.node("gpu-d", {{"nvidia.com/gpu.present", "true"}},
           {{"capacity", {{"nvidia.com/gpu", "4"}}}, {"allocatable", {{"nvidia.com/gpu", "3"}}}});
    c.node("cpu-1", json::object(), {{"cpu", "32"}});
    c.pod("team-a", "trainer-a", "gpu-a", "main", {{"nvidia.com/gpu", 1}});
    c.pod("team-a", "waiting", "", "main", {{"nvidia.com/gpu", 1}}, {{"phase", "Pending"}});
    c.pod("team-b", "notebook-b", "gpu-a", "jupyter", {{"nvidia.com/gpu.shared", 1}});
    c.pod("team-c", "svc-c", "gpu-a", "server", {{"nvidia.com/gpu.shared", 2}});
    c.pod("team-d", "infer-d", "gpu-a", "model", {{"nvidia.com/mig-3g.20gb", 1}});
    c.pod("team-e", "on-c", "gpu-c", "main", {{"nvidia.com/gpu", 1}});
    c.pod("team-e", "done", "gpu-b", "main", {{"nvidia.com/gpu", 1}}, {{"phase", "Succeeded"}});
    c.agent("kgpu-agent-a", "gpu-a", agent_a_->port());
    c.agent("kgpu-agent-b", "gpu-b", agent_b_->port());
    c.agent("kgpu-agent-c", "gpu-c", closed_port());
    auto q =
        c.client().create({"", "v1", "resourcequotas", true, "ResourceQuota"}, "team-a",
                          {{"metadata", {{"name", "gpus"}}}, {"spec", {{"hard", {{"requests.nvidia.com/gpu", "2"}}}}}});
    ASSERT_TRUE(q) << q.error().text();
  }

  StandIn standin_{{"--proxy-timeout-ms", "2000"}};
  TempDir host_;
  std::unique_ptr<KubeletPeer> peer_;
  std::unique_ptr<PluginAgent> agent_a_, agent_b_;
};

TEST_F(TopTest, NodesPodsNamespacesAndAllocations) {
  // Nodes: wait until both agents have sampled twice (GPM) and read PodResources.
  json nodes;
  Output out;
  const bool ready = eventually(
      [&] {
        out = kgpu(standin_, "top nodes -o json");
        nodes = json_of(out);
        const json* a = nodes.is_array() ? find(nodes, "name", "gpu-a") : nullptr;
        const json* b = nodes.is_array() ? find(nodes, "name", "gpu-b") : nullptr;
        return a != nullptr && b != nullptr && !(*b)["tensorActivePercent"].is_null() && (*a)["devices"].size() == 4 &&
               (*a)["devices"][1]["holders"].size() == 2;
      },
      std::chrono::seconds(20));
  ASSERT_TRUE(ready) << out.text << "\nagent a:\n" << agent_a_->log() << "\nagent b:\n" << agent_b_->log();
  EXPECT_EQ(out.status, 0) << out.text;
  ASSERT_EQ(nodes.size(), 4u) << nodes.dump(2);  // cpu-1 is no GPU node
  const json& a = *find(nodes, "name", "gpu-a");
  EXPECT_EQ(a["gpus"], 3);
  EXPECT_EQ(a["models"], (json{{"NVIDIA L4", 2}, {"NVIDIA A100-SXM4-40GB", 1}}));
  EXPECT_EQ(a["utilPercent"], 60);        // (40 + 80) / 2; MIG instances have no utilization
  EXPECT_EQ(a["memoryUsedMiB"], 14500);   // 6000 + 4500 + 4000 + 0
  EXPECT_EQ(a["memoryTotalMiB"], 86260);  // 2 x 23034 + 2 x 20096
  EXPECT_EQ(a["temperatureC"], 60);       // the hottest
  EXPECT_EQ(a["powerW"], 180);            // 30 + 50 + 100, the A100 once for its two instances
  EXPECT_EQ(a["resources"], (json::parse(R"([
    {"name":"nvidia.com/gpu","allocatable":1,"requested":1,"replicasPerGpu":1},
    {"name":"nvidia.com/gpu.shared","allocatable":4,"requested":3,"replicasPerGpu":4},
    {"name":"nvidia.com/mig-3g.20gb","allocatable":2,"requested":1,"replicasPerGpu":1}])")));
  EXPECT_EQ(a["devices"][0]["holders"], json::array({"team-a/trainer-a/main"}));
  EXPECT_EQ(a["devices"][1]["holders"], json::array({"team-b/notebook-b/jupyter 1/4", "team-c/svc-c/server 2/4"}));
  EXPECT_EQ(a["devices"][2]["migProfile"], "3g.20gb");
  const json& b = *find(nodes, "name", "gpu-b");
  EXPECT_EQ(b["utilPercent"], 90);
  EXPECT_NEAR(b["grActivePercent"].get<double>(), 50, 0.5);
  EXPECT_NEAR(b["tensorActivePercent"].get<double>(), 30, 0.5);
  EXPECT_EQ(b["memoryUsedMiB"], 20000);
  EXPECT_EQ(b["memoryTotalMiB"], 81559);
  EXPECT_EQ(b["powerW"], 500);
  const json& cn = *find(nodes, "name", "gpu-c");
  EXPECT_TRUE(cn["utilPercent"].is_null());
  EXPECT_TRUE(cn["cordoned"].get<bool>());
  EXPECT_NE(cn["error"].get<std::string>().find("agent pod kgpu-system/kgpu-agent-c unreachable: "), std::string::npos)
      << cn["error"];
  EXPECT_NE(cn["error"].get<std::string>().find("503"), std::string::npos) << cn["error"];
  EXPECT_NE(cn["error"].get<std::string>().find("connection refused"), std::string::npos) << cn["error"];
  const json& d = *find(nodes, "name", "gpu-d");
  EXPECT_EQ(d["error"], "no kgpu agent pod on this node");
  EXPECT_NE(out.text.find("node gpu-d: no GPU metrics: no kgpu agent pod on this node"), std::string::npos);

  // The table, sorted by utilization, and the per-GPU lines of -o wide.
  out = kgpu(standin_, "top nodes --sort-by util");
  EXPECT_EQ(out.status, 0) << out.text;
  const size_t at_b = out.text.find("\ngpu-b "), at_a = out.text.find("\ngpu-a "), at_c = out.text.find("\ngpu-c ");
  EXPECT_TRUE(at_b < at_a && at_a < at_c) << out.text;
  EXPECT_NE(out.text.find("14500Mi/86260Mi"), std::string::npos) << out.text;
  EXPECT_NE(out.text.find("gpu 1/1 gpu.shared 3/4 mig-3g.20gb 1/2"), std::string::npos) << out.text;
  out = kgpu(standin_, "top nodes gpu-a -o wide");
  EXPECT_NE(out.text.find("GPU 2 MIG 3g.20gb"), std::string::npos) << out.text;
  EXPECT_EQ(out.text.find("gpu-b"), std::string::npos) << out.text;

  // Pods: what each holds and uses, shares included.
  out = kgpu(standin_, "top pods -A -o json");
  const json pods = json_of(out);
  ASSERT_TRUE(pods.is_array()) << out.text;
  ASSERT_EQ(pods.size(), 5u) << pods.dump(2);  // not the pending pod, not the finished one
  const json& trainer = *find(pods, "pod", "trainer-a");
  EXPECT_EQ(trainer["holds"][0]["what"], "GPU 0 (NVIDIA L4)");
  EXPECT_EQ(trainer["utilPercent"], 40);
  EXPECT_EQ(trainer["memoryUsedMiB"], 6000);
  EXPECT_EQ(trainer["memoryEntitledMiB"], 23034);
  const json& nb = *find(pods, "pod", "notebook-b");
  EXPECT_EQ(nb["holds"][0]["what"], "1/4 of GPU 1 (NVIDIA L4)");
  EXPECT_EQ(nb["gpuEquivalents"], 0.25);
  EXPECT_EQ(nb["utilPercent"], 30);
  EXPECT_EQ(nb["memoryUsedMiB"], 1000);
  EXPECT_EQ(nb["memoryEntitledMiB"], 5758.5);  // a quarter of 23034
  const json& svc = *find(pods, "pod", "svc-c");
  EXPECT_EQ(svc["holds"][0]["what"], "2/4 of GPU 1 (NVIDIA L4)");
  EXPECT_EQ(svc["gpuEquivalents"], 0.5);
  EXPECT_EQ(svc["utilPercent"], 50);
  EXPECT_EQ(svc["memoryUsedMiB"], 3000);
  const json& infer = *find(pods, "pod", "infer-d");
  EXPECT_EQ(infer["holds"][0]["what"], "MIG 3g.20gb on GPU 2 (NVIDIA A100-SXM4-40GB)");
  EXPECT_EQ(infer["gpuEquivalents"], 0.43);  // 3 of 7 slices
  EXPECT_EQ(infer["memoryUsedMiB"], 4000);
  EXPECT_EQ(infer["memoryEntitledMiB"], 20096);
  const json& onc = *find(pods, "pod", "on-c");
  EXPECT_NE(onc["note"].get<std::string>().find("unreachable"), std::string::npos) << onc.dump();
  EXPECT_EQ(onc["holds"][0]["what"], "1 gpu");

  out = kgpu(standin_, "top pods -n team-c --containers");
  EXPECT_EQ(out.status, 0) << out.text;
  EXPECT_NE(out.text.find("svc-c   server      0.50   2/4 of GPU 1 (NVIDIA L4)   50%"), std::string::npos) << out.text;
  out = kgpu(standin_, "top pods -A -l nope=1");
  EXPECT_NE(out.text.find("No GPU pods found."), std::string::npos) << out.text;

  // Namespaces against the quota: team-a requests 2 (the pending pod counts) of its 2.
  out = kgpu(standin_, "top namespaces -o json");
  const json ns = json_of(out);
  ASSERT_TRUE(ns.is_array()) << out.text;
  const json& team_a = *find(ns, "name", "team-a");
  EXPECT_EQ(team_a["pods"], 1);
  EXPECT_EQ(team_a["requested"]["nvidia.com/gpu"], 2);
  EXPECT_EQ(team_a["quota"]["requests.nvidia.com/gpu"], 2);
  EXPECT_EQ(team_a["utilPercent"], 40);
  EXPECT_EQ((*find(ns, "name", "team-c"))["gpuEquivalents"], 0.5);
  out = kgpu(standin_, "top ns --sort-by gpus");
  EXPECT_NE(out.text.find("gpu 2/2"), std::string::npos) << out.text;

  // Allocations: per node and cluster, holders, and what nobody can use.
  out = kgpu(standin_, "allocations -o json");
  EXPECT_EQ(out.status, 0) << out.text;
  const json alloc = json_of(out);
  ASSERT_TRUE(alloc.is_object()) << out.text;
  const json* gpu_total = find(alloc["cluster"], "resource", "nvidia.com/gpu");
  ASSERT_NE(gpu_total, nullptr);
  EXPECT_EQ((*gpu_total)["capacity"], 8);     // 1 + 1 + 2 + 4
  EXPECT_EQ((*gpu_total)["allocatable"], 7);  // gpu-d has an unhealthy one
  EXPECT_EQ((*gpu_total)["requested"], 2);    // trainer-a, on-c
  std::map<std::string, double> unusable;
  for (const auto& u : alloc["unusable"])
    unusable[u["node"].get<std::string>() + " " + u["reason"].get<std::string>()] = u["count"];
  EXPECT_EQ(unusable,
            (std::map<std::string, double>{{"gpu-a fragmented", 1}, {"gpu-c cordoned", 1}, {"gpu-d unhealthy", 1}}))
      << alloc.dump(2);
  out = kgpu(standin_, "allocations");
  EXPECT_NE(out.text.find("nvidia.com/gpu.shared (4 per GPU)"), std::string::npos) << out.text;
  EXPECT_NE(out.text.find("team-b/notebook-b (1), team-c/svc-c (2)"), std::string::npos) << out.text;

  // As a kubectl plugin: the same binary under the name kubectl-gpu, which kubectl finds on PATH.
  const std::string bin = std::filesystem::path(KGPU_BINARY).parent_path().string();
  out = run_command(bin + "/kubectl-gpu top --help 2>&1");
  EXPECT_NE(out.text.find("kubectl gpu top"), std::string::npos) << out.text;
  if (!KGPU_KUBECTL.empty()) {  // kubectl from .tools/kube, when scripts/setup.sh fetched it
    out = run_command("PATH=" + bin + ":$PATH KUBECONFIG=" + standin_.kubeconfig() + " " + KGPU_KUBECTL +
                      " gpu top nodes gpu-b 2>/dev/null");
    EXPECT_EQ(out.status, 0) << out.text;
    EXPECT_NE(out.text.find("20000Mi/81559Mi"), std::string::npos) << out.text;
  }
}

TEST_F(TopTest, NoMetricsAtAllFails) {
  agent_a_.reset();
  agent_b_.reset();
  const Output out = kgpu(standin_, "top nodes");
  EXPECT_EQ(out.status, 1) << out.text;
  EXPECT_NE(out.text.find("node gpu-a: no GPU metrics: agent pod kgpu-system/kgpu-agent-a unreachable"),
            std::string::npos)
      << out.text;
  EXPECT_NE(out.text.find("gpu-b"), std::string::npos) << out.text;
}

// The same views from Prometheus: series as the chart's ServiceMonitor stores them (the scrape
// target's pod/namespace/container, the agent's own as exported_*), another exporter's series left
// out by the job selector.
TEST(TopPrometheus, NodesAndPodsFromRecordedSeries) {
  if (!prometheus_installed()) GTEST_SKIP() << "prometheus/promtool are not installed";
  const auto now = static_cast<long>(std::time(nullptr));
  const long t = now - now % 60 - 3600;
  const std::string target =
      R"(Hostname="gpu-p",job="kgpu-agent",endpoint="metrics",namespace="kgpu-system",pod="kgpu-agent-p",container="agent",modelName="NVIDIA L4")";
  auto gpu = [&](int i) { return "gpu=\"" + std::to_string(i) + "\",UUID=\"GPU-p" + std::to_string(i) + "\","; };
  const std::string solo = R"(,exported_namespace="team-p",exported_pod="solo",exported_container="main")";
  const std::string nb = R"(,exported_namespace="team-q",exported_pod="nb",exported_container="jupyter")";
  const std::string ts = " " + std::to_string(t) + "\n";
  std::string om;
  auto line = [&](const std::string& name, const std::string& labels, double v) {
    om += name + "{" + labels + "} " + std::to_string(v) + ts;
  };
  om += "# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n";
  line("DCGM_FI_DEV_GPU_UTIL", gpu(0) + target + solo, 70);
  line("DCGM_FI_DEV_GPU_UTIL", gpu(1) + target, 60);
  line("DCGM_FI_DEV_GPU_UTIL", gpu(1) + target + nb, 25);
  line("DCGM_FI_DEV_GPU_UTIL", gpu(1) + R"(Hostname="gpu-p",job="nvidia-dcgm-exporter",modelName="NVIDIA L4")", 99);
  om += "# TYPE DCGM_FI_DEV_FB_USED gauge\n";
  line("DCGM_FI_DEV_FB_USED", gpu(0) + target + solo, 2000);
  line("DCGM_FI_DEV_FB_USED", gpu(1) + target, 5000);
  line("DCGM_FI_DEV_FB_USED", gpu(1) + target + nb, 1500);
  om += "# TYPE DCGM_FI_DEV_FB_FREE gauge\n";
  line("DCGM_FI_DEV_FB_FREE", gpu(0) + target + solo, 20778);
  line("DCGM_FI_DEV_FB_FREE", gpu(1) + target, 17778);
  om += "# TYPE DCGM_FI_DEV_FB_RESERVED gauge\n";
  line("DCGM_FI_DEV_FB_RESERVED", gpu(0) + target + solo, 256);
  line("DCGM_FI_DEV_FB_RESERVED", gpu(1) + target, 256);
  om += "# TYPE kgpu_device_allocated gauge\n";
  line("kgpu_device_allocated", gpu(0) + target + solo + R"(,resource="nvidia.com/gpu",device_id="GPU-p0")", 1);
  line("kgpu_device_allocated", gpu(1) + target + nb + R"(,resource="nvidia.com/gpu.shared",device_id="GPU-p1::1")", 1);
  om += "# TYPE kgpu_container_gpu_processes gauge\n";
  line("kgpu_container_gpu_processes", gpu(1) + target + nb, 1);
  om += "# EOF\n";
  RecordedPrometheus prometheus(om);
  ASSERT_TRUE(prometheus.error().empty()) << prometheus.error();

  StandIn standin;
  Cluster c(standin);
  for (const char* n : {"team-p", "team-q"}) c.ns(n);
  c.node("gpu-p", {{"nvidia.com/gpu.present", "true"}, {"nvidia.com/gpu.replicas", "4"}},
         {{"nvidia.com/gpu.shared", "4"}});
  c.pod("team-p", "solo", "gpu-p", "main", {{"nvidia.com/gpu", 1}});
  c.pod("team-q", "nb", "gpu-p", "jupyter", {{"nvidia.com/gpu.shared", 1}});
  const std::string from = " --prometheus " + prometheus.url() + " --at " + std::to_string(t);

  Output out = kgpu(standin, "top nodes -o json" + from);
  ASSERT_EQ(out.status, 0) << out.text;
  const json nodes = json_of(out);
  ASSERT_EQ(nodes.size(), 1u) << out.text;
  EXPECT_EQ(nodes[0]["utilPercent"], 65);  // (70 + 60) / 2; the other exporter's 99 is not the agent's
  EXPECT_EQ(nodes[0]["memoryUsedMiB"], 7000);
  EXPECT_EQ(nodes[0]["memoryTotalMiB"], 46068);
  EXPECT_EQ(nodes[0]["devices"][0]["holders"], json::array({"team-p/solo/main"}));
  EXPECT_EQ(nodes[0]["devices"][1]["holders"], json::array({"team-q/nb/jupyter 1/4"}));

  out = kgpu(standin, "top pods -A -o json" + from);
  ASSERT_EQ(out.status, 0) << out.text;
  const json pods = json_of(out);
  ASSERT_EQ(pods.size(), 2u) << out.text;
  const json& s = *find(pods, "pod", "solo");
  EXPECT_EQ(s["holds"][0]["what"], "GPU 0 (NVIDIA L4)");
  EXPECT_EQ(s["utilPercent"], 70);
  EXPECT_EQ(s["memoryUsedMiB"], 2000);
  const json& n = *find(pods, "pod", "nb");
  EXPECT_EQ(n["holds"][0]["what"], "1/4 of GPU 1 (NVIDIA L4)");
  EXPECT_EQ(n["utilPercent"], 25);
  EXPECT_EQ(n["memoryUsedMiB"], 1500);

  // Nothing recorded at that time for the selector: said per node, and a failure overall.
  out = kgpu(standin, "top nodes --prometheus-selector 'job=\"nobody\"'" + from);
  EXPECT_EQ(out.status, 1) << out.text;
  EXPECT_NE(out.text.find("node gpu-p: no GPU metrics: Prometheus has no series of this node"), std::string::npos)
      << out.text;
}

TEST(TopCli, UsageErrorsBeforeAnythingIsRead) {
  const std::string kgpu_bin = KGPU_BINARY;
  Output out = run_command(kgpu_bin + " top pods --sort-by cpu --kubeconfig /nonexistent");
  EXPECT_EQ(out.status, 2) << out.text;
  EXPECT_NE(out.text.find("kgpu top pods: --sort-by cpu: expected one of name, gpus, gr-active, memory, tensor, util"),
            std::string::npos)
      << out.text;
  out = run_command(kgpu_bin + " top nodes -o yaml --kubeconfig /nonexistent");
  EXPECT_EQ(out.status, 2) << out.text;
  EXPECT_NE(out.text.find("-o/--output: expected wide or json"), std::string::npos) << out.text;
  out = run_command(kgpu_bin + " top nodes --at 5 --kubeconfig /nonexistent");
  EXPECT_EQ(out.status, 2) << out.text;
  EXPECT_NE(out.text.find("--at is for --prometheus"), std::string::npos) << out.text;
  out = run_command(kgpu_bin + " top");
  EXPECT_EQ(out.status, 2) << out.text;
}

TEST(StandInProxy, ForwardsToThePodAndFailsAsTheApiServerDoes) {
  StandIn s({"--proxy-timeout-ms", "300"});
  Cluster c(s);
  PluginAgent agent(node_b(), "", {"--device-plugin", "false", "-c", "200"});
  ASSERT_GT(agent.port(), 0);
  c.ns("kgpu-system");
  c.agent("up", "n", agent.port());
  c.agent("down", "n", closed_port());
  c.pod("kgpu-system", "no-ip", "n", "c", json::object());
  // A listener that never answers: the connection is accepted by the kernel, no reply comes.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(fd, 8), 0);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  c.agent("silent", "n", ntohs(a.sin_port));
  kube::ClientOptions o;
  o.max_retries = 0;
  auto client = client_for(token_config(s), o);

  const std::string base = "/api/v1/namespaces/kgpu-system/pods/";
  std::string page;
  EXPECT_TRUE(eventually([&] {
    auto r = client->get_raw(base + "up:" + std::to_string(agent.port()) + "/proxy/metrics");
    page = r ? *r : r.error().text();
    return page.find("DCGM_FI_DEV_GPU_UTIL{") != std::string::npos;
  })) << page;
  // Without a port: the first declared container port.
  auto r = client->get_raw(base + "up/proxy/metrics");
  ASSERT_TRUE(r) << r.error().text();
  EXPECT_NE(r->find("kgpu_gpu_up{"), std::string::npos);
  // The pod's answer passes through: its 404 for another path.
  r = client->get_raw(base + "up/proxy/nothing-here");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, 404);

  r = client->get_raw(base + "missing:9400/proxy/metrics");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, 404);
  EXPECT_EQ(r.error().message, "pods \"missing\" not found");
  r = client->get_raw(base + "no-ip:9400/proxy/metrics");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, 400);
  EXPECT_EQ(r.error().message, "address not allowed");
  r = client->get_raw(base + "down/proxy/metrics");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, 503);
  EXPECT_EQ(r.error().reason, "ServiceUnavailable");
  EXPECT_NE(r.error().message.find("error trying to reach service: dial tcp 127.0.0.1:"), std::string::npos)
      << r.error().message;
  EXPECT_NE(r.error().message.find("connection refused"), std::string::npos) << r.error().message;
  const auto started = std::chrono::steady_clock::now();
  r = client->get_raw(base + "silent/proxy/metrics");
  const auto took = std::chrono::steady_clock::now() - started;
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, 503);
  EXPECT_NE(r.error().message.find("no answer within 300 ms"), std::string::npos) << r.error().message;
  EXPECT_LT(took, std::chrono::seconds(5));
  r = client->get_raw(base + "a:b:c:d/proxy/metrics");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, 400);
  ::close(fd);
}

}  // namespace
}  // namespace kgpu::testing
