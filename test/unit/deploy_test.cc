// The shipped manifests agree with each other.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <set>

#include "agent/plugin_manager.h"
#include "kubelet/device_plugin.h"
#include "sharing/config.h"

namespace {

TEST(Deploy, PrometheusRuleMatchesTheTestedRulesFile) {
  const auto rules = YAML::LoadFile(KGPU_SOURCE_DIR "/deploy/rules/gpu-alerts.rules.yaml");
  const auto crd = YAML::LoadFile(KGPU_SOURCE_DIR "/deploy/prometheus-rule.yaml");
  EXPECT_EQ(crd["kind"].as<std::string>(), "PrometheusRule");
  EXPECT_EQ(crd["metadata"]["name"].as<std::string>(), "gpu-alerts");
  YAML::Emitter a, b;
  a << rules["groups"];
  b << crd["spec"]["groups"];
  EXPECT_EQ(std::string(a.c_str()), std::string(b.c_str()));
}

TEST(Deploy, ServiceMonitorSelectsTheService) {
  const auto svc = YAML::LoadFile(KGPU_SOURCE_DIR "/deploy/service.yaml");
  const auto sm = YAML::LoadFile(KGPU_SOURCE_DIR "/deploy/servicemonitor.yaml");
  EXPECT_EQ(sm["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"].as<std::string>(),
            svc["metadata"]["labels"]["app.kubernetes.io/name"].as<std::string>());
  EXPECT_EQ(sm["spec"]["endpoints"][0]["port"].as<std::string>(), svc["spec"]["ports"][0]["name"].as<std::string>());
  EXPECT_EQ(svc["spec"]["ports"][0]["port"].as<int>(), 9400);
}

// The DaemonSet mounts every directory the agent uses with its default flags, so the defaults are
// what a deployment runs with.
TEST(Deploy, DaemonSetMountsWhatTheAgentDefaultsUse) {
  const auto docs = YAML::LoadAllFromFile(KGPU_SOURCE_DIR "/deploy/daemonset.yaml");
  YAML::Node ds;
  for (const auto& d : docs) {
    if (d["kind"].as<std::string>() == "DaemonSet") ds = d;
  }
  ASSERT_TRUE(ds);
  const auto container = ds["spec"]["template"]["spec"]["containers"][0];
  std::set<std::string> mounts;
  for (const auto& m : container["volumeMounts"]) mounts.insert(m["mountPath"].as<std::string>());
  const kgpu::sharing::Config defaults;
  const kgpu::agent::DevicePluginOptions options;
  for (const std::string& dir :
       {std::string(kgpu::kubelet::kDefaultDevicePluginDir), options.cdi_root, defaults.container_driver_root,
        defaults.mps_root, std::filesystem::path(defaults.gfd_output_file).parent_path().string(),
        std::string("/var/lib/kubelet/pod-resources")}) {
    EXPECT_TRUE(mounts.contains(dir)) << dir << " is not mounted";
  }
  std::string config_file;
  for (const auto& e : container["env"]) {
    if (e["name"].as<std::string>() == "CONFIG_FILE") config_file = e["value"].as<std::string>();
  }
  EXPECT_TRUE(mounts.contains(std::filesystem::path(config_file).parent_path().string())) << config_file;
  const auto sc = container["securityContext"];
  EXPECT_FALSE(sc["privileged"].as<bool>());
  EXPECT_FALSE(sc["allowPrivilegeEscalation"].as<bool>());
  EXPECT_EQ(sc["capabilities"]["drop"][0].as<std::string>(), "ALL");
}

TEST(Deploy, SharingConfigMapIsAValidConfig) {
  const auto cm = YAML::LoadFile(KGPU_SOURCE_DIR "/deploy/sharing-config.yaml");
  EXPECT_EQ(cm["metadata"]["name"].as<std::string>(), "kgpu-sharing-config");
  auto config = kgpu::sharing::parse_config(cm["data"]["config.yaml"].as<std::string>(), "sharing-config.yaml");
  ASSERT_TRUE(config) << config.error().message;
  EXPECT_TRUE(config->warnings.empty());
  ASSERT_TRUE(kgpu::sharing::finalize(*config, {}));
  EXPECT_EQ(config->sharing.kind, kgpu::sharing::SharingKind::kTimeSlicing);
  EXPECT_EQ(config->sharing.resources.at(0).replicas, 4);
  EXPECT_TRUE(config->sharing.fail_requests_greater_than_one);
}

}  // namespace
