// mig-parted's config format (gpu/mig_config.h): parsing with file:line errors, NVIDIA's default
// config names, and each GPU's target under a config.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gpu/mig_config.h"
#include "gpu/mig_plan.h"
#include "sim/mig_eval.h"

namespace kgpu::gpu::mig {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// What an H100 80GB offers (NVML's GPU-instance profiles; memory per spec).
std::vector<Offer> h100() {
  auto shape = [](const char* key) {
    for (const auto& s : shapes()) {
      if (std::string(s.key) == key) return &s;
    }
    return static_cast<const Shape*>(nullptr);
  };
  return {{shape("1g"), "1g.10gb", 9856},       {shape("2g"), "2g.20gb", 20096}, {shape("3g"), "3g.40gb", 40320},
          {shape("4g"), "4g.40gb", 40320},      {shape("7g"), "7g.80gb", 80896}, {shape("1g+me"), "1g.10gb+me", 9856},
          {shape("1g.2x"), "1g.20gb", 20096}};
}

constexpr const char* kFile = R"(version: v1
mig-configs:
  all-disabled:
    - devices: all
      mig-enabled: false
  custom:
    - devices: all
      mig-enabled: true
      mig-devices:
        "1g.10gb": 7
    - devices: [0, 1]
      device-filter: ["0x233010DE", "0x20B010DE"]
      mig-enabled: true
      mig-devices:
        "3g.40gb": 2
    - devices: [7]
      mig-enabled: false
)";

TEST(MigConfig, ParsesMigPartedsFormat) {
  auto f = parse_config(kFile, "config.yaml");
  ASSERT_TRUE(f) << f.error().message;
  ASSERT_EQ(f->configs.size(), 2u);
  const auto& c = f->configs.at("custom");
  ASSERT_EQ(c.size(), 3u);
  EXPECT_FALSE(c[0].devices.has_value());
  EXPECT_EQ(c[1].devices, std::vector<unsigned>({0, 1}));
  EXPECT_THAT(c[1].device_filter, ElementsAre(0x233010DEu, 0x20B010DEu));
  EXPECT_EQ(c[1].line, 11);
  // The format round-trips.
  auto again = parse_config(format_config(*f), "formatted");
  ASSERT_TRUE(again) << again.error().message << "\n" << format_config(*f);
  EXPECT_EQ(format_config(*again), format_config(*f));
}

TEST(MigConfig, BadFilesNameTheLineAndField) {
  struct Case {
    const char* text;
    const char* error;
  } cases[] = {
      {"version: v2\nmig-configs: {a: [{devices: all, mig-enabled: false}]}\n", "f.yaml:1: version: unknown version 'v2'"},
      {"mig-configs: {a: [{devices: all, mig-enabled: false}]}\n", "version: missing"},
      {"version: v1\nmig-configs: {}\n", "mig-configs: expected a mapping of config names"},
      {"version: v1\nmig-configs:\n  a: []\n", "f.yaml:3: mig-configs.a: expected a non-empty list"},
      {"version: v1\nmig-configs:\n  a:\n    - mig-enabled: true\n", "f.yaml:4: mig-configs.a[0]: devices is required"},
      {"version: v1\nmig-configs:\n  a:\n    - {devices: all}\n", "mig-configs.a[0]: mig-enabled is required"},
      {"version: v1\nmig-configs:\n  a:\n    - {devices: all, mig-enabled: false, mig-devices: {1g.10gb: 1}}\n",
       "mig-configs.a[0].mig-devices: must be empty when mig-enabled is false"},
      {"version: v1\nmig-configs:\n  a:\n    - {devices: [0, 0], mig-enabled: false}\n", "devices[1]: GPU 0 is listed twice"},
      {"version: v1\nmig-configs:\n  a:\n    - {devices: some, mig-enabled: false}\n",
       "mig-configs.a[0].devices: expected \"all\" or a list"},
      {"version: v1\nmig-configs:\n  a:\n    - {devices: all, mig-enabled: yes please}\n", "is not true or false"},
      {"version: v1\nmig-configs:\n  a:\n    - {devices: all, mig-enabled: true, mig-devices: {1g.10gb: 9}}\n",
       "mig-devices.1g.10gb: 9 instances: a GPU holds at most 7"},
      {"version: v1\nmig-configs:\n  a:\n    - {devices: all, mig-enabled: true, device-filter: H100}\n",
       "device-filter: 'H100' is not a PCI id such as 0x233010DE"},
      {"version: v1\nmig-configs:\n  a:\n    - {devices: all, mig-enabled: true, colour: red}\n",
       "mig-configs.a[0]: unknown field 'colour'"},
      {"version: v1\nmig-configs: {a: [{devices: all, mig-enabled: false}]}\nextra: 1\n", "f.yaml:3: (top): unknown field 'extra'"},
      {"version: v1\nmig-configs: [\n", "not valid YAML"},
  };
  for (const auto& c : cases) {
    auto f = parse_config(c.text, "f.yaml");
    ASSERT_FALSE(f) << c.text;
    EXPECT_THAT(f.error().message, HasSubstr(c.error)) << c.text;
  }
}

TEST(MigConfig, DefaultNamesAreNvidias) {
  const auto offers = h100();
  auto d = default_configs(offers);
  std::vector<std::string> names;
  for (const auto& [n, e] : d.configs) names.push_back(n);
  EXPECT_THAT(names, ElementsAre("all-1g.10gb", "all-1g.10gb.me", "all-1g.20gb", "all-2g.20gb", "all-3g.40gb",
                                 "all-4g.40gb", "all-7g.80gb", "all-balanced", "all-disabled", "all-enabled"));
  auto count = [&](const std::string& name) { return d.configs.at(name)[0].profiles; };
  EXPECT_THAT(count("all-1g.10gb"), ElementsAre(std::pair<std::string, unsigned>{"1g.10gb", 7}));
  EXPECT_THAT(count("all-2g.20gb"), ElementsAre(std::pair<std::string, unsigned>{"2g.20gb", 3}));
  EXPECT_THAT(count("all-3g.40gb"), ElementsAre(std::pair<std::string, unsigned>{"3g.40gb", 2}));
  EXPECT_THAT(count("all-1g.20gb"), ElementsAre(std::pair<std::string, unsigned>{"1g.20gb", 4}));
  EXPECT_THAT(count("all-1g.10gb.me"), ElementsAre(std::pair<std::string, unsigned>{"1g.10gb+me", 1}));
  EXPECT_THAT(count("all-balanced"),
              ElementsAre(std::pair<std::string, unsigned>{"1g.10gb", 2}, std::pair<std::string, unsigned>{"2g.20gb", 1},
                          std::pair<std::string, unsigned>{"3g.40gb", 1}));
  EXPECT_TRUE(d.configs.at("all-enabled")[0].enabled);
  EXPECT_TRUE(d.configs.at("all-enabled")[0].profiles.empty());
  // Every default fits one GPU.
  for (const auto& [n, e] : d.configs) {
    std::vector<std::string> want;
    for (const auto& [p, c] : e[0].profiles) want.insert(want.end(), c, p);
    EXPECT_TRUE(plan(offers, want)) << n;
  }
  // A GPU without MIG: all-disabled alone.
  EXPECT_EQ(default_configs({}).configs.size(), 1u);
}

TEST(MigConfig, TargetsFollowDevicesFiltersAndTheLastEntry) {
  auto f = *parse_config(kFile, "config.yaml");
  // GPUs 0-1 are H100 SXM (0x2330), GPU 2 an A100 (0x20B0), 3-7 H100.
  std::vector<GpuId> gpus;
  for (unsigned i = 0; i < 8; ++i) gpus.push_back({i, i == 2 ? 0x20B010DEu : 0x233010DEu});
  auto t = select(f, "custom", gpus);
  ASSERT_TRUE(t) << t.error().message;
  ASSERT_EQ(t->size(), 8u);
  EXPECT_THAT((*t)[0].profiles, ElementsAre("3g.40gb", "3g.40gb"));  // the later entry wins
  EXPECT_EQ((*t)[2].profiles.size(), 7u);                            // not in devices [0, 1]
  EXPECT_FALSE((*t)[7].enabled);
  // A filter no GPU matches: the entry names none; GPUs no entry names are left out.
  gpus = {{0, 0x294110DEu}, {1, 0x294110DEu}};
  auto f2 = *parse_config("version: v1\nmig-configs:\n  x:\n    - {devices: [1], device-filter: \"0x233010DE\", mig-enabled: false}\n",
                          "f2.yaml");
  EXPECT_TRUE(select(f2, "x", gpus)->empty());
  auto unknown = select(f, "nope", gpus);
  ASSERT_FALSE(unknown);
  EXPECT_THAT(unknown.error().message, HasSubstr("config.yaml: no config named 'nope' (known: all-disabled, custom)"));
  auto missing = select(*parse_config("version: v1\nmig-configs:\n  x:\n    - {devices: [5], mig-enabled: false}\n", "f3.yaml"),
                        "x", gpus);
  ASSERT_FALSE(missing);
  EXPECT_THAT(missing.error().message, HasSubstr("f3.yaml:4: mig-configs.x: devices names GPU 5, which this node does not have"));
}

}  // namespace
}  // namespace kgpu::gpu::mig

namespace kgpu::gpu::mig {
namespace {

PlanNode plan_node(const std::string& name, unsigned gpus, const std::string& current, std::vector<std::string> running) {
  PlanNode n;
  n.name = name;
  for (unsigned i = 0; i < gpus; ++i) n.gpus.push_back({i, 0x233010DEu});
  n.offers = h100();
  n.current = current;
  n.running = std::move(running);
  return n;
}

std::vector<std::string> times(unsigned n, const std::string& p) { return std::vector<std::string>(n, p); }

TEST(MigPlan, AnEmptyNodeTakesTheLayoutThatServesThePendingRequests) {
  const auto file = default_configs(h100());
  auto c = plan_configs(file, {plan_node("a", 2, "all-disabled", {})}, times(14, "1g.10gb"));
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].config, "all-1g.10gb");
  EXPECT_TRUE(c[0].change);
  EXPECT_EQ(c[0].served, 14u);
  EXPECT_EQ(c[0].stranded_slices, 0u);
  EXPECT_THAT(c[0].why, HasSubstr("all-1g.10gb: serves 14 pending, 0 eviction(s), 0 compute slice(s) stranded; next best"));
}

TEST(MigPlan, RunningPodsAreNotEvictedForPendingOnes) {
  const auto file = default_configs(h100());
  // Two GPUs in all-balanced, two 1g.10gb pods running; four 3g.40gb requests pending.
  auto c = plan_configs(file, {plan_node("a", 2, "all-balanced", times(2, "1g.10gb"))}, times(4, "3g.40gb"));
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].config, "all-balanced");  // all-3g.40gb would serve all four but evict both pods
  EXPECT_FALSE(c[0].change);
  EXPECT_EQ(c[0].evictions, 0u);
  EXPECT_EQ(c[0].served, 2u);  // one free 3g.40gb per GPU
  EXPECT_THAT(c[0].why, HasSubstr("(the current config)"));
  // Without running pods the same demand takes all-3g.40gb.
  c = plan_configs(file, {plan_node("a", 2, "all-balanced", {})}, times(4, "3g.40gb"));
  EXPECT_EQ(c[0].config, "all-3g.40gb");
  EXPECT_EQ(c[0].served, 4u);
}

TEST(MigPlan, DemandIsSharedOutNodeByNode) {
  const auto file = default_configs(h100());
  auto demand = times(7, "1g.10gb");
  demand.push_back("7g.80gb");
  auto c = plan_configs(file, {plan_node("a", 1, "", {}), plan_node("b", 1, "", {})}, demand);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].config, "all-1g.10gb");
  EXPECT_EQ(c[0].served, 7u);
  EXPECT_EQ(c[1].config, "all-7g.80gb");
  EXPECT_EQ(c[1].served, 1u);
  EXPECT_EQ(profile_slices("3g.40gb"), 3u);
  EXPECT_EQ(profile_slices("1g.10gb+me"), 1u);
  EXPECT_EQ(profile_slices("x"), 0u);
}

}  // namespace
}  // namespace kgpu::gpu::mig

// The MIG layouts compared on a trace (sim/mig_eval.h, `kgpu sim --mig-layouts`).
namespace kgpu::sim {
namespace {

sched::NodeState one_gpu_node(const std::string& name) {
  sched::NodeState n;
  n.name = name;
  n.gpu_free = {sched::kMilli};
  return n;
}

sched::Pod gpu_pod(const std::string& name, int num_gpu, int milli, int64_t creation, std::optional<int64_t> deletion) {
  sched::Pod p;
  p.name = name;
  p.num_gpu = num_gpu;
  p.gpu_milli = milli;
  p.creation = creation;
  p.deletion = deletion;
  return p;
}

const MigLayoutResult& of(const MigEvaluation& ev, const std::string& layout) {
  for (const auto& l : ev.layouts)
    if (l.layout == layout) return l;
  ADD_FAILURE() << "no layout " << layout;
  static MigLayoutResult none;
  return none;
}

TEST(MigEval, TracePodsBecomeProfiles) {
  EXPECT_EQ(mig_instances(gpu_pod("a", 1, 100, 0, {})), std::vector<std::string>{"1g.10gb"});
  EXPECT_EQ(mig_instances(gpu_pod("b", 1, 250, 0, {})), std::vector<std::string>{"2g.20gb"});
  EXPECT_EQ(mig_instances(gpu_pod("c", 1, 500, 0, {})), std::vector<std::string>{"4g.40gb"});
  EXPECT_EQ(mig_instances(gpu_pod("d", 2, sched::kMilli, 0, {})), (std::vector<std::string>{"7g.80gb", "7g.80gb"}));
  EXPECT_TRUE(mig_instances(gpu_pod("e", 0, 0, 0, {})).empty());
}

TEST(MigEval, ThePlannerServesWhatFixedLayoutsCannot) {
  // Four 1/7 shares and a whole GPU on two one-GPU nodes, all pending at once.
  const std::vector<sched::NodeState> nodes = {one_gpu_node("a"), one_gpu_node("b")};
  std::vector<sched::Pod> pods;
  for (int i = 0; i < 4; ++i) pods.push_back(gpu_pod("s" + std::to_string(i), 1, 140, i, {}));
  pods.push_back(gpu_pod("whole", 1, sched::kMilli, 10, {}));
  const auto ev = evaluate_mig_layouts(nodes, pods, {});
  EXPECT_EQ(ev.gpu_pods, 5u);
  EXPECT_EQ(of(ev, "planner").served, 5u);       // one node all-1g, the other one 7g
  EXPECT_EQ(of(ev, "all-balanced").served, 4u);  // two 1g.10gb a GPU; no 7g.80gb
  EXPECT_EQ(of(ev, "all-1g.10gb").served, 4u);
  EXPECT_NEAR(of(ev, "planner").slices_used, (4.0 + 7.0) / 14.0, 1e-9);
}

TEST(MigEval, TimeModeFreesInstancesWhenPodsLeave) {
  // Three whole-GPU pods one after the other on one GPU: one at a time fits.
  const std::vector<sched::NodeState> nodes = {one_gpu_node("a")};
  const std::vector<sched::Pod> pods = {gpu_pod("p0", 1, sched::kMilli, 0, 10), gpu_pod("p1", 1, sched::kMilli, 10, 20),
                                        gpu_pod("p2", 1, sched::kMilli, 15, 30)};
  const auto instant = evaluate_mig_layouts(nodes, pods, {});
  EXPECT_EQ(of(instant, "planner").served, 1u);
  const auto timed = evaluate_mig_layouts(nodes, pods, {true, 1, 1});
  EXPECT_EQ(of(timed, "planner").served, 2u);  // p2 arrives while p1 holds the GPU
  EXPECT_NEAR(of(timed, "planner").peak_slices, 1.0, 1e-9);
  EXPECT_NEAR(of(timed, "planner").slices_used, 20.0 / 30.0, 1e-9);
  // Twice as fast: p1 arrives at 5 while p0 runs until 10, p2 at 7: only p0 is served.
  const auto fast = evaluate_mig_layouts(nodes, pods, {true, 2, 1});
  EXPECT_EQ(of(fast, "planner").served, 1u);
  const auto copies = evaluate_mig_layouts(nodes, pods, {true, 1, 2});
  EXPECT_EQ(copies.gpu_pods, 6u);
  EXPECT_EQ(of(copies, "planner").served, 2u);
}

}  // namespace
}  // namespace kgpu::sim
