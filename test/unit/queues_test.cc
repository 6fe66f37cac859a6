// GPU quota queues (scheduler/queues.h): the config's rules and errors, usage, admission order,
// borrowing within a cohort and reclaim.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "scheduler/queues.h"

namespace kgpu::scheduler::queues {
namespace {

constexpr const char* kTwoTeams = R"(version: v1
clusterQueues:
  - name: team-a
    cohort: lab
    namespaces: [a]
    quotas:
      - {resource: nvidia.com/gpu, nominalQuota: 8}
  - name: team-b
    cohort: lab
    namespaces: [b]
    quotas:
      - {resource: nvidia.com/gpu, nominalQuota: 8, borrowingLimit: 6, lendingLimit: 8}
localQueues:
  - {namespace: shared, name: fast, clusterQueue: team-b}
)";

Config config(const char* text) {
  auto c = parse_config(text, "queues.yaml");
  EXPECT_TRUE(c) << (c ? "" : c.error().message);
  return c ? *c : Config{};
}

Workload wl(const std::string& id, const std::string& queue, int64_t gpus, int32_t priority = 0, bool admitted = false,
            const std::string& created = "") {
  Workload w;
  w.id = id;
  w.name = id;
  w.queue = queue;
  w.priority = priority;
  w.created = created.empty() ? id : created;
  w.request[{"nvidia.com/gpu", ""}] = gpus;
  w.admitted = admitted;
  return w;
}

TEST(QueuesConfig, ReadsKueuesVocabularyAndRefusesBadConfigsNamingTheField) {
  const Config c = config(kTwoTeams);
  ASSERT_EQ(c.queues.size(), 2u);
  EXPECT_EQ(c.queues[1].quotas[0].borrowing_limit, 6);
  EXPECT_EQ(queue_for(c, "a", ""), "team-a");
  EXPECT_EQ(queue_for(c, "shared", "fast"), "team-b");
  EXPECT_EQ(queue_for(c, "shared", ""), "");

  std::vector<std::pair<std::string, std::string>> bad = {
      {"version: v1\nclusterQueues:\n  - name: a\n    quotas: [{resource: nvidia.com/gpu, nominalQuota: -2}]\n",
       "queues.yaml:4: clusterQueues[0].quotas[0].nominalQuota: -2 is negative"},
      {"version: v1\nclusterQueues:\n  - name: a\n    cohort: b\n    quotas: [{resource: r, nominalQuota: 1}]\n"
       "  - name: b\n    quotas: [{resource: r, nominalQuota: 1}]\n",
       "cohort b of queue a is also a queue's name (a cycle)"},
      {"version: v1\nclusterQueues:\n  - name: a\n    quotas: [{resource: r, nominalQuota: 1}]\n"
       "  - name: a\n    quotas: [{resource: r, nominalQuota: 1}]\n",
       "clusterQueues[1].name: queue a is named twice"},
      {"version: v1\nclusterQueues:\n  - name: a\n    quotas: [{resource: r, nominalQuota: 1}]\n"
       "localQueues:\n  - {namespace: x, name: y, clusterQueue: nope}\n",
       "localQueues[0].clusterQueue: no cluster queue \"nope\""},
      {"version: v1\nclusterQueues:\n  - name: a\n    quotas: [{resource: r, nominalQuota: 2, lendingLimit: 3}]\n",
       "lendingLimit: 3 is more than the nominal quota 2"},
      {"version: v2\nclusterQueues: []\n", "version: \"v2\": this reads v1"},
      {"version: v1\nclusterQueues:\n  - name: a\n    quotas: []\n", "clusterQueues[0].quotas: want a non-empty list"},
      {"version: v1\nclusterQueues:\n  - name: Team_A\n    quotas: [{resource: r, nominalQuota: 1}]\n",
       "is not a DNS label"},
      {"a: &x [*x]\n", "queues.yaml"},
  };
  std::string many = "version: v1\nclusterQueues:\n  - name: a\n    quotas: [{resource: r, nominalQuota: 1}]\n    namespaces: [";
  for (int i = 0; i < 1001; ++i) many += (i ? ",n" : "n") + std::to_string(i);
  many += "]\n";
  bad.emplace_back(many, "queues.yaml:5: clusterQueues[0].namespaces: 1001 namespaces, at most 1000");
  for (const auto& [text, want] : bad) {
    auto c2 = parse_config(text, "queues.yaml");
    ASSERT_FALSE(c2) << text;
    EXPECT_NE(c2.error().message.find(want), std::string::npos) << c2.error().message;
  }
}

TEST(QueuesAdmit, BorrowsIdleQuotaWithinTheLimitsAndOrdersByPriority) {
  const Config c = config(kTwoTeams);
  // team-b idle: team-a takes its 8 and borrows up to what team-b lends.
  std::vector<Workload> ws = {wl("a1", "team-a", 8), wl("a2", "team-a", 8), wl("a3", "team-a", 4)};
  Decision d = admit(c, ws);
  EXPECT_EQ(d.admit, (std::vector<std::string>{"a1", "a2"}));
  EXPECT_NE(d.waiting.at("a3").find("queue team-a uses 16 of nvidia.com/gpu"), std::string::npos) << d.waiting.at("a3");
  const auto u = usage(c, {wl("a1", "team-a", 8, 0, true), wl("a2", "team-a", 8, 0, true), wl("a3", "team-a", 4)});
  EXPECT_EQ(u.at("team-a").used.at({"nvidia.com/gpu", ""}), 16);
  EXPECT_EQ(u.at("team-a").borrowed.at({"nvidia.com/gpu", ""}), 8);
  EXPECT_EQ(u.at("team-a").pending.at({"nvidia.com/gpu", ""}), 4);
  // team-b's borrowing limit is 6.
  d = admit(c, {wl("b1", "team-b", 8), wl("b2", "team-b", 6), wl("b3", "team-b", 1)});
  EXPECT_EQ(d.admit, (std::vector<std::string>{"b1", "b2"}));
  // Priority first within a queue, then creation.
  d = admit(c, {wl("low", "team-a", 8, 0, false, "1"), wl("high", "team-a", 8, 10, false, "2")});
  EXPECT_EQ(d.admit.front(), "high");
}

TEST(QueuesAdmit, FairShareAcrossQueuesAndReclaimOfBorrowersWhole) {
  const Config c = config(kTwoTeams);
  // Both pending: the queue with the lower share goes first, alternating.
  Decision d = admit(c, {wl("a1", "team-a", 4, 0, false, "1"), wl("a2", "team-a", 4, 0, false, "2"),
                         wl("b1", "team-b", 4, 0, false, "3"), wl("b2", "team-b", 4, 0, false, "4")});
  EXPECT_EQ(d.admit, (std::vector<std::string>{"a1", "b1", "a2", "b2"}));
  // team-a borrows 8 of team-b's; team-b wants its quota back: the newest, lowest-priority
  // borrower goes, whole, and team-b's workload waits for it.
  std::vector<Workload> ws = {wl("a1", "team-a", 8, 0, true, "1"), wl("gang:a/job", "team-a", 8, 0, true, "2"),
                              wl("b1", "team-b", 8, 0, false, "3")};
  d = admit(c, ws);
  EXPECT_TRUE(d.admit.empty());
  ASSERT_EQ(d.evict.at("b1"), std::vector<std::string>{"gang:a/job"});
  EXPECT_NE(d.waiting.at("b1").find("reclaiming 1 workload(s) that borrow in cohort lab"), std::string::npos);
  // Never: no reclaim.
  Config never = c;
  never.queues[1].reclaim = Reclaim::kNever;
  d = admit(never, ws);
  EXPECT_TRUE(d.evict.empty());
  // LowerPriority: a borrower of equal priority is kept.
  Config lower = c;
  lower.queues[1].reclaim = Reclaim::kLowerPriority;
  EXPECT_TRUE(admit(lower, ws).evict.empty());
  ws[2].priority = 5;
  EXPECT_EQ(admit(lower, ws).evict.at("b1"), std::vector<std::string>{"gang:a/job"});
  // A queue beyond its nominal quota reclaims nothing: it would only borrow.
  ws.push_back(wl("b0", "team-b", 8, 0, true, "0"));
  d = admit(c, ws);
  EXPECT_TRUE(d.evict.empty());
}


// Admission, kept between passes and without reasons, decides as admit() over the same workloads:
// random workloads of three queues (two in a cohort with limits, one alone), random admitted and
// pending sets, changed one at a time.
TEST(QueuesAdmission, IncrementalPassesDecideAsAdmit) {
  const Config c = config(R"(version: v1
clusterQueues:
  - name: team-a
    cohort: lab
    namespaces: [a]
    weight: 2
    quotas:
      - {resource: nvidia.com/gpu, nominalQuota: 12, lendingLimit: 6}
      - {resource: nvidia.com/gpu, model: H100, nominalQuota: 4}
  - name: team-b
    cohort: lab
    namespaces: [b]
    reclaimWithinCohort: LowerPriority
    quotas:
      - {resource: nvidia.com/gpu, nominalQuota: 8, borrowingLimit: 6}
  - name: solo
    namespaces: [s]
    quotas:
      - {resource: nvidia.com/gpu, nominalQuota: 5}
)");
  uint64_t x = 88172645463325252ULL;
  auto rnd = [&](uint64_t n) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x % n;
  };
  const std::vector<std::string> queues = {"team-a", "team-b", "solo", "nowhere"};
  size_t admitted_seen = 0, evicted_seen = 0;
  for (int round = 0; round < 40; ++round) {
    std::map<std::string, Workload> ws;
    Admission inc(c);
    for (int step = 0; step < 60; ++step) {
      const std::string id = "w" + std::to_string(rnd(30));
      if (rnd(5) == 0) {
        ws.erase(id);
        inc.remove(id);
      } else {
        Workload w = wl(id, queues[rnd(queues.size())], static_cast<int64_t>(1 + rnd(6)), static_cast<int32_t>(rnd(3)),
                        rnd(3) == 0, std::to_string(rnd(1000)));
        if (rnd(4) == 0) w.request[{"nvidia.com/gpu", "H100"}] = static_cast<int64_t>(1 + rnd(3));
        ws[id] = w;
        inc.add(w);
      }
      std::vector<Workload> all;
      for (const auto& [_, w] : ws) all.push_back(w);
      const Decision want = admit(c, all);
      const Decision got = inc.pass(false);
      ASSERT_EQ(got.admit, want.admit) << "round " << round << " step " << step;
      ASSERT_EQ(got.evict, want.evict) << "round " << round << " step " << step;
      EXPECT_TRUE(got.waiting.empty());
      admitted_seen += want.admit.size();
      evicted_seen += want.evict.size();
      // Apply part of the decision, as a caller would.
      if (!want.admit.empty() && rnd(2) == 0) {
        ws[want.admit.front()].admitted = true;
        EXPECT_TRUE(inc.set_admitted(want.admit.front()));
        EXPECT_FALSE(inc.set_admitted(want.admit.front()));
      }
    }
  }
  // The random cases reach both admissions and reclaims.
  EXPECT_GT(admitted_seen, 100u);
  EXPECT_GT(evicted_seen, 10u);
}

// The workloads of pods: requests as the scheduler counts them (an init container asking more than
// the containers together sets the request), a gang as one workload of all its members, a pod
// without the queue gate admitted, a finished pod left out.
TEST(QueuesWorkloads, PodsBecomeWorkloadsAsTheSchedulerCountsThem) {
  const Config c = config(kTwoTeams);
  auto pod = [](const std::string& name, const std::string& ns, int gpus, bool gated) {
    nlohmann::json p = {{"metadata", {{"name", name}, {"namespace", ns}, {"uid", "uid-" + name}, {"creationTimestamp", "2026-12-06T10:00:00Z"}}},
                        {"spec", {{"containers", nlohmann::json::array({{{"name", "c"}, {"resources", {{"limits", {{"nvidia.com/gpu", std::to_string(gpus)}}}}}}})}}}};
    if (gated) p["spec"]["schedulingGates"] = nlohmann::json::array({{{"name", kQueueGate}}});
    return p;
  };
  nlohmann::json init = pod("init", "a", 1, true);
  init["spec"]["initContainers"] = nlohmann::json::array({{{"name", "i"}, {"resources", {{"limits", {{"nvidia.com/gpu", "3"}}}}}}});
  nlohmann::json m0 = pod("m0", "b", 2, true), m1 = pod("m1", "b", 2, false);
  for (auto* m : {&m0, &m1}) {
    (*m)["metadata"]["labels"] = {{"kueue.x-k8s.io/pod-group-name", "job"}};
    (*m)["metadata"]["annotations"] = {{"kueue.x-k8s.io/pod-group-total-count", "2"}};
  }
  nlohmann::json done = pod("done", "a", 4, false);
  done["status"]["phase"] = "Succeeded";
  const nlohmann::json other = pod("elsewhere", "c", 1, true);
  const auto ws = workloads_of(c, {&init, &m0, &m1, &done, &other});
  ASSERT_EQ(ws.size(), 2u);
  std::map<std::string, const Workload*> by;
  for (const auto& w : ws) by[w.id] = &w;
  ASSERT_TRUE(by.contains("uid-init"));
  EXPECT_EQ(amount_of(by["uid-init"]->request, {"nvidia.com/gpu", ""}), 3);
  EXPECT_EQ(by["uid-init"]->queue, "team-a");
  EXPECT_FALSE(by["uid-init"]->admitted);
  ASSERT_TRUE(by.contains("gang:b/job"));
  EXPECT_EQ(amount_of(by["gang:b/job"]->request, {"nvidia.com/gpu", ""}), 4);
  EXPECT_FALSE(by["gang:b/job"]->admitted);  // one member still gated
}

}  // namespace
}  // namespace kgpu::scheduler::queues
