// The scheduler's MIG planning rounds (scheduler/mig_planning.h) against the API-server stand-in:
// which nodes a round labels and which it leaves alone.
#include <gtest/gtest.h>

#include "apiclient/client.h"
#include "scheduler/mig_planning.h"
#include "standin.h"
#include "test_env.h"

namespace kgpu::scheduler {
namespace {

using nlohmann::json;

json mig_node(const std::string& name, const std::string& config, const std::string& state) {
  json labels = {{"nvidia.com/mig.capable", "true"}, {"nvidia.com/gpu.count", "2"}, {"nvidia.com/gpu.memory", "81559"}};
  if (!config.empty()) labels["nvidia.com/mig.config"] = config;
  if (!state.empty()) labels["nvidia.com/mig.config.state"] = state;
  return {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", name}, {"labels", labels}}}};
}

json mig_pod(const std::string& name, const std::string& resource, int n, const std::string& node = "") {
  json p = {{"metadata", {{"name", name}, {"namespace", "default"}}},
            {"spec",
             {{"containers",
               json::array({{{"name", "c"}, {"resources", {{"limits", {{resource, std::to_string(n)}}}}}}})}}}};
  if (!node.empty()) p["spec"]["nodeName"] = node;
  return p;
}

struct Planning : ::testing::Test {
  kgpu::testing::StandIn api;
  std::unique_ptr<kube::Client> client = kgpu::testing::client_for(kgpu::testing::token_config(api));
  std::vector<kube::ObjectRef> nodes, pods;

  void node(const json& n) {
    ASSERT_TRUE(client->create(kube::resources::kNodes, "", n));
    nodes.push_back(std::make_shared<const json>(n));
  }
  void pod(const json& p) { pods.push_back(std::make_shared<const json>(p)); }
  std::string label(const std::string& node, const std::string& key) {
    auto n = client->get(kube::resources::kNodes, "", node);
    if (!n) return "<error>";
    const auto& l = (*n)["metadata"]["labels"];
    return l.contains(key) ? l[key].get<std::string>() : "";
  }
};

TEST_F(Planning, LabelsOnlyWherePendingRequestsAreServedWithoutEvictions) {
  node(mig_node("idle", "all-balanced", "success"));            // serves pending 7g.80gb with all-7g.80gb
  node(mig_node("busy", "all-balanced", "success"));            // a running 1g.10gb pod: a change evicts it
  node(mig_node("changing", "all-1g.10gb", "pending"));         // a change is under way
  node(mig_node("failed", "all-7g.80gb", "failed"));            // that config just failed here
  pod(mig_pod("runs", "nvidia.com/mig-1g.10gb", 1, "busy"));
  for (int k = 0; k < 8; ++k) pod(mig_pod("want-" + std::to_string(k), "nvidia.com/mig-7g.80gb", 1));
  MigPlanning p(*client, nullptr, std::nullopt);
  const auto labelled = p.round(nodes, pods);
  EXPECT_EQ(labelled, std::vector<std::string>{"idle"});
  EXPECT_EQ(label("idle", "nvidia.com/mig.config"), "all-7g.80gb");
  EXPECT_EQ(label("idle", "nvidia.com/mig.config.state"), "");  // cleared for the manager's outcome
  EXPECT_EQ(label("busy", "nvidia.com/mig.config"), "all-balanced");
  EXPECT_EQ(label("changing", "nvidia.com/mig.config"), "all-1g.10gb");
  EXPECT_EQ(label("failed", "nvidia.com/mig.config"), "all-7g.80gb");
  EXPECT_EQ(label("failed", "nvidia.com/mig.config.state"), "failed");
  EXPECT_EQ(p.labelled(), 1u);

  // The next rounds, before the node's MIG manager has taken the label up (no state yet) and after
  // it applied it: the node is asked already, nothing is labelled again.
  for (const char* state : {"", "pending", "success"}) {
    auto idle = client->get(kube::resources::kNodes, "", "idle");
    ASSERT_TRUE(idle);
    if (*state != '\0') (*idle)["metadata"]["labels"]["nvidia.com/mig.config.state"] = state;
    for (auto& n : nodes)
      if ((*n)["metadata"]["name"] == "idle") n = std::make_shared<const json>(*idle);
    EXPECT_TRUE(p.round(nodes, pods).empty()) << "state \"" << state << "\"";
  }
  EXPECT_EQ(p.labelled(), 1u);

  // No pending request: nothing changes, however stranded the layouts are.
  MigPlanning quiet(*client, nullptr, std::nullopt);
  std::vector<kube::ObjectRef> running_only = {pods.front()};
  EXPECT_TRUE(quiet.round(nodes, running_only).empty());
}

}  // namespace
}  // namespace kgpu::scheduler
