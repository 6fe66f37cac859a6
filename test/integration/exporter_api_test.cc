// dcgm-exporter's pod labels and pod_uid through the `kgpu agent` binary with API access: the
// agent's pod informer (against the API-server stand-in) names the pods the kubelet's
// PodResources attributes GPUs to.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "../peers/kubelet_peer.h"
#include "agent_fixture.h"
#include "node_fixture.h"
#include "standin.h"
#include "test_env.h"

namespace kgpu::testing {
namespace {

using nlohmann::json;
using namespace kgpu::testing::fixture;

constexpr const char* kNode = "gpu-node-7";

TEST(ExporterApi, PodLabelsAndUidFromTheApiServer) {
  StandIn standin;
  auto client = client_for(token_config(standin));
  ASSERT_TRUE(client);
  ASSERT_TRUE(client->create(kube::resources::kNodes, "", json{{"metadata", {{"name", kNode}}}}));
  ASSERT_TRUE(client->create(kube::resources::kNamespaces, "", json{{"metadata", {{"name", "team-a"}}}}));
  const json pod{
      {"metadata",
       {{"name", "trainer-a"}, {"labels", {{"app.kubernetes.io/name", "trainer"}, {"team", "a"}, {"gpu", "clash"}}}}},
      {"spec", {{"nodeName", kNode}, {"containers", json::array({{{"name", "main"}, {"image", "i:1"}}})}}}};
  auto made = client->create(kube::resources::kPods, "team-a", pod);
  ASSERT_TRUE(made) << made.error().text();
  const std::string uid = (*made)["metadata"]["uid"].get<std::string>();

  TempDir dir;
  std::string mig0;
  {
    FakeNodeFile probe{node_yaml()};
    auto node = open_fake();
    ASSERT_TRUE(node);
    mig0 = node->inventory()->gpus[2].mig_devices[0].uuid;
  }
  KubeletPeer peer{(dir.path() / "kubelet.sock").string()};
  peer.set_pods(pods(mig0));
  peer.start();
  PluginAgent agent(node_yaml(), "",
                    {"--kubeconfig", standin.kubeconfig(), "--node-name", kNode, "--device-plugin", "false", "-c",
                     "200", "--pod-resources-socket", peer.socket_path(), "--pod-resources-interval", "200",
                     "--kubernetes-pod-label-allowlist-regex", "^app\\.,^team$,^gpu$"},
                    {"DCGM_EXPORTER_KUBERNETES_ENABLE_POD_LABELS=true", "DCGM_EXPORTER_KUBERNETES_ENABLE_POD_UID=true",
                     "NODE_NAME=gpu-node-7"});
  const std::string want = "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"" + std::string(kGpu0) +
                           "\",pci_bus_id=\"00000000:18:00.0\",device=\"nvidia0\",modelName=\"NVIDIA L4\","
                           "Hostname=\"gpu-node-7\",DCGM_FI_DRIVER_VERSION=\"580.105.08\","
                           "app_kubernetes_io_name=\"trainer\",team=\"a\",container=\"main\",namespace=\"team-a\","
                           "pod=\"trainer-a\",pod_uid=\"" +
                           uid + "\"} 40\n";
  std::string page;
  EXPECT_TRUE(eventually([&] {
    page = agent.metrics();
    return page.find(want) != std::string::npos;
  })) << want
      << "\n"
      << page << "\nlog:\n"
      << agent.log();
  EXPECT_EQ(agent.log().find("level=error"), std::string::npos) << agent.log();
  EXPECT_EQ(agent.log().find("is not honoured"), std::string::npos) << agent.log();
}

}  // namespace
}  // namespace kgpu::testing
