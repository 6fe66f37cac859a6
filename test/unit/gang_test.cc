// Gangs: what makes a pod a member (scheduler/gang.h) and the scheduler's whole-gang reservations
// (GpuScheduler::reserve_gang): all or nothing, members filtered to their planned nodes.
#include <gtest/gtest.h>

#include "common/clock.h"
#include "k8s/gpu_assignment.h"
#include "scheduler/gang.h"
#include "scheduler/scheduler.h"
#include "report_node.h"

namespace kgpu::scheduler {
namespace {

using nlohmann::json;

json member(const std::string& name, json labels, json annotations = json::object(), int gpus = 1) {
  return {{"metadata", {{"name", name}, {"namespace", "ml"}, {"uid", "uid-" + name}, {"labels", labels}, {"annotations", annotations}}},
          {"spec",
           {{"containers",
             json::array({{{"name", "c"}, {"resources", {{"limits", {{"nvidia.com/gpu", std::to_string(gpus)}}}}}}})}}}};
}

TEST(GangOf, EachAnchorsMarkersAndThePrecedence) {
  auto k = gang_of(member("a", {{"kueue.x-k8s.io/pod-group-name", "train"}},
                          {{"kueue.x-k8s.io/pod-group-total-count", "4"}}));
  ASSERT_TRUE(k && *k) << (k ? "" : k.error().message);
  EXPECT_EQ((*k)->key, "ml/train");
  EXPECT_EQ((*k)->source, "kueue");
  EXPECT_EQ((*k)->min_count, 4);

  auto c = gang_of(member("b", {{"scheduling.x-k8s.io/pod-group", "pg"}}));
  ASSERT_TRUE(c && *c);
  EXPECT_EQ((*c)->source, "coscheduling");
  EXPECT_FALSE((*c)->min_count);
  EXPECT_EQ((*c)->podgroup.group, "scheduling.x-k8s.io");
  EXPECT_EQ(podgroup_min_count(**c, {{"spec", {{"minMember", 3}}}}), 3);
  EXPECT_FALSE(podgroup_min_count(**c, {{"spec", {{"minMember", 0}}}}));

  auto v = gang_of(member("c", json::object(), {{"scheduling.k8s.io/group-name", "vg"}, {kGangMinCountAnnotation, "2"}}));
  ASSERT_TRUE(v && *v);
  EXPECT_EQ((*v)->source, "volcano");
  EXPECT_EQ((*v)->min_count, 2);  // kgpu's annotation: no PodGroup object needed

  json native = member("d", json::object());
  native["spec"]["schedulingGroup"] = {{"podGroupName", "ng"}};
  auto n = gang_of(native);
  ASSERT_TRUE(n && *n);
  EXPECT_EQ((*n)->source, "scheduling.k8s.io");
  EXPECT_EQ(podgroup_min_count(**n, {{"spec", {{"schedulingPolicy", {{"gang", {{"minCount", 8}}}}}}}}), 8);
  // A PodGroup its user wrote badly is an error naming the field, never a crash.
  const std::vector<json> bad_groups = {json::parse(R"({"spec": {"schedulingPolicy": {"gang": {}}}})"),
                                        json::parse(R"({"spec": {"schedulingPolicy": {"gang": "x"}}})"),
                                        json::parse(R"({"spec": "x"})"), json("x")};
  for (const json& bad : bad_groups) {
    const auto r = podgroup_min_count(**n, bad);
    ASSERT_FALSE(r) << bad.dump();
    EXPECT_NE(r.error().message.find("spec.schedulingPolicy.gang.minCount: want a count"), std::string::npos);
  }
  EXPECT_FALSE(podgroup_min_count(**c, {{"spec", {{"minMember", "3"}}}}));

  // Two markers naming one group agree; naming two groups is the pod's error, naming both fields.
  auto same = gang_of(member("e", {{"kueue.x-k8s.io/pod-group-name", "g"}, {"scheduling.x-k8s.io/pod-group", "g"}},
                             {{"kueue.x-k8s.io/pod-group-total-count", "2"}}));
  ASSERT_TRUE(same && *same);
  EXPECT_EQ((*same)->source, "kueue");
  auto bad = gang_of(member("f", {{"kueue.x-k8s.io/pod-group-name", "g1"}, {"scheduling.x-k8s.io/pod-group", "g2"}},
                            {{"kueue.x-k8s.io/pod-group-total-count", "2"}}));
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message,
            "pod ml/f: label kueue.x-k8s.io/pod-group-name names gang \"g1\" but label scheduling.x-k8s.io/pod-group "
            "names \"g2\"");
  auto no_total = gang_of(member("g", {{"kueue.x-k8s.io/pod-group-name", "g"}}));
  ASSERT_FALSE(no_total);
  EXPECT_NE(no_total.error().message.find("without the annotation kueue.x-k8s.io/pod-group-total-count"),
            std::string::npos);
  auto negative = gang_of(member("h", {{"kueue.x-k8s.io/pod-group-name", "g"}},
                                 {{"kueue.x-k8s.io/pod-group-total-count", "-3"}}));
  ASSERT_FALSE(negative);
  EXPECT_NE(negative.error().message.find("\"-3\" is not a count from 1 to 100000"), std::string::npos);
  auto none = gang_of(member("i", json::object()));
  ASSERT_TRUE(none);
  EXPECT_FALSE(*none);
}

json node(const std::string& name, int gpus) {
  return kgpu::testing::report_node(name, gpus, "nvidia.com/gpu", 1, {}, "64", "512Gi");
}

using kgpu::testing::args_for;

json kueue_member(const std::string& name, const std::string& group, int total, int gpus) {
  return member(name, {{"kueue.x-k8s.io/pod-group-name", group}}, {{"kueue.x-k8s.io/pod-group-total-count", std::to_string(total)}},
                gpus);
}

class Gangs : public ::testing::Test {
 protected:
  void SetUp() override {
    sched = kgpu::testing::offline_scheduler(clock);
    ASSERT_TRUE(sched);
    sched->upsert_node(node("n1", 8));
    sched->upsert_node(node("n2", 8));
  }
  FakeClock clock;
  std::unique_ptr<GpuScheduler> sched;
};

TEST_F(Gangs, TheWholeGangIsReservedOrNothing) {
  std::vector<json> four;
  for (int i = 0; i < 4; ++i) four.push_back(kueue_member("w" + std::to_string(i), "a", 4, 4));
  // Before its reservation a member fits nowhere.
  auto before = sched->filter(args_for(four[0], {"n1", "n2"}));
  EXPECT_FALSE(before.node);
  EXPECT_EQ(before.result.failed.at("n1"), "waits for its gang ml/a to be admitted whole");

  const auto deadline = clock.steady_now() + std::chrono::seconds(60);
  const GangPlan plan = sched->reserve_gang("ml/a", four, deadline);
  ASSERT_TRUE(plan.reserved) << plan.reason;
  ASSERT_EQ(plan.nodes.size(), 4u);
  EXPECT_EQ(sched->allocation("nvidia.com/gpu"), (std::pair<int64_t, int64_t>{16000, 16000}));
  // Each member is filtered to its planned node with its planned GPUs.
  for (const auto& m : four) {
    auto d = sched->filter(args_for(m, {"n1", "n2"}));
    ASSERT_TRUE(d.node) << d.message;
    EXPECT_EQ(*d.node, plan.nodes.at(m["metadata"]["uid"].get<std::string>()));
    EXPECT_EQ(d.gpus.size(), 4u);
    EXPECT_NE(d.message.find("as gang ml/a planned"), std::string::npos);
  }
  // A second gang does not fit beside it: nothing of it is held.
  std::vector<json> two = {kueue_member("x0", "b", 2, 8), kueue_member("x1", "b", 2, 8)};
  const GangPlan b = sched->reserve_gang("ml/b", two, deadline);
  EXPECT_FALSE(b.reserved);
  EXPECT_FALSE(b.never);
  EXPECT_NE(b.reason.find("member 1 of 2 (ml/x0): no node has room"), std::string::npos) << b.reason;
  EXPECT_EQ(sched->allocation("nvidia.com/gpu").first, 16000);
  // Released: the second gang fits now.
  EXPECT_EQ(sched->release_gang("ml/a"), 4u);
  EXPECT_EQ(sched->allocation("nvidia.com/gpu").first, 0);
  EXPECT_TRUE(sched->reserve_gang("ml/b", two, deadline).reserved);
}

TEST_F(Gangs, AGangLargerThanTheClusterIsNeverAndAReservationLastsUntilItsDeadline) {
  std::vector<json> three;
  for (int i = 0; i < 3; ++i) three.push_back(kueue_member("big" + std::to_string(i), "big", 3, 8));
  const GangPlan p = sched->reserve_gang("ml/big", three, clock.steady_now() + std::chrono::seconds(5));
  EXPECT_FALSE(p.reserved);
  EXPECT_TRUE(p.never);
  EXPECT_NE(p.reason.find("the gang asks 24.00 GPUs of nvidia.com/gpu and the cluster has 16"), std::string::npos)
      << p.reason;

  // Longer than the scheduler's assume TTL (60 s), shorter than the deadline: still held.
  std::vector<json> one = {kueue_member("solo", "s", 1, 8)};
  ASSERT_TRUE(sched->reserve_gang("ml/s", one, clock.steady_now() + std::chrono::seconds(120)).reserved);
  const json cpu_only = {{"metadata", {{"name", "cpu"}, {"namespace", "ml"}, {"uid", "uid-cpu"}}},
                         {"spec", {{"containers", json::array({{{"name", "c"}}})}}}};
  const auto refresh = [&] { sched->filter(args_for(cpu_only, {"n1"})); };  // a verb expires old choices
  clock.advance(std::chrono::seconds(90));
  refresh();
  EXPECT_EQ(sched->allocation("nvidia.com/gpu").first, 8000);
  clock.advance(std::chrono::seconds(31));
  refresh();
  EXPECT_EQ(sched->allocation("nvidia.com/gpu").first, 0);
}

// A gang of several members prefers one NVLink domain (nvidia.com/gpu.clique): packing alone would
// take the two half-used nodes, one in each domain.
TEST(GangDomains, AGangIsPlannedWithinOneNvlinkDomainWhenItFitsThere) {
  FakeClock clock;
  const auto s = kgpu::testing::offline_scheduler(clock);
  ASSERT_TRUE(s);
  auto& sched = *s;
  const auto in_domain = [](json n, const std::string& clique) {
    n["metadata"]["labels"]["nvidia.com/gpu.clique"] = clique;
    return n;
  };
  std::vector<std::pair<int, k8s::GpuUse>> half;
  for (int g = 0; g < 4; ++g) half.emplace_back(g, k8s::GpuUse{"other", "busy", "uid-busy", "c", 1});
  const auto busy = [&](const std::string& name) {
    return kgpu::testing::report_node(name, 8, "nvidia.com/gpu", 1, half, "64", "512Gi");
  };
  sched.upsert_node(in_domain(busy("a1"), "fabric.1"));
  sched.upsert_node(in_domain(node("a2", 8), "fabric.1"));
  sched.upsert_node(in_domain(busy("b1"), "fabric.2"));
  sched.upsert_node(in_domain(node("b2", 8), "fabric.2"));
  sched.upsert_node(in_domain(node("b3", 8), "fabric.2"));
  std::vector<json> two = {kueue_member("p0", "pair", 2, 4), kueue_member("p1", "pair", 2, 4)};
  const auto deadline = clock.steady_now() + std::chrono::seconds(60);
  GangPlan plan = sched.reserve_gang("ml/pair", two, deadline);
  ASSERT_TRUE(plan.reserved) << plan.reason;
  // fabric.2 has the most free GPUs (20 of 24): both members there.
  EXPECT_EQ(plan.domain, "fabric.2");
  for (const auto& [uid, n] : plan.nodes) EXPECT_EQ(n[0], 'b') << uid << " on " << n;
  // A gang no single domain holds (3 x 8 GPUs: fabric.2 has two idle nodes left at most) goes
  // across domains.
  EXPECT_EQ(sched.release_gang("ml/pair"), 2u);
  std::vector<json> three;
  for (int i = 0; i < 3; ++i) three.push_back(kueue_member("q" + std::to_string(i), "wide", 3, 8));
  plan = sched.reserve_gang("ml/wide", three, deadline);
  ASSERT_TRUE(plan.reserved) << plan.reason;
  EXPECT_EQ(plan.domain, "");
  std::set<std::string> nodes;
  for (const auto& [uid, n] : plan.nodes) nodes.insert(n);
  EXPECT_EQ(nodes, (std::set<std::string>{"a2", "b2", "b3"}));
}

}  // namespace
}  // namespace kgpu::scheduler
