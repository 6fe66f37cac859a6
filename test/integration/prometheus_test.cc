// End to end: the real `prometheus` scrapes a running `kgpu agent` (fake NVML node, kubelet peer
// serving PodResources from the wire contract, fabricated /proc) and answers the guide's PromQL.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "gpu/node.h"
#include "node_fixture.h"
#include "test_env.h"

namespace kgpu {
namespace {

using namespace kgpu::testing;
using namespace kgpu::testing::fixture;
using nlohmann::json;

class PrometheusTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists("/usr/bin/prometheus")) GTEST_SKIP() << "prometheus is not installed";
    fabricate_host(dir_);
    setenv("KGPU_FAKE_NVML_CONFIG", node_path_.c_str(), 1);
    {
      auto node = gpu::NodeGpus::open(fake_library());
      ASSERT_TRUE(node);
      auto inv = (*node)->inventory();
      ASSERT_TRUE(inv);
      mig_uuid_ = inv->gpus[2].mig_devices[0].uuid;
    }
    peer_.set_pods(pods(mig_uuid_));
    peer_.start();

    const std::string d = dir_.path().string();
    agent_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{KGPU_BINARY, "agent", "-a", "127.0.0.1:0", "-c", "300",
                                 "--nvml-library", fake_library(), "--pod-resources-socket", peer_.socket_path(),
                                 "--pod-resources-interval", "300", "--proc-root", d + "/proc", "--container-log-dir",
                                 d + "/containers", "--pod-log-dir", d + "/pods"},
        std::vector<std::string>{"KGPU_FAKE_NVML_CONFIG=" + node_path_, "NODE_NAME=gpu-node-7"}, d + "/agent.log");
    // Both servers bind port 0: the agent logs the port it got; Prometheus does not, so its port
    // is read from the kernel's table of the process's listening sockets.
    agent_port_ = agent_port(d + "/agent.log");
    ASSERT_NE(agent_port_, 0) << log("agent.log");
    // Target labels as Kubernetes service discovery attaches them: the workload's namespace/pod
    // labels then arrive as exported_namespace/exported_pod, which the guide's queries use.
    const auto config =
        dir_.write("prometheus.yml",
                   "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
                   "rule_files: ['" + KGPU_SOURCE_DIR +
                   "/deploy/rules/gpu-alerts.rules.yaml']\n"
                   "scrape_configs:\n"
                   "  - job_name: kgpu-agent\n"
                   "    static_configs:\n"
                   "      - targets: ['127.0.0.1:" +
                       std::to_string(agent_port_) +
                       "']\n"
                       "        labels: {namespace: kgpu-system, pod: kgpu-agent-x7k2p, container: agent}\n");
    prometheus_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{"/usr/bin/prometheus", "--config.file=" + config, "--storage.tsdb.path=" + d + "/tsdb",
                                 "--web.listen-address=127.0.0.1:0", "--log.level=warn"},
        std::vector<std::string>{}, d + "/prometheus.log");
    prom_port_ = wait_for_listening_port(prometheus_->pid());
    ASSERT_NE(prom_port_, 0) << log("prometheus.log");
  }

  void TearDown() override { unsetenv("KGPU_FAKE_NVML_CONFIG"); }

  // Instant query; returns the result vector (fails the test on an API error).
  json query(const std::string& q) {
    httplib::Client c("127.0.0.1", prom_port_);
    c.set_connection_timeout(2);
    auto res = c.Get("/api/v1/query", httplib::Params{{"query", q}}, httplib::Headers{});
    if (!res || res->status != 200) return json();
    auto j = json::parse(res->body, nullptr, false);
    if (j.is_discarded() || j["status"] != "success") {
      ADD_FAILURE() << "query failed: " << q << ": " << res->body;
      return json();
    }
    return j["data"]["result"];
  }

  // Waits until `q` returns at least `n` series.
  json wait_for(const std::string& q, size_t n, std::chrono::seconds limit = std::chrono::seconds(40)) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    json r;
    while (std::chrono::steady_clock::now() < deadline) {
      r = query(q);
      if (r.is_array() && r.size() >= n) return r;
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    return r;
  }

  static std::map<std::string, double> by_label(const json& result, const std::string& label) {
    std::map<std::string, double> out;
    for (const auto& s : result) {
      const std::string key = s["metric"].contains(label) ? s["metric"][label].get<std::string>() : "";
      out[key] = std::stod(s["value"][1].get<std::string>());
    }
    return out;
  }

  std::string log(const std::string& name) {
    std::ifstream in(dir_.path() / name);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  TempDir dir_;
  std::string node_path_ = dir_.write("node.yaml", node_yaml());
  KubeletPeer peer_{(dir_.path() / "kubelet.sock").string()};
  std::string mig_uuid_;
  int agent_port_ = 0, prom_port_ = 0;
  std::unique_ptr<ChildProcess> agent_, prometheus_;
};

TEST_F(PrometheusTest, GuideQueriesReturnPerPodNumbers) {
  auto series = wait_for("DCGM_FI_DEV_GPU_UTIL{exported_namespace=~\"team-.*\"}", 3);
  ASSERT_GE(series.size(), 3u) << "agent log:\n" << log("agent.log") << "\nprometheus log:\n" << log("prometheus.log");

  // The guide's namespace panel: true per-namespace numbers, also on the time-sliced GPU.
  auto ns = by_label(query("avg by (exported_namespace) (DCGM_FI_DEV_GPU_UTIL)"), "exported_namespace");
  EXPECT_DOUBLE_EQ(ns["team-a"], 40);  // whole GPU held by trainer-a
  EXPECT_DOUBLE_EQ(ns["team-b"], 30);  // its processes' share of the shared GPU
  EXPECT_DOUBLE_EQ(ns["team-c"], 50);
  EXPECT_DOUBLE_EQ(ns[""], 80);  // the shared GPU as a whole
  EXPECT_FALSE(ns.contains("kgpu-system")) << "the agent's own pod must not be mistaken for a workload";

  // Memory per pod on the shared GPU and on a MIG instance.
  auto mem = by_label(query("DCGM_FI_DEV_FB_USED{exported_pod!=\"\"}"), "exported_pod");
  EXPECT_DOUBLE_EQ(mem["notebook-b"], 1000);
  EXPECT_DOUBLE_EQ(mem["svc-c"], 3000);
  EXPECT_DOUBLE_EQ(mem["infer-d"], 4000);
  auto mig = query("DCGM_FI_DEV_FB_USED{GPU_I_PROFILE=\"3g.20gb\",GPU_I_ID=\"1\"}");
  ASSERT_EQ(mig.size(), 1u);
  EXPECT_EQ(mig[0]["metric"]["exported_pod"], "infer-d");
  EXPECT_EQ(mig[0]["metric"]["Hostname"], "gpu-node-7");
  EXPECT_EQ(mig[0]["metric"]["modelName"], "NVIDIA A100-SXM4-40GB");

  // Allocation join: which pod holds which device.
  EXPECT_EQ(query("kgpu_device_allocated").size(), 4u);
  auto idle = query("DCGM_FI_DEV_GPU_UTIL and on (Hostname, UUID) kgpu_device_allocated");
  EXPECT_EQ(idle.size(), 4u) << idle.dump();  // GPU 0's series, GPU 1's and its two containers'

  // Dashboard 12239's queries and ours evaluate.
  std::ifstream dash(KGPU_SOURCE_DIR + "/deploy/grafana-dashboard.json");
  auto d = json::parse(dash);
  for (const auto& p : d["panels"]) {
    for (const auto& t : p["targets"]) {
      std::string expr = t["expr"];
      for (auto [var, val] : {std::pair{"$instance", ".*"}, std::pair{"$gpu", ".*"}}) {
        for (size_t pos; (pos = expr.find(var)) != std::string::npos;) expr.replace(pos, std::string(var).size(), val);
      }
      auto r = query(expr);
      EXPECT_TRUE(r.is_array()) << p["title"] << ": " << expr;
    }
  }
  EXPECT_FALSE(query("DCGM_FI_DEV_GPU_TEMP{gpu=~\".*\"}").empty());
  EXPECT_FALSE(query("avg by (exported_namespace) (DCGM_FI_DEV_GPU_UTIL{exported_namespace!=\"\"})").empty());
  EXPECT_FALSE(query("DCGM_FI_DEV_GPU_UTIL * on (Hostname, UUID, exported_namespace, exported_pod, exported_container) "
                     "group_left() (kgpu_container_gpu_processes > 0)")
                   .empty());

  // The alert rules load and evaluate.
  httplib::Client c("127.0.0.1", prom_port_);
  auto rules = c.Get("/api/v1/rules");
  ASSERT_TRUE(rules);
  auto rj = json::parse(rules->body);
  ASSERT_EQ(rj["data"]["groups"].size(), 1u);
  EXPECT_EQ(rj["data"]["groups"][0]["rules"].size(), 12u);
  for (const auto& r : rj["data"]["groups"][0]["rules"]) EXPECT_EQ(r["health"], "ok") << r.dump();
}

TEST_F(PrometheusTest, ScrapeEndpointAndHealth) {
  httplib::Client c("127.0.0.1", agent_port_);
  auto res = c.Get("/health");
  eventually([&] { return static_cast<bool>(res = c.Get("/health")); }, std::chrono::seconds(5));
  ASSERT_TRUE(res) << log("agent.log");
  EXPECT_EQ(res->status, 200);
  auto m = c.Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_NE(m->body.find("# TYPE DCGM_FI_DEV_GPU_TEMP gauge"), std::string::npos);
  EXPECT_NE(m->body.find("Hostname=\"gpu-node-7\""), std::string::npos);

  // Concurrent scrapes: each gets a whole page.
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      httplib::Client tc("127.0.0.1", agent_port_);
      for (int i = 0; i < 50; ++i) {
        auto r = tc.Get("/metrics");
        if (!r || r->status != 200 || r->body.find("kgpu_pod_resources_up") == std::string::npos) ++bad;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);
}

TEST(AgentCli, CountersFileSelectsMetricsAndBadOnesAreRejected) {
  TempDir dir;
  const auto node = dir.write("node.yaml", "preset: pcie-t4-2\n");
  const auto counters = dir.write("counters.csv",
                                  "# mine\nDCGM_FI_DEV_GPU_TEMP, gauge, GPU temperature (in C).\n"
                                  "DCGM_FI_PROF_PIPE_INT_ACTIVE, gauge, not from NVML\n");
  ChildProcess agent({KGPU_BINARY, "agent", "-a", "127.0.0.1:0", "-f", counters, "--nvml-library", fake_library(),
                      "--pod-resources-socket", (dir.path() / "none.sock").string()},
                     {"KGPU_FAKE_NVML_CONFIG=" + node}, (dir.path() / "agent.log").string());
  const int port = agent_port((dir.path() / "agent.log").string());
  ASSERT_NE(port, 0);
  httplib::Client c("127.0.0.1", port);
  auto m = c.Get("/metrics");
  eventually([&] { return static_cast<bool>(m = c.Get("/metrics")); }, std::chrono::seconds(5));
  ASSERT_TRUE(m);
  EXPECT_NE(m->body.find("# HELP DCGM_FI_DEV_GPU_TEMP GPU temperature (in C).\n"), std::string::npos) << m->body;
  EXPECT_EQ(m->body.find("DCGM_FI_DEV_POWER_USAGE"), std::string::npos);
  EXPECT_EQ(m->body.find("DCGM_FI_DRIVER_VERSION"), std::string::npos);
  EXPECT_NE(m->body.find("kgpu_pod_resources_up 0"), std::string::npos) << "no kubelet: still serving";
  std::ifstream log(dir.path() / "agent.log");
  std::stringstream text;
  text << log.rdbuf();
  EXPECT_NE(text.str().find(counters + ":3: DCGM_FI_PROF_PIPE_INT_ACTIVE is not available from NVML; skipped"),
            std::string::npos)
      << text.str();

  const auto bad = dir.write("bad.csv", "DCGM_FI_DEV_GPU_TEMP, histogram, x\n");
  auto out =
      run_command(std::string(KGPU_BINARY) + " agent -a 127.0.0.1:0 -f " + bad + " --nvml-library " + fake_library());
  EXPECT_EQ(out.status, 1);
  EXPECT_NE(out.text.find(bad + ":1: DCGM_FI_DEV_GPU_TEMP: unknown type 'histogram'"), std::string::npos) << out.text;
  auto bad_addr = run_command(std::string(KGPU_BINARY) + " agent -a nowhere --nvml-library " + fake_library());
  EXPECT_EQ(bad_addr.status, 2);
  EXPECT_NE(bad_addr.text.find("expected [host]:port"), std::string::npos) << bad_addr.text;
}

}  // namespace
}  // namespace kgpu
