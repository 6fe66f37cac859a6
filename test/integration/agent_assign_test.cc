// The real `kgpu agent` with API access (the API-server stand-in, tools/apiserver) honouring the
// scheduler's GPU assignment: pods are created and bound with the contract's annotations as
// `kgpu scheduler` binds them, and a kubelet peer calls Allocate with device IDs of its own
// choosing. Covers whole GPUs (an NVLink pair), equal pods admitted back to back, an MPS share's
// limits, refusals, unassigned pods, the checkpoint across a restart, the node report and the
// metrics' attribution.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <sstream>

#include "../peers/kubelet_peer.h"
#include "agent_fixture.h"
#include "k8s/gpu_assignment.h"
#include "standin.h"

#include <httplib.h>

namespace kgpu::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using nlohmann::json;
using namespace std::chrono_literals;

constexpr const char* kNode = "gpu-node-1";
constexpr const char* kL4 = "preset: pcie-l4-4\n";
constexpr const char* kA100 = "preset: dgx-a100-8\ntopology:\n  nvlink: [[0, 1, 2, 3], [4, 5, 6, 7]]\n";

// The stand-in with this node, and an agent with API access to it.
class AssignTest : public ::testing::Test {
 protected:
  void start(const std::string& node_yaml, const std::string& config = "", std::vector<std::string> extra = {},
             std::vector<std::string> env = {}) {
    client_ = client_for(token_config(standin_));
    ASSERT_TRUE(client_);
    ASSERT_TRUE(client_->create(kube::resources::kNodes, "", json{{"metadata", {{"name", kNode}}}}));
    std::vector<std::string> flags{"--kubeconfig", standin_.kubeconfig(), "--node-name", kNode};
    if (std::ranges::find(extra, "--node-report-interval") == extra.end()) {
      flags.insert(flags.end(), {"--node-report-interval", "100"});
    }
    flags.insert(flags.end(), extra.begin(), extra.end());
    agent_ = std::make_unique<PluginAgent>(node_yaml, config, flags, env);
    regs_ = agent_->registrations(1);
    ASSERT_FALSE(regs_.empty());
    plugin_ = std::make_unique<PluginClient>(agent_->kubelet().plugin_socket(regs_[0]));
  }

  // Creates pod `name` whose containers request `resource` (name -> count; init containers are
  // "init-*"), then binds it to the node as the scheduler does.
  void bind(const std::string& name, const std::vector<std::pair<std::string, int>>& containers,
            const std::string& resource, const std::string& assignment, const std::string& bound_at) {
    json spec{{"containers", json::array()}};
    for (const auto& [c, n] : containers) {
      json ct{{"name", c}, {"image", "i:1"}, {"resources", {{"limits", {{resource, std::to_string(n)}}}}}};
      spec[c.starts_with("init-") ? "initContainers" : "containers"].push_back(ct);
    }
    auto made = client_->create(kube::resources::kPods, "default", json{{"metadata", {{"name", name}}}, {"spec", spec}});
    ASSERT_TRUE(made) << made.error().text();
    json annotations{{k8s::kAnnotationGpuResource, resource}, {k8s::kAnnotationBoundAt, bound_at}};
    if (!assignment.empty()) annotations[k8s::kAnnotationGpuAssignment] = assignment;
    auto bound = client_->bind("default", name, (*made)["metadata"]["uid"].get<std::string>(), kNode, annotations);
    ASSERT_TRUE(bound) << bound.error().text();
  }

  std::string annotation(const kube::Resource& r, const std::string& ns, const std::string& name,
                         const std::string& key) {
    auto got = client_->get(r, ns, name);
    if (!got) return "";
    return (*got)["metadata"].value("annotations", json::object()).value(key, "");
  }
  std::string allocated(const std::string& pod) {
    return annotation(kube::resources::kPods, "default", pod, k8s::kAnnotationGpuAllocated);
  }
  // The node report once `pred` holds for it (fails the test after 10 s).
  k8s::NodeGpuReport report_when(const std::function<bool(const k8s::NodeGpuReport&)>& pred) {
    k8s::NodeGpuReport last;
    const bool ok = eventually([&] {
      auto r = k8s::parse_node_report(annotation(kube::resources::kNodes, "", kNode, k8s::kAnnotationNodeGpus));
      if (!r) return false;
      last = *r;
      return pred(last);
    });
    EXPECT_TRUE(ok) << k8s::format_node_report(last) << "\n" << agent_->log();
    return last;
  }

  StandIn standin_;
  std::unique_ptr<kube::Client> client_;
  std::unique_ptr<PluginAgent> agent_;
  std::vector<Registration> regs_;
  std::unique_ptr<PluginClient> plugin_;
};

std::string cdi(const std::string& uuid) { return "k8s.device-plugin.nvidia.com/gpu=" + uuid; }

// The DCGM_FI_DEV_GPU_UTIL series of one GPU in a /metrics page ("" when absent).
std::string util_line(const std::string& page, const std::string& uuid) {
  std::istringstream in(page);
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("DCGM_FI_DEV_GPU_UTIL{") && line.find("UUID=\"" + uuid + "\"") != std::string::npos) return line;
  }
  return "";
}

std::vector<std::string> pods_of(const k8s::ReportedGpu& g) {
  std::vector<std::string> out;
  for (const auto& u : g.used) out.push_back(u.pod + "/" + u.container);
  return out;
}

TEST_F(AssignTest, AssignedNvlinkPairWinsOverTheKubeletsIds) {
  start(kA100);
  auto list = first_list(*plugin_, 8);
  ASSERT_EQ(list.size(), 8u);
  bind("train", {{"main", 2}}, "nvidia.com/gpu", "main:" + list[4].id + "," + list[5].id, "2026-01-01T00:00:01.000000Z");
  auto a = plugin_->allocate({{list[0].id, list[7].id}});
  ASSERT_TRUE(a) << a.error().message << agent_->log();
  EXPECT_THAT(a->at(0).cdi_devices, ElementsAre(cdi(list[4].id), cdi(list[5].id)));
  EXPECT_TRUE(eventually([&] { return allocated("train") == "main:" + list[4].id + "," + list[5].id; }))
      << allocated("train");
  auto report = report_when([](const auto& r) { return r.gpus.size() == 8 && !r.gpus[4].used.empty(); });
  ASSERT_EQ(report.gpus.size(), 8u);
  EXPECT_THAT(pods_of(report.gpus[4]), ElementsAre("train/main"));
  EXPECT_THAT(pods_of(report.gpus[5]), ElementsAre("train/main"));
  EXPECT_TRUE(report.gpus[0].used.empty());
  EXPECT_THAT(report.gpus[4].nvlink_peers, ElementsAre(5, 6, 7));
  EXPECT_EQ(report.gpus[4].resource, "nvidia.com/gpu");
}

TEST_F(AssignTest, EqualPodsAdmittedBackToBackKeepTheirOwnGpus) {
  start(kL4);
  auto list = first_list(*plugin_, 4);
  ASSERT_EQ(list.size(), 4u);
  // Bound in this order, a fraction of a second apart; the kubelet offers each the other's GPU.
  bind("first", {{"c", 1}}, "nvidia.com/gpu", "c:" + list[2].id, "2026-01-01T00:00:01.100000Z");
  bind("second", {{"c", 1}}, "nvidia.com/gpu", "c:" + list[3].id, "2026-01-01T00:00:01.200000Z");
  auto a = plugin_->allocate({{list[3].id}});
  auto b = plugin_->allocate({{list[2].id}});
  ASSERT_TRUE(a && b) << agent_->log();
  EXPECT_THAT(a->at(0).cdi_devices, ElementsAre(cdi(list[2].id)));
  EXPECT_THAT(b->at(0).cdi_devices, ElementsAre(cdi(list[3].id)));
  EXPECT_TRUE(eventually([&] { return allocated("first") == "c:" + list[2].id; })) << allocated("first");
  EXPECT_EQ(allocated("second"), "c:" + list[3].id);
}

TEST_F(AssignTest, InitContainerThenContainerOfOnePod) {
  start(kL4);
  auto list = first_list(*plugin_, 4);
  bind("staged", {{"init-load", 1}, {"serve", 1}}, "nvidia.com/gpu",
       "init-load:" + list[1].id + ";serve:" + list[2].id, "2026-01-01T00:00:01Z");
  auto init = plugin_->allocate({{list[0].id}});
  ASSERT_TRUE(init) << agent_->log();
  EXPECT_THAT(init->at(0).cdi_devices, ElementsAre(cdi(list[1].id)));
  auto serve = plugin_->allocate({{list[3].id}});
  ASSERT_TRUE(serve) << agent_->log();
  EXPECT_THAT(serve->at(0).cdi_devices, ElementsAre(cdi(list[2].id)));
  EXPECT_TRUE(eventually([&] { return allocated("staged") == "init-load:" + list[1].id + ";serve:" + list[2].id; }))
      << allocated("staged");
}

TEST_F(AssignTest, MpsShareGetsItsLimits) {
  start(kL4, "sharing:\n  mps:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n", {},
        {"PATH=/nonexistent"});
  auto list = first_list(*plugin_, 16);
  ASSERT_EQ(list.size(), 16u);
  const std::string gpu2 = list[8].id.substr(0, list[8].id.find("::"));
  bind("infer", {{"server", 1}}, "nvidia.com/gpu", "server:" + gpu2, "2026-01-01T00:00:01Z");
  auto a = plugin_->allocate({{list[0].id}});  // a replica of GPU 0
  ASSERT_TRUE(a) << a.error().message << agent_->log();
  EXPECT_THAT(a->at(0).cdi_devices, ElementsAre(cdi(gpu2)));
  EXPECT_EQ(a->at(0).envs.at("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), "25");
  EXPECT_EQ(a->at(0).envs.at("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"), "0=5758M");  // 23034 MiB * 1/4
  auto report = report_when([](const auto& r) { return r.gpus.size() == 4 && !r.gpus[2].used.empty(); });
  ASSERT_EQ(report.gpus.size(), 4u);
  EXPECT_EQ(report.gpus[2].replicas, 4);
  EXPECT_EQ(report.gpus[2].used.at(0).replicas, 1);
}

TEST_F(AssignTest, RefusesAGpuInUseAndAnUnknownGpu) {
  start(kL4);
  auto list = first_list(*plugin_, 4);
  bind("holder", {{"c", 1}}, "nvidia.com/gpu", "c:" + list[1].id, "2026-01-01T00:00:01Z");
  ASSERT_TRUE(plugin_->allocate({{list[0].id}}));
  bind("clash", {{"c", 1}}, "nvidia.com/gpu", "c:" + list[1].id, "2026-01-01T00:00:02Z");
  auto clash = plugin_->allocate({{list[2].id}});
  ASSERT_FALSE(clash);
  EXPECT_THAT(clash.error().message, HasSubstr("cannot honour the assignment: pod default/clash container c: GPU " +
                                               list[1].id + " is already in use by pod default/holder container c"));
  // The refused pod is not matched again: the next pod gets its own assignment.
  bind("next", {{"c", 1}}, "nvidia.com/gpu", "c:" + list[3].id, "2026-01-01T00:00:02.5Z");
  auto next = plugin_->allocate({{list[2].id}});
  ASSERT_TRUE(next) << agent_->log();
  EXPECT_THAT(next->at(0).cdi_devices, ElementsAre(cdi(list[3].id)));
  bind("ghost", {{"c", 2}}, "nvidia.com/gpu", "c:GPU-nope," + list[2].id, "2026-01-01T00:00:03Z");
  auto ghost = plugin_->allocate({{list[0].id, list[2].id}});
  ASSERT_FALSE(ghost);
  EXPECT_THAT(ghost.error().message,
              HasSubstr("cannot honour the assignment: pod default/ghost container c: GPU GPU-nope is not on this node"));
  EXPECT_EQ(allocated("clash"), "");
}

TEST_F(AssignTest, AGpuTurningUnhealthyIsReportedAtOnceAndItsAssignmentRefused) {
  // The report interval is a minute: what the test sees comes from the change itself.
  start(kL4 + std::string("faults:\n  xids: []\n"), "", {"--node-report-interval", "60000", "--health-recovery", "0"});
  auto list = first_list(*plugin_, 4);
  report_when([](const auto& r) { return r.gpus.size() == 4 && r.gpus[2].healthy; });
  ASSERT_TRUE(eventually([&] { return agent_->log().find("watching XID events") != std::string::npos; }));
  agent_->fake().rewrite(kL4 + std::string("faults:\n  xids:\n  - {gpu: 2, xid: 94}\n"));
  report_when([](const auto& r) { return r.gpus.size() == 4 && !r.gpus[2].healthy && r.gpus[1].healthy; });
  bind("late", {{"c", 1}}, "nvidia.com/gpu", "c:" + list[2].id, "2026-01-01T00:00:01Z");
  auto refused = plugin_->allocate({{list[0].id}});
  ASSERT_FALSE(refused);
  EXPECT_THAT(refused.error().message,
              HasSubstr("cannot honour the assignment: pod default/late container c: GPU " + list[2].id + " is unhealthy"));
}

TEST_F(AssignTest, UnassignedPodIsSteeredOffAnAssignedGpuAndTheTableSurvivesARestart) {
  start(kL4);
  auto list = first_list(*plugin_, 4);
  bind("assigned", {{"c", 1}}, "nvidia.com/gpu", "c:" + list[1].id, "2026-01-01T00:00:01Z");
  auto a = plugin_->allocate({{list[0].id}});
  ASSERT_TRUE(a) << agent_->log();
  EXPECT_THAT(a->at(0).cdi_devices, ElementsAre(cdi(list[1].id)));
  // Another scheduler's pod: the kubelet thinks GPU 1 is free (it gave GPU 0 to "assigned").
  auto other = plugin_->allocate({{list[1].id}});
  ASSERT_TRUE(other) << agent_->log();
  ASSERT_EQ(other->at(0).cdi_devices.size(), 1u);
  EXPECT_NE(other->at(0).cdi_devices[0], cdi(list[1].id));
  const std::string steered = other->at(0).cdi_devices[0];

  agent_->restart();
  agent_->registrations(2);
  PluginClient again(agent_->kubelet().plugin_socket(regs_[0]));
  ASSERT_EQ(first_list(again, 4).size(), 4u);
  // Both holdings came back from the checkpoint: GPU 1 and the steered GPU stay taken.
  auto third = again.allocate({{list[1].id}});
  ASSERT_TRUE(third) << agent_->log();
  EXPECT_NE(third->at(0).cdi_devices[0], cdi(list[1].id));
  EXPECT_NE(third->at(0).cdi_devices[0], steered);
}

TEST_F(AssignTest, NodeReportAndMetricsFollowWhatContainersReallyGot) {
  TempDir sock;
  KubeletPeer pod_resources((sock.path() / "pr.sock").string());
  pod_resources.start();
  start(kL4, "",
        {"--pod-resources-socket", pod_resources.socket_path(), "--pod-resources-interval", "100", "-c", "100"});
  auto list = first_list(*plugin_, 4);
  bind("model", {{"c", 1}}, "nvidia.com/gpu", "c:" + list[1].id, "2026-01-01T00:00:01Z");
  ASSERT_TRUE(plugin_->allocate({{list[0].id}}));
  ASSERT_TRUE(plugin_->allocate({{list[3].id}}));  // unassigned, GPU 3 free: kept
  // The kubelet reports its own IDs.
  pod_resources.set_pods({{"default", "model", {{"c", "nvidia.com/gpu", {list[0].id}}}},
                          {"default", "other", {{"x", "nvidia.com/gpu", {list[3].id}}}}});
  auto report = report_when([](const auto& r) {
    return r.gpus.size() == 4 && !r.gpus[3].used.empty() && !r.gpus[3].used[0].pod.empty();
  });
  ASSERT_EQ(report.gpus.size(), 4u);
  EXPECT_TRUE(report.gpus[0].used.empty());
  EXPECT_THAT(pods_of(report.gpus[1]), ElementsAre("model/c"));
  EXPECT_THAT(pods_of(report.gpus[3]), ElementsAre("other/x"));
  // Metrics: GPU 1 carries the pod, GPU 0 (the kubelet's ID for it) does not.
  std::string page;
  EXPECT_TRUE(eventually([&] {
    page = agent_->metrics();
    return util_line(page, list[1].id).find("pod=\"model\"") != std::string::npos;
  })) << page;
  EXPECT_THAT(util_line(page, list[0].id), ::testing::Not(HasSubstr("pod=")));
}

TEST_F(AssignTest, WithoutApiAccessTheKubeletsIdsAreUsed) {
  PluginAgent agent(kL4, "");
  auto regs = agent.registrations(1);
  PluginClient client(agent.kubelet().plugin_socket(regs[0]));
  auto list = first_list(client, 4);
  auto a = client.allocate({{list[2].id}});
  ASSERT_TRUE(a);
  EXPECT_THAT(a->at(0).cdi_devices, ElementsAre(cdi(list[2].id)));
  EXPECT_FALSE(std::filesystem::exists(agent.dir().path() / "dp" / "kgpu-allocations.json"));
}

}  // namespace
}  // namespace kgpu::testing

namespace kgpu::testing {
namespace {

// The whole path: the agent reports its GPUs, `kgpu scheduler` (called as kube-scheduler calls an
// extender) picks node and GPUs from that report and binds, and the kubelet's Allocate — with
// device IDs of the kubelet's own choosing — gets the GPUs the scheduler picked.
class EndToEnd : public AssignTest {
 protected:
  void start_scheduler() {
    log_ = (dir_.path() / "scheduler.log").string();
    scheduler_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{KGPU_BINARY, "scheduler", "--kubeconfig", standin_.kubeconfig(), "--address",
                                 "127.0.0.1:0", "--leader-elect=false"},
        std::vector<std::string>{}, log_);
    port_ = agent_port(log_, 20s);
    ASSERT_GT(port_, 0) << slurp(log_);
    ASSERT_TRUE(eventually([&] {
      httplib::Client c("127.0.0.1", port_);
      auto r = c.Get("/readyz");
      return r && r->status == 200;
    })) << slurp(log_);
  }
  json post(const std::string& verb, const json& body) {
    httplib::Client c("127.0.0.1", port_);
    auto r = c.Post("/" + verb, body.dump(), "application/json");
    EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "no answer") << slurp(log_);
    return r && r->status == 200 ? json::parse(r->body) : json();
  }
  // Creates the pod and schedules it through the extender; the assignment written.
  std::string schedule(const std::string& name, const std::string& resource, int units) {
    json pod{{"metadata", {{"name", name}, {"namespace", "default"}}},
             {"spec", {{"containers", json::array({json{{"name", "main"}, {"image", "i:1"},
                                                         {"resources", {{"limits", {{resource, std::to_string(units)}}}}}}})}}}};
    auto made = client_->create(kube::resources::kPods, "default", pod);
    EXPECT_TRUE(made);
    if (!made) return "";
    // kube-scheduler retries until the scheduler has read the agent's report and, for an equal
    // pod on the node, the agent's allocation of the one before.
    json reply;
    EXPECT_TRUE(eventually([&] {
      reply = post("filter", json{{"Pod", *made}, {"Nodes", nullptr}, {"NodeNames", {kNode}}});
      if (!reply["NodeNames"].is_array() || reply["NodeNames"].size() != 1) return false;
      reply = post("bind", json{{"PodName", name}, {"PodNamespace", "default"},
                                {"PodUID", (*made)["metadata"]["uid"]}, {"Node", kNode}});
      return reply.value("Error", "?").empty();
    })) << reply.dump();
    return annotation(kube::resources::kPods, "default", name, k8s::kAnnotationGpuAssignment);
  }

  TempDir dir_;
  std::string log_;
  std::unique_ptr<ChildProcess> scheduler_;
  int port_ = 0;
};

TEST_F(EndToEnd, SchedulerPicksAnNvlinkPairAndTheKubeletsAllocateGetsIt) {
  start(kA100);
  auto list = first_list(*plugin_, 8);
  report_when([](const auto& r) { return r.gpus.size() == 8; });
  start_scheduler();
  const std::string assignment = schedule("train", "nvidia.com/gpu", 2);
  auto a = k8s::parse_assignment(assignment);
  ASSERT_TRUE(a && a->size() == 1 && a->at(0).uuids.size() == 2) << assignment;
  // The kubelet passes two IDs that are not the assigned ones.
  std::vector<std::string> ids;
  for (const auto& d : list)
    if (ids.size() < 2 && std::ranges::find(a->at(0).uuids, d.id) == a->at(0).uuids.end()) ids.push_back(d.id);
  auto got = plugin_->allocate({ids});
  ASSERT_TRUE(got) << got.error().message << agent_->log();
  EXPECT_THAT(got->at(0).cdi_devices, ::testing::UnorderedElementsAre(cdi(a->at(0).uuids[0]), cdi(a->at(0).uuids[1])));
  EXPECT_TRUE(eventually([&] { return allocated("train") == assignment; })) << allocated("train");
  // The report now lists the pod on those GPUs, and the scheduler counts them as taken.
  report_when([](const auto& r) {
    int n = 0;
    for (const auto& g : r.gpus) n += !g.used.empty();
    return n == 2;
  });
}

TEST_F(EndToEnd, MpsSharesPackOnTheChosenGpuWithTheirLimits) {
  start(kL4, "sharing:\n  mps:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n", {},
        {"PATH=/nonexistent"});
  auto list = first_list(*plugin_, 16);
  report_when([](const auto& r) { return r.gpus.size() == 4 && r.gpus[0].replicas == 4; });
  start_scheduler();
  // Two replicas, both on the GPU the scheduler picked (NVIDIA's one-replica MPS rule is for
  // requests whose replicas could be split over GPUs): half of it, enforced by MPS.
  const std::string first = schedule("a", "nvidia.com/gpu", 2);
  auto got = plugin_->allocate({{list[15].id, list[14].id}});  // replicas of the last GPU
  ASSERT_TRUE(got) << got.error().message << agent_->log();
  const std::string gpu = first.substr(first.find(':') + 1);
  EXPECT_THAT(got->at(0).cdi_devices, ElementsAre(cdi(gpu)));
  EXPECT_EQ(got->at(0).envs.at("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), "50");
  EXPECT_EQ(got->at(0).envs.at("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"), "0=11517M");  // 23034 MiB * 2/4
  // Without an assignment NVIDIA's rule stands.
  auto unassigned = plugin_->allocate({{list[0].id, list[1].id}});
  ASSERT_FALSE(unassigned);
  EXPECT_THAT(unassigned.error().message, HasSubstr("maximum request size for shared resources is 1"));
  // Once the agent has allocated "a", an equal pod packs onto the same GPU (the other half).
  ASSERT_TRUE(eventually([&] { return !allocated("a").empty(); }));
  const std::string second = schedule("b", "nvidia.com/gpu", 2);
  EXPECT_EQ(second.substr(second.find(':') + 1), gpu);
}

}  // namespace
}  // namespace kgpu::testing
