#include <gtest/gtest.h>

#include "framework/framework.h"
#include "sim/simulator.h"
#include "sim/trace.h"

namespace kgpu::sched {
namespace {

NodeState node(const std::string& name, std::vector<int> gpu_free, int64_t cpu = 64000, const std::string& model = "T4") {
  NodeState n;
  n.name = name;
  n.cpu_milli = n.cpu_free = cpu;
  n.memory_mib = n.memory_free = 262144;
  n.gpu_model = model;
  n.gpu_free = std::move(gpu_free);
  return n;
}

Pod pod(int num_gpu, int milli, int64_t cpu = 4000) {
  Pod p;
  p.name = "p";
  p.cpu_milli = cpu;
  p.memory_mib = 1024;
  p.num_gpu = num_gpu;
  p.gpu_milli = milli;
  return p;
}

TaskShape shape(int num_gpu, int milli, int64_t cpu = 1000, double pop = 1.0) {
  TaskShape s;
  s.cpu_milli = cpu;
  s.num_gpu = num_gpu;
  s.gpu_milli = milli;
  s.popularity = pop;
  return s;
}

TEST(Fragmentation, WorkedExamples) {
  const NodeState n = node("n", {1000, 500});
  EXPECT_DOUBLE_EQ(fragmentation(n, shape(1, 600)), 500);           // only the half-free GPU is too small
  EXPECT_DOUBLE_EQ(fragmentation(n, shape(1, 400)), 0);             // both can host it
  EXPECT_DOUBLE_EQ(fragmentation(n, shape(1, 1000)), 500);          // fits the idle GPU; the half one is lost to it
  EXPECT_DOUBLE_EQ(fragmentation(n, shape(2, 1000)), 1500);         // does not fit: all idle capacity
  EXPECT_DOUBLE_EQ(fragmentation(n, shape(0, 0)), 1500);            // CPU-only: all idle capacity
  EXPECT_DOUBLE_EQ(fragmentation(n, shape(1, 300, 100000)), 1500);  // not enough CPU
  TaskShape v100 = shape(1, 500);
  v100.gpu_models = {"V100M16"};
  EXPECT_DOUBLE_EQ(fragmentation(n, v100), 1500);  // model mismatch
  // Weighted by popularity.
  EXPECT_DOUBLE_EQ(fragmentation(n, std::vector<TaskShape>{shape(1, 600, 1000, 0.5), shape(2, 1000, 1000, 0.5)}),
                   0.5 * 500 + 0.5 * 1500);
}

TEST(Fragmentation, DeltaAndClusterRatio) {
  const NodeState n = node("n", {1000, 1000});
  const std::vector<TaskShape> w = {shape(1, 1000)};
  // A 0.5 share on an idle GPU leaves a half GPU that a whole-GPU task cannot use.
  EXPECT_DOUBLE_EQ(fragmentation_delta(n, pod(1, 500), {0}, w), 500);
  Cluster c({node("a", {1000, 500}), node("b", {250})});
  auto r = cluster_fragmentation(c, w);
  EXPECT_DOUBLE_EQ(r.idle_milli, 1750);
  EXPECT_DOUBLE_EQ(r.fragmented_milli, 500 + 250);
  EXPECT_NEAR(r.ratio(), 750.0 / 1750, 1e-12);
}

TEST(TargetWorkload, PopularShapesCoveringTheShare) {
  std::vector<Pod> pods;
  for (int i = 0; i < 90; ++i) pods.push_back(pod(1, 1000));
  for (int i = 0; i < 8; ++i) pods.push_back(pod(1, 500));
  for (int i = 0; i < 2; ++i) pods.push_back(pod(1, 250));
  auto w = target_workload(pods, 0.95);
  ASSERT_EQ(w.size(), 2u);  // 90% + 8% reach 95%; the 2% tail is left out
  EXPECT_NEAR(w[0].popularity, 90.0 / 98, 1e-12);
  EXPECT_EQ(w[1].gpu_milli, 500);
}

Outcome place(const std::string& policy, Cluster& c, const Pod& p, uint64_t seed = 1) {
  SchedulingContext ctx;
  ctx.workload = {shape(1, 1000, 1000, 0.5), shape(1, 500, 1000, 0.5)};
  auto fw = make_framework(policy, ctx);
  EXPECT_TRUE(fw) << fw.error().message;
  std::mt19937_64 rng(seed);
  return fw->schedule(p, c, rng);
}

TEST(Policies, BestFitPacksLeastAllocatedSpreads) {
  Cluster a({node("empty", {1000, 1000}), node("busy", {1000, 300})});
  EXPECT_EQ(place("BestFit", a, pod(1, 200)).placement->node, 1u);
  Cluster b({node("empty", {1000, 1000}), node("busy", {1000, 300})});
  EXPECT_EQ(place("LeastAllocated", b, pod(1, 200)).placement->node, 0u);
  Cluster c({node("empty", {1000, 1000}), node("busy", {1000, 300})});
  EXPECT_EQ(place("MostAllocated", c, pod(1, 200)).placement->node, 1u);
}

TEST(Policies, GpuPackingPrefersASharedGpu) {
  Cluster c({node("busy-full-gpus", {1000, 0}), node("shared", {1000, 600}), node("idle", {1000, 1000})});
  auto out = place("GpuPacking", c, pod(1, 500));
  ASSERT_TRUE(out.placement);
  EXPECT_EQ(out.placement->node, 1u);
  EXPECT_EQ(out.placement->gpus, std::vector<int>{1});
  EXPECT_EQ(c.node(1).gpu_free[1], 100);
}

TEST(Policies, GpuClusteringPrefersTheSameRequest) {
  Cluster c({node("a", {1000, 1000}), node("b", {1000, 1000})});
  c.assign(pod(1, 300), Placement{1, {0}});
  EXPECT_EQ(place("GpuClustering", c, pod(1, 300)).placement->node, 1u);
}

TEST(Policies, FgdChoosesTheGpuThatFragmentsLeast) {
  // Workload: half whole-GPU tasks, half 0.5 shares. Putting a 0.5 share on the half-used GPU
  // (free 500) fragments nothing; on an idle GPU it strands half a GPU for the whole-GPU tasks.
  Cluster c({node("n", {1000, 500})});
  auto out = place("FGD", c, pod(1, 500));
  ASSERT_TRUE(out.placement);
  EXPECT_EQ(out.placement->gpus, std::vector<int>{1});
}

Outcome place_with(const std::string& policy, Cluster& c, const Pod& p, std::vector<TaskShape> workload) {
  SchedulingContext ctx;
  ctx.workload = std::move(workload);
  ctx.tie_break = TieBreak::kFirst;
  auto fw = make_framework(policy, ctx);
  EXPECT_TRUE(fw);
  std::mt19937_64 rng(1);
  return fw->schedule(p, c, rng);
}

TEST(Policies, FgdPackConsolidatesWhereFgdTies) {
  // A CPU-only pod changes no GPU's fragmentation: FGD ties everywhere and takes the first node;
  // FGDPack sends it to the node with the least free GPU.
  const std::vector<TaskShape> sharing = {shape(1, 500)};
  Cluster a({node("idle", {1000, 1000}), node("busy", {1000, 200})});
  EXPECT_EQ(place_with("FGD", a, pod(0, 0), sharing).placement->node, 0u);
  Cluster b({node("idle", {1000, 1000}), node("busy", {1000, 200})});
  EXPECT_EQ(place_with("FGDPack", b, pod(0, 0), sharing).placement->node, 1u);
  // With multi-GPU pods carrying most of the demand it scores exactly as FGD.
  const std::vector<TaskShape> multi = {shape(2, 1000, 1000, 0.7), shape(1, 500, 1000, 0.3)};
  Cluster c({node("idle", {1000, 1000}), node("busy", {1000, 200})});
  EXPECT_EQ(place_with("FGDPack", c, pod(0, 0), multi).placement->node, 0u);
}

TEST(Policies, DotProductPrefersTheLeastAlignedNode) {
  // Free (CPU, GPU) of 'gpu-rich' aligns with a GPU-heavy pod more than 'cpu-rich' does: Tetris
  // scores 100·(1 − dot/2), so the smaller alignment wins.
  Cluster c({node("gpu-rich", {1000, 1000, 1000, 1000}, 8000), node("cpu-rich", {1000}, 120000)});
  EXPECT_EQ(place("DotProduct", c, pod(1, 1000, 4000)).placement->node, 1u);
}

class Recorder : public ReservePlugin {
 public:
  explicit Recorder(std::vector<std::string>* log) : log_(log) {}
  void reserve(const Pod& p, const Placement& pl, const Cluster& c) override {
    log_->push_back("reserve " + p.name + " on " + c.node(pl.node).name);
  }
  void unreserve(const Pod& p, const Placement& pl, const Cluster& c) override {
    log_->push_back("unreserve " + p.name + " on " + c.node(pl.node).name);
  }

 private:
  std::vector<std::string>* log_;
};

TEST(Framework, ReserveAndUnreserve) {
  std::vector<std::string> log;
  auto fw = make_framework("BestFit", {});
  ASSERT_TRUE(fw);
  fw->add_reserve_plugin(std::make_unique<Recorder>(&log));
  Cluster c({node("a", {1000})});
  std::mt19937_64 rng(1);
  Pod p = pod(1, 600);
  p.name = "nb";
  auto out = fw->schedule(p, c, rng);
  ASSERT_TRUE(out.placement);
  EXPECT_EQ(c.node(0).gpu_free[0], 400);
  fw->unreserve(p, *out.placement, c);
  EXPECT_EQ(c.node(0).gpu_free[0], 1000);
  EXPECT_EQ(c.gpu_allocated(), 0);
  EXPECT_EQ(log, (std::vector<std::string>{"reserve nb on a", "unreserve nb on a"}));
}

TEST(Policies, RandomIsDeterministicForASeed) {
  std::vector<size_t> first, second;
  for (int run = 0; run < 2; ++run) {
    Cluster c({node("a", {1000}), node("b", {1000}), node("c", {1000}), node("d", {1000})});
    auto& out = run == 0 ? first : second;
    for (uint64_t s = 1; s <= 4; ++s) out.push_back(place("Random", c, pod(1, 100), s).placement->node);
  }
  EXPECT_EQ(first, second);
}

TEST(Framework, ReasonsWhenNothingFits) {
  Cluster c({node("a", {300}), node("b", {200}), node("v", {1000}, 64000, "V100M16")});
  Pod p = pod(1, 500);
  p.gpu_models = {"T4"};
  auto out = place("BestFit", c, p);
  EXPECT_FALSE(out.placement);
  EXPECT_EQ(out.message(), "0/3 nodes are available: 2 insufficient GPU share, 1 GPU model mismatch.");
  Cluster d({node("small", {1000}, 2000)});
  EXPECT_EQ(place("FGD", d, pod(1, 1000, 4000)).message(), "0/1 nodes are available: 1 Insufficient cpu.");
  EXPECT_FALSE(make_framework("Magic", {}));
}

TEST(Framework, SelectorsAndTaints) {
  NodeState tainted = node("t", {1000});
  tainted.taints.push_back({"nvidia.com/gpu", "present", "NoSchedule"});
  NodeState labelled = node("l", {1000});
  labelled.labels["pool"] = "a100";
  Cluster c({tainted, labelled});
  Pod p = pod(1, 1000);
  p.node_selector["pool"] = "a100";
  EXPECT_EQ(place("BestFit", c, p).placement->node, 1u);
  Cluster c2({tainted});
  EXPECT_FALSE(place("BestFit", c2, pod(1, 1000)).placement);
  Pod tolerant = pod(1, 1000);
  tolerant.tolerations.push_back({"nvidia.com/gpu", "Exists", "", "NoSchedule"});
  EXPECT_TRUE(place("BestFit", c2, tolerant).placement);
}

// The same toleration rule as k8s::tolerates (one implementation, k8s/predicates.h).
TEST(Framework, TolerationSemantics) {
  const Taint gpu{"nvidia.com/gpu", "present", "NoSchedule"};
  EXPECT_TRUE((Toleration{"nvidia.com/gpu", "Exists", "", ""}.tolerates(gpu)));
  EXPECT_TRUE((Toleration{"", "Exists", "", ""}.tolerates(gpu)));
  EXPECT_TRUE((Toleration{"nvidia.com/gpu", "Equal", "present", "NoSchedule"}.tolerates(gpu)));
  EXPECT_FALSE((Toleration{"nvidia.com/gpu", "Equal", "absent", ""}.tolerates(gpu)));
  EXPECT_FALSE((Toleration{"nvidia.com/gpu", "Exists", "", "NoExecute"}.tolerates(gpu)));
  EXPECT_FALSE((Toleration{"", "Equal", "present", ""}.tolerates(gpu)));  // empty key needs Exists
}

// Cordoned nodes and required node affinity are part of the model, filtered by registered
// plugins, with typed statuses and kube-scheduler's texts.
TEST(Framework, UnschedulableAndAffinityAreFilters) {
  NodeState cordoned = node("cordoned", {1000});
  cordoned.unschedulable = true;
  NodeState labelled = node("labelled", {1000});
  labelled.labels["zone"] = "b";
  NodeState plain = node("plain", {1000});
  Cluster c({cordoned, labelled, plain});

  Pod p = pod(1, 1000);
  p.required_affinity.push_back(NodeSelectorTerm{{NodeSelectorRequirement{"zone", "In", {"b"}}}, {}});
  const FitReport fit = explain_fit(p, c);
  ASSERT_EQ(fit.status.size(), 3u);
  EXPECT_EQ(fit.status[0].code, FitCode::kNodeAffinity);  // affinity runs first
  EXPECT_STREQ(fit.status[0].plugin, "NodeAffinity");
  EXPECT_TRUE(fit.status[1].fits());
  EXPECT_EQ(fit.status[2].code, FitCode::kNodeAffinity);
  EXPECT_EQ(fit.outcome.feasible, 1u);
  EXPECT_EQ(place("BestFit", c, p).placement->node, 1u);

  Pod any = pod(1, 1000);
  const FitReport cordon = explain_fit(any, c);
  EXPECT_EQ(cordon.status[0].code, FitCode::kUnschedulable);
  EXPECT_STREQ(cordon.status[0].plugin, "NodeUnschedulable");
  EXPECT_EQ(cordon.status[0].message(c.node(0)), "node(s) were unschedulable");
  any.tolerations.push_back({"node.kubernetes.io/unschedulable", "Exists", "", "NoSchedule"});
  EXPECT_TRUE(explain_fit(any, c).status[0].fits());

  // By name (match_fields): the full scan decides, as for any other pod.
  Pod named = pod(1, 1000);
  named.required_affinity.push_back(
      NodeSelectorTerm{{}, {NodeSelectorRequirement{"metadata.name", "In", {"plain"}}}});
  EXPECT_TRUE(named.affinity_reads_node_name());
  SchedulingContext ctx;
  ctx.tie_break = TieBreak::kFirst;
  auto fw = make_framework("BestFit", ctx);
  ASSERT_TRUE(fw);
  std::mt19937_64 rng(1);
  Cluster c2({labelled, plain});
  const Outcome out = fw->schedule(named, c2, rng);
  ASSERT_TRUE(out.placement);
  EXPECT_EQ(out.placement->node, 1u);
  EXPECT_EQ(out.message(), "1/2 nodes are available: 1 node(s) didn't match Pod's node affinity/selector.");
}

// Statuses are values: the resource filter names the resource, the taint filter the taint.
TEST(Framework, TypedStatuses) {
  NodeState tainted = node("t", {1000});
  tainted.taints.push_back({"other", "x", "PreferNoSchedule"});
  tainted.taints.push_back({"dedicated", "ml", "NoSchedule"});
  NodeState small = node("s", {1000}, 2000);
  NodeState busy = node("b", {0});
  Cluster c({tainted, small, busy});
  const FitReport fit = explain_fit(pod(1, 1000, 4000), c);
  EXPECT_EQ(fit.status[0].code, FitCode::kUntoleratedTaint);
  EXPECT_EQ(fit.status[0].taint, 1);
  EXPECT_EQ(fit.status[0].message(c.node(0)), "node(s) had untolerated taint {dedicated: ml}");
  EXPECT_EQ(fit.status[1].code, FitCode::kInsufficient);
  EXPECT_STREQ(fit.status[1].resource, "cpu");
  EXPECT_EQ(fit.status[2].code, FitCode::kInsufficient);
  EXPECT_STREQ(fit.status[2].resource, "nvidia.com/gpu");
  EXPECT_EQ(fit.outcome.message(),
            "0/3 nodes are available: 1 Insufficient cpu, 1 Insufficient nvidia.com/gpu, 1 node(s) had untolerated "
            "taint {dedicated: ml}.");
  EXPECT_EQ(explain_fit(pod(1, 500), Cluster({busy})).status[0].code, FitCode::kGpuShare);
}

// The incremental path (per-shape score trees, refreshed from the cluster's change log) decides
// exactly as the full scan: same node, GPUs, feasible count and reasons at every step, through
// placements and releases, for every deterministic policy, on a cluster with repeated node states,
// models, labels and taints.
// A filter that is not one of default_filters(): the incremental path then re-runs every filter
// on a changed node instead of re-checking resources alone. (Filters read what state ids intern:
// labels, not names.)
class GpuPodsOnOddRacks : public FilterPlugin {
 public:
  const char* name() const override { return "GpuPodsOnOddRacks"; }
  FitStatus filter(const Pod& p, const NodeState& n) const override {
    const auto rack = n.labels.find("rack");
    if (p.num_gpu == 0 || (rack != n.labels.end() && rack->second == "odd")) return {};
    return {FitCode::kNodeAffinity, name()};
  }
};

// Every decision of the incremental path (per-shape score trees, the resource re-check of changed
// nodes) against the full scan, through placements and releases, for every deterministic policy,
// on clusters of one to four tree levels (8 children per entry), with default filters and with a
// filter list of its own.
TEST(Framework, IncrementalDecidesAsTheFullScan) {
  for (const int size : {1, 9, 60, 700}) {
    for (const bool own_filters : {false, true}) {
      std::mt19937_64 gen(7 + static_cast<uint64_t>(size));
      std::vector<NodeState> nodes;
      const std::vector<std::string> models = {"T4", "V100M16", "A100"};
      for (int i = 0; i < size; ++i) {
        const int gpus = std::vector<int>{0, 1, 2, 4, 8}[gen() % 5];
        NodeState n = node("n" + std::to_string(i), std::vector<int>(static_cast<size_t>(gpus), 1000),
                           std::vector<int64_t>{32000, 64000, 96000}[gen() % 3], models[gen() % 3]);
        if (gen() % 7 == 0) n.labels["pool"] = "a";
        if (gen() % 9 == 0) n.taints.push_back({"dedicated", "x", "NoSchedule"});
        n.unschedulable = i % 13 == 4;
        if (i % 5 == 1) n.labels["zone"] = i % 10 == 1 ? "a" : "b";
        if (own_filters) n.labels["rack"] = i % 2 == 1 ? "odd" : "even";
        nodes.push_back(std::move(n));
      }
      std::vector<Pod> shapes;
      for (int i = 0; i < 12; ++i) {
        const int kind = static_cast<int>(gen() % 4);
        Pod p = kind == 0   ? pod(0, 0, 2000)
                : kind == 1 ? pod(1, std::vector<int>{250, 500, 300}[gen() % 3], std::vector<int64_t>{1000, 4000}[gen() % 2])
                : kind == 2 ? pod(1, 1000, 8000)
                            : pod(std::vector<int>{2, 4, 8}[gen() % 3], 1000, 16000);
        if (gen() % 5 == 0) p.gpu_models = {"T4"};
        if (gen() % 6 == 0) p.node_selector["pool"] = "a";
        if (gen() % 4 == 0) p.tolerations.push_back({"dedicated", "Exists", "", "NoSchedule"});
        if (i % 4 == 1) {
          p.required_affinity.push_back(NodeSelectorTerm{{NodeSelectorRequirement{"zone", "NotIn", {"a"}}}, {}});
        }
        if (i % 6 == 5) p.tolerations.push_back({"node.kubernetes.io/unschedulable", "Exists", "", ""});
        shapes.push_back(p);
      }
      SchedulingContext ctx;
      ctx.workload = {shape(1, 500, 1000, 0.5), shape(1, 1000, 4000, 0.3), shape(2, 1000, 8000, 0.2)};
      ctx.tie_break = TieBreak::kFirst;
      const int steps_per_run = 400 + 2 * size;
      for (const std::string policy : {"LeastAllocated", "MostAllocated", "DotProduct", "GpuClustering",
                                       "GpuPacking", "BestFit", "FGD", "FGDPack"}) {
        SCOPED_TRACE(policy + " on " + std::to_string(size) + " nodes" + (own_filters ? ", own filters" : ""));
        auto make = [&] {
          auto fw = make_framework(policy, ctx);
          if (!fw || !own_filters) return fw;
          auto filters = default_filters();
          filters.push_back(std::make_unique<GpuPodsOnOddRacks>());
          auto score = policy_registry().at(policy)(ctx);
          return Result<Framework>(Framework(std::move(filters), std::move(score), TieBreak::kFirst));
        };
        auto fast = make(), slow = make();
        ASSERT_TRUE(fast && slow);
        slow->set_incremental(false);
        Cluster a(nodes), b(nodes);
        std::mt19937_64 ra(1), rb(1), steps(3);
        std::vector<std::pair<Pod, Placement>> placed;
        int placements = 0, unplaced = 0;
        for (int step = 0; step < steps_per_run; ++step) {
          if (!placed.empty() && steps() % 3 == 0) {  // a pod leaves
            const size_t k = steps() % placed.size();
            fast->unreserve(placed[k].first, placed[k].second, a);
            slow->unreserve(placed[k].first, placed[k].second, b);
            placed.erase(placed.begin() + static_cast<std::ptrdiff_t>(k));
            continue;
          }
          const Pod& p = shapes[steps() % shapes.size()];
          const Outcome x = fast->schedule(p, a, ra), y = slow->schedule(p, b, rb);
          ASSERT_EQ(x.placement.has_value(), y.placement.has_value()) << "step " << step;
          ASSERT_EQ(x.feasible, y.feasible) << "step " << step;
          ASSERT_EQ(x.reasons, y.reasons) << "step " << step;
          if (!x.placement) {
            ++unplaced;
            continue;
          }
          ASSERT_EQ(x.placement->node, y.placement->node) << "step " << step;
          ASSERT_EQ(x.placement->gpus, y.placement->gpus) << "step " << step;
          placed.emplace_back(p, *x.placement);
          ++placements;
        }
        EXPECT_GT(placements, size >= 60 ? 50 : 0);
        if (size == 60) {
          EXPECT_GT(unplaced, 10);  // the small cluster fills: rejections by resources
        }
        for (size_t i = 0; i < a.nodes().size(); ++i) {  // the packed room in step with the nodes
          const NodeRoom want = NodeRoom::of(a.node(i)), got = a.room(i);
          ASSERT_EQ(std::tie(got.cpu_free, got.memory_free, got.version, got.gpus, got.max_gpu_free, got.full_free_gpus),
                    std::tie(want.cpu_free, want.memory_free, want.version, want.gpus, want.max_gpu_free,
                             want.full_free_gpus))
              << "node " << i;
        }
      }
    }
  }
}

// Changes made past the framework (the cluster's change log trimmed before the next decision)
// still reach every shape's scores.
TEST(Framework, IncrementalSurvivesATrimmedChangeLog) {
  std::vector<NodeState> nodes;
  for (int i = 0; i < 20; ++i) nodes.push_back(node("n" + std::to_string(i), {1000, 1000}));
  SchedulingContext ctx;
  ctx.tie_break = TieBreak::kFirst;
  auto fast = make_framework("BestFit", ctx), slow = make_framework("BestFit", ctx);
  ASSERT_TRUE(fast && slow);
  slow->set_incremental(false);
  Cluster a(nodes), b(nodes);
  std::mt19937_64 ra(1), rb(1);
  const Pod share = pod(1, 500), whole = pod(1, 1000);
  for (const Pod* p : {&share, &whole}) ASSERT_TRUE(fast->schedule(*p, a, ra).placement && slow->schedule(*p, b, rb).placement);
  const uint64_t start = a.change_seq();
  for (int k = 0; k < 70000; ++k) {  // placed and released behind the framework's back: 140,000 log entries
    a.assign(share, Placement{static_cast<size_t>(k % 20), {1}});
    a.release(share, Placement{static_cast<size_t>(k % 20), {1}});
  }
  ASSERT_FALSE(a.changes_since(start));  // trimmed
  a.assign(whole, Placement{7, {1}});  // and one change that stays
  b.assign(whole, Placement{7, {1}});
  for (const Pod* p : {&share, &whole, &share}) {
    const Outcome x = fast->schedule(*p, a, ra), y = slow->schedule(*p, b, rb);
    ASSERT_TRUE(x.placement && y.placement);
    EXPECT_EQ(x.placement->node, y.placement->node);
    EXPECT_EQ(x.placement->gpus, y.placement->gpus);
    EXPECT_EQ(x.feasible, y.feasible);
  }
}

// FGD caches a node's fragmentation by node version; a node outside a Cluster (version 0) that
// changes in place is scored from its current state every time.
TEST(Fgd, ANodeOutsideAClusterIsScoredFromItsCurrentState) {
  SchedulingContext ctx;
  ctx.workload = {shape(1, 1000)};
  auto fgd = policy_registry().at("FGD")(ctx);
  std::mt19937_64 rng(1);
  NodeState n = node("a", {1000, 1000});
  const auto idle = fgd->score(pod(1, 500), n, rng);
  n.gpu_free = {500, 1000};
  const auto half = fgd->score(pod(1, 500), n, rng);
  const auto fresh = policy_registry().at("FGD")(ctx)->score(pod(1, 500), n, rng);
  ASSERT_TRUE(idle && half && fresh);
  EXPECT_EQ(idle->score, 37);  // a half GPU left that the whole-GPU shape cannot use: dF = +500
  EXPECT_EQ(half->score, 62);  // the half GPU filled: dF = -500
  EXPECT_EQ(half->score, fresh->score);
  EXPECT_EQ(half->gpus, std::vector<int>{0});
}

TEST(Cluster, ChangeLogAndIdentity) {
  Cluster c({node("a", {1000}), node("b", {1000})});
  const uint64_t start = c.change_seq();
  c.assign(pod(1, 500), Placement{1, {0}});
  c.assign(pod(1, 200), Placement{0, {0}});
  auto changed = c.changes_since(start);
  ASSERT_TRUE(changed);
  EXPECT_EQ(std::vector<uint32_t>(changed->begin(), changed->end()), (std::vector<uint32_t>{1, 0}));
  EXPECT_TRUE(c.changes_since(c.change_seq())->empty());
  EXPECT_FALSE(c.changes_since(c.change_seq() + 1));
  Cluster copy = c;
  EXPECT_NE(copy.id(), c.id());
}

}  // namespace
}  // namespace kgpu::sched

namespace kgpu::sim {
namespace {

const char* kNodes = "sn,cpu_milli,memory_mib,gpu,model\nn0,32000,131072,2,T4\nn1,64000,262144,4,V100M16\n";
const char* kPods =
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
    "p0,4000,8192,1,500,,LS,Running,0,100,0\n"
    "p1,8000,8192,2,1000,V100M16|V100M32,LS,Running,10,50,10\n"
    "p2,1000,1024,0,0,,BE,Running,20,,20\n";

TEST(Trace, LoadsBothFormats) {
  auto nodes = parse_nodes(kNodes, "nodes.csv");
  ASSERT_TRUE(nodes) << nodes.error().message;
  ASSERT_EQ(nodes->size(), 2u);
  EXPECT_EQ((*nodes)[1].gpus(), 4);
  EXPECT_EQ((*nodes)[1].gpu_model, "V100M16");
  auto pods = parse_pods(kPods, "pods.csv");
  ASSERT_TRUE(pods) << pods.error().message;
  EXPECT_EQ((*pods)[1].gpu_models, (std::vector<std::string>{"V100M16", "V100M32"}));
  EXPECT_EQ((*pods)[0].deletion, 100);
  EXPECT_FALSE((*pods)[2].deletion.has_value());
  auto multigpu = parse_pods("name,cpu_milli,memory_mib,num_gpu,gpu_milli\nx,1000,1024,4,1000\n", "multigpu.csv");
  ASSERT_TRUE(multigpu);
  EXPECT_EQ((*multigpu)[0].gpu_request(), 4000);
}

TEST(Trace, BadRowsNameFileLineAndColumn) {
  auto truncated = parse_pods("name,cpu_milli,memory_mib,num_gpu,gpu_milli\nx,1000,1024\n", "pods.csv");
  ASSERT_FALSE(truncated);
  EXPECT_EQ(truncated.error().message, "pods.csv:2: 3 columns, the header has 5 (truncated file?)");
  auto word = parse_pods("name,cpu_milli,memory_mib,num_gpu,gpu_milli\nx,lots,1024,1,100\n", "pods.csv");
  ASSERT_FALSE(word);
  EXPECT_EQ(word.error().message, "pods.csv:2: cpu_milli 'lots' is not an integer");
  auto share = parse_pods("name,cpu_milli,memory_mib,num_gpu,gpu_milli\nx,1,1,2,500\n", "pods.csv");
  ASSERT_FALSE(share);
  EXPECT_NE(share.error().message.find("must be whole"), std::string::npos);
  auto range = parse_pods("name,cpu_milli,memory_mib,num_gpu,gpu_milli\nx,1,1,1,1500\n", "pods.csv");
  ASSERT_FALSE(range);
  EXPECT_EQ(range.error().message, "pods.csv:2: gpu_milli 1500 is outside 0..1000");
  auto header = parse_nodes("sn,cpu,gpu\n", "nodes.csv");
  ASSERT_FALSE(header);
  EXPECT_EQ(header.error().message, "nodes.csv:1: header lacks column 'cpu_milli'");
}

TEST(Simulator, FgdProtocolIsDeterministicAndReachesTheTarget) {
  auto nodes = parse_nodes(kNodes, "n");
  auto pods = parse_pods(kPods, "p");
  ASSERT_TRUE(nodes && pods);
  RunOptions o;
  o.policy = "FGD";
  o.seed = 7;
  auto a = run_fgd_protocol(*nodes, *pods, o);
  auto b = run_fgd_protocol(*nodes, *pods, o);
  ASSERT_TRUE(a && b);
  EXPECT_LE(a->final_arrived, 1.3);
  EXPECT_GE(a->final_arrived, 1.3 - 2.0 / 6);  // stops before the draw that would pass 130%
  EXPECT_EQ(a->arrivals, b->arrivals);
  EXPECT_EQ(a->scheduled, b->scheduled);
  EXPECT_DOUBLE_EQ(a->final_allocated, b->final_allocated);
  EXPECT_LE(a->final_allocated, 1.0);
  EXPECT_FALSE(a->curve.empty());
  // The run's CPU time is measured (a busy machine's waits excluded): never more than its wall time.
  EXPECT_GT(a->cpu_seconds, 0);
  EXPECT_LE(a->cpu_seconds, a->seconds + 1e-3);
}

TEST(Simulator, TimeDrivenFreesCapacity) {
  auto nodes = parse_nodes("sn,cpu_milli,memory_mib,gpu,model\nn0,32000,131072,1,T4\n", "n");
  auto pods = parse_pods(
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
      "a,1000,1024,1,1000,,LS,Running,0,10,0\n"
      "b,1000,1024,1,1000,,LS,Running,5,20,5\n"
      "c,1000,1024,1,1000,,LS,Running,10,30,10\n",
      "p");
  ASSERT_TRUE(nodes && pods);
  RunOptions o;
  o.policy = "BestFit";
  o.pending = Pending::kDrop;  // the queue's behaviour: sim_queue_test.cc
  auto r = run_time_driven(*nodes, *pods, o);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->scheduled, 2u);  // b finds the GPU taken; c arrives when a has left
  EXPECT_EQ(r->unscheduled_by_shape["1 GPU"], 1);
  EXPECT_DOUBLE_EQ(r->peak_allocated, 1.0);
  EXPECT_DOUBLE_EQ(r->final_allocated, 1.0);  // c still runs at the end
}

}  // namespace
}  // namespace kgpu::sim

namespace kgpu::sim {
namespace {

TEST(Trace, BomTrimmedCellsAndSpecs) {
  auto nodes = parse_nodes("\xEF\xBB\xBFsn,cpu_milli,memory_mib,gpu,model\nn0, 32000 ,131072,2,T4\n", "bom.csv");
  ASSERT_TRUE(nodes) << nodes.error().message;
  EXPECT_EQ((*nodes)[0].cpu_milli, 32000);
  auto pods = parse_pods("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\na,1,1,1,500,V100M16 | T4|\nb,1,1,0,0,T4\n",
                         "pods.csv");
  ASSERT_TRUE(pods) << pods.error().message;
  EXPECT_EQ((*pods)[0].gpu_models, (std::vector<std::string>{"V100M16", "T4"}));
  EXPECT_TRUE((*pods)[1].gpu_models.empty());  // a CPU-only pod's model list means nothing
  auto empty_spec = parse_pods("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\na,1,1,1,500,|\n", "p.csv");
  ASSERT_FALSE(empty_spec);
  EXPECT_EQ(empty_spec.error().message, "p.csv:2: gpu_spec '|' names no GPU model");
  auto quoted = parse_pods("name,cpu_milli,memory_mib,num_gpu,gpu_milli\n\"a,b\",1,1,0,0\n", "q.csv");
  ASSERT_FALSE(quoted);
  EXPECT_EQ(quoted.error().message, "q.csv:2: quoted fields are not supported in trace CSVs");
}

TEST(Simulator, DegenerateInputsFailInsteadOfLooping) {
  auto cpu_nodes = parse_nodes("sn,cpu_milli,memory_mib,gpu,model\nc0,32000,131072,0,\n", "n");
  auto gpu_nodes = parse_nodes("sn,cpu_milli,memory_mib,gpu,model\nn0,32000,131072,1,T4\n", "n");
  auto gpu_pods = parse_pods("name,cpu_milli,memory_mib,num_gpu,gpu_milli\na,1,1,1,500\n", "p");
  auto cpu_pods = parse_pods("name,cpu_milli,memory_mib,num_gpu,gpu_milli\na,1,1,0,0\n", "p");
  ASSERT_TRUE(cpu_nodes && gpu_nodes && gpu_pods && cpu_pods);
  RunOptions o;
  o.policy = "BestFit";
  EXPECT_FALSE(run_time_driven(*cpu_nodes, *gpu_pods, o));
  EXPECT_FALSE(run_fgd_protocol(*cpu_nodes, *gpu_pods, o));
  auto none = run_fgd_protocol(*gpu_nodes, *cpu_pods, o);
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().message.find("no GPUs"), std::string::npos);
  // A target below the trace's own demand stops early.
  o.target_arrived = 0.4;
  auto small = run_fgd_protocol(*gpu_nodes, *gpu_pods, o);
  ASSERT_TRUE(small);
  EXPECT_EQ(small->arrivals, 0u);
}

}  // namespace
}  // namespace kgpu::sim
