#include "agent_fixture.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <signal.h>

#include <filesystem>

#include "common/files.h"

namespace kgpu::testing {

PluginAgent::PluginAgent(const std::string& node_yaml, const std::string& config_yaml, std::vector<std::string> extra,
                         std::vector<std::string> env)
    : fake_(node_yaml), kubelet_((dir_.path() / "dp").string()) {
  std::filesystem::create_directories(dir_.path() / "dp");
  std::filesystem::create_directories(dir_.path() / "features.d");
  config_ = dir_.write("config.yaml", config_yaml);
  kubelet_.start();
  argv_ = {KGPU_BINARY,
           "agent",
           "--nvml-library",
           KGPU_FAKE_NVML,
           "-a",
           "127.0.0.1:0",
           "--device-plugin-dir",
           (dir_.path() / "dp").string(),
           "--cdi-root",
           (dir_.path() / "cdi").string(),
           "--output-file",
           features_file(),
           "--machine-type-file",
           dir_.write("product_name", "DGX H100\n"),
           "--health-interval",
           "100",
           "--container-driver-root",
           (dir_.path() / "no-driver-root").string()};
  if (std::ranges::find(extra, "--pod-resources-socket") == extra.end()) {
    argv_.push_back("--pod-resources-socket");
    argv_.push_back("");
  }
  if (!config_yaml.empty()) {
    argv_.push_back("--config-file");
    argv_.push_back(config_);
  }
  argv_.insert(argv_.end(), extra.begin(), extra.end());
  env.push_back("KGPU_FAKE_NVML_CONFIG=" + fake_.path());
  env_ = std::move(env);
  log_ = (dir_.path() / "agent.log").string();
  spawn();
}

void PluginAgent::spawn() {
  port_ = 0;
  process_ = std::make_unique<ChildProcess>(argv_, env_, log_);
}

void PluginAgent::restart() {
  process_.reset();  // killed and reaped
  std::filesystem::remove(log_);
  spawn();
}

std::optional<int> PluginAgent::terminate(std::chrono::milliseconds timeout) {
  ::kill(process_->pid(), SIGTERM);
  return process_->wait(timeout);
}

std::string PluginAgent::log() const { return read_file(log_).value_or(""); }

std::vector<Registration> PluginAgent::registrations(size_t n) {
  EXPECT_TRUE(kubelet_.wait_for_registrations(n, std::chrono::seconds(10)))
      << "registrations: " << kubelet_.registrations().size() << "\nagent log:\n"
      << log();
  return kubelet_.registrations();
}

int PluginAgent::port() {
  if (port_ == 0) port_ = agent_port(log_);  // the port the agent bound (it was asked for 0)
  return port_;
}

std::string PluginAgent::metrics() {
  httplib::Client c("127.0.0.1", port());
  c.set_connection_timeout(2);
  auto r = c.Get("/metrics");
  return r ? r->body : "";
}

std::vector<DeviceEntry> first_list(PluginClient& client, size_t expected_size) {
  client.watch();
  auto list = client.wait_for_list([&](const auto& l) { return l.size() == expected_size; }, std::chrono::seconds(5));
  EXPECT_TRUE(list.has_value()) << "no list of " << expected_size << " devices";
  return list.value_or(std::vector<DeviceEntry>{});
}

}  // namespace kgpu::testing
