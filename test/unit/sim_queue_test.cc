// The time mode's pending queue (sim::Pending::kQueue) on hand-built clusters: retry on departure,
// priority then arrival order, kube-scheduler's backoff, and the delay / fragmentation accounting.
#include <gtest/gtest.h>

#include "sim/queue_eval.h"
#include "sim/simulator.h"
#include "sim/trace.h"

namespace kgpu::sim {
namespace {

sched::NodeState gpu_node(const std::string& name, int gpus) {
  sched::NodeState n;
  n.name = name;
  n.cpu_milli = n.cpu_free = 64000;
  n.memory_mib = n.memory_free = 262144;
  n.gpu_model = "T4";
  n.gpu_free.assign(static_cast<size_t>(gpus), sched::kMilli);
  return n;
}

// A pod of `num_gpu` GPUs of `milli` each (a share when num_gpu == 1 and milli < 1000), arriving
// at `created` and living `lifetime` seconds.
sched::Pod pod(const std::string& name, int num_gpu, int milli, int64_t created, int64_t lifetime, int priority = 0) {
  sched::Pod p;
  p.name = name;
  p.cpu_milli = 1000;
  p.memory_mib = 1024;
  p.num_gpu = num_gpu;
  p.gpu_milli = milli;
  p.creation = created;
  p.deletion = created + lifetime;
  p.priority = priority;
  return p;
}

RunResult run(const std::vector<sched::NodeState>& nodes, const std::vector<sched::Pod>& pods,
              Pending pending = Pending::kQueue) {
  RunOptions o;
  o.policy = "BestFit";
  o.tie_break = sched::TieBreak::kFirst;
  o.pending = pending;
  auto r = run_time_driven(nodes, pods, o);
  EXPECT_TRUE(r) << r.error().message;
  return r ? *r : RunResult{};
}

constexpr int kOneGpu = 2;  // gpu_class() of a one-GPU pod
constexpr int kShare = 1;   // gpu_class() of a share

TEST(SimQueue, RetriesOnDepartureInArrivalOrder) {
  // One GPU. a holds it 0..10; b (arrives 5) and c (arrives 10) wait; a's departure at 10 lets
  // b, the earlier arrival, go first; c waits for b (10 + 15 = 25).
  const auto r = run({gpu_node("n0", 1)}, {pod("a", 1, 1000, 0, 10), pod("b", 1, 1000, 5, 15), pod("c", 1, 1000, 10, 20)});
  EXPECT_TRUE(r.queue.enabled);
  EXPECT_EQ(r.scheduled, 3u);
  const auto& c = r.queue.by_class.at(kOneGpu);
  EXPECT_EQ(c.arrived, 3u);
  EXPECT_EQ(c.placed, 3u);
  EXPECT_EQ(c.waited, 2u);
  EXPECT_EQ(c.never_placed, 0u);
  // Delays 0, 5, 15: nearest rank.
  EXPECT_EQ(c.delay_p50, 5);
  EXPECT_EQ(c.delay_p95, 15);
  EXPECT_EQ(c.delay_max, 15);
  EXPECT_EQ(c.wait_pod_seconds, 5 + 15);
  EXPECT_EQ(c.fragmentation_pod_seconds, 0);  // nothing was free while they waited
  EXPECT_EQ(r.queue.attempts, 5u);            // a once, b and c twice
  EXPECT_EQ(r.queue.peak_pending, 1u);
  EXPECT_EQ(r.queue.end_time, 25);
  EXPECT_EQ(r.queue.all.placed, 3u);
  EXPECT_EQ(r.queue.all.wait_pod_seconds, 20);

  // The same with drops: b finds the GPU taken and is gone; c arrives as a leaves.
  const auto d =
      run({gpu_node("n0", 1)}, {pod("a", 1, 1000, 0, 10), pod("b", 1, 1000, 5, 15), pod("c", 1, 1000, 10, 20)},
          Pending::kDrop);
  EXPECT_FALSE(d.queue.enabled);
  EXPECT_EQ(d.scheduled, 2u);
  EXPECT_EQ(d.unscheduled_by_shape.at("1 GPU"), 1);
}

TEST(SimQueue, HigherPriorityFirstThenArrival) {
  // One GPU held 0..10 by a. `share` (a 0.6 share, arrives 1) and `whole` (one GPU, arrives 2)
  // wait; whichever goes first at 10 keeps the other out for its 100 s.
  auto pods_with = [](int share_priority, int whole_priority) {
    return std::vector<sched::Pod>{pod("a", 1, 1000, 0, 10), pod("share", 1, 600, 1, 100, share_priority),
                                   pod("whole", 1, 1000, 2, 100, whole_priority)};
  };
  // Equal priority: the earlier arrival (share) first.
  auto r = run({gpu_node("n0", 1)}, pods_with(0, 0));
  EXPECT_EQ(r.queue.by_class.at(kShare).delay_max, 10 - 1);
  EXPECT_EQ(r.queue.by_class.at(kOneGpu).delay_max, 110 - 2);
  // Higher priority wins over arrival.
  r = run({gpu_node("n0", 1)}, pods_with(0, 5));
  EXPECT_EQ(r.queue.by_class.at(kOneGpu).delay_max, 10 - 2);
  EXPECT_EQ(r.queue.by_class.at(kShare).delay_max, 110 - 1);
  EXPECT_EQ(r.scheduled, 3u);
}

TEST(SimQueue, BackoffDefersTheRetryAfterADeparture) {
  // One GPU shared by a (0..7) and b (0..8); x (one GPU) arrives at 5 and fails (backoff 1 s);
  // a's departure at 7 retries it, it fails again (backoff 2 s, until 9); b's departure at 8
  // finds it backing off, so it is placed at 9, not 8.
  const auto r = run({gpu_node("n0", 1)}, {pod("a", 1, 500, 0, 7), pod("b", 1, 500, 0, 8), pod("x", 1, 1000, 5, 10)});
  EXPECT_EQ(r.scheduled, 3u);
  EXPECT_EQ(r.queue.by_class.at(kOneGpu).delay_max, 9 - 5);
  EXPECT_EQ(r.queue.attempts, 5u);  // a, b, and x three times
  EXPECT_EQ(r.queue.all.wait_pod_seconds, 4);
}

TEST(SimQueue, CountsTimeBehindFragmentation) {
  // Two one-GPU nodes, each with a 0.6 share taken (until 50 and 100). x asks for 0.5: 0.8 GPU is
  // free in total but no GPU has 0.5, so its 40 s of waiting (10..50) are behind fragmentation.
  // y asks for a whole GPU: 0.8 free in total is not enough, so its wait is not.
  const auto r = run({gpu_node("n0", 1), gpu_node("n1", 1)},
                     {pod("a", 1, 600, 0, 50), pod("b", 1, 600, 0, 100), pod("x", 1, 500, 10, 1000),
                      pod("y", 1, 1000, 20, 10)});
  const auto& share = r.queue.by_class.at(kShare);
  EXPECT_EQ(share.fragmentation_pod_seconds, 40);
  EXPECT_EQ(share.wait_pod_seconds, 40);
  // y: from 20 until b leaves at 100 (x took a's GPU at 50). From 50 on 0.9 GPU is free: still
  // less than y's whole GPU.
  const auto& whole = r.queue.by_class.at(kOneGpu);
  EXPECT_EQ(whole.delay_max, 80);
  EXPECT_EQ(whole.fragmentation_pod_seconds, 0);
  EXPECT_EQ(r.queue.all.fragmentation_pod_seconds, 40);
}

TEST(SimQueue, PodsThatNeverFitAreCountedAtTheEnd) {
  // An 8-GPU pod on a 1-GPU node waits for ever; the run ends when nothing can change.
  const auto r = run({gpu_node("n0", 1)}, {pod("big", 8, 1000, 0, 10), pod("small", 1, 1000, 3, 10)});
  EXPECT_EQ(r.scheduled, 1u);
  EXPECT_EQ(r.queue.by_class.at(16).never_placed, 1u);
  EXPECT_EQ(r.queue.by_class.at(16).placed, 0u);
  EXPECT_EQ(r.queue.all.never_placed, 1u);
  EXPECT_EQ(r.unscheduled_by_shape.at("8 GPU"), 1);
  EXPECT_EQ(r.queue.end_time, 13);  // small's departure: the last event that could help
  EXPECT_EQ(r.queue.by_class.at(16).wait_pod_seconds, 13);
}

TEST(SimQueue, NoWaitingHashesAsDropMode) {
  const std::vector<sched::NodeState> nodes = {gpu_node("n0", 2), gpu_node("n1", 4)};
  const std::vector<sched::Pod> pods = {pod("a", 1, 500, 0, 10), pod("b", 2, 1000, 1, 5), pod("c", 1, 1000, 2, 30),
                                        pod("d", 1, 300, 2, 0), pod("e", 4, 1000, 40, 5)};
  const auto q = run(nodes, pods);
  const auto d = run(nodes, pods, Pending::kDrop);
  EXPECT_EQ(q.scheduled, pods.size());
  EXPECT_EQ(q.queue.all.waited, 0u);
  EXPECT_EQ(q.placement_hash, d.placement_hash);
}

TEST(SimQueue, PodCopiesMultiplyTheLoad) {
  RunOptions o;
  o.policy = "BestFit";
  o.tie_break = sched::TieBreak::kFirst;
  o.pod_copies = 3;
  // Three copies of a one-GPU pod on one GPU: they run one after the other.
  auto r = run_time_driven({gpu_node("n0", 1)}, {pod("a", 1, 1000, 0, 10)}, o);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->arrivals, 3u);
  EXPECT_EQ(r->scheduled, 3u);
  EXPECT_EQ(r->queue.all.delay_max, 20);
  o.pod_copies = 0;
  EXPECT_FALSE(run_time_driven({gpu_node("n0", 1)}, {pod("a", 1, 1000, 0, 10)}, o));
}


const ScenarioResult& scenario(const QueueEvaluation& ev, const std::string& name) {
  for (const auto& s : ev.scenarios)
    if (s.name == name) return s;
  throw std::runtime_error("no scenario " + name);
}

const TenantResult& tenant(const ScenarioResult& s, const std::string& name) {
  for (const auto& t : s.tenants)
    if (t.name == name) return t;
  throw std::runtime_error("no tenant " + name);
}

// A gang (two 1-GPU pods created in the same second with one shape) waits until both fit, where pod
// by pod one member starts at once and the other waits.
TEST(SimQueueEval, GangsStartWholeAndPodByPodStartsPart) {
  const std::vector<sched::NodeState> nodes = {gpu_node("n1", 1), gpu_node("n2", 1)};
  std::vector<sched::Pod> pods = {pod("single", 1, 1000, 0, 50), pod("w0", 1, 1000, 0, 100), pod("w1", 1, 1000, 0, 100),
                                  pod("late", 0, 0, 200, 10)};
  pods[0].cpu_milli = 2000;  // another shape: not of the gang
  auto ev = evaluate_queues(nodes, pods, {"LS", "LS", "LS", "LS"}, {});
  ASSERT_TRUE(ev) << ev.error().message;
  EXPECT_EQ(ev->gangs, 1u);
  EXPECT_EQ(ev->gang_pods, 2u);
  const auto& pod_by_pod = scenario(*ev, "pod-by-pod");
  EXPECT_EQ(pod_by_pod.jobs, 4u);
  EXPECT_EQ(pod_by_pod.wait_p99, 50);   // w1 waited for single to leave
  EXPECT_EQ(pod_by_pod.jct_p99, 150);   // w1: 50 waiting + 100 running
  const auto& gangs = scenario(*ev, "gangs+queues");
  EXPECT_EQ(gangs.jobs, 3u);
  EXPECT_EQ(gangs.gang_jobs, 1u);
  EXPECT_EQ(gangs.wait_p99, 50);  // the whole gang waited
  EXPECT_EQ(gangs.jct_p99, 150);
  EXPECT_EQ(gangs.evictions, 0u);
  // Arrival window [0, 200): pod by pod both GPUs busy over [0, 100), one over [100, 150); the gang
  // leaves one GPU idle over [0, 50).
  EXPECT_NEAR(pod_by_pod.utilization_mean, (100 * 1.0 + 50 * 0.5) / 200, 1e-9);
  EXPECT_NEAR(gangs.utilization_mean, (50 * 0.5 + 100 * 1.0) / 200, 1e-9);
  EXPECT_DOUBLE_EQ(gangs.utilization_peak, 1.0);
  EXPECT_DOUBLE_EQ(gangs.utilization[0], 0.5);
}

// Quotas by share of GPU-seconds: BE (4 pods x 1000 s) gets 2.667 GPUs, LS (2 x 1000 s) 1.333.
// BE borrows the whole cluster first; LS's first pod reclaims one BE job (the newest), whole, and
// starts at once; its second would pass LS's quota and waits. Pod by pod, both LS pods wait for
// BE's end.
TEST(SimQueueEval, ReclaimGivesATenantItsQuotaBackAndCountsTheLostWork) {
  const std::vector<sched::NodeState> nodes = {gpu_node("n1", 2), gpu_node("n2", 2)};
  std::vector<sched::Pod> pods;
  std::vector<std::string> qos;
  for (int i = 0; i < 4; ++i) {
    pods.push_back(pod("be" + std::to_string(i), 1, 1000, 0, 1000));
    pods.back().cpu_milli = 1000 + i;  // four shapes: four jobs, not a gang
    qos.push_back("BE");
  }
  for (int i = 0; i < 2; ++i) {
    pods.push_back(pod("ls" + std::to_string(i), 1, 1000, 10, 1000));
    pods.back().cpu_milli = 2000 + i;
    qos.push_back("LS");
  }
  auto ev = evaluate_queues(nodes, pods, qos, {});
  ASSERT_TRUE(ev) << ev.error().message;
  EXPECT_NE(ev->queues_yaml.find("name: be"), std::string::npos);
  const auto& gangs = scenario(*ev, "gangs+queues");
  EXPECT_EQ(tenant(gangs, "be").quota, 2667);
  EXPECT_EQ(tenant(gangs, "ls").quota, 1333);
  EXPECT_EQ(gangs.evictions, 1u);
  EXPECT_EQ(tenant(gangs, "be").evictions, 1u);
  EXPECT_EQ(tenant(gangs, "ls").evictions, 0u);
  EXPECT_DOUBLE_EQ(gangs.lost_gpu_seconds, 10);  // one GPU for 10 s
  EXPECT_EQ(tenant(gangs, "ls").wait_p50, 0);     // ls0 started at its arrival
  EXPECT_EQ(gangs.completed, 6u);
  const auto& pod_by_pod = scenario(*ev, "pod-by-pod");
  EXPECT_EQ(pod_by_pod.evictions, 0u);
  EXPECT_EQ(tenant(pod_by_pod, "ls").wait_p50, 990);
  EXPECT_EQ(tenant(pod_by_pod, "ls").wait_p99, 990);
}

TEST(SimQueueEval, RefusesBadTenantsAndOptions) {
  const std::vector<sched::NodeState> nodes = {gpu_node("n1", 1)};
  const std::vector<sched::Pod> pods = {pod("a", 1, 500, 0, 10)};
  auto ev = evaluate_queues(nodes, pods, {}, {});
  ASSERT_FALSE(ev);
  EXPECT_EQ(ev.error().message, "tenants by qos: 0 qos values for 1 pods");
  QueueEvalOptions o;
  o.tenants = "hash:0";
  EXPECT_FALSE(evaluate_queues(nodes, pods, {}, o));
  o.tenants = "team";
  EXPECT_FALSE(evaluate_queues(nodes, pods, {}, o));
  o.tenants = "hash:3";
  ev = evaluate_queues(nodes, pods, {}, o);
  ASSERT_TRUE(ev) << ev.error().message;
  EXPECT_EQ(scenario(*ev, "fifo").tenants.size(), 3u);
  o.pod_copies = 0;
  EXPECT_FALSE(evaluate_queues(nodes, pods, {}, o));
}


TEST(SimQueueEval, TheQosColumnIsReadWithThePods) {
  std::vector<std::string> qos;
  auto pods = parse_pods("name,cpu_milli,memory_mib,num_gpu,gpu_milli,qos\na,1000,1024,1,500,LS\nb,1000,1024,0,0,BE\n",
                         "pods.csv", &qos);
  ASSERT_TRUE(pods) << pods.error().message;
  EXPECT_EQ(pods->size(), 2u);
  EXPECT_EQ(qos, (std::vector<std::string>{"LS", "BE"}));
  qos.clear();
  ASSERT_TRUE(parse_pods("name,cpu_milli,memory_mib,num_gpu,gpu_milli\na,1000,1024,1,500\n", "pods.csv", &qos));
  EXPECT_TRUE(qos.empty());
}

}  // namespace
}  // namespace kgpu::sim
