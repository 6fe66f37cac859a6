// `kgpu report` end to end: the API-server stand-in holds a small GPU cluster, Debian's real
// prometheus serves 36 hours of the agent's series for busy, idle, stale and shared GPUs (written
// as OpenMetrics, loaded with promtool), and the report's numbers are checked against values
// worked out by hand below. The HTML page is opened in Debian's headless chromium.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "prom_fixture.h"
#include "standin.h"
#include "test_env.h"

namespace kgpu {
namespace {

using namespace kgpu::testing;
using nlohmann::json;

constexpr int kStep = 300;     // s, the agent's samples as recorded and the report's --step
constexpr int kSamples = 432;  // 36 h
constexpr const char* kH100 = "NVIDIA H100 80GB HBM3";
constexpr const char* kL4 = "NVIDIA L4";

// The window ends an hour ago on a whole hour; samples at T0, T0 + 300, ..., U.
struct Times {
  long until = 0, t0 = 0;
};
Times times() {
  Times t;
  const long now = static_cast<long>(std::time(nullptr));
  t.until = now - now % 3600 - 3600;
  t.t0 = t.until - (kSamples - 1) * kStep;
  return t;
}

std::string rfc3339(long epoch) {
  char buf[32];
  const std::time_t tt = epoch;
  std::tm tm{};
  gmtime_r(&tt, &tm);
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// One recorded device series: its labels and its utilization / memory at sample i.
struct Recorded {
  std::string labels;
  std::function<double(int)> util;
  double fb_used = 0;
  double fb_free = -1;  // -1: no FB_FREE series (per-container series on a shared GPU)
};

// Labels as the agent writes them; `renamed`: Prometheus's Kubernetes discovery attached its own
// namespace/pod (the agent's), so the workload's arrive as exported_*.
std::string labels(const std::string& node, int gpu, const std::string& model, const std::string& ns = "",
                   const std::string& pod = "", bool renamed = false) {
  std::string l = "gpu=\"" + std::to_string(gpu) + "\",UUID=\"GPU-" + node + "-" + std::to_string(gpu) +
                  "\",device=\"nvidia" + std::to_string(gpu) + "\",modelName=\"" + model + "\",Hostname=\"" + node +
                  "\"";
  if (!pod.empty()) {
    const std::string p = renamed ? "exported_" : "";
    l += "," + p + "container=\"main\"," + p + "namespace=\"" + ns + "\"," + p + "pod=\"" + pod + "\"";
  }
  if (renamed) l += ",namespace=\"kgpu-system\",pod=\"kgpu-agent-" + node + "\",container=\"agent\"";
  return l;
}

std::vector<Recorded> recorded() {
  auto constant = [](double v) { return [v](int) { return v; }; };
  std::vector<Recorded> r;
  // gpu-h100-1: trainer on 0-3 (busy), infer on 4 (20%), the notebook on 5 (50% for 6 h, then 0),
  // 6-7 free. gpu-h100-2: the ETL Job on 0-1 (idle throughout), 2-7 free.
  for (int g = 0; g < 4; ++g)
    r.push_back({labels("gpu-h100-1", g, kH100, "team-a", "trainer-0", true), constant(90), 60000, 21559});
  r.push_back({labels("gpu-h100-1", 4, kH100, "team-b", "infer-5c7d8-x2x9q", true), constant(20), 8000, 73559});
  r.push_back({labels("gpu-h100-1", 5, kH100, "team-b", "notebook-bob", true),
               [](int i) { return i < 72 ? 50.0 : 0.0; }, 30000, 51559});
  for (int g = 6; g < 8; ++g) r.push_back({labels("gpu-h100-1", g, kH100, "", "", true), constant(0), 0, 81559});
  for (int g = 0; g < 2; ++g)
    r.push_back({labels("gpu-h100-2", g, kH100, "team-c", "etl-28999-k4j2p", true), constant(0), 1000, 80559});
  for (int g = 2; g < 8; ++g) r.push_back({labels("gpu-h100-2", g, kH100, "", "", true), constant(0), 0, 81559});
  // gpu-l4-1, time-sliced 4 ways: GPU 0 shared by dev-shell (2%) and viz (40%); the GPU's own
  // series carry no pod.
  r.push_back({labels("gpu-l4-1", 0, kL4), constant(42), 5000, 18034});
  r.push_back({labels("gpu-l4-1", 0, kL4, "team-c", "dev-shell"), constant(2), 1000});
  r.push_back({labels("gpu-l4-1", 0, kL4, "team-a", "viz-6f5b4-abcde"), constant(40), 4000});
  for (int g = 1; g < 4; ++g) r.push_back({labels("gpu-l4-1", g, kL4), constant(0), 0, 23034});
  return r;
}

std::string openmetrics(const Times& t) {
  const auto series = recorded();
  std::string out;
  out.reserve(8 << 20);
  auto family = [&](const char* name, const char* help, const std::function<double(const Recorded&, int)>& value,
                    bool free_only) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " gauge\n";
    for (const auto& s : series) {
      if (free_only && s.fb_free < 0) continue;
      for (int i = 0; i < kSamples; ++i) {
        out += name;
        out +=
            "{" + s.labels + "} " + std::to_string(value(s, i)) + " " + std::to_string(t.t0 + long(i) * kStep) + "\n";
      }
    }
  };
  family(
      "DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", [](const Recorded& s, int i) { return s.util(i); }, false);
  family(
      "DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", [](const Recorded& s, int) { return s.fb_used; },
      false);
  family(
      "DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", [](const Recorded& s, int) { return s.fb_free; },
      true);
  out += "# EOF\n";
  return out;
}

json node(const std::string& name, const std::string& product, int gpus, int replicas, int memory_mib) {
  json labels = {{"nvidia.com/gpu.product", product},
                 {"nvidia.com/gpu.count", std::to_string(gpus)},
                 {"nvidia.com/gpu.memory", std::to_string(memory_mib)}};
  json alloc = {{"cpu", "128"}, {"memory", "1024Gi"}, {"pods", "110"}};
  if (replicas > 1) {
    labels["nvidia.com/gpu.replicas"] = std::to_string(replicas);
    alloc["nvidia.com/gpu.shared"] = std::to_string(gpus * replicas);
  } else {
    alloc["nvidia.com/gpu"] = std::to_string(gpus);
  }
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata", {{"name", name}, {"labels", labels}}},
          {"status", {{"allocatable", alloc}, {"capacity", alloc}}}};
}

json owner(const std::string& kind, const std::string& api, const std::string& name) {
  return json::array(
      {{{"apiVersion", api}, {"kind", kind}, {"name", name}, {"uid", "uid-" + name}, {"controller", true}}});
}

json pod(const std::string& ns, const std::string& name, const std::string& node, const std::string& resource, int n,
         long started, const json& owners, const std::string& owner_label, const std::string& product) {
  json meta = {{"name", name}, {"namespace", ns}};
  if (!owners.is_null()) meta["ownerReferences"] = owners;
  if (!owner_label.empty()) meta["labels"] = {{"owner", owner_label}};
  json res = {{"limits", {{resource, std::to_string(n)}}}};
  return {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata", meta},
      {"spec",
       {{"nodeName", node},
        {"nodeSelector", {{"nvidia.com/gpu.product", product}}},
        {"containers", json::array({{{"name", "main"}, {"image", "registry.example/app:1"}, {"resources", res}}})}}},
      {"status", {{"phase", "Running"}, {"startTime", rfc3339(started)}}}};
}

json cluster(const Times& t) {
  const std::string h100 = "NVIDIA-H100-80GB-HBM3", l4 = "NVIDIA-L4-SHARED";
  json items = json::array();
  items.push_back(node("gpu-h100-1", h100, 8, 1, 81559));
  items.push_back(node("gpu-h100-2", h100, 8, 1, 81559));
  items.push_back(node("gpu-l4-1", l4, 4, 4, 23034));
  for (const char* ns : {"team-a", "team-b", "team-c"}) {
    items.push_back({{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", ns}}}});
  }
  items.push_back({{"apiVersion", "apps/v1"},
                   {"kind", "ReplicaSet"},
                   {"metadata",
                    {{"name", "infer-5c7d8"},
                     {"namespace", "team-b"},
                     {"ownerReferences", owner("Deployment", "apps/v1", "infer")}}},
                   {"spec",
                    {{"selector", {{"matchLabels", {{"app", "infer"}}}}},
                     {"template",
                      {{"metadata", {{"labels", {{"app", "infer"}}}}},
                       {"spec", {{"containers", json::array({{{"name", "main"}, {"image", "x"}}})}}}}}}}});
  items.push_back(
      {{"apiVersion", "apps/v1"},
       {"kind", "ReplicaSet"},
       {"metadata",
        {{"name", "viz-6f5b4"}, {"namespace", "team-a"}, {"ownerReferences", owner("Deployment", "apps/v1", "viz")}}},
       {"spec",
        {{"selector", {{"matchLabels", {{"app", "viz"}}}}},
         {"template",
          {{"metadata", {{"labels", {{"app", "viz"}}}}},
           {"spec", {{"containers", json::array({{{"name", "main"}, {"image", "x"}}})}}}}}}}});
  items.push_back(
      {{"apiVersion", "batch/v1"},
       {"kind", "Job"},
       {"metadata",
        {{"name", "etl-28999"}, {"namespace", "team-c"}, {"ownerReferences", owner("CronJob", "batch/v1", "etl")}}},
       {"spec",
        {{"template",
          {{"spec",
            {{"restartPolicy", "Never"}, {"containers", json::array({{{"name", "main"}, {"image", "x"}}})}}}}}}}});
  items.push_back(pod("team-a", "trainer-0", "gpu-h100-1", "nvidia.com/gpu", 4, t.t0 - 3 * 86400,
                      owner("StatefulSet", "apps/v1", "trainer"), "alice", h100));
  items.push_back(pod("team-b", "infer-5c7d8-x2x9q", "gpu-h100-1", "nvidia.com/gpu", 1, t.t0 - 2 * 86400,
                      owner("ReplicaSet", "apps/v1", "infer-5c7d8"), "bob", h100));
  items.push_back(pod("team-b", "notebook-bob", "gpu-h100-1", "nvidia.com/gpu", 1, t.t0 - 86400, nullptr, "bob", h100));
  items.push_back(pod("team-c", "etl-28999-k4j2p", "gpu-h100-2", "nvidia.com/gpu", 2, t.t0,
                      owner("Job", "batch/v1", "etl-28999"), "", h100));
  items.push_back(
      pod("team-c", "dev-shell", "gpu-l4-1", "nvidia.com/gpu.shared", 1, t.t0 - 86400, nullptr, "carol", l4));
  items.push_back(pod("team-a", "viz-6f5b4-abcde", "gpu-l4-1", "nvidia.com/gpu.shared", 1, t.t0 - 86400,
                      owner("ReplicaSet", "apps/v1", "viz-6f5b4"), "alice", l4));
  // A finished pod holds nothing.
  json done = pod("team-c", "etl-28998-zzzzz", "gpu-h100-2", "nvidia.com/gpu", 2, t.t0 - 86400,
                  owner("Job", "batch/v1", "etl-28999"), "", h100);
  done["status"]["phase"] = "Succeeded";
  items.push_back(done);
  return {{"apiVersion", "v1"}, {"kind", "List"}, {"items", items}};
}

const json* find(const json& array, const std::string& key, const std::string& value) {
  for (const auto& e : array) {
    if (e.value(key, "") == value) return &e;
  }
  return nullptr;
}

class ReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!prometheus_installed()) GTEST_SKIP() << "prometheus/promtool are not installed";
    prom_ = std::make_unique<RecordedPrometheus>(openmetrics(t_));
    ASSERT_TRUE(prom_->error().empty()) << prom_->error();
    const std::string objects = dir_.write("cluster.json", cluster(t_).dump());
    api_ = std::make_unique<StandIn>(std::vector<std::string>{"--load", objects});
    prices_ = dir_.write("prices.yaml", "currency: EUR\ndefault: 1\nmodels:\n  H100: 4\n  L4: 0.8\n");
  }

  Output report(const std::string& extra) {
    return run_command(std::string(KGPU_BINARY) + " report --kubeconfig " + api_->kubeconfig() + " --prometheus " +
                       prom_->url() + " --since 2d --step 5m --until " + std::to_string(t_.until) + " --prices " +
                       prices_ + " " + extra + " 2>&1");
  }

  Times t_ = times();
  TempDir dir_;
  std::unique_ptr<RecordedPrometheus> prom_;
  std::unique_ptr<StandIn> api_;
  std::string prices_;
};

TEST_F(ReportTest, NumbersMatchTheHandComputedOnes) {
  const auto out = report("-o json");
  ASSERT_EQ(out.status, 0) << out.text;
  const json r = json::parse(out.text, nullptr, false);
  ASSERT_FALSE(r.is_discarded()) << out.text;
  EXPECT_EQ(r["currency"], "EUR");
  EXPECT_EQ(r["gpuPods"], 6);  // the Succeeded pod holds nothing
  EXPECT_EQ(r["podsWithMetrics"], 6);
  // 432 samples x 5 min = 36 h per device. Held: trainer 4 x 36, infer 36, notebook 36, ETL 2 x 36,
  // dev-shell and viz a quarter of an L4 each for 36 h.
  EXPECT_NEAR(r["heldGpuHours"].get<double>(), 144 + 36 + 36 + 72 + 9 + 9, 1e-6);
  // Idle: the notebook's last 360 samples (30 h), the ETL Job's 2 x 36 h, dev-shell's 9.
  EXPECT_NEAR(r["idleGpuHours"].get<double>(), 30 + 72 + 9, 1e-6);
  EXPECT_NEAR(r["idleCost"].get<double>(), 30 * 4 + 72 * 4 + 9 * 0.8, 1e-6);

  // Allocated but idle (mean below 5%): the ETL Job, then dev-shell. The notebook's mean is
  // 50 x 72 / 432 = 8.33%: not on this list, but on the stale one.
  ASSERT_EQ(r["idle"].size(), 2u) << r["idle"].dump(1);
  EXPECT_EQ(r["idle"][0]["pod"], "etl-28999-k4j2p");
  EXPECT_EQ(r["idle"][0]["workload"], "CronJob/etl");
  EXPECT_EQ(r["idle"][0]["kind"], "Job");
  EXPECT_NEAR(r["idle"][0]["gpus"].get<double>(), 2, 1e-9);
  EXPECT_NEAR(r["idle"][0]["idleGpuHours"].get<double>(), 72, 1e-6);
  EXPECT_NEAR(r["idle"][0]["cost"].get<double>(), 288, 1e-6);
  EXPECT_EQ(r["idle"][1]["pod"], "dev-shell");
  EXPECT_EQ(r["idle"][1]["workload"], "Pod/dev-shell");
  EXPECT_NEAR(r["idle"][1]["gpus"].get<double>(), 0.25, 1e-9);
  EXPECT_NEAR(r["idle"][1]["meanUtilPercent"].get<double>(), 2, 1e-9);
  EXPECT_NEAR(r["idle"][1]["cost"].get<double>(), 9 * 0.8, 1e-6);

  // Rollups.
  const json* a = find(r["byNamespace"], "key", "team-a");
  const json* b = find(r["byNamespace"], "key", "team-b");
  const json* c = find(r["byNamespace"], "key", "team-c");
  ASSERT_TRUE(a && b && c) << r["byNamespace"].dump(1);
  EXPECT_NEAR((*a)["heldGpuHours"].get<double>(), 153, 1e-6);
  EXPECT_NEAR((*a)["idleGpuHours"].get<double>(), 0, 1e-6);
  EXPECT_NEAR((*b)["idleGpuHours"].get<double>(), 30, 1e-6);
  EXPECT_NEAR((*c)["idleGpuHours"].get<double>(), 81, 1e-6);
  EXPECT_NEAR((*c)["idleCost"].get<double>(), 295.2, 1e-6);
  EXPECT_EQ(r["byNamespace"][0]["key"], "team-c");  // most idle first
  const json* infer = find(r["byWorkload"], "key", "team-b/Deployment/infer");
  ASSERT_TRUE(infer) << r["byWorkload"].dump(1);
  EXPECT_NEAR((*infer)["heldGpuHours"].get<double>(), 36, 1e-6);
  EXPECT_TRUE(find(r["byWorkload"], "key", "team-a/StatefulSet/trainer"));
  EXPECT_TRUE(find(r["byWorkload"], "key", "team-a/Deployment/viz"));
  const json* bob = find(r["byOwner"], "key", "bob");
  const json* none = find(r["byOwner"], "key", "(no owner label)");
  ASSERT_TRUE(bob && none) << r["byOwner"].dump(1);
  EXPECT_EQ((*bob)["pods"], 2);
  EXPECT_NEAR((*bob)["idleGpuHours"].get<double>(), 30, 1e-6);
  EXPECT_NEAR((*none)["idleGpuHours"].get<double>(), 72, 1e-6);

  // Right-sizing. infer: peak 8000 MiB x 1.2 = 9600 fits 1g.10gb's 9984 MiB, but 20% x 1.2 = 24%
  // of the GPU needs more than 1/7 of its compute: 2g.20gb (2/7 of a GPU), saving 5/7 x 36 h.
  // notebook: 30000 x 1.2 = 36000 MiB needs 3g.40gb (half a GPU), saving 18 GPU-hours.
  ASSERT_EQ(r["rightSize"].size(), 2u) << r["rightSize"].dump(1);
  EXPECT_EQ(r["rightSize"][0]["pod"], "infer-5c7d8-x2x9q");
  EXPECT_EQ(r["rightSize"][0]["suggestion"], "MIG 2g.20gb");
  EXPECT_EQ(r["rightSize"][0]["suggestedResource"], "nvidia.com/mig-2g.20gb");
  EXPECT_NEAR(r["rightSize"][0]["peakMemoryMiB"].get<double>(), 8000, 1e-9);
  EXPECT_NEAR(r["rightSize"][0]["capacityMiB"].get<double>(), 81559, 1e-9);
  EXPECT_NEAR(r["rightSize"][0]["savingGpuHours"].get<double>(), 5.0 / 7 * 36, 1e-6);
  EXPECT_NEAR(r["rightSize"][0]["saving"].get<double>(), 5.0 / 7 * 36 * 4, 1e-6);
  EXPECT_EQ(r["rightSize"][1]["pod"], "notebook-bob");
  EXPECT_EQ(r["rightSize"][1]["suggestion"], "MIG 3g.40gb");
  EXPECT_NEAR(r["rightSize"][1]["savingGpuHours"].get<double>(), 18, 1e-6);

  // Stale: the ETL Job never active (since its start at T0: 431 x 5 min), the notebook idle since
  // its last active sample (T0 + 71 x 5 min: 360 x 5 min = 30 h).
  ASSERT_EQ(r["stale"].size(), 2u) << r["stale"].dump(1);
  EXPECT_EQ(r["stale"][0]["pod"], "etl-28999-k4j2p");
  EXPECT_TRUE(r["stale"][0]["lastActive"].is_null());
  EXPECT_NEAR(r["stale"][0]["idleHours"].get<double>(), 431.0 * kStep / 3600, 1e-6);
  EXPECT_NEAR(r["stale"][0]["costSinceActive"].get<double>(), 431.0 * kStep / 3600 * 2 * 4, 1e-6);
  EXPECT_EQ(r["stale"][1]["pod"], "notebook-bob");
  EXPECT_EQ(r["stale"][1]["kind"], "notebook");
  EXPECT_EQ(r["stale"][1]["lastActive"], rfc3339(t_.t0 + 71 * kStep));
  EXPECT_NEAR(r["stale"][1]["idleHours"].get<double>(), 30, 1e-6);

  // Fragmentation today: h100-1 uses GPUs 0-5, h100-2 GPUs 0-1, the L4 half of GPU 0.
  // Idle whole GPUs 2 + 6 + 3. The target workload (no CPU requests): 1 H100 GPU (2 pods),
  // a quarter L4 (2), 4 H100 GPUs (1), 2 H100 GPUs (1): p = 1/3, 1/3, 1/6, 1/6. Fragmented
  // (milli): h100-1 2000 x (1/6 for 4 GPUs + 1/3 wrong model for the L4 share) = 1000;
  // h100-2 6000 x 1/3 = 2000; L4 3500 x (1/3 + 1/6 + 1/6) = 2333.3; of 11500 idle.
  const json& f = r["fragmentation"];
  EXPECT_EQ(f["nodes"], 3);
  EXPECT_EQ(f["gpus"], 20);
  EXPECT_EQ(f["pods"], 6);
  EXPECT_NEAR(f["gpusAllocated"].get<double>(), 8.5, 1e-9);
  EXPECT_EQ(f["today"]["idleGpus"], 11);
  EXPECT_EQ(f["today"]["idleNodes"], 0);
  EXPECT_EQ(f["today"]["partlyUsedGpus"], 1);
  EXPECT_NEAR(f["today"]["fragmentedGpus"].get<double>(), (1000 + 2000 + 3500 * 2.0 / 3) / 1000, 1e-6);
  EXPECT_NEAR(f["today"]["fragmentationRatio"].get<double>(), (1000 + 2000 + 3500 * 2.0 / 3) / 11500, 1e-6);
  // FGD places the same pods (each on its GPU model) on the empty cluster.
  EXPECT_EQ(f["fgd"]["unplacedPods"], 0);
  EXPECT_EQ(f["fgd"]["idleGpus"].get<int>() + f["fgd"]["partlyUsedGpus"].get<int>(), 20 - 8);
  EXPECT_LE(f["fgd"]["fragmentedGpus"].get<double>(), f["today"]["fragmentedGpus"].get<double>() + 1e-9);
  EXPECT_EQ(f["freedGpus"].get<int>(), f["fgd"]["idleGpus"].get<int>() - 11);
}

TEST_F(ReportTest, TextAndErrors) {
  const auto text = report("--sim-out " + dir_.path().string());
  ASSERT_EQ(text.status, 0) << text.text;
  EXPECT_NE(text.text.find("6 GPU pods, 6 with metrics: 306.0 GPU-hours held"), std::string::npos) << text.text;
  EXPECT_NE(text.text.find("team-c/etl-28999-k4j2p"), std::string::npos) << text.text;
  EXPECT_NE(text.text.find("MIG 2g.20gb"), std::string::npos) << text.text;

  // The cluster as kgpu sim input: 3 nodes, the 6 GPU pods in start order; kgpu sim places all.
  const std::string nodes = slurp(dir_.path() / "nodes.csv"), pods = slurp(dir_.path() / "pods.csv");
  EXPECT_EQ(nodes,
            "sn,cpu_milli,memory_mib,gpu,model\n"
            "gpu-h100-1,128000,1048576,8,NVIDIA-H100-80GB-HBM3\n"
            "gpu-h100-2,128000,1048576,8,NVIDIA-H100-80GB-HBM3\n"
            "gpu-l4-1,128000,1048576,4,NVIDIA-L4-SHARED\n");
  EXPECT_TRUE(
      pods.starts_with("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,creation_time\n"
                       "team-a/trainer-0,0,0,4,1000,NVIDIA-H100-80GB-HBM3,0\n"
                       "team-b/infer-5c7d8-x2x9q,0,0,1,1000,NVIDIA-H100-80GB-HBM3,86400\n"))
      << pods;
  EXPECT_NE(pods.find("team-c/dev-shell,0,0,1,250,NVIDIA-L4-SHARED,"), std::string::npos) << pods;
  const auto sim =
      run_command(std::string(KGPU_BINARY) + " sim --nodes " + (dir_.path() / "nodes.csv").string() + " --pods " +
                  (dir_.path() / "pods.csv").string() + " --mode time --policy FGD --seeds 1 --output csv 2>&1");
  ASSERT_EQ(sim.status, 0) << sim.text;
  EXPECT_NE(sim.text.find("\nFGD,1,6,6,"), std::string::npos) << sim.text;  // policy,seed,arrivals,scheduled

  // A Prometheus error names the query; a bad price file its line and field.
  const auto bad_prom = run_command(std::string(KGPU_BINARY) + " report --kubeconfig " + api_->kubeconfig() +
                                    " --prometheus http://127.0.0.1:1 2>&1");
  EXPECT_EQ(bad_prom.status, 1) << bad_prom.text;
  EXPECT_NE(bad_prom.text.find("reading Prometheus: query 'count_over_time("), std::string::npos) << bad_prom.text;
  const std::string bad = dir_.write("bad.yaml", "currency: EUR\nmodels:\n  H100: four\n");
  const auto bad_prices =
      run_command(std::string(KGPU_BINARY) + " report --prometheus " + prom_->url() + " --prices " + bad + " 2>&1");
  EXPECT_EQ(bad_prices.status, 2) << bad_prices.text;
  EXPECT_NE(bad_prices.text.find("bad.yaml:3: models.H100: price 'four' is not a non-negative number"),
            std::string::npos)
      << bad_prices.text;
}

// Whether the PNG's image data holds content: inflated, a blank page is all zero bytes after
// PNG's row filters (only the filter-type bytes vary); a rendered page is not.
struct PngContent {
  bool ok = false;
  size_t width = 0, height = 0, nonzero = 0, total = 0, distinct = 0;
};
PngContent png_content(const std::string& png) {
  PngContent c;
  if (png.size() < 33 || png.compare(1, 3, "PNG") != 0) return c;
  auto be32 = [&](size_t at) {
    return (size_t(uint8_t(png[at])) << 24) | (size_t(uint8_t(png[at + 1])) << 16) |
           (size_t(uint8_t(png[at + 2])) << 8) | size_t(uint8_t(png[at + 3]));
  };
  c.width = be32(16);
  c.height = be32(20);
  std::string idat;
  for (size_t at = 8; at + 8 <= png.size();) {
    const size_t len = be32(at);
    const std::string type = png.substr(at + 4, 4);
    if (at + 12 + len > png.size()) return c;
    if (type == "IDAT") idat += png.substr(at + 8, len);
    at += 12 + len;
  }
  std::string raw(64 << 20, '\0');
  uLongf size = raw.size();
  if (uncompress(reinterpret_cast<Bytef*>(raw.data()), &size, reinterpret_cast<const Bytef*>(idat.data()),
                 idat.size()) != Z_OK) {
    return c;
  }
  std::set<uint8_t> values;
  for (size_t i = 0; i < size; ++i) {
    c.nonzero += raw[i] != 0;
    values.insert(uint8_t(raw[i]));
  }
  c.total = size;
  c.distinct = values.size();
  c.ok = true;
  return c;
}

TEST_F(ReportTest, HtmlIsSelfContainedAndRendersInChromium) {
  const std::string page = (dir_.path() / "report.html").string();
  const auto out = report("-o html --file " + page);
  ASSERT_EQ(out.status, 0) << out.text;
  const std::string html = slurp(page);
  EXPECT_TRUE(html.starts_with("<!DOCTYPE html>"));
  for (const char* external : {"<script", "src=", "href=", "@import", "url("}) {
    EXPECT_EQ(html.find(external), std::string::npos) << external;
  }
  EXPECT_NE(html.find("<svg"), std::string::npos);

  if (!std::filesystem::exists("/usr/bin/chromium")) GTEST_SKIP() << "chromium is not installed (scripts/setup.sh)";
  const std::string flags =
      " --headless=new --no-sandbox --disable-gpu --no-first-run --disable-extensions "
      "--user-data-dir=" +
      (dir_.path() / "chromium").string() + " --window-size=1200,1800 ";
  const auto dom = run_command("/usr/bin/chromium" + flags + "--dump-dom file://" + page + " 2>/dev/null");
  ASSERT_EQ(dom.status, 0) << dom.text;
  EXPECT_NE(dom.text.find("GPU cost and waste report"), std::string::npos) << dom.text.substr(0, 2000);
  EXPECT_NE(dom.text.find("team-c/etl-28999-k4j2p"), std::string::npos);
  EXPECT_NE(dom.text.find("MIG 2g.20gb"), std::string::npos);
  EXPECT_NE(dom.text.find("Idle GPU-hours by namespace"), std::string::npos);

  const std::string png = (dir_.path() / "report.png").string();
  const auto shot = run_command("/usr/bin/chromium" + flags + "--screenshot=" + png + " file://" + page + " 2>&1");
  ASSERT_EQ(shot.status, 0) << shot.text;
  const auto c = png_content(slurp(png));
  ASSERT_TRUE(c.ok) << "not a PNG chromium wrote: " << shot.text;
  EXPECT_EQ(c.width, 1200u);
  EXPECT_EQ(c.height, 1800u);
  // Text, tables and bars: well above a blank page's zero content.
  EXPECT_GT(c.nonzero, c.total / 50) << c.nonzero << " of " << c.total;
  EXPECT_GT(c.distinct, 100u);
  if (const char* keep = std::getenv("KGPU_REPORT_SCREENSHOT"))
    std::filesystem::copy_file(png, keep, std::filesystem::copy_options::overwrite_existing);
}

}  // namespace
}  // namespace kgpu
