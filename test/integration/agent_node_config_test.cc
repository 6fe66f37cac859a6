// The real `kgpu agent` with API access (the API-server stand-in) on the fake NVML, for what it
// does per node: the config chosen from a config directory by the node's label and switched
// without a restart; the node labels file kept across restarts and removed only on an uninstall
// (the agent's DaemonSet gone).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>

#include "agent_fixture.h"
#include "common/files.h"
#include "k8s/gpu_assignment.h"
#include "standin.h"

namespace kgpu::testing {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;
using namespace std::chrono_literals;

constexpr const char* kNode = "gpu-node-1";
constexpr const char* kL4 = "preset: pcie-l4-4\n";  // four GPUs
constexpr const char* kLabel = "nvidia.com/device-plugin.config";
constexpr const char* kPlain = "version: v1\n";

std::string time_sliced(int replicas) {
  return "version: v1\nsharing:\n  timeSlicing:\n    resources:\n      - name: nvidia.com/gpu\n        replicas: " +
         std::to_string(replicas) + "\n";
}

// A ConfigMap volume as the kubelet keeps it: each key a symlink into ..data, which names a
// timestamped directory; an update writes a new directory and swaps ..data in one rename.
class ConfigMapVolume {
 public:
  explicit ConfigMapVolume(const std::map<std::string, std::string>& data) { publish(data); }
  void publish(const std::map<std::string, std::string>& data) {
    const std::string version = "..v" + std::to_string(++version_);
    for (const auto& [k, v] : data) dir_.write(version + "/" + k, v);
    std::filesystem::create_directory_symlink(version, dir_.path() / "..data_tmp");
    std::filesystem::rename(dir_.path() / "..data_tmp", dir_.path() / "..data");
    for (const auto& [k, v] : data) {
      if (!std::filesystem::is_symlink(dir_.path() / k)) std::filesystem::create_symlink("..data/" + k, dir_.path() / k);
    }
  }
  std::string path() const { return dir_.path().string(); }

 private:
  TempDir dir_;
  int version_ = 0;
};

class NodeConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    client_ = client_for(token_config(standin_));
    ASSERT_TRUE(client_);
    ASSERT_TRUE(client_->create(kube::resources::kNodes, "", json{{"metadata", {{"name", kNode}}}}));
  }
  std::vector<std::string> api_flags() const {
    return {"--kubeconfig", standin_.kubeconfig(), "--node-name", kNode, "--node-report-interval", "100"};
  }
  void label_node(const json& value) {
    auto r = client_->patch(kube::resources::kNodes, "", kNode, kube::PatchType::kMerge,
                            json{{"metadata", {{"labels", {{kLabel, value}}}}}});
    ASSERT_TRUE(r) << r.error().text();
  }
  // Waits for the agent's /metrics to contain `line` (fails the test after 10 s).
  void metrics_show(const std::string& line) {
    std::string page;
    EXPECT_TRUE(eventually([&] {
      page = agent_->metrics();
      return page.find(line) != std::string::npos;
    })) << "no '" << line << "' in\n"
        << page << "\nagent log:\n"
        << agent_->log();
  }
  bool log_shows(const std::string& text) {
    const bool ok = eventually([&] { return agent_->log().find(text) != std::string::npos; });
    EXPECT_TRUE(ok) << "no '" << text << "' in the agent log:\n" << agent_->log();
    return ok;
  }
  std::string node_annotation(const std::string& key) {
    auto node = client_->get(kube::resources::kNodes, "", kNode);
    if (!node) return "";
    return (*node)["metadata"].value("annotations", json::object()).value(key, "");
  }

  StandIn standin_;
  std::unique_ptr<kube::Client> client_;
  std::unique_ptr<PluginAgent> agent_;
};

std::string devices(int healthy) {
  return "kgpu_device_plugin_devices{resource=\"nvidia.com/gpu\",health=\"healthy\"} " + std::to_string(healthy) + "\n";
}
std::string info(const std::string& name, const std::string& by) {
  return "kgpu_device_plugin_config_info{name=\"" + name + "\",selected_by=\"" + by + "\"} 1\n";
}

TEST_F(NodeConfigTest, TheNodeLabelSwitchesTheConfigWithoutARestart) {
  ConfigMapVolume volume({{"plain", kPlain}, {"ts4", time_sliced(4)}});
  auto flags = api_flags();
  flags.insert(flags.end(), {"--config-dir", volume.path(), "--config-default", "plain"});
  agent_ = std::make_unique<PluginAgent>(kL4, "", flags);
  auto regs = agent_->registrations(1);
  ASSERT_EQ(regs.size(), 1u);
  ASSERT_EQ(regs[0].resource_name, "nvidia.com/gpu");
  PluginClient plugin(agent_->kubelet().plugin_socket(regs[0]));
  EXPECT_EQ(first_list(plugin, 4).size(), 4u);
  metrics_show(info("plain", "default"));

  // The label names the time-sliced config: the open ListAndWatch stream gets 4 x 4 devices.
  label_node("ts4");
  auto sixteen = plugin.wait_for_list([](const auto& l) { return l.size() == 16; }, 10s);
  EXPECT_TRUE(sixteen.has_value()) << agent_->log();
  metrics_show(info("ts4", "node-label"));
  metrics_show(devices(16));
  EXPECT_TRUE(log_shows("config selected"));

  // A label naming no config: an error naming node, label, value, directory and the configs; the
  // time-sliced config keeps running.
  label_node("huge");
  // (The text log escapes the quotes around the value.)
  EXPECT_TRUE(log_shows("names no config in " + volume.path() + "; available: plain, ts4"));
  EXPECT_THAT(agent_->log(), HasSubstr(std::string("node ") + kNode + ": label nvidia.com/device-plugin.config="));
  EXPECT_THAT(agent_->log(), HasSubstr("huge"));
  metrics_show("kgpu_device_plugin_config_last_reload_successful 0\n");
  metrics_show(info("ts4", "node-label"));
  metrics_show(devices(16));
  // A name that climbs out of the directory is refused the same way.
  label_node("..data");
  EXPECT_TRUE(log_shows("..data\\\" is not a config name"));

  // Back to a config that exists: nothing wrong any more.
  label_node("ts4");
  metrics_show("kgpu_device_plugin_config_last_reload_successful 1\n");

  // The ConfigMap is edited (the kubelet swaps ..data): the chosen config is re-read.
  volume.publish({{"plain", kPlain}, {"ts4", time_sliced(2)}});
  EXPECT_TRUE(plugin.wait_for_list([](const auto& l) { return l.size() == 8; }, 10s).has_value()) << agent_->log();

  // The label removed: the default again.
  label_node(nullptr);
  EXPECT_TRUE(plugin.wait_for_list([](const auto& l) { return l.size() == 4; }, 10s).has_value()) << agent_->log();
  metrics_show(info("plain", "default"));
  EXPECT_EQ(agent_->kubelet().registrations().size(), 1u) << "the resource kept its registration";
}

TEST_F(NodeConfigTest, WithoutApiAccessTheDefaultOrTheSingleConfig) {
  ConfigMapVolume volume({{"ts4", time_sliced(4)}});
  label_node("plain");  // not read without API access
  agent_ = std::make_unique<PluginAgent>(kL4, "", std::vector<std::string>{"--config-dir", volume.path()});
  auto regs = agent_->registrations(1);
  ASSERT_EQ(regs.size(), 1u);
  metrics_show(info("ts4", "single"));
  metrics_show(devices(16));
  EXPECT_THAT(agent_->log(), HasSubstr("no API access, so the node label nvidia.com/device-plugin.config is not read"));
}

// ---- The labels file across restarts and on uninstall.

class LabelsLifeTest : public NodeConfigTest {
 protected:
  // The agent's DaemonSet and its Pod (owned by it) in the stand-in.
  void install() {
    auto ns = client_->create(kube::resources::kNamespaces, "", json{{"metadata", {{"name", "kgpu-system"}}}});
    ASSERT_TRUE(ns) << ns.error().text();
    auto ds = client_->create(
        kube::resources::kDaemonSets, "kgpu-system",
        json{{"metadata", {{"name", "kgpu-agent"}}},
             {"spec",
              {{"selector", {{"matchLabels", {{"app", "kgpu-agent"}}}}},
               {"template",
                {{"metadata", {{"labels", {{"app", "kgpu-agent"}}}}},
                 {"spec", {{"containers", json::array({{{"name", "agent"}, {"image", "kgpu:1"}}})}}}}}}}});
    ASSERT_TRUE(ds) << ds.error().text();
    json owner{{"apiVersion", "apps/v1"},      {"kind", "DaemonSet"},          {"name", "kgpu-agent"},
               {"uid", (*ds)["metadata"]["uid"]}, {"controller", true}, {"blockOwnerDeletion", true}};
    auto pod = client_->create(kube::resources::kPods, "kgpu-system",
                               json{{"metadata", {{"name", "kgpu-agent-x1"}, {"ownerReferences", {owner}}}},
                                    {"spec", {{"nodeName", kNode},
                                              {"containers", json::array({{{"name", "agent"}, {"image", "kgpu:1"}}})}}}});
    ASSERT_TRUE(pod) << pod.error().text();
  }
  void start_agent(std::vector<std::string> flags) {
    flags.insert(flags.end(), {"--pod-name", "kgpu-agent-x1", "--pod-namespace", "kgpu-system", "--no-timestamp"});
    agent_ = std::make_unique<PluginAgent>(kL4, "", flags);
    ASSERT_FALSE(agent_->registrations(1).empty());
    ASSERT_FALSE(agent_->metrics().empty());  // serving: the start wrote the labels
    ASSERT_THAT(read_file(agent_->features_file()).value_or(""), HasSubstr("nvidia.com/gpu.count=4"));
  }
  void delete_daemonset() {
    auto gone = client_->remove(kube::resources::kDaemonSets, "kgpu-system", "kgpu-agent");
    ASSERT_TRUE(gone) << gone.error().text();
  }
  // SIGTERM; then the labels file is there or not as `kept` says, and the log says `why`.
  void terminate_expecting(bool kept, const std::string& why) {
    auto status = agent_->terminate();
    ASSERT_TRUE(status.has_value()) << "the agent did not exit on SIGTERM\n" << agent_->log();
    EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << agent_->log();
    EXPECT_EQ(std::filesystem::exists(agent_->features_file()), kept) << agent_->log();
    EXPECT_THAT(agent_->log(), HasSubstr(why));
  }
};

TEST_F(LabelsLifeTest, KeptOnSigtermWhileTheDaemonSetExists) {
  install();
  start_agent(api_flags());
  terminate_expecting(true, "node labels kept: DaemonSet kgpu-system/kgpu-agent exists");
}

TEST_F(LabelsLifeTest, RemovedOnSigtermOnceTheDaemonSetIsDeleted) {
  install();
  start_agent(api_flags());
  EXPECT_TRUE(eventually([&] { return !node_annotation(k8s::kAnnotationNodeGpus).empty(); })) << agent_->log();
  delete_daemonset();
  terminate_expecting(false, "uninstall: DaemonSet kgpu-system/kgpu-agent is gone");
  EXPECT_EQ(node_annotation(k8s::kAnnotationNodeGpus), "");
}

TEST_F(LabelsLifeTest, KeptWithoutApiAccess) {
  start_agent({});
  terminate_expecting(true, "node labels kept: no API access");
}

TEST_F(LabelsLifeTest, KeptWhenTheApiDoesNotAnswerInTime) {
  install();
  start_agent(api_flags());
  delete_daemonset();
  standin_.fault({{"delayMs", 2000}, {"path", "/pods/kgpu-agent-x1"}, {"method", "GET"}, {"times", -1}});
  // Decided (and logged) before the shutdown grace ran out, though the API never answered.
  terminate_expecting(true, "node labels kept: reading pod kgpu-system/kgpu-agent-x1");
}

// `helm uninstall` deletes the DaemonSet, then the ClusterRole, its binding and the ServiceAccount,
// all before the kubelet stops the pod: a read refused at shutdown that worked at start is that.
TEST_F(LabelsLifeTest, RemovedWhenAccessIsRevokedAfterItWorkedAtStart) {
  install();
  start_agent(api_flags());
  EXPECT_TRUE(eventually([&] { return agent_->log().find("can read its pod and its DaemonSet") != std::string::npos; }))
      << agent_->log();
  standin_.fault({{"status", 403}, {"path", "/pods/kgpu-agent-x1"}, {"method", "GET"}, {"times", -1}});
  terminate_expecting(false, "uninstall: reading pod kgpu-system/kgpu-agent-x1 is refused now");
}

// RBAC that never allowed the read (an older manifest without the rule) is not an uninstall.
TEST_F(LabelsLifeTest, KeptWhenAccessWasNeverAllowed) {
  install();
  standin_.fault({{"status", 403}, {"path", "/daemonsets/kgpu-agent"}, {"method", "GET"}, {"times", -1}});
  start_agent(api_flags());
  terminate_expecting(true, "node labels kept: reading DaemonSet kgpu-system/kgpu-agent");
  EXPECT_THAT(agent_->log(), Not(HasSubstr("can read its pod and its DaemonSet")));
}

TEST_F(LabelsLifeTest, ARestartLeavesTheFileByteIdentical) {
  start_agent({});
  const std::string before = read_file(agent_->features_file()).value_or("");
  struct stat st0 {};
  ASSERT_EQ(::stat(agent_->features_file().c_str(), &st0), 0);
  agent_->restart();
  ASSERT_FALSE(agent_->metrics().empty()) << agent_->log();  // serving again: labels written
  EXPECT_EQ(read_file(agent_->features_file()).value_or(""), before);
  struct stat st1 {};
  ASSERT_EQ(::stat(agent_->features_file().c_str(), &st1), 0);
  EXPECT_EQ(st0.st_ino, st1.st_ino) << "the file was replaced";
}

}  // namespace
}  // namespace kgpu::testing
