// Gang admission rounds (scheduler/gang_admission.h) against the API-server stand-in: a restarted
// scheduler (no reservations in memory) plans only the members not bound yet, around the GPUs the
// bound ones hold; gates come off only for a whole gang.
#include <gtest/gtest.h>

#include "apiclient/client.h"
#include "k8s/gpu_assignment.h"
#include "scheduler/gang.h"
#include "scheduler/gang_admission.h"
#include "../unit/report_node.h"
#include "standin.h"
#include "test_env.h"

namespace kgpu::scheduler {
namespace {

using nlohmann::json;

json gpu_node(const std::string& name, int gpus) {
  return kgpu::testing::report_node(name, gpus, "nvidia.com/gpu", 1, {}, "64", "512Gi");
}

struct Admission : ::testing::Test {
  kgpu::testing::StandIn api;
  std::unique_ptr<kube::Client> client = kgpu::testing::client_for(kgpu::testing::token_config(api));
  FakeClock clock;
  std::unique_ptr<GpuScheduler> sched;

  void SetUp() override {
    sched = kgpu::testing::offline_scheduler(clock);
    ASSERT_TRUE(sched);
    ASSERT_TRUE(client->create(kube::resources::kNamespaces, "", {{"metadata", {{"name", "ml"}}}}));
    for (const auto& n : {gpu_node("n1", 8), gpu_node("n2", 8)}) {
      ASSERT_TRUE(client->create(kube::resources::kNodes, "", n));
      sched->upsert_node(n);
    }
  }
  // A member of gang "job" (total 4) asking 4 GPUs; bound to `node` with `gpus` when given.
  json member(const std::string& name, bool gated, const std::string& node = "", const std::string& gpus = "") {
    json p = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata",
               {{"name", name},
                {"namespace", "ml"},
                {"labels", {{"kueue.x-k8s.io/pod-group-name", "job"}}},
                {"annotations", {{"kueue.x-k8s.io/pod-group-total-count", "4"}}}}},
              {"spec",
               {{"containers",
                 json::array({{{"name", "c"}, {"image", "x"}, {"resources", {{"limits", {{"nvidia.com/gpu", "4"}}}}}}})}}}};
    if (gated) p["spec"]["schedulingGates"] = json::array({{{"name", kGangGate}}, {{"name", "other.io/gate"}}});
    if (!node.empty()) {
      p["spec"]["nodeName"] = node;
      p["metadata"]["annotations"]["kgpu.io/gpu-resource"] = "nvidia.com/gpu";
      p["metadata"]["annotations"]["kgpu.io/gpu-assignment"] = "c:" + gpus;
    }
    auto created = client->create(kube::resources::kPods, "ml", p);
    EXPECT_TRUE(created) << (created ? "" : created.error().text());
    return created ? *created : p;
  }
  std::vector<kube::ObjectRef> refs(const std::vector<json>& pods) {
    std::vector<kube::ObjectRef> out;
    for (const auto& p : pods) out.push_back(std::make_shared<const json>(p));
    return out;
  }
};

TEST_F(Admission, ARestartedSchedulerPlansOnlyTheUnboundMembersAroundTheBoundOnes) {
  // Two members bound before the restart (on n1's GPUs 0-3 and n2's 0-3), two not: one gated, one
  // whose gate was already removed.
  std::vector<json> pods = {member("m0", false, "n1", "n1-g0,n1-g1,n1-g2,n1-g3"),
                            member("m1", false, "n2", "n2-g0,n2-g1,n2-g2,n2-g3"), member("m2", true),
                            member("m3", false)};
  for (const auto& p : pods) sched->upsert_pod(p);
  EXPECT_EQ(sched->allocation("nvidia.com/gpu").first, 8000);
  GangAdmission admission(*sched, *client, nullptr, GangAdmissionOptions{std::chrono::seconds(60), &clock});
  const GangRound r = admission.round(refs(pods));
  ASSERT_EQ(r.reserved, std::vector<std::string>{"ml/job"}) << (r.waiting.empty() ? "" : r.waiting.begin()->second);
  EXPECT_EQ(sched->allocation("nvidia.com/gpu").first, 16000);  // no GPU booked twice: 8 bound + 8 reserved
  // m2's gate is gone (the other gate stays); m3 is marked so kube-scheduler retries it.
  auto m2 = client->get(kube::resources::kPods, "ml", "m2");
  ASSERT_TRUE(m2);
  EXPECT_EQ((*m2)["spec"]["schedulingGates"], json::array({{{"name", "other.io/gate"}}}));
  auto m3 = client->get(kube::resources::kPods, "ml", "m3");
  ASSERT_TRUE(m3);
  EXPECT_TRUE((*m3)["metadata"]["annotations"].contains(kGangReservationAnnotation));
  // The next round keeps the reservation; once both are bound the gang is admitted.
  EXPECT_TRUE(admission.round(refs(pods)).reserved.empty());
  EXPECT_EQ(admission.reserved(), 1u);
  pods[2]["spec"]["nodeName"] = "n1";
  pods[3]["spec"]["nodeName"] = "n2";
  EXPECT_EQ(admission.round(refs(pods)).admitted, std::vector<std::string>{"ml/job"});
  EXPECT_EQ(admission.reserved(), 0u);
}

TEST_F(Admission, ADeletedMemberReleasesTheReservationWhole) {
  std::vector<json> pods;
  for (int i = 0; i < 4; ++i) pods.push_back(member("d" + std::to_string(i), true));
  GangAdmission admission(*sched, *client, nullptr, GangAdmissionOptions{std::chrono::seconds(60), &clock});
  ASSERT_EQ(admission.round(refs(pods)).reserved.size(), 1u);
  EXPECT_EQ(sched->allocation("nvidia.com/gpu").first, 16000);
  pods.pop_back();  // d3 deleted before it was placed
  const GangRound r = admission.round(refs(pods));
  EXPECT_EQ(r.released, std::vector<std::string>{"ml/job"});
  EXPECT_EQ(sched->allocation("nvidia.com/gpu").first, 0);
  // Three of four: it waits, holding nothing.
  const GangRound w = admission.round(refs(pods));
  EXPECT_TRUE(w.reserved.empty());
  EXPECT_EQ(w.waiting.at("ml/job"), "gang ml/job: 3 of its 4 members exist");
}

// The timeout on the scheduler's clock: a reservation not bound whole within it is released whole
// (its placed members' evictions are the API server's: e2e.gang checks them against kube-apiserver).
TEST_F(Admission, AReservationNotBoundWithinTheTimeoutIsReleasedWhole) {
  std::vector<json> pods;
  for (int i = 0; i < 4; ++i) pods.push_back(member("t" + std::to_string(i), true));
  GangAdmission admission(*sched, *client, nullptr, GangAdmissionOptions{std::chrono::seconds(60), &clock});
  ASSERT_EQ(admission.round(refs(pods)).reserved.size(), 1u);
  pods[0]["spec"]["nodeName"] = "n1";  // one member placed, three not
  clock.advance(std::chrono::seconds(59));
  GangRound r = admission.round(refs(pods));
  EXPECT_TRUE(r.timed_out.empty());
  EXPECT_EQ(admission.reserved(), 1u);
  EXPECT_EQ(sched->allocation("nvidia.com/gpu").first, 16000);
  clock.advance(std::chrono::seconds(2));
  r = admission.round(refs(pods));
  EXPECT_EQ(r.timed_out, std::vector<std::string>{"ml/job"});
  EXPECT_EQ(admission.reserved(), 0u);
  EXPECT_EQ(sched->allocation("nvidia.com/gpu").first, 0);
}

}  // namespace
}  // namespace kgpu::scheduler
