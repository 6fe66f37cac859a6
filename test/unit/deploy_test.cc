// The shipped manifests agree with each other.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

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

}  // namespace
