#include "prom_fixture.h"

#include <httplib.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace kgpu::testing {

bool prometheus_installed() {
  return std::filesystem::exists("/usr/bin/prometheus") && std::filesystem::exists("/usr/bin/promtool");
}

RecordedPrometheus::RecordedPrometheus(const std::string& openmetrics) {
  const auto d = dir_.path();
  const std::string input = dir_.write("history.om", openmetrics);
  const auto created = run_command("/usr/bin/promtool tsdb create-blocks-from openmetrics " + input + " " +
                                   (d / "data").string() + " 2>&1");
  if (created.status != 0) {
    error_ = "promtool tsdb create-blocks-from openmetrics failed:\n" + created.text;
    return;
  }
  const std::string config = dir_.write("prometheus.yml", "global: {scrape_interval: 1m}\n");
  server_ = std::make_unique<ChildProcess>(
      std::vector<std::string>{"/usr/bin/prometheus", "--config.file=" + config,
                               "--storage.tsdb.path=" + (d / "data").string(), "--storage.tsdb.retention.time=3650d",
                               "--web.listen-address=127.0.0.1:0", "--log.level=warn"},
      std::vector<std::string>{}, (d / "prometheus.log").string());
  port_ = wait_for_listening_port(server_->pid());
  if (port_ == 0) {
    std::ifstream in(d / "prometheus.log");
    std::stringstream s;
    s << in.rdbuf();
    error_ = "prometheus did not listen:\n" + s.str();
    return;
  }
  // It listens before its storage is open, answering 503 until then.
  const bool ready = eventually(
      [&] {
        httplib::Client c("127.0.0.1", port_);
        c.set_connection_timeout(1);
        auto res = c.Get("/-/ready");
        return res && res->status == 200;
      },
      std::chrono::seconds(30));
  if (!ready) {
    error_ = "prometheus did not become ready";
    port_ = 0;
  }
}

}  // namespace kgpu::testing
