// A `kgpu agent` child process on the fake NVML with its own directories and a kubelet peer
// (test/peers/device_plugin_peer.h): what the device-plugin and assignment tests start.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "../peers/device_plugin_peer.h"
#include "test_env.h"

namespace kgpu::testing {

class PluginAgent {
 public:
  // `extra` flags are appended; unless they name --pod-resources-socket, the agent reads no
  // PodResources. `env` entries ("NAME=value") are added to the agent's environment.
  PluginAgent(const std::string& node_yaml, const std::string& config_yaml, std::vector<std::string> extra = {},
              std::vector<std::string> env = {});

  KubeletRegistry& kubelet() { return kubelet_; }
  FakeNodeFile& fake() { return fake_; }
  const TempDir& dir() const { return dir_; }
  std::string log() const;
  std::string config_path() const { return config_; }
  std::string socket(const std::string& name) const { return (dir_.path() / "dp" / name).string(); }

  // Waits for `n` registrations in total; returns them.
  std::vector<Registration> registrations(size_t n);
  // GET /metrics (empty on failure).
  std::string metrics();
  // The port the agent listens on (waits for its "listening on" line; 0 when it never came).
  int port();
  // Ends the agent process and starts it again with the same flags, directories and kubelet.
  void restart();
  // Sends SIGTERM and waits up to `timeout` for the agent to exit; its wait status (nullopt: still
  // running). The log stays readable; restart() starts it again.
  std::optional<int> terminate(std::chrono::milliseconds timeout = std::chrono::seconds(5));
  std::string features_file() const { return (dir_.path() / "features.d" / "gfd").string(); }

 private:
  void spawn();

  TempDir dir_;
  FakeNodeFile fake_;
  KubeletRegistry kubelet_;
  std::string config_, log_;
  std::vector<std::string> argv_, env_;
  int port_ = 0;
  std::unique_ptr<ChildProcess> process_;
};

// Opens ListAndWatch and returns the first list of `expected_size` devices (fails the test after 5 s).
std::vector<DeviceEntry> first_list(PluginClient& client, size_t expected_size);

}  // namespace kgpu::testing
