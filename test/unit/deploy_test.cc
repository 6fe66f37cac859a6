// The shipped manifests (rendered from the Helm chart by scripts/render-deploy.sh; the helm_chart
// test checks they are current) agree with each other and with the agent's defaults.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <set>

#include "agent/plugin_manager.h"
#include "kubelet/device_plugin.h"
#include "sharing/config.h"
#include "../integration/paths.h"

namespace {

TEST(Deploy, PrometheusRuleMatchesTheTestedRulesFile) {
  const auto rules = YAML::LoadFile(KGPU_SOURCE_DIR + "/deploy/rules/gpu-alerts.rules.yaml");
  const auto crd = YAML::LoadFile(KGPU_SOURCE_DIR + "/deploy/prometheus-rule.yaml");
  EXPECT_EQ(crd["kind"].as<std::string>(), "PrometheusRule");
  EXPECT_EQ(crd["metadata"]["name"].as<std::string>(), "kgpu-gpu-alerts");
  YAML::Emitter a, b;
  a << rules["groups"];
  b << crd["spec"]["groups"];
  EXPECT_EQ(std::string(a.c_str()), std::string(b.c_str()));
}

TEST(Deploy, ServiceMonitorSelectsTheService) {
  const auto svc = YAML::LoadFile(KGPU_SOURCE_DIR + "/deploy/service.yaml");
  const auto sm = YAML::LoadFile(KGPU_SOURCE_DIR + "/deploy/servicemonitor.yaml");
  EXPECT_EQ(sm["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"].as<std::string>(),
            svc["metadata"]["labels"]["app.kubernetes.io/name"].as<std::string>());
  EXPECT_EQ(sm["spec"]["endpoints"][0]["port"].as<std::string>(), svc["spec"]["ports"][0]["name"].as<std::string>());
  EXPECT_EQ(svc["spec"]["ports"][0]["port"].as<int>(), 9400);
}

// The DaemonSet mounts every directory the agent uses with its default flags, so the defaults are
// what a deployment runs with.
TEST(Deploy, DaemonSetMountsWhatTheAgentDefaultsUse) {
  const auto docs = YAML::LoadAllFromFile(KGPU_SOURCE_DIR + "/deploy/daemonset.yaml");
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
  std::string config_dir;
  for (const auto& e : container["env"]) {
    if (e["name"].as<std::string>() == "CONFIG_FILE_SRCDIR") config_dir = e["value"].as<std::string>();
  }
  EXPECT_TRUE(mounts.contains(config_dir)) << config_dir;
  const auto sc = container["securityContext"];
  EXPECT_FALSE(sc["privileged"].as<bool>());
  EXPECT_FALSE(sc["allowPrivilegeEscalation"].as<bool>());
  EXPECT_EQ(sc["capabilities"]["drop"][0].as<std::string>(), "ALL");
}

TEST(Deploy, EveryNamedSharingConfigIsValid) {
  const auto docs = YAML::LoadAllFromFile(KGPU_SOURCE_DIR + "/deploy/sharing-config.yaml");
  YAML::Node cm;
  for (const auto& d : docs) {
    if (d && d["kind"] && d["kind"].as<std::string>() == "ConfigMap") cm = d;
  }
  ASSERT_TRUE(cm);
  EXPECT_EQ(cm["metadata"]["name"].as<std::string>(), "kgpu-configs");
  std::set<std::string> names;
  for (const auto& entry : cm["data"]) {
    const auto name = entry.first.as<std::string>();
    names.insert(name);
    auto config = kgpu::sharing::parse_config(entry.second.as<std::string>(), name);
    ASSERT_TRUE(config) << name << ": " << config.error().message;
    EXPECT_TRUE(config->warnings.empty()) << name;
    ASSERT_TRUE(kgpu::sharing::finalize(*config, {})) << name;
    if (name == "time-slicing-4") {
      EXPECT_EQ(config->sharing.kind, kgpu::sharing::SharingKind::kTimeSlicing);
      EXPECT_EQ(config->sharing.resources.at(0).replicas, 4);
      EXPECT_TRUE(config->sharing.fail_requests_greater_than_one);
    }
  }
  EXPECT_EQ(names, (std::set<std::string>{"default", "time-slicing-4"}));
}

}  // namespace
