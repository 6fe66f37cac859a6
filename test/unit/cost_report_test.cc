// `kgpu report`'s pieces without peers: price files, durations, MIG sizes, the cluster view and
// the report over hand-made usage (MIG pods, shares, pods without metrics).
#include <gtest/gtest.h>

#include "report/cluster.h"
#include "report/prices.h"
#include "report/report.h"

namespace kgpu::cost {
namespace {

using nlohmann::json;

TEST(CostPrices, ParsesAndMatchesModels) {
  auto p = parse_prices("currency: EUR\ndefault: 1.5\nmodels:\n  H100: 4\n  NVIDIA H100 NVL: 5\n  L4: 0.8\n", "p.yaml");
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->currency, "EUR");
  EXPECT_DOUBLE_EQ(p->price_for("NVIDIA H100 80GB HBM3"), 4);
  EXPECT_DOUBLE_EQ(p->price_for("nvidia h100 nvl"), 5);  // exact, case-insensitive
  EXPECT_DOUBLE_EQ(p->price_for("NVIDIA-L4-SHARED"), 0.8);
  EXPECT_DOUBLE_EQ(p->price_for("Tesla T4"), 1.5);
  ASSERT_TRUE(p->set_from_flag("Tesla T4=0.35"));
  EXPECT_DOUBLE_EQ(p->price_for("Tesla T4"), 0.35);
  ASSERT_TRUE(p->set_from_flag("h100=4.5"));
  EXPECT_DOUBLE_EQ(p->price_for("NVIDIA H100 80GB HBM3"), 4.5);
  EXPECT_FALSE(p->set_from_flag("H100"));
  EXPECT_FALSE(p->set_from_flag("H100=-1"));
  EXPECT_FALSE(p->set_from_flag("H100=inf"));
  auto empty = parse_prices("", "e.yaml");
  ASSERT_TRUE(empty);
  EXPECT_DOUBLE_EQ(empty->price_for("anything"), 0);
}

TEST(CostPrices, ErrorsNameFileLineAndField) {
  struct Case {
    const char* text;
    const char* error;
  };
  const Case cases[] = {
      {"models:\n  H100: four\n", "p.yaml:2: models.H100: price 'four' is not a non-negative number"},
      {"default: -2\n", "p.yaml:1: default: price '-2' is not a non-negative number"},
      {"currency: EUR\nrates: {}\n", "p.yaml:2: unknown field 'rates' (expected currency, default, models)"},
      {"models: [1, 2]\n", "p.yaml:1: models: expected a mapping of GPU model to price"},
      {"models:\n  H100: 1\n  h100: 2\n", "p.yaml:3: models.h100: listed twice"},
      {"- 1\n", "p.yaml:1: expected a mapping"},
      {"models:\n  H100: [1]\n", "p.yaml:2: models.H100: price '(not a scalar)' is not a non-negative number"},
  };
  for (const auto& c : cases) {
    auto p = parse_prices(c.text, "p.yaml");
    ASSERT_FALSE(p) << c.text;
    EXPECT_EQ(p.error().message, c.error);
  }
  // Bounded: size and alias expansion.
  EXPECT_FALSE(parse_prices(std::string(70 << 10, '#'), "big.yaml"));
  std::string bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n";
  for (char c = 'b'; c <= 'h'; ++c)
    bomb += std::string(1, c) + ": &" + c + " [*" + char(c - 1) + ", *" + char(c - 1) + ", *" + char(c - 1) + ", *" +
            char(c - 1) + ", *" + char(c - 1) + "]\n";
  auto b = parse_prices(bomb, "bomb.yaml");
  ASSERT_FALSE(b);
  EXPECT_TRUE(b.error().message.starts_with("bomb.yaml:")) << b.error().message;
  EXPECT_FALSE(load_prices("/nonexistent/prices.yaml"));
}

TEST(CostDuration, Grammar) {
  EXPECT_DOUBLE_EQ(*parse_duration("7d"), 7 * 86400);
  EXPECT_DOUBLE_EQ(*parse_duration("1h30m"), 5400);
  EXPECT_DOUBLE_EQ(*parse_duration("1w"), 604800);
  EXPECT_DOUBLE_EQ(*parse_duration("90s"), 90);
  EXPECT_DOUBLE_EQ(*parse_duration("1.5h"), 5400);
  for (const char* bad : {"", "7", "d", "7x", "0h", "-1h", "7d3"}) EXPECT_FALSE(parse_duration(bad)) << bad;
}

TEST(CostMig, ProfilesOfModelsFromTheShapeTable) {
  auto h100 = mig_profiles_for("NVIDIA H100 80GB HBM3", 81559);
  std::vector<std::string> names;
  for (const auto& p : h100) names.push_back(p.name);
  EXPECT_EQ(names, (std::vector<std::string>{"1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"}));
  EXPECT_NEAR(h100[0].share(), 1.0 / 7, 1e-12);
  EXPECT_NEAR(h100[1].share(), 2.0 / 8, 1e-12);
  EXPECT_NEAR(h100[3].share(), 0.5, 1e-12);
  auto a100_40 = mig_profiles_for("NVIDIA A100-SXM4-40GB", 40960);
  ASSERT_FALSE(a100_40.empty());
  EXPECT_EQ(a100_40[0].name, "1g.5gb");
  EXPECT_EQ(mig_profiles_for("NVIDIA A100-SXM4-80GB", 81920)[0].name, "1g.10gb");
  auto h200 = mig_profiles_for("NVIDIA H200", 143771);
  ASSERT_EQ(h200.size(), 6u);
  EXPECT_EQ(h200[2].name, "2g.35gb");
  EXPECT_EQ(h200[5].name, "7g.141gb");
  EXPECT_TRUE(mig_profiles_for("NVIDIA L4", 23034).empty());
  EXPECT_TRUE(mig_profiles_for("Tesla T4", 15360).empty());
}

json gpu_node(const std::string& name, const std::string& product, int gpus, const std::string& resource, int units) {
  return {{"metadata",
           {{"name", name},
            {"labels", {{"nvidia.com/gpu.product", product}, {"nvidia.com/gpu.count", std::to_string(gpus)}}}}},
          {"status", {{"allocatable", {{"cpu", "64"}, {"memory", "512Gi"}, {resource, std::to_string(units)}}}}}};
}

json gpu_pod(const std::string& ns, const std::string& name, const std::string& node, const std::string& resource,
             const std::string& units, const std::string& phase = "Running") {
  return {
      {"metadata", {{"namespace", ns}, {"name", name}, {"labels", {{"team", "ml"}}}}},
      {"spec",
       {{"nodeName", node},
        {"containers",
         json::array({{{"name", "c"},
                       {"image", "jupyter/scipy"},
                       {"resources",
                        {{"limits", {{resource, units}}}, {"requests", {{"cpu", "500m"}, {"memory", "1Gi"}}}}}}})}}},
      {"status", {{"phase", phase}, {"startTime", "2026-11-01T00:00:00Z"}}}};
}

TEST(CostCluster, GpuPodsWorkloadsAndNodes) {
  ClusterObjects o;
  o.nodes.push_back(gpu_node("a100", "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb", 1, "nvidia.com/mig-1g.10gb", 7));
  o.nodes.push_back(gpu_node("cpu-only", "", 0, "cpu", 8));
  o.nodes.push_back(gpu_node("h100", "NVIDIA-H100-80GB-HBM3", 8, "nvidia.com/gpu", 8));
  o.pods.push_back(gpu_pod("ml", "lab", "a100", "nvidia.com/mig-1g.10gb", "1"));
  o.pods.push_back(gpu_pod("ml", "done", "h100", "nvidia.com/gpu", "1", "Succeeded"));
  o.pods.push_back(gpu_pod("ml", "pending", "", "nvidia.com/gpu", "1", "Pending"));
  o.pods.push_back(gpu_pod("ml", "cpu", "h100", "cpu", "1"));
  auto job = gpu_pod("ml", "train-x", "h100", "nvidia.com/gpu", "2");
  job["metadata"]["ownerReferences"] = json::array({{{"kind", "Job"}, {"name", "train"}, {"controller", true}}});
  job["spec"]["containers"][0]["image"] = "trainer:1";
  o.pods.push_back(job);
  auto stray = gpu_pod("ml", "stray", "gone-node", "nvidia.com/gpu", "1");
  o.pods.push_back(stray);
  const auto v = cluster_from_objects(o, "team");
  ASSERT_EQ(v.nodes.size(), 2u);  // the CPU node is not a GPU node
  EXPECT_EQ(v.nodes[0].name, "a100");
  EXPECT_TRUE(v.nodes[0].mig);
  EXPECT_EQ(v.nodes[1].gpus, 8);
  EXPECT_EQ(v.nodes[1].cpu_milli, 64000);
  ASSERT_EQ(v.pods.size(), 3u);
  EXPECT_EQ(v.pods[0].name, "lab");
  EXPECT_EQ(v.pods[0].mig_profile(), "1g.10gb");
  EXPECT_EQ(v.pods[0].kind, WorkKind::kNotebook);  // the jupyter image
  EXPECT_EQ(v.pods[0].owner, "ml");
  EXPECT_EQ(v.pods[0].workload, "Pod/lab");
  EXPECT_EQ(v.pods[0].cpu_milli, 500);
  EXPECT_EQ(v.pods[0].memory_mib, 1024);
  EXPECT_EQ(v.pods[1].name, "stray");
  EXPECT_EQ(v.pods[2].workload, "Job/train");
  EXPECT_EQ(v.pods[2].kind, WorkKind::kJob);
  EXPECT_EQ(v.pods[2].units, 2);
  ASSERT_EQ(v.warnings.size(), 1u);
  EXPECT_NE(v.warnings[0].find("ml/stray"), std::string::npos);
}

// A MIG pod whose peak fits a smaller profile, and a GPU pod without metrics.
TEST(CostReport, MigPodsRightSizeAndPodsWithoutMetrics) {
  ClusterObjects o;
  o.nodes.push_back(gpu_node("a100", "NVIDIA-A100-SXM4-80GB", 1, "nvidia.com/mig-3g.40gb", 2));
  o.nodes[0]["metadata"]["labels"]["nvidia.com/gpu.memory"] = "81920";
  o.nodes.push_back(gpu_node("h100", "NVIDIA-H100-80GB-HBM3", 8, "nvidia.com/gpu", 8));
  o.pods.push_back(gpu_pod("ml", "svc", "a100", "nvidia.com/mig-3g.40gb", "1"));
  o.pods.push_back(gpu_pod("ml", "dark", "h100", "nvidia.com/gpu", "1"));
  const auto cluster = cluster_from_objects(o, "team");
  Usage u;
  u.options.until = 1'800'000'000;
  u.options.window_s = 86400;
  u.options.step_s = 3600;
  DeviceUsage d;
  d.ns = "ml";
  d.pod = "svc";
  d.node = "a100";
  d.uuid = "GPU-1";
  d.mig_id = "2";
  d.model = "NVIDIA A100-SXM4-80GB";
  d.mig_profile = "3g.40gb";
  d.held_samples = 24;
  d.idle_samples = 0;
  d.mean_util = 30;
  d.last_active = u.options.until;
  d.peak_fb_mib = 7000;
  d.fb_total_mib = 40192;
  u.devices.push_back(d);
  Prices prices;
  prices.default_price = 2;
  const auto r = build_report(cluster, u, prices, ReportOptions{});
  EXPECT_EQ(r.gpu_pods, 2);
  EXPECT_EQ(r.pods_with_metrics, 1);
  ASSERT_FALSE(r.warnings.empty());
  EXPECT_NE(r.warnings.back().find("1 of 2 GPU pods have no utilization series"), std::string::npos);
  // 3g.40gb is half an A100 (4 of 8 memory slices). 7000 x 1.2 = 8400 MiB fits 1g.10gb (9856),
  // but 30% of the instance = 15% of the GPU x 1.2 = 18% needs 2 of 7 compute slices: 2g.20gb.
  EXPECT_NEAR(r.held_gpu_hours, 24 * 0.5, 1e-9);
  ASSERT_EQ(r.right_size.size(), 1u);
  EXPECT_EQ(r.right_size[0].current, "MIG 3g.40gb");
  EXPECT_EQ(r.right_size[0].suggestion, "MIG 2g.20gb");
  EXPECT_NEAR(r.right_size[0].saving_gpu_hours, (0.5 - 2.0 / 7) * 24, 1e-9);
  EXPECT_NEAR(r.right_size[0].saving, (0.5 - 2.0 / 7) * 24 * 2, 1e-9);
  // MIG nodes stay out of the fragmentation model; the H100 node and its pod are in it.
  EXPECT_EQ(r.fragmentation.nodes, 2);
  EXPECT_EQ(r.fragmentation.nodes_modelled, 1);
  EXPECT_EQ(r.fragmentation.pods, 1);
  EXPECT_EQ(r.fragmentation.idle_gpus, 7);
  // Renderings carry the numbers.
  EXPECT_NE(to_text(r).find("MIG 2g.20gb"), std::string::npos);
  EXPECT_EQ(to_json(r)["rightSize"][0]["suggestedResource"], "nvidia.com/mig-2g.20gb");
  const auto html = to_html(r);
  EXPECT_NE(html.find("MIG 2g.20gb"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
}

TEST(CostReport, HtmlEscapesNames) {
  Report r;
  r.until = 1'800'000'000;
  r.since = r.until - 3600;
  r.warnings.push_back("pod <script>alert(1)</script> & co");
  Rollup x;
  x.key = "ns\"<b>";
  x.idle_gpu_hours = 2;
  r.by_namespace.push_back(x);
  const auto html = to_html(r);
  EXPECT_EQ(html.find("<script>"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;alert(1)&lt;/script&gt; &amp; co"), std::string::npos);
  EXPECT_NE(html.find("ns&quot;&lt;b&gt;"), std::string::npos);
}

}  // namespace
}  // namespace kgpu::cost
