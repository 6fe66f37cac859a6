// The agent's remediation with the API server failing (the stand-in's injected 503s, which a real
// server cannot be made to answer): the GPU is withheld from the kubelet at once, remediated,
// and the node annotation and conditions land once the API answers again (docs/remediation.md).
// The rest of remediation runs against the real control plane (test/kube/e2e_remediation_test.py).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "agent_fixture.h"
#include "apiclient/client.h"
#include "standin.h"
#include "test_env.h"

namespace kgpu::testing {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;

constexpr const char* kNode = "gpu-node-1";
// Four A100s, no nvidia-persistenced, no processes: a reset needs nothing else to stop.
constexpr const char* kNodeYaml =
    "preset: dgx-a100-8\ngpus:\n  - {index: 3, persistenceMode: false}\n";

std::string record_of(kube::Client& c, const std::string& gpu_index) {
  auto n = c.get(kube::resources::kNodes, "", kNode);
  if (!n) return "";
  const auto a = (*n)["metadata"].value("annotations", json::object()).value("kgpu.io/remediation", "");
  if (a.empty()) return "";
  const json parsed = json::parse(a);
  for (const auto& [uuid, r] : parsed["gpus"].items()) {
    if (std::to_string(r.value("index", 99)) == gpu_index) return r.dump();
  }
  return "";
}

TEST(RemediationApi, TheAgentKeepsServingAndRetriesItsWritesWhileTheApiFails) {
  StandIn standin;
  auto client = client_for(token_config(standin));
  ASSERT_TRUE(client->create(kube::resources::kNodes, "", json{{"metadata", {{"name", kNode}}}}));
  PluginAgent agent(kNodeYaml, "",
                    {"--kubeconfig", standin.kubeconfig(), "--node-name", kNode, "--remediation=on",
                     "--remediation-interval", "100", "--remediation-namespace", "default"});
  auto regs = agent.registrations(1);
  ASSERT_FALSE(regs.empty()) << agent.log();
  PluginClient plugin(agent.kubelet().plugin_socket(regs[0]));
  plugin.watch();
  ASSERT_TRUE(first_list(plugin, 8).size() == 8);

  // Every write to the Node fails from now on.
  standin.fault({{"status", 503}, {"path", std::string("/api/v1/nodes/") + kNode}, {"method", "PATCH"}, {"times", -1}});
  agent.fake().rewrite(std::string(kNodeYaml) + "faults:\n  xids: [{gpu: 3, xid: 62}]\n");

  // The kubelet sees GPU 3 Unhealthy at once, API or not.
  auto list = plugin.wait_for_list(
      [](const std::vector<DeviceEntry>& l) {
        return std::count_if(l.begin(), l.end(), [](const DeviceEntry& d) { return d.health == "Unhealthy"; }) == 1;
      },
      std::chrono::seconds(10));
  ASSERT_TRUE(list) << agent.log();
  EXPECT_TRUE(eventually([&] {
    return agent.metrics().find("kgpu_remediation_write_failures_total 0") == std::string::npos &&
           agent.metrics().find("kgpu_remediation_faults_total{action=\"reset-gpu\"} 1") != std::string::npos;
  })) << agent.metrics();
  EXPECT_EQ(record_of(*client, "3"), "");  // nothing could be written

  // The API answers again: the record and the conditions land, with GPU 3 remediated meanwhile.
  standin.fault({{"clear", true}});
  ASSERT_TRUE(eventually([&] { return record_of(*client, "3").find("\"phase\":\"in-service\"") != std::string::npos; }))
      << client->get(kube::resources::kNodes, "", kNode)->dump() << "\n" << agent.log();
  // The conditions follow the annotation in the same round.
  std::map<std::string, std::string> conditions;
  std::string node_text;
  EXPECT_TRUE(eventually([&] {
    auto node = client->get(kube::resources::kNodes, "", kNode);
    if (!node) return false;
    node_text = node->dump();
    conditions.clear();
    for (const auto& c : node->value("status", json::object()).value("conditions", json::array())) {
      conditions[c.value("type", "")] = c.value("status", "");
    }
    return conditions.size() == 3;
  })) << node_text << "\n" << agent.log();
  EXPECT_EQ(conditions["GpuResetRequired"], "False") << node_text;
  EXPECT_EQ(conditions["GpuRebootRequired"], "False");
  EXPECT_EQ(conditions["GpuNeedsAttention"], "False");
  EXPECT_THAT(agent.log(), HasSubstr("the node annotation could not be written (retried)"));
  // Returned to the kubelet.
  EXPECT_TRUE(plugin.wait_for_list(
      [](const std::vector<DeviceEntry>& l) {
        return l.size() == 8 && std::all_of(l.begin(), l.end(), [](const DeviceEntry& d) { return d.health == "Healthy"; });
      },
      std::chrono::seconds(10)))
      << agent.log();
}

}  // namespace
}  // namespace kgpu::testing
