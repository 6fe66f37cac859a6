// The fault action table, the classifier's rules and the remediation engine against a host that
// records what it was asked to do.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

#include "health/fault_actions.h"
#include "health/remediation.h"
#include "../integration/paths.h"

namespace kgpu::health {
namespace {

using namespace std::chrono_literals;

TEST(FaultActions, DefaultsAreTheShippedFileWithTheCataloguesActions) {
  const auto& t = FaultActions::defaults();
  std::ifstream f(kgpu::testing::paths::source_dir() + "/deploy/health/xid-actions.yaml");
  std::stringstream ss;
  ss << f.rdbuf();
  auto shipped = FaultActions{}.overlay(ss.str(), "xid-actions.yaml");
  ASSERT_TRUE(shipped) << shipped.error().message;
  EXPECT_EQ(shipped->xids.size(), t.xids.size());
  EXPECT_EQ(t.xid(48)->action, Action::kResetGpu);
  EXPECT_EQ(t.xid(79)->action, Action::kRebootNode);
  EXPECT_EQ(t.xid(13)->action, Action::kRestartApp);
  EXPECT_EQ(t.xid(63)->action, Action::kNone);
  EXPECT_EQ(t.xid(54)->action, Action::kReport);
  EXPECT_EQ(t.xid(45)->rule, Rule::kDefer);
  EXPECT_EQ(t.xid(154)->rule, Rule::kRecoveryAction);
  EXPECT_EQ(t.xid(119)->mnemonic, "GSP_RPC_TIMEOUT");
  for (uint64_t x : {46, 62, 64, 95, 109, 110, 119, 120}) EXPECT_EQ(t.xid(x)->action, Action::kResetGpu) << x;
  for (uint64_t x : {31, 43, 63, 92, 94}) EXPECT_LT(t.xid(x)->action, Action::kResetGpu) << x;
  EXPECT_EQ(t.signals[static_cast<size_t>(Signal::kRowRemapPending)], Action::kResetGpu);
  EXPECT_EQ(t.signals[static_cast<size_t>(Signal::kRowRemapFailure)], Action::kReport);
  EXPECT_EQ(t.recovery[1], Action::kResetGpu);
  EXPECT_EQ(t.recovery[7], Action::kRebootNode);
  EXPECT_EQ(t.companion_window, 10s);
}

TEST(FaultActions, AnOverrideReplacesEntriesOneByOne) {
  auto t = FaultActions::defaults().overlay(
      "xids:\n  - {xid: 13, action: reset-gpu}\n  - {xid: 200, mnemonic: SITE_SPECIFIC, action: report}\n"
      "signals: {thermalSlowdown: restart-app}\nunknown: report\n",
      "site.yaml");
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_EQ(t->xid(13)->action, Action::kResetGpu);
  EXPECT_EQ(t->xid(200)->mnemonic, "SITE_SPECIFIC");
  EXPECT_EQ(t->xid(48)->action, Action::kResetGpu);  // untouched
  EXPECT_EQ(t->signals[static_cast<size_t>(Signal::kThermalSlowdown)], Action::kRestartApp);
  EXPECT_EQ(t->unknown, Action::kReport);
}

TEST(FaultActions, BadFilesNameTheFileLineAndField) {
  const auto& d = FaultActions::defaults();
  struct Case {
    const char* text;
    const char* error;
  } cases[] = {
      {"xids:\n  - {xid: 13, action: reboot}\n", "site.yaml:2: xids[0].action: unknown action 'reboot'"},
      {"xids:\n  - {xid: 13, action: none}\n  - {xid: 13, action: none}\n", "site.yaml:3: xids[1].xid: XID 13 is listed twice"},
      {"xids:\n  - {xid: x13, action: none}\n", "site.yaml:2: xids[0].xid: 'x13' is not an XID number"},
      {"xids:\n  - {xid: 13}\n", "site.yaml:2: xids[0]: needs xid and action"},
      {"xids:\n  - {xid: 45, action: none, rule: sometimes}\n", "xids[0].rule: unknown rule 'sometimes'"},
      {"signals:\n  hot: none\n", "site.yaml:2: signals: unknown key 'hot'"},
      {"recoveryActions: {REBOOT: none}\n", "recoveryActions: unknown key 'REBOOT'"},
      {"version: v2\n", "site.yaml:1: version: unsupported version 'v2'"},
      {"companionWindow: soon\n", "companionWindow: bad duration 'soon'"},
      {"xid: [\n", "site.yaml:2: not valid YAML"},
      {"actions: {}\n", "site.yaml:1: (top): unknown field 'actions'"},
      {"a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
       "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
       "e: [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n",
       "site.yaml"},
  };
  for (const auto& c : cases) {
    auto t = d.overlay(c.text, "site.yaml");
    ASSERT_FALSE(t) << c.text;
    EXPECT_NE(t.error().message.find(c.error), std::string::npos) << t.error().message;
  }
}

class ClassifierTest : public ::testing::Test {
 protected:
  FakeClock clock;
  Classifier c{FaultActions::defaults(), clock};
};

TEST_F(ClassifierTest, TheMostSevereFaultDecidesUntilCleared) {
  auto v = c.on_xid("GPU-a", 13);
  EXPECT_EQ(v.recommendation, Action::kRestartApp);
  EXPECT_EQ(v.reason, "XID 13 (GR_EXCEPTION): restart-app");
  v = c.on_xid("GPU-a", 48);
  EXPECT_EQ(v.recommendation, Action::kResetGpu);
  EXPECT_TRUE(v.changed());
  v = c.on_xid("GPU-a", 31);
  EXPECT_EQ(v.recommendation, Action::kResetGpu);
  EXPECT_FALSE(v.changed());
  EXPECT_EQ(c.recommendation("GPU-b"), Action::kNone);  // per GPU
  c.clear("GPU-a");
  EXPECT_EQ(c.recommendation("GPU-a"), Action::kNone);
}

TEST_F(ClassifierTest, AnUnknownXidIsReportedWithItsNumberAndNoAction) {
  auto v = c.on_xid("GPU-a", 999);
  EXPECT_EQ(v.recommendation, Action::kNone);
  EXPECT_EQ(v.reason, "XID 999: not in the fault action table, no action");
}

TEST_F(ClassifierTest, RepeatedXid45NeverEscalatesAndFollowsItsCompanion) {
  for (int i = 0; i < 50; ++i) {
    auto v = c.on_xid("GPU-a", 45);
    EXPECT_EQ(v.recommendation, Action::kNone);
    clock.advance(30s);
  }
  c.on_xid("GPU-b", 79);
  clock.advance(2s);
  auto v = c.on_xid("GPU-b", 45);
  EXPECT_EQ(v.recommendation, Action::kRebootNode);
  EXPECT_FALSE(v.changed());
  EXPECT_EQ(v.reason, "XID 45 (PREEMPTIVE_REMOVAL) follows XID 79: that XID decides");
  clock.advance(20s);  // past the companion window: alone again
  v = c.on_xid("GPU-b", 45);
  EXPECT_NE(v.reason.find("alone"), std::string::npos);
}

TEST_F(ClassifierTest, Xid154FollowsTheRecoveryActionAndMayCancel) {
  c.on_xid("GPU-a", 119);
  auto v = c.on_xid("GPU-a", 154, 0u);  // the driver says NONE
  EXPECT_EQ(v.recommendation, Action::kNone);
  EXPECT_TRUE(v.cancelled());
  EXPECT_NE(v.reason.find("recovery action is NONE"), std::string::npos);
  v = c.on_xid("GPU-a", 154, 2u);  // NODE_REBOOT
  EXPECT_EQ(v.recommendation, Action::kRebootNode);
  c.on_xid("GPU-b", 48);
  v = c.on_xid("GPU-b", 154);  // NVML cannot say: the linked XID decides
  EXPECT_EQ(v.recommendation, Action::kResetGpu);
  EXPECT_EQ(v.reason,
            "XID 154 (GPU_RECOVERY_ACTION_CHANGED): the driver's recovery action is unknown; the linked XID 48 decides");
}

TEST_F(ClassifierTest, SignalsUseTheirTableEntries) {
  auto v = c.on_signal("GPU-a", Signal::kRowRemapPending, "(2 rows)");
  EXPECT_EQ(v.recommendation, Action::kResetGpu);
  EXPECT_EQ(v.reason, "rowRemapPending (2 rows): reset-gpu");
  v = c.on_signal("GPU-b", Signal::kThermalSlowdown);
  EXPECT_EQ(v.recommendation, Action::kNone);
}

// A host that records the calls and answers from its fields.
struct FakeHost : RemediationHost {
  std::vector<std::string> calls;
  std::map<std::string, std::vector<PodRef>> pods;  // by GPU uuid
  std::vector<PodRef> node_pod_list;
  std::set<std::string> blocked;  // pod names whose eviction a PDB refuses
  bool budget_free = true;
  std::string reset_error, validate_error;
  unsigned procs = 0;
  std::string boot = "boot-1";
  std::vector<std::string> events;

  void withhold(const GpuRecord& r) override { calls.push_back("withhold " + r.uuid); }
  void release(const GpuRecord& r) override { calls.push_back("release " + r.uuid); }
  Result<std::vector<PodRef>> gpu_pods(const GpuRecord& r) override { return pods[r.uuid]; }
  Result<std::vector<PodRef>> node_pods() override { return node_pod_list; }
  Result<Eviction> evict(const PodRef& p) override {
    calls.push_back("evict " + p.name);
    if (blocked.contains(p.name)) return Eviction{EvictOutcome::kBlocked, "Cannot evict pod as it would violate the pod's disruption budget."};
    for (auto& [gpu, list] : pods) std::erase(list, p);
    std::erase(node_pod_list, p);
    return Eviction{};
  }
  Result<bool> acquire_budget(const GpuRecord& r, std::string* holders) override {
    calls.push_back("acquire " + r.uuid);
    if (!budget_free) *holders = "node-b/GPU-z";
    return budget_free;
  }
  Result<void> release_budget(const GpuRecord& r) override {
    calls.push_back("release-budget " + r.uuid);
    return {};
  }
  Result<unsigned> processes(const GpuRecord&) override { return procs; }
  Result<void> reset(const GpuRecord& r) override {
    calls.push_back("reset " + r.uuid);
    if (!reset_error.empty()) return fail(ErrorCode::kUnavailable, "{}", reset_error);
    return {};
  }
  Result<void> validate(const GpuRecord& r) override {
    calls.push_back("validate " + r.uuid);
    if (!validate_error.empty()) return fail(ErrorCode::kUnavailable, "{}", validate_error);
    return {};
  }
  Result<void> cordon(bool on) override {
    calls.push_back(on ? "cordon" : "uncordon");
    return {};
  }
  std::string boot_id() override { return boot; }
  void cleared(const GpuRecord& r) override { calls.push_back("cleared " + r.uuid); }
  void event(const GpuRecord&, bool warning, const std::string& reason, const std::string& message) override {
    events.push_back(std::string(warning ? "Warning " : "Normal ") + reason + ": " + message);
  }
  size_t count(const std::string& call) const { return std::count(calls.begin(), calls.end(), call); }
};

class RemediatorTest : public ::testing::Test {
 protected:
  Verdict fault(Action a, const std::string& reason = "XID 48: reset-gpu") {
    Verdict v;
    v.event_action = v.recommendation = a;
    v.reason = reason;
    return v;
  }
  FakeClock clock;
  FakeHost host;
  Policy policy{.mode = Mode::kOn};
};

TEST_F(RemediatorTest, ResetPathWaitsForTheBudgetAndThePdbThenReturnsTheGpu) {
  Remediator r(policy, host, clock);
  host.pods["GPU-a"] = {{"team", "train-0", "u0"}, {"team", "train-1", "u1"}};
  host.blocked = {"train-1"};
  host.budget_free = false;
  r.on_verdict("GPU-a", 3, fault(Action::kResetGpu));
  EXPECT_EQ(r.records().at("GPU-a").phase, Phase::kDraining);
  EXPECT_EQ(host.count("withhold GPU-a"), 1u);
  auto conds = r.conditions();
  EXPECT_EQ(conds[0].type, "GpuResetRequired");
  EXPECT_EQ(conds[0].status, "True");
  EXPECT_EQ(conds[0].reason, "Draining");
  EXPECT_NE(conds[0].message.find("GPU 3 (GPU-a): XID 48: reset-gpu"), std::string::npos) << conds[0].message;
  EXPECT_EQ(conds[1].status, "False");

  r.step();
  EXPECT_NE(r.records().at("GPU-a").message.find("held by node-b/GPU-z"), std::string::npos);
  EXPECT_EQ(host.count("evict train-0"), 0u);  // no eviction without a budget slot
  host.budget_free = true;
  r.step();
  EXPECT_EQ(host.count("evict train-0"), 1u);
  EXPECT_EQ(host.count("evict train-1"), 1u);
  EXPECT_NE(r.records().at("GPU-a").message.find("disruption budget"), std::string::npos);
  EXPECT_EQ(r.records().at("GPU-a").phase, Phase::kDraining);
  EXPECT_EQ(host.count("reset GPU-a"), 0u);
  host.blocked.clear();
  r.step();  // train-1 evicted now
  r.step();  // nothing holds it: reset, validate, back
  EXPECT_EQ(host.count("reset GPU-a"), 1u);
  EXPECT_EQ(host.count("validate GPU-a"), 1u);
  EXPECT_EQ(host.count("release GPU-a"), 1u);
  EXPECT_EQ(host.count("release-budget GPU-a"), 1u);
  EXPECT_EQ(host.count("cleared GPU-a"), 1u);
  EXPECT_EQ(r.records().at("GPU-a").phase, Phase::kInService);
  EXPECT_EQ(r.conditions()[0].status, "False");
  EXPECT_EQ(host.events.back().rfind("Normal GpuReturnedToService: GPU 3 (GPU-a)", 0), 0u) << host.events.back();
}

TEST_F(RemediatorTest, ProcessesOutsideKubernetesDelayTheReset) {
  Remediator r(policy, host, clock);
  host.procs = 1;
  r.on_verdict("GPU-a", 0, fault(Action::kResetGpu));
  r.step();
  r.step();
  EXPECT_EQ(r.records().at("GPU-a").phase, Phase::kResetting);
  EXPECT_EQ(host.count("reset GPU-a"), 0u);
  EXPECT_NE(r.records().at("GPU-a").message.find("1 process(es) outside Kubernetes"), std::string::npos);
  host.procs = 0;
  r.step();
  EXPECT_EQ(r.records().at("GPU-a").phase, Phase::kInService);
}

TEST_F(RemediatorTest, AFailedResetEscalatesOnceAndIsNeverRetriedInALoop) {
  Remediator r(policy, host, clock);
  host.reset_error = "In use by another client";
  host.node_pod_list = {{"team", "notebook", "u2"}};
  r.on_verdict("GPU-a", 0, fault(Action::kResetGpu));
  for (int i = 0; i < 10; ++i) r.step();
  EXPECT_EQ(host.count("reset GPU-a"), 1u);
  const auto& rec = r.records().at("GPU-a");
  EXPECT_EQ(rec.phase, Phase::kNodeDraining);
  EXPECT_EQ(rec.action, Action::kRebootNode);
  EXPECT_EQ(host.count("cordon"), 1u);
  EXPECT_EQ(host.count("evict notebook"), 1u);
  EXPECT_NE(rec.message.find("waiting for the node to reboot"), std::string::npos) << rec.message;
  EXPECT_EQ(r.conditions()[1].status, "True");
  // The node reboots: a new boot ID; the GPU validates and the node is uncordoned.
  host.boot = "boot-2";
  r.step();
  EXPECT_EQ(r.records().at("GPU-a").phase, Phase::kInService);
  EXPECT_EQ(host.count("uncordon"), 1u);
}

TEST_F(RemediatorTest, AFlappingGpuIsQuarantinedInsteadOfCycled) {
  Remediator r(policy, host, clock);
  for (int i = 0; i < 2; ++i) {
    r.on_verdict("GPU-a", 0, fault(Action::kResetGpu));
    r.step();
    EXPECT_EQ(r.records().at("GPU-a").phase, Phase::kInService);
    clock.advance(5min);
  }
  r.on_verdict("GPU-a", 0, fault(Action::kResetGpu));
  EXPECT_EQ(r.records().at("GPU-a").phase, Phase::kQuarantined);
  r.step();
  EXPECT_EQ(host.count("reset GPU-a"), 2u);  // not a third time
  EXPECT_EQ(r.conditions()[2].status, "True");
  EXPECT_EQ(r.conditions()[2].reason, "Quarantined");
  ASSERT_TRUE(r.release_by_operator("GPU-a"));
  EXPECT_EQ(r.records().at("GPU-a").phase, Phase::kInService);
  EXPECT_FALSE(r.release_by_operator("GPU-a"));
}

TEST_F(RemediatorTest, DryRunSaysWhatItWouldDoAndTouchesNothing) {
  policy.mode = Mode::kDryRun;
  Remediator r(policy, host, clock);
  host.pods["GPU-a"] = {{"team", "train-0", "u0"}};
  r.on_verdict("GPU-a", 2, fault(Action::kResetGpu));
  r.step();
  EXPECT_TRUE(host.calls.empty()) << host.calls.front();
  EXPECT_EQ(r.records().at("GPU-a").phase, Phase::kNoted);
  ASSERT_EQ(host.events.size(), 1u);
  EXPECT_EQ(host.events[0],
            "Warning RemediationDryRun: GPU 2 (GPU-a): XID 48: reset-gpu; remediation is dry-run: it would withhold it, "
            "evict its pods, reset it and validate it");
  EXPECT_EQ(r.conditions()[0].status, "True");
  EXPECT_EQ(r.conditions()[0].reason, "Noted");
}

TEST_F(RemediatorTest, ACancelReturnsAGpuThatIsStillDraining) {
  Remediator r(policy, host, clock);
  host.pods["GPU-a"] = {{"team", "train-0", "u0"}};
  host.blocked = {"train-0"};
  r.on_verdict("GPU-a", 0, fault(Action::kResetGpu));
  r.step();
  Verdict cancel;
  cancel.previous = Action::kResetGpu;
  cancel.reason = "XID 154: the driver's recovery action is NONE: none";
  r.on_verdict("GPU-a", 0, cancel);
  EXPECT_EQ(r.records().at("GPU-a").phase, Phase::kInService);
  EXPECT_EQ(host.count("release GPU-a"), 1u);
  EXPECT_EQ(host.count("release-budget GPU-a"), 1u);
  EXPECT_EQ(host.count("reset GPU-a"), 0u);
}

TEST_F(RemediatorTest, AWorseFaultDuringTheDrainEscalates) {
  Remediator r(policy, host, clock);
  host.pods["GPU-a"] = {{"team", "train-0", "u0"}};
  host.blocked = {"train-0"};
  r.on_verdict("GPU-a", 0, fault(Action::kResetGpu));
  r.step();
  r.on_verdict("GPU-a", 0, fault(Action::kRebootNode, "XID 79: reboot-node"));
  EXPECT_EQ(r.records().at("GPU-a").phase, Phase::kNodeDraining);
  EXPECT_EQ(r.conditions()[1].status, "True");
  EXPECT_EQ(r.conditions()[0].status, "False");
}

TEST_F(RemediatorTest, ARestartResumesFromTheRecordsWithoutRepeatingDoneSteps) {
  std::map<std::string, GpuRecord> saved;
  {
    Remediator r(policy, host, clock);
    host.node_pod_list = {};
    r.on_verdict("GPU-a", 0, fault(Action::kRebootNode, "XID 79: reboot-node"));
    r.step();
    for (const auto& [k, v] : r.records()) {
      auto back = GpuRecord::from_json(nlohmann::json::parse(v.to_json().dump()));
      ASSERT_TRUE(back) << back.error().message;
      saved[k] = *back;
    }
  }
  EXPECT_EQ(host.count("cordon"), 1u);
  host.calls.clear();
  Remediator again(policy, host, clock);
  again.restore(saved);
  EXPECT_EQ(host.count("withhold GPU-a"), 1u);
  again.step();
  EXPECT_EQ(host.count("cordon"), 0u);  // already cordoned: not again
  EXPECT_EQ(again.records().at("GPU-a").phase, Phase::kNodeDraining);
}

TEST(GpuRecord, MalformedRecordsNameTheField) {
  EXPECT_NE(GpuRecord::from_json({{"uuid", "GPU-a"}, {"phase", "melting"}}).error().message.find("phase: unknown 'melting'"),
            std::string::npos);
  EXPECT_NE(GpuRecord::from_json({{"phase", "noted"}}).error().message.find("uuid: missing"), std::string::npos);
  EXPECT_NE(GpuRecord::from_json({{"uuid", "GPU-a"}, {"index", "three"}}).error().message.find("wrong type"),
            std::string::npos);
  EXPECT_NE(GpuRecord::from_json({{"uuid", 7}}).error().message.find("uuid: expected a string"), std::string::npos);
}

}  // namespace
}  // namespace kgpu::health
