// kgpu doctor against a live API server (the stand-in loaded with a GPU cluster's objects and
// logs): --collect through the API client, live mode, RBAC-forbidden kinds kept as collection
// errors, kinds the API lacks, a hung server bounded by the request timeout, the snapshot's file
// mode, and no kubectl anywhere.
#include <gtest/gtest.h>
#include <httplib.h>

#include <filesystem>

#include "doctor/collect.h"
#include "doctor/diagnose.h"
#include "doctor/snapshot.h"
#include "k8s/document.h"
#include "standin.h"
#include "test_env.h"

namespace kgpu::doctor {
namespace {

using kgpu::testing::slurp;
using kgpu::testing::StandIn;
using kgpu::testing::TempDir;

const std::string kCluster = std::string(KGPU_SOURCE_DIR) + "/test/data/doctor/live-cluster/";

// The stand-in serving the cluster of test/data/doctor/live-cluster (with the Prometheus operator's
// kinds, which a cluster has when the operator is installed) and its validator's log.
std::unique_ptr<StandIn> cluster() {
  auto s = std::make_unique<StandIn>(std::vector<std::string>{
      "--load", kCluster + "core.json", "--resource", "monitoring.coreos.com/v1/servicemonitors/ServiceMonitor",
      "--resource", "monitoring.coreos.com/v1/prometheusrules/PrometheusRule"});
  s->put_log("gpu-operator/nvidia-operator-validator-cjcw6/toolkit-validation",
             slurp(kCluster + "logs/gpu-operator_nvidia-operator-validator-cjcw6_toolkit-validation.log"));
  return s;
}

struct Run {
  int status = -1;
  std::string out;
};
Run sh(const std::string& cmd) {
  auto o = kgpu::testing::run_command(cmd);
  return Run{o.status, o.text};
}

std::vector<std::string> requests(const StandIn& s) {
  httplib::SSLClient c("127.0.0.1", s.port());
  c.enable_server_certificate_verification(false);
  auto r = c.Get("/standin/v1/requests");
  std::vector<std::string> out;
  if (!r) return out;
  for (const auto& e : nlohmann::json::parse(r->body)) out.push_back(e["method"].get<std::string>() + " " + e["path"].get<std::string>());
  return out;
}

TEST(DoctorLive, CollectsThroughTheApi) {
  auto s = cluster();
  CollectOptions o;
  o.kubeconfig = s->kubeconfig();
  o.collected_at = "2026-10-20T10:00:00Z";
  auto text = collect_snapshot(o);
  ASSERT_TRUE(text) << text.error().message;
  auto snap = Snapshot::from(k8s::load_text(std::move(*text), "collected.json"));
  EXPECT_EQ(snap.collected_at(), "2026-10-20T10:00:00Z");
  EXPECT_EQ(snap.nodes.size(), 4u);
  EXPECT_EQ(snap.pods.size(), 21u);
  ASSERT_EQ(snap.logs.size(), 1u);
  EXPECT_EQ(snap.logs[0].container, "toolkit-validation");
  EXPECT_NE(snap.logs[0].text.find("toolkit probe output: \xef\xbf\xbd"), std::string::npos) << snap.logs[0].text;
  // podmonitors: not served by this API; recorded in kubectl's words, the rest kept.
  bool podmonitors = false;
  for (const auto& e : snap.collection_errors()) podmonitors |= e == "the server doesn't have a resource type \"podmonitors\"";
  EXPECT_TRUE(podmonitors);
  auto fs = diagnose(snap, Options{});
  ASSERT_TRUE(fs);
  bool found = false;
  for (const auto& f : *fs) found |= f.rule == "gpu-not-advertised" && f.object == "node/gpu-l4-2";
  EXPECT_TRUE(found);
  // Never ConfigMaps or Secrets.
  for (const auto& r : requests(*s)) {
    EXPECT_EQ(r.find("configmaps"), std::string::npos) << r;
    EXPECT_EQ(r.find("secrets"), std::string::npos) << r;
  }
}

TEST(DoctorLive, ForbiddenKindsAreKeptAsErrors) {
  auto s = cluster();
  s->fault({{"status", 403}, {"path", "/poddisruptionbudgets"}, {"times", -1}});
  CollectOptions o;
  o.kubeconfig = s->kubeconfig();
  auto text = collect_snapshot(o);
  ASSERT_TRUE(text) << text.error().message;
  auto snap = Snapshot::from(k8s::load_text(std::move(*text), "collected.json"));
  EXPECT_EQ(snap.nodes.size(), 4u);
  bool forbidden = false;
  for (const auto& e : snap.collection_errors()) {
    forbidden |= e == "Error from server (Forbidden): poddisruptionbudgets.policy is forbidden: User \"kgpu-test\" "
                      "cannot list resource \"poddisruptionbudgets\" in API group \"policy\" at the cluster scope";
  }
  EXPECT_TRUE(forbidden);
}

TEST(DoctorLive, BinaryLiveModeCollectAndFileMode) {
  auto s = cluster();
  TempDir d;
  const std::string kgpu = KGPU_BINARY;
  auto live = sh(kgpu + " doctor --kubeconfig " + s->kubeconfig() + " --node gpu-l4-2");
  EXPECT_EQ(live.status, 3) << live.out;
  EXPECT_NE(live.out.find("gpu-not-advertised node/gpu-l4-2"), std::string::npos) << live.out;
  // $KUBECONFIG works as for kubectl, with the context chosen by --context.
  live = sh("KUBECONFIG=/nonexistent:" + s->kubeconfig() + " " + kgpu + " doctor --context standin-cert --node gpu-l4-2");
  EXPECT_EQ(live.status, 3) << live.out;
  const std::string out = (d.path() / "snap.json").string();
  ASSERT_EQ(sh(kgpu + " doctor --collect --kubeconfig " + s->kubeconfig() + " -o " + out + " 2>/dev/null").status, 0);
  EXPECT_EQ(std::filesystem::status(out).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  EXPECT_EQ(sh(kgpu + " doctor --no-checklist --snapshot " + out).status, 3);
  // No configuration at all: a usage/input error naming what was looked for.
  auto none = sh("env -u KUBECONFIG -u KUBERNETES_SERVICE_HOST HOME=" + d.path().string() + " " + kgpu + " doctor 2>&1");
  EXPECT_EQ(none.status, 2) << none.out;
  EXPECT_NE(none.out.find("no Kubernetes configuration"), std::string::npos) << none.out;
}

TEST(DoctorLive, AHungServerIsBoundedByTheRequestTimeout) {
  auto s = cluster();
  s->fault({{"delayMs", 3000}, {"path", "/api/v1/nodes"}, {"times", -1}});
  CollectOptions o;
  o.kubeconfig = s->kubeconfig();
  o.request_timeout = std::chrono::seconds(1);
  const auto start = std::chrono::steady_clock::now();
  auto text = collect_snapshot(o);
  ASSERT_FALSE(text);
  EXPECT_NE(text.error().message.find("Timeout was reached"), std::string::npos) << text.error().message;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
}

}  // namespace
}  // namespace kgpu::doctor
