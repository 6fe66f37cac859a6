// End to end: the real `prometheus` scrapes a `kgpu agent` (fake NVML) over HTTPS with a client
// certificate and basic auth, as set by the agent's --web-config-file (exporter-toolkit format).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/web_config.h"
#include "test_env.h"
#include "tls_fixture.h"

namespace kgpu {
namespace {

using namespace kgpu::testing;
using nlohmann::json;
using ::testing::HasSubstr;

class PrometheusTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists("/usr/bin/prometheus")) GTEST_SKIP() << "prometheus is not installed";
    ASSERT_FALSE(server_.cert.empty());
    ASSERT_FALSE(client_.cert.empty());
    web_ = dir_.write("web/web.yml", web_config(bcrypt_hash("s3cret", 6)));
    std::filesystem::copy_file(server_.cert, dir_.path() / "web/server.crt");
    std::filesystem::copy_file(server_.key, dir_.path() / "web/server.key");
    std::filesystem::copy_file(ca_.cert(), dir_.path() / "web/ca.crt");

    const std::string d = dir_.path().string();
    const auto node = dir_.write("node.yaml", "preset: pcie-t4-2\n");
    agent_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{KGPU_BINARY, "agent", "-a", "127.0.0.1:0", "-c", "300", "--nvml-library",
                                 fake_library(), "--pod-resources-socket", d + "/none.sock", "--device-plugin=false",
                                 "--labels=false"},
        std::vector<std::string>{"KGPU_FAKE_NVML_CONFIG=" + node, "NODE_NAME=gpu-node-7",
                                 "DCGM_EXPORTER_WEB_CONFIG_FILE=" + web_},
        d + "/agent.log");
    agent_port_ = agent_port(d + "/agent.log");
    ASSERT_NE(agent_port_, 0) << log("agent.log");

    const std::string target = "    static_configs: [{targets: ['127.0.0.1:" + std::to_string(agent_port_) + "']}]\n";
    const std::string tls = "    scheme: https\n    tls_config: {ca_file: " + ca_.cert() +
                            ", cert_file: " + client_.cert + ", key_file: " + client_.key + "}\n";
    const auto config = dir_.write(
        "prometheus.yml",
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        "scrape_configs:\n"
        "  - job_name: tls\n" +
            tls + "    basic_auth: {username: prometheus, password: s3cret}\n" + target +
            "  - job_name: wrong-password\n" + tls + "    basic_auth: {username: prometheus, password: guess}\n" +
            target + "  - job_name: no-client-cert\n    scheme: https\n    tls_config: {ca_file: " + ca_.cert() +
            "}\n"
            "    basic_auth: {username: prometheus, password: s3cret}\n" +
            target + "  - job_name: plain-http\n    basic_auth: {username: prometheus, password: s3cret}\n" + target);
    prometheus_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{"/usr/bin/prometheus", "--config.file=" + config, "--storage.tsdb.path=" + d + "/tsdb",
                                 "--web.listen-address=127.0.0.1:0", "--log.level=warn"},
        std::vector<std::string>{}, d + "/prometheus.log");
    prom_port_ = wait_for_listening_port(prometheus_->pid());
    ASSERT_NE(prom_port_, 0) << log("prometheus.log");
  }

  static std::string web_config(const std::string& hash) {
    return "tls_server_config:\n"
           "  cert_file: server.crt\n"
           "  key_file: server.key\n"
           "  client_auth_type: RequireAndVerifyClientCert\n"
           "  client_ca_file: ca.crt\n"
           "basic_auth_users:\n"
           "  prometheus: " +
           hash + "\n";
  }

  json get(const std::string& path, const httplib::Params& params = {}) {
    httplib::Client c("127.0.0.1", prom_port_);
    c.set_connection_timeout(2);
    auto res = c.Get(path, params, httplib::Headers{});
    if (!res || res->status != 200) return json();
    auto j = json::parse(res->body, nullptr, false);
    return j.is_discarded() ? json() : j["data"];
  }
  // The value of a one-series instant query, or nullopt.
  std::optional<double> value(const std::string& q) {
    const json r = get("/api/v1/query", {{"query", q}})["result"];
    if (!r.is_array() || r.size() != 1) return std::nullopt;
    return std::stod(r[0]["value"][1].get<std::string>());
  }
  // The last scrape error of the job's target.
  std::string last_error(const std::string& job) {
    const json targets = get("/api/v1/targets");
    for (const auto& t : targets["activeTargets"]) {
      if (t["labels"]["job"] == job) return t["lastError"].get<std::string>();
    }
    return "";
  }
  std::string log(const std::string& name) {
    std::ifstream in(dir_.path() / name);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  TempDir dir_;
  TestCa ca_{dir_, "ca"};
  CertFiles server_ = ca_.server("server");
  CertFiles client_ = ca_.client("prometheus", "DNS:prometheus.example");
  std::string web_;
  int agent_port_ = 0, prom_port_ = 0;
  std::unique_ptr<ChildProcess> agent_, prometheus_;
};

TEST_F(PrometheusTlsTest, ScrapesOverTlsWithClientCertAndBasicAuth) {
  const auto limit = std::chrono::seconds(40);
  ASSERT_TRUE(eventually([&] { return value("up{job=\"tls\"}") == 1.0; }, limit))
      << last_error("tls") << "\nagent log:\n"
      << log("agent.log") << "\nprometheus log:\n"
      << log("prometheus.log");
  EXPECT_TRUE(eventually(
      [&] {
        return get("/api/v1/query", {{"query", "DCGM_FI_DEV_GPU_TEMP{job=\"tls\"}"}})["result"].size() == 2;
      },
      limit));

  // Wrong password: 401, the target is down. No client certificate, or plain HTTP: no scrape.
  // (The target's lastError is recorded just after its up sample: both are waited for.)
  auto down_with = [&](const std::string& job, const std::string& error) {
    return eventually(
        [&] {
          const std::string e = last_error(job);
          return value("up{job=\"" + job + "\"}") == 0.0 && !e.empty() && e.find(error) != std::string::npos;
        },
        limit);
  };
  EXPECT_TRUE(down_with("wrong-password", "401 Unauthorized")) << last_error("wrong-password");
  EXPECT_TRUE(down_with("no-client-cert", "")) << last_error("no-client-cert");
  EXPECT_TRUE(down_with("plain-http", "")) << last_error("plain-http");

  // A bad new web config: logged with its file and line, and the last good one keeps serving.
  {
    std::ofstream(web_ + ".new") << web_config("$2y$10$tooshort");
    std::filesystem::rename(web_ + ".new", web_);
  }
  ASSERT_TRUE(eventually([&] { return log("agent.log").find("keeping the last good web config") != std::string::npos; },
                         std::chrono::seconds(10)))
      << log("agent.log");
  EXPECT_THAT(log("agent.log"), HasSubstr(web_ + ":7: basic_auth_users.prometheus: not a bcrypt hash"));
  const double after = static_cast<double>(std::time(nullptr));
  EXPECT_TRUE(eventually(
      [&] {
        auto t = value("timestamp(up{job=\"tls\"} == 1)");
        return t && *t > after + 1;
      },
      limit))
      << last_error("tls");
}

TEST(AgentWebConfig, ABadConfigStopsTheStart) {
  TempDir dir;
  const auto node = dir.write("node.yaml", "preset: pcie-t4-2\n");
  const auto bad =
      dir.write("web.yml", "tls_server_config:\n  cert_file: a.crt\n  key_file: a.key\n  min_version: SSL3\n");
  auto out = run_command("KGPU_FAKE_NVML_CONFIG=" + node + " " + KGPU_BINARY + " agent -a 127.0.0.1:0 --nvml-library " +
                         fake_library() + " --pod-resources-socket '' --device-plugin=false --web-config-file " + bad);
  EXPECT_EQ(out.status, 1) << out.text;
  EXPECT_THAT(out.text, HasSubstr(bad + ":4: tls_server_config.min_version: unknown TLS version: SSL3"));
}

}  // namespace
}  // namespace kgpu
