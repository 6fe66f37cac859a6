// The client's controller machinery against the API-server stand-in: informers (sync, handlers,
// indexes, resume after a dropped watch, relist after 410), leader election between two processes
// (a SIGKILLed leader is replaced within the lease duration; a clean stop hands over at once), and
// events.k8s.io Events aggregated into series.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <condition_variable>
#include <fstream>
#include <thread>

#include "apiclient/events.h"
#include "apiclient/informer.h"
#include "apiclient/leader.h"
#include "common/clock.h"
#include "standin.h"
#include "test_env.h"

namespace kgpu::kube {
namespace {

using nlohmann::json;
using namespace kgpu::testing;  // the stand-in fixture and its helpers


json bound_pod(const std::string& name, const std::string& node) {
  json p = test_pod(name);
  p["spec"]["nodeName"] = node;
  return p;
}

TEST(Informer, SyncsFollowsAndIndexes) {
  StandIn server;
  auto writer = client_for(token_config(server));
  for (int i = 0; i < 30; ++i) ASSERT_TRUE(writer->create(resources::kPods, "default", bound_pod("p" + std::to_string(i), i % 2 ? "n1" : "n2")));
  auto reader = client_for(token_config(server));
  InformerOptions o;
  o.resource = resources::kPods;
  o.page_size = 7;
  Informer inf(*reader, o);
  inf.add_index("node", index::by_node_name());
  std::mutex mu;
  std::vector<std::string> log;
  inf.add_handlers({[&](const ObjectRef& x) {
                      std::lock_guard l(mu);
                      log.push_back("add " + Informer::key_of(*x));
                    },
                    [&](const ObjectRef&, const ObjectRef& x) {
                      std::lock_guard l(mu);
                      log.push_back("update " + Informer::key_of(*x));
                    },
                    [&](const ObjectRef& x) {
                      std::lock_guard l(mu);
                      log.push_back("delete " + Informer::key_of(*x));
                    }});
  inf.start();
  ASSERT_TRUE(inf.wait_for_sync(std::chrono::seconds(10))) << inf.last_error();
  EXPECT_EQ(inf.size(), 30u);
  EXPECT_EQ(inf.by_index("node", "n1").size(), 15u);
  ASSERT_TRUE(writer->patch(resources::kPods, "default", "p1", PatchType::kMerge, json::parse(R"({"metadata":{"labels":{"x":"1"}}})")));
  ASSERT_TRUE(writer->remove(resources::kPods, "default", "p2"));
  ASSERT_TRUE(writer->create(resources::kPods, "default", bound_pod("late", "n1")));
  ASSERT_TRUE(eventually([&] { return inf.size() == 30 && inf.get("default/late") != nullptr; }));
  EXPECT_EQ((*inf.get("default/p1"))["metadata"]["labels"]["x"], "1");
  EXPECT_EQ(inf.get("default/p2"), nullptr);
  EXPECT_EQ(inf.by_index("node", "n1").size(), 16u);
  EXPECT_EQ(inf.by_index("node", "n2").size(), 14u);
  {
    std::lock_guard l(mu);
    // p2's deletion is an update (deletionTimestamp set) and then the delete, as kube-apiserver sends it.
    ASSERT_EQ(log.size(), 34u);
    EXPECT_EQ(std::vector<std::string>(log.end() - 4, log.end()),
              (std::vector<std::string>{"update default/p1", "update default/p2", "delete default/p2",
                                        "add default/late"}));
  }
  // A dropped watch resumes from the last version: nothing is listed again, nothing is lost.
  const uint64_t lists = inf.stats().lists;
  server.fault({{"dropWatches", true}});
  ASSERT_TRUE(writer->create(resources::kPods, "default", bound_pod("after-drop", "n2")));
  ASSERT_TRUE(eventually([&] { return inf.get("default/after-drop") != nullptr; }));
  EXPECT_EQ(inf.stats().lists, lists);
  EXPECT_GE(inf.stats().watches, 2u);
  // History expired while the watch was down: 410, relist, and the handlers hear only the difference.
  // The informer's next request (its re-watch) is held 1.5 s, long enough for a change and a
  // compaction to pass it by; then its relists fail 8 times: more than the client retries one
  // request (5), so the informer backs off and lists again.
  server.fault({{"delayMs", 1500}, {"path", "/api/v1/pods"}, {"method", "GET"}, {"times", 1}});
  server.fault({{"dropWatches", true}});
  ASSERT_TRUE(writer->remove(resources::kPods, "default", "p3"));
  server.fault({{"compact", true}});
  server.fault({{"status", 503}, {"path", "/api/v1/pods"}, {"method", "GET"}, {"times", 8}});
  ASSERT_TRUE(eventually([&] { return inf.get("default/p3") == nullptr; }));
  EXPECT_GT(inf.stats().lists, lists);
  EXPECT_EQ(inf.stats().relists_after_gone, 1u);
  EXPECT_EQ(inf.stats().errors, 1u);  // one failed relist (6 tries), then a good one
  inf.stop();
}

// synced() (what a scheduler's /readyz waits for) turns true only once every handler holds the first
// list: the first add is held here until the test has seen the informer not synced.
TEST(Informer, SyncedOnlyOnceTheHandlersHoldTheFirstList) {
  StandIn server;
  auto writer = client_for(token_config(server));
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(writer->create(resources::kPods, "default", bound_pod("p" + std::to_string(i), "n1")));
  auto reader = client_for(token_config(server));
  InformerOptions o;
  o.resource = resources::kPods;
  Informer inf(*reader, o);
  std::mutex mu;
  std::condition_variable cv;
  bool entered = false;
  bool released = false;
  size_t added = 0;
  inf.add_handlers({[&](const ObjectRef&) {
                      std::unique_lock l(mu);
                      entered = true;
                      cv.notify_all();
                      cv.wait(l, [&] { return released; });
                      ++added;
                    },
                    nullptr, nullptr});
  inf.start();
  {
    std::unique_lock l(mu);
    ASSERT_TRUE(cv.wait_for(l, std::chrono::seconds(10), [&] { return entered; })) << inf.last_error();
  }
  EXPECT_FALSE(inf.synced());
  EXPECT_FALSE(inf.wait_for_sync(std::chrono::milliseconds(100)));
  {
    std::lock_guard l(mu);
    released = true;
  }
  cv.notify_all();
  ASSERT_TRUE(inf.wait_for_sync(std::chrono::seconds(10))) << inf.last_error();
  {
    std::lock_guard l(mu);
    EXPECT_EQ(added, 3u);
  }
  inf.stop();
}

TEST(Informer, SelectorsAndTransform) {
  StandIn server;
  auto c = client_for(token_config(server));
  for (const std::string node : {"a", "b", "a"}) {
    static int i = 0;
    ASSERT_TRUE(c->create(resources::kPods, "default", bound_pod("s" + std::to_string(i++), node)));
  }
  InformerOptions o;
  o.resource = resources::kPods;
  o.field_selector = "spec.nodeName=a";
  o.transform = [](json& obj) { obj.erase("spec"); };
  Informer inf(*c, o);
  inf.start();
  ASSERT_TRUE(inf.wait_for_sync(std::chrono::seconds(10)));
  EXPECT_EQ(inf.size(), 2u);
  EXPECT_FALSE(inf.list()[0]->contains("spec"));
  inf.stop();
}

TEST(LeaderElection, KilledLeaderIsReplacedWithinTheLeaseDuration) {
  StandIn server;
  TempDir d;
  const auto candidate = [&](const std::string& id) {
    return std::make_unique<ChildProcess>(
        std::vector<std::string>{KGPU_LEADER_CHILD, server.kubeconfig(), "kgpu-scheduler", id, "2000", "1500", "250"},
        std::vector<std::string>{}, (d.path() / id).string());
  };
  auto a = candidate("a");
  ASSERT_TRUE(eventually([&] { return slurp(d.path() / "a").find("a leading") != std::string::npos; }));
  auto b = candidate("b");
  auto c = client_for(token_config(server));
  // While a renews (two renewals seen), b stays a candidate.
  const auto renew_time = [&] {
    auto lease = c->get(resources::kLeases, "kube-system", "kgpu-scheduler");
    return lease ? (*lease)["spec"].value("renewTime", "") : std::string();
  };
  for (int i = 0; i < 2; ++i) {
    const std::string seen = renew_time();
    ASSERT_TRUE(eventually([&] { return renew_time() != seen; }));
  }
  EXPECT_EQ(slurp(d.path() / "b"), "");
  const json before = *c->get(resources::kLeases, "kube-system", "kgpu-scheduler");
  EXPECT_EQ(before["spec"]["holderIdentity"], "a");
  kill(a->pid(), SIGKILL);
  const auto killed = std::chrono::steady_clock::now();
  ASSERT_TRUE(eventually([&] { return slurp(d.path() / "b").find("b leading") != std::string::npos; },
                         std::chrono::seconds(10)));
  const auto takeover = std::chrono::steady_clock::now() - killed;
  // Within the lease duration (2 s) plus a retry period, measured from the kill, with room for a
  // loaded machine's request latency.
  EXPECT_LT(takeover, std::chrono::milliseconds(2000 + 250 + 1500));
  const json after = *c->get(resources::kLeases, "kube-system", "kgpu-scheduler");
  EXPECT_EQ(after["spec"]["holderIdentity"], "b");
  EXPECT_EQ(after["spec"]["leaseTransitions"], before["spec"]["leaseTransitions"].get<int>() + 1);
  // A clean stop releases the lease: the next candidate takes it at once, not after 2 s.
  auto e = candidate("e");
  kill(b->pid(), SIGTERM);
  ASSERT_TRUE(b->wait(std::chrono::seconds(5)));
  const auto released = std::chrono::steady_clock::now();
  ASSERT_TRUE(eventually([&] { return slurp(d.path() / "e").find("e leading") != std::string::npos; }));
  // Released: well before the 2 s lease would have run out.
  EXPECT_LT(std::chrono::steady_clock::now() - released, std::chrono::milliseconds(1900));
  EXPECT_NE(slurp(d.path() / "b").find("b stopped"), std::string::npos);
}

// The same election on a fake clock: the 15 s lease and 2 s retries of client-go's defaults pass
// in no real time, and a leader that stopped renewing (killed: no release) is replaced only once
// its lease has run out on the successor's clock.
TEST(LeaderElection, OnAFakeClockTheLeaseRunsOutBeforeASuccessorTakesOver) {
  StandIn server;
  auto client = client_for(token_config(server));
  FakeClock clock;
  const auto config = [&](const std::string& id, std::atomic<bool>* leading, Clock::SteadyTime* since) {
    LeaderElectionConfig c;
    c.name = "kgpu-scheduler";
    c.identity = id;
    c.release_on_stop = false;  // as if killed
    c.clock = &clock;
    c.on_started_leading = [&clock, leading, since] {
      *since = clock.steady_now();
      *leading = true;
    };
    return c;
  };
  std::atomic<bool> a_leading{false}, b_leading{false}, stop_a{false}, stop_b{false};
  Clock::SteadyTime a_since{}, b_since{};
  LeaderElector a(*client, config("a", &a_leading, &a_since));
  std::thread ta([&] { a.run(stop_a); });
  ASSERT_TRUE(eventually([&] { return a_leading.load(); }));
  stop_a = true;
  ta.join();
  LeaderElector b(*client, config("b", &b_leading, &b_since));
  std::thread tb([&] { b.run(stop_b); });
  ASSERT_TRUE(eventually([&] { return b.observed_holder() == "a"; }));
  for (int s = 0; s < 40 && !b_leading; ++s) {
    clock.advance(std::chrono::seconds(1));
    eventually([&] { return b_leading.load(); }, std::chrono::milliseconds(20));
  }
  stop_b = true;
  tb.join();
  ASSERT_TRUE(b_leading);
  EXPECT_GT(b_since - a_since, std::chrono::seconds(15));  // never before a's lease ran out
  const json lease = *client->get(resources::kLeases, "kube-system", "kgpu-scheduler");
  EXPECT_EQ(lease["spec"]["holderIdentity"], "b");
  EXPECT_EQ(lease["spec"]["leaseTransitions"], 1);
}

TEST(Events, IdenticalEventsBecomeOneSeries) {
  StandIn server;
  auto c = client_for(token_config(server));
  EventRecorderOptions o;
  o.reporting_controller = "kgpu.io/scheduler";
  o.reporting_instance = "kgpu-0";
  o.series_flush = std::chrono::milliseconds(0);  // every repeat patches the series (counted below)
  EventRecorder rec(*c, o);
  const EventTarget pod{"v1", "Pod", "default", "trainer", "uid-1"};
  for (int i = 0; i < 50; ++i) rec.record(pod, "Warning", "FailedScheduling", "Scheduling", "0/3 nodes are available");
  rec.flush();
  auto events = c->list_all(resources::kEventsV1, "default", {});
  ASSERT_TRUE(events);
  ASSERT_EQ(events->size(), 1u);
  const json& e = (*events)[0];
  EXPECT_EQ(e["series"]["count"], 50);
  EXPECT_EQ(e["reportingController"], "kgpu.io/scheduler");
  EXPECT_EQ(e["regarding"]["name"], "trainer");
  EXPECT_EQ(e["type"], "Warning");
  EXPECT_TRUE(e["eventTime"].get<std::string>().ends_with("Z"));
}

TEST(Events, SeriesWritesAreThrottledAndDistinctEventsLimitedPerObject) {
  StandIn server;
  auto c = client_for(token_config(server));
  EventRecorderOptions o;
  o.reporting_controller = "kgpu.io/scheduler";
  o.reporting_instance = "kgpu-0";
  o.series_flush = std::chrono::seconds(30);
  o.burst = 5;
  o.qps = 0.001;
  EventRecorder rec(*c, o);
  const EventTarget pod{"v1", "Pod", "default", "loop", ""};
  for (int i = 0; i < 1000; ++i) rec.record(pod, "Normal", "Scheduled", "Binding", "same");
  ASSERT_TRUE(eventually([&] { return rec.writes() == 1; }));  // one create; the series waits for the flush period
  for (int i = 0; i < 20; ++i) rec.record(pod, "Normal", "Scheduled", "Binding", "note " + std::to_string(i));
  EXPECT_EQ(rec.dropped(), 16u);  // burst 5: one spent above, four more distinct events written
  // The limit is per object: another pod's event is written although "loop" has no token left.
  rec.record(EventTarget{"v1", "Pod", "default", "other", ""}, "Normal", "Scheduled", "Binding", "note 0");
  EXPECT_EQ(rec.dropped(), 16u);
  rec.flush();
  EXPECT_EQ(rec.writes(), 7u);  // 1 + 4 + 1 creates, and the series' patch
  auto events = c->list_all(resources::kEventsV1, "default", {});
  ASSERT_TRUE(events);
  EXPECT_EQ(events->size(), 6u);
  for (const json& e : *events) {
    if (e["note"] == "same") {
      EXPECT_EQ(e["series"]["count"], 1000);
    }
  }
}

// The per-object token bucket refills on the recorder's clock: on a fake one, five minutes pass
// at once and the next distinct event is written again.
TEST(Events, TokensRefillOnTheRecordersClock) {
  StandIn server;
  auto c = client_for(token_config(server));
  FakeClock clock;
  EventRecorderOptions o;
  o.reporting_controller = "kgpu.io/scheduler";
  o.reporting_instance = "kgpu-0";
  o.burst = 2;  // qps stays client-go's 1 per 300 s
  o.clock = &clock;
  EventRecorder rec(*c, o);
  const EventTarget pod{"v1", "Pod", "default", "p", ""};
  for (int i = 0; i < 3; ++i) rec.record(pod, "Normal", "Scheduled", "Binding", "note " + std::to_string(i));
  EXPECT_EQ(rec.dropped(), 1u);
  clock.advance(std::chrono::seconds(299));
  rec.record(pod, "Normal", "Scheduled", "Binding", "note 3");
  EXPECT_EQ(rec.dropped(), 2u);  // not a whole token yet
  clock.advance(std::chrono::seconds(2));
  rec.record(pod, "Normal", "Scheduled", "Binding", "note 4");
  EXPECT_EQ(rec.dropped(), 2u);
  rec.flush();
  EXPECT_EQ(rec.writes(), 3u);
}

TEST(Events, RecordNeverWaitsOnTheApiAndTheQueueIsBounded) {
  StandIn server;
  auto c = client_for(token_config(server));
  // The first event write hangs for 5 s in the server.
  server.fault({{"method", "POST"}, {"path", "/events"}, {"delayMs", 5000}, {"times", 1}});
  EventRecorderOptions o;
  o.reporting_controller = "kgpu.io/scheduler";
  o.reporting_instance = "kgpu-0";
  o.queue_limit = 10;
  EventRecorder rec(*c, o);
  const auto pod = [](int i) { return EventTarget{"v1", "Pod", "default", "p" + std::to_string(i), ""}; };
  rec.record(pod(0), "Normal", "Scheduled", "Binding", "n");
  ASSERT_TRUE(eventually([&] { return rec.writes() == 1; }));  // the writer holds it, waiting on the server
  for (int i = 1; i < 50; ++i) rec.record(pod(i), "Normal", "Scheduled", "Binding", "n");
  EXPECT_EQ(rec.writes(), 1u);
  EXPECT_EQ(rec.dropped(), 39u);  // ten wait in the queue
  rec.flush();
  EXPECT_EQ(rec.writes(), 11u);
  auto events = c->list_all(resources::kEventsV1, "default", {});
  ASSERT_TRUE(events);
  EXPECT_EQ(events->size(), 11u);
}

TEST(Events, AFailedCreateIsTriedAgainByTheNextIdenticalEvent) {
  StandIn server;
  auto c = client_for(token_config(server));
  server.fault({{"method", "POST"}, {"path", "/events"}, {"status", 403}, {"times", 1}});
  EventRecorder rec(*c, EventRecorderOptions{"kgpu.io/scheduler", "kgpu-0"});
  const EventTarget pod{"v1", "Pod", "default", "p", ""};
  rec.record(pod, "Warning", "FailedScheduling", "Scheduling", "no GPU");
  rec.flush();
  rec.record(pod, "Warning", "FailedScheduling", "Scheduling", "no GPU");
  rec.flush();
  auto events = c->list_all(resources::kEventsV1, "default", {});
  ASSERT_TRUE(events);
  ASSERT_EQ(events->size(), 1u);
  EXPECT_EQ((*events)[0]["note"], "no GPU");
}

}  // namespace
}  // namespace kgpu::kube
