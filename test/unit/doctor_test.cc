// kgpu doctor over the fixtures in test/data/doctor (test/data/doctor/make_fixtures.py writes them):
// every failure the guide lists yields its exact finding, the healthy cluster none; targets, JSON,
// exit codes. Collection from a live API server: test/integration/doctor_live_test.cc.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>
#include <type_traits>

#include "doctor/collect.h"
#include "doctor/diagnose.h"
#include "doctor/snapshot.h"
#include "lint/lint.h"
#include "../integration/paths.h"

namespace kgpu::doctor {
namespace {

const std::string kData = std::string(KGPU_SOURCE_DIR) + "/test/data/doctor/";

Snapshot load(const std::string& name) {
  auto s = Snapshot::load({kData + name + "/snapshot.json"});
  EXPECT_TRUE(s.has_value()) << name;
  EXPECT_TRUE(s->errors().empty()) << name;
  return std::move(*s);
}

std::vector<Finding> run(const Snapshot& s, Options o = {}) {
  auto f = diagnose(s, o);
  EXPECT_TRUE(f.has_value());
  return f ? *f : std::vector<Finding>{};
}

const Finding* find(const std::vector<Finding>& fs, const std::string& rule, const std::string& object = "") {
  for (const auto& f : fs) {
    if (f.rule == rule && (object.empty() || f.object == object)) return &f;
  }
  return nullptr;
}

bool any_evidence(const Finding& f, const std::string& needle) {
  for (const auto& e : f.evidence) {
    if (e.text.find(needle) != std::string::npos || e.source.find(needle) != std::string::npos) return true;
  }
  return false;
}

bool any_of(const std::vector<std::string>& lines, const std::string& needle) {
  for (const auto& l : lines) {
    if (l.find(needle) != std::string::npos) return true;
  }
  return false;
}

std::string dump(const std::vector<Finding>& fs) { return to_text(fs); }

struct Case {
  const char* fixture;
  const char* rule;
  const char* object;
  Severity severity;
  Layer layer;
  const char* evidence;  // substring of an evidence text or source
  const char* fix;       // substring of a fix line
  const char* detail;    // substring of a detail line ("" = none asserted)
};

class DoctorCase : public ::testing::TestWithParam<Case> {};

TEST_P(DoctorCase, ReportsTheFinding) {
  const Case& c = GetParam();
  const Snapshot s = load(c.fixture);
  const auto fs = run(s);
  const Finding* f = find(fs, c.rule, c.object);
  ASSERT_NE(f, nullptr) << c.fixture << ":\n" << dump(fs);
  EXPECT_EQ(f->severity, c.severity);
  EXPECT_EQ(f->layer, c.layer);
  EXPECT_TRUE(any_evidence(*f, c.evidence)) << dump({*f});
  EXPECT_TRUE(any_of(f->fix, c.fix)) << dump({*f});
  if (*c.detail != '\0') {
    EXPECT_TRUE(any_of(f->details, c.detail)) << dump({*f});
  }
  // Evidence points back into the snapshot (file:line) or a log line.
  for (const auto& e : f->evidence) EXPECT_NE(e.source.find("snapshot.json:"), std::string::npos) << e.source;
}

const Case kCases[] = {
    {"insufficient-gpu", "insufficient-gpu", "pod/team-a/train-bert", Severity::kCritical, Layer::kScheduler,
     "0/4 nodes are available: 2 Insufficient nvidia.com/gpu, 2 node(s) didn't match Pod's node affinity/selector.",
     "kubectl scale statefulset -n team-a jupyter-alice --replicas=0",
     "team-a/jupyter-alice-0 holds 1 nvidia.com/gpu on gpu-l4-2, running 9d0h -- notebook, running for days"},
    {"selector-shared", "selector-no-match", "pod/default/gpu-smi", Severity::kCritical, Layer::kScheduler,
     "4 node(s) didn't match Pod's node affinity/selector",
     "{\"nodeSelector\":{\"nvidia.com/gpu.product\":\"NVIDIA-L4-SHARED\"}}",
     "NVIDIA-L4-SHARED is NVIDIA-L4 with time-slicing's -SHARED suffix"},
    {"selector-mig", "selector-no-match", "pod/team-a/embed-worker", Severity::kCritical, Layer::kScheduler,
     "didn't match Pod's node affinity/selector", "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb",
     "with the MIG (single strategy) product suffix"},
    {"taint-not-tolerated", "gpu-taint-not-tolerated", "pod/default/cuda-vectoradd", Severity::kCritical,
     Layer::kScheduler, "nvidia.com/gpu=present:NoSchedule",
     "{\"tolerations\":[{\"key\":\"nvidia.com/gpu\",\"operator\":\"Exists\",\"effect\":\"NoSchedule\"}]}", ""},
    {"quota-exhausted", "quota-exhausted", "job/team-a/finetune-llama", Severity::kCritical, Layer::kSpec,
     "exceeded quota: gpu-quota, requested: requests.nvidia.com/gpu=2, used: requests.nvidia.com/gpu=4",
     "kubectl describe resourcequota -n team-a gpu-quota", ""},
    {"rolling-update", "rolling-update-second-gpu", "pod/llm/qwen-vllm-7f9c6d5b48-pqn22", Severity::kCritical,
     Layer::kScheduler, "type: RollingUpdate",
     "kubectl patch deployment -n llm qwen-vllm --type merge -p '{\"spec\":{\"strategy\":{\"type\":\"Recreate\"",
     "old pod qwen-vllm-5d8f7c9b6-"},
    {"fractional-request", "gpu-request-fractional", "deployment/llm/embeddings", Severity::kCritical, Layer::kSpec,
     "Invalid value: \"500m\": must be an integer", "nvidia.com/mig-1g.10gb", ""},
    {"request-limit-mismatch", "gpu-request-limit-mismatch", "deployment/llm/whisper", Severity::kCritical,
     Layer::kSpec, "must be equal to nvidia.com/gpu limit of 2", "set resources.limits nvidia.com/gpu", ""},
    {"gpu-not-advertised", "gpu-not-advertised", "node/gpu-l4-2", Severity::kCritical, Layer::kPlugin,
     "Error: error validating toolkit installation", "-c toolkit-validation", "device plugin pod gpu-operator/"},
    {"driver-version-mismatch", "driver-version-mismatch", "node/gpu-a100-1", Severity::kCritical, Layer::kDriver,
     "Failed to initialize NVML: Driver/library version mismatch", "kubectl drain gpu-a100-1 --ignore-daemonsets", ""},
    {"driver-kernel-crashloop", "driver-kernel-crashloop", "node/gpu-l4-1", Severity::kCritical, Layer::kDriver,
     "kernelVersion: 6.14.0-1011-aws", "driver.usePrecompiled=true", ""},
    {"driver-secure-boot", "driver-secure-boot", "node/gpu-a100-1", Severity::kCritical, Layer::kDriver,
     "modprobe: ERROR: could not insert 'nvidia': Key was rejected by service", "signed driver modules", ""},
    {"toolkit-init-error", "toolkit-init-error", "pod/default/cuda-vectoradd", Severity::kCritical, Layer::kRuntime,
     "nvidia-container-cli: initialization error: nvml error: driver not loaded",
     "kubectl logs -n gpu-operator nvidia-driver-daemonset-", "driver pod gpu-operator/nvidia-driver-daemonset-"},
    {"app-no-gpu-requested", "app-no-gpu-requested", "pod/team-a/pytorch-train", Severity::kWarning, Layer::kApp,
     "RuntimeError: Found no NVIDIA driver on your system", "\"nvidia.com/gpu\":1", ""},
    {"app-visible-devices", "app-visible-devices-by-hand", "pod/team-a/benchmark", Severity::kCritical, Layer::kApp,
     "NVIDIA_VISIBLE_DEVICES=all", "remove env NVIDIA_VISIBLE_DEVICES", ""},
    {"app-cuda-newer", "app-cuda-newer-than-driver", "pod/team-a/train-gpt", Severity::kCritical, Layer::kApp,
     "The NVIDIA driver on your system is too old (found version 12080)", "nvidia-smi", ""},
    {"mig-failed", "mig-config-failed", "node/gpu-a100-1", Severity::kCritical, Layer::kNode,
     "nvidia.com/mig.config=all-1g.5gb, nvidia.com/mig.config.state=failed",
     "nvidia.com/mig.config=<a profile valid for", ""},
    {"mig-pending", "mig-config-pending", "node/gpu-a100-1", Severity::kWarning, Layer::kNode,
     "nvidia.com/mig.config.state=pending", "mig\\.config\\.state", ""},
    {"admission-shared", "admission-shared-request", "pod/team-a/llama-70b", Severity::kCritical, Layer::kPlugin,
     "maximum request size for shared resources is 1", "\"nvidia.com/gpu\":1", ""},
    {"admission-kubelet-restart", "admission-plugin-not-registered", "pod/team-a/batch-infer-m4g5f",
     Severity::kCritical, Layer::kPlugin, "Starting kubelet.", "kubectl delete pod -n team-a batch-infer-m4g5f", ""},
    {"dra-unsatisfiable", "dra-claim-unsatisfiable", "pod/llm/llama-dra", Severity::kCritical, Layer::kScheduler,
     "2 cannot allocate all claims", "kubectl get resourceslices", "published memory capacities: 23034Mi x2"},
    {"gpu-node-cpu-full", "gpu-node-cpu-memory-full", "pod/team-a/notebook-bob", Severity::kCritical, Layer::kScheduler,
     "1 Insufficient cpu", "kubectl taint nodes gpu-l4-2 nvidia.com/gpu=present:NoSchedule",
     "gpu-l4-2: Insufficient cpu"},
    {"probe-killed-loading", "probe-killed-model-loading", "pod/llm/qwen-vllm-5d8f7c9b6-64bbf", Severity::kCritical,
     Layer::kApp, "Container vllm failed liveness probe, will be restarted", "add a startupProbe",
     "livenessProbe: initialDelaySeconds 0, periodSeconds 15, failureThreshold 3"},
    {"gpu-limit-missing", "gpu-limit-missing", "deployment/llm/reranker", Severity::kCritical, Layer::kSpec,
     "spec.containers[0].resources.limits: Required value: Limit must be set for non overcommitable resources",
     "move nvidia.com/gpu from resources.requests to resources.limits", ""},
};

INSTANTIATE_TEST_SUITE_P(Fixtures, DoctorCase, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case>& p) {
                           std::string n = p.param.fixture;
                           for (auto& ch : n) ch = ch == '-' ? '_' : ch;
                           return n;
                         });

TEST(Doctor, HealthyClusterHasNoFindings) {
  const Snapshot s = load("healthy");
  EXPECT_EQ(s.nodes.size(), 4u);
  EXPECT_EQ(s.collected_at(), "2026-10-20T10:00:00Z");
  const auto fs = run(s);
  EXPECT_TRUE(fs.empty()) << dump(fs);
  EXPECT_EQ(exit_code(fs), 0);
}

TEST(Doctor, EveryFixtureReportsOnlyItsOwnProblemAtTheCriticalLevel) {
  // A case's critical findings are its own rule (plus the plugin-layer consequence of a broken driver).
  for (const auto& c : kCases) {
    const auto fs = run(load(c.fixture));
    for (const auto& f : fs) {
      if (f.severity != Severity::kCritical) continue;
      const bool ok =
          f.rule == c.rule || (f.rule == "gpu-not-advertised" && std::string(c.rule).starts_with("driver-"));
      EXPECT_TRUE(ok) << c.fixture << ": unexpected " << f.rule << " " << f.object;
    }
  }
}

TEST(Doctor, ChecklistItemsFromTheSnapshot) {
  const auto fs = run(load("checklist-gaps"));
  for (const auto& [rule, object] : std::vector<std::pair<std::string, std::string>>{
           {"checklist-gpu-nodes-tainted", "cluster"},
           {"checklist-priority-classes", "cluster"},
           {"checklist-gpu-metrics-scraped", "cluster"},
           {"checklist-gpu-alerts", "cluster"},
           {"checklist-one-driver-owner", "node/gpu-l4-1"},
           {"checklist-cuda-validator", "node/gpu-a100-1"},
           {"checklist-gpu-quota", "namespace/team-b"},
           {"checklist-pdb-inference", "deployment/team-b/chat"},
           {"checklist-image-pinned", "deployment/team-b/chat"},
           {"checklist-startup-probe", "deployment/team-b/chat"},
           {"checklist-autoscale-queue-depth", "horizontalpodautoscaler/team-b/chat"},
       }) {
    EXPECT_NE(find(fs, rule, object), nullptr) << rule << " " << object << "\n" << dump(fs);
  }
  const Finding* alerts = find(fs, "checklist-gpu-alerts");
  ASSERT_NE(alerts, nullptr);
  EXPECT_EQ(alerts->summary, "no alert rule for GPU temperature, memory, XID errors, idle allocated GPUs");
  const Finding* owner = find(fs, "checklist-one-driver-owner");
  ASSERT_NE(owner, nullptr);
  EXPECT_TRUE(any_evidence(*owner, "cloud.google.com/gke-gpu-driver-version=latest"));
  // Untolerating workloads: the taint was removed here, so the item is checked in the taint fixture instead.
  Options no_checklist;
  no_checklist.checklist = false;
  EXPECT_TRUE(run(load("checklist-gaps"), no_checklist).empty());
}

TEST(Doctor, WorkloadsMustTolerateTheGpuTaint) {
  // The healthy cluster with a GPU Deployment lacking the toleration: checked from the template.
  const auto fs = run(load("checklist-gaps"));
  EXPECT_EQ(find(fs, "checklist-workloads-tolerate"), nullptr);  // GPU nodes untainted there: nothing to tolerate
  const auto taint = run(load("taint-not-tolerated"));
  const Finding* f = find(taint, "checklist-workloads-tolerate", "job/team-a/render");
  ASSERT_NE(f, nullptr) << dump(taint);
  EXPECT_NE(f->summary.find("nvidia.com/gpu=present:NoSchedule"), std::string::npos);
  EXPECT_TRUE(any_of(f->fix, "kubectl patch job -n team-a render --type merge"));
  EXPECT_EQ(find(taint, "checklist-workloads-tolerate", "pod/default/cuda-vectoradd"),
            nullptr);  // bare pods: not workloads
}

TEST(Doctor, Targets) {
  const Snapshot s = load("toolkit-init-error");
  Options pod;
  pod.target = {Target::Kind::kPod, "default", "cuda-vectoradd"};
  auto fs = run(s, pod);
  ASSERT_EQ(fs.size(), 1u) << dump(fs);
  EXPECT_EQ(fs[0].rule, "toolkit-init-error");

  Options node;
  node.target = {Target::Kind::kNode, "", "gpu-l4-1"};
  EXPECT_TRUE(run(s, node).empty());
  node.target.name = "gpu-l4-2";
  EXPECT_NE(find(run(s, node), "toolkit-init-error"), nullptr);

  Options ns;
  ns.target = {Target::Kind::kNamespace, "llm", ""};
  EXPECT_TRUE(run(s, ns).empty());

  Options missing;
  missing.target = {Target::Kind::kPod, "default", "nope"};
  auto r = diagnose(s, missing);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kNotFound);
}

TEST(Doctor, JsonAndExitCodes) {
  const auto fs = run(load("mig-pending"));
  EXPECT_EQ(exit_code(fs), 1);
  const auto j = to_json(fs);
  ASSERT_EQ(j["findings"].size(), 1u);
  EXPECT_EQ(j["findings"][0]["rule"], "mig-config-pending");
  EXPECT_EQ(j["findings"][0]["severity"], "warning");
  EXPECT_EQ(j["findings"][0]["layer"], "node");
  EXPECT_EQ(j["exitCode"], 1);
  EXPECT_EQ(exit_code(run(load("insufficient-gpu"))), 3);
}

// A finding a partial snapshot must yield: its rule and object, a piece of its evidence and of its fix.
struct Want {
  const char* rule;
  const char* object;
  const char* evidence;
  const char* fix;
};

// The finding `w` describes, with its evidence and fix checked; null (and a test failure) if absent.
const Finding* expect_finding(const std::vector<Finding>& fs, const Want& w) {
  const Finding* f = find(fs, w.rule, w.object);
  EXPECT_NE(f, nullptr) << w.rule << " " << w.object << "\n" << dump(fs);
  if (f == nullptr) return nullptr;
  EXPECT_TRUE(any_evidence(*f, w.evidence)) << dump({*f});
  EXPECT_TRUE(any_of(f->fix, w.fix)) << dump({*f});
  return f;
}

// `kubectl get events,rs -o json`: FailedCreate events diagnosed from the event and what of the owner
// chain is present (a ReplicaSet without its Deployment; neither; a Job or StatefulSet alone).
TEST(DoctorPartial, FailedCreateEventsWithoutTheirOwners) {
  const auto fs = run(load("partial-events-rs"));
  for (const Want& w : {
           Want{"gpu-request-limit-mismatch", "deployment/llm/whisper",
                "spec.containers[0].resources.requests: Invalid value: \"1\": must be equal to nvidia.com/gpu limit of 2",
                "set resources.limits nvidia.com/gpu"},
           Want{"gpu-request-fractional", "deployment/team-b/embeddings", "Invalid value: \"500m\": must be an integer",
                "nvidia.com/mig-1g.10gb"},
           Want{"limitrange-exceeded", "deployment/team-c/chat",
                "maximum nvidia.com/gpu usage per Container is 1, but limit is 2", "kubectl describe limitrange -n team-c"},
           Want{"quota-exhausted", "job/team-a/finetune-llama",
                "exceeded quota: gpu-quota, requested: requests.nvidia.com/gpu=2", "kubectl describe resourcequota"},
           Want{"gpu-limit-missing", "statefulset/team-d/llama", "Limit must be set for non overcommitable resources",
                "resources.limits"},
           Want{"gpu-request-limit-mismatch", "deployment/team-g/asr",
                "must be less than or equal to nvidia.com/gpu limit", "set resources.limits nvidia.com/gpu"},
       }) {
    const Finding* f = expect_finding(fs, w);
    if (f == nullptr) continue;
    EXPECT_EQ(f->severity, Severity::kCritical);
    EXPECT_EQ(f->layer, Layer::kSpec);
  }
  // The Deployment is named from the ReplicaSet's name only when neither is in the snapshot.
  EXPECT_TRUE(any_of(find(fs, "gpu-request-fractional")->details, "inferred from the ReplicaSet's name"));
  EXPECT_FALSE(any_of(find(fs, "gpu-request-limit-mismatch", "deployment/llm/whisper")->details, "inferred"));
  // A quota on CPU is not a GPU finding.
  for (const auto& f : fs) EXPECT_EQ(f.object.find("team-e"), std::string::npos) << f.rule << " " << f.object;
  EXPECT_NE(find(fs, "snapshot-no-nodes"), nullptr);
}

// `kubectl get events -o json` alone: what the kubelet did to pods that are not in the snapshot.
TEST(DoctorPartial, KubeletEventsWithoutTheirPods) {
  const auto fs = run(load("partial-events-pods"));
  for (const Want& w : {
           Want{"admission-device-error", "pod/team-a/batch-infer-7xk2q", "failed to get nvlink state: GPU is lost",
                "kubectl cordon gpu-a100-1"},
           Want{"admission-plugin-not-registered", "pod/team-b/render-0",
                "requested number of devices unavailable for nvidia.com/gpu. Requested: 1, Available: 0",
                "kubectl get node gpu-l4-2 -o jsonpath"},
           Want{"admission-out-of-resource", "pod/team-c/pinned",
                "Node didn't have enough resource: nvidia.com/gpu, requested: 1, used: 1, capacity: 1",
                "drop spec.nodeName"},
           Want{"admission-shared-request", "pod/team-f/llama-mps", "at most 1 nvidia.com/gpu can be requested",
                "\"nvidia.com/gpu\":1"},
           Want{"probe-killed-model-loading", "pod/llm/qwen-vllm-5d8f7c9b6-64bbf",
                "Liveness probe failed: Get \"http://192.168.3.17:8000/health\"", "add a startupProbe"},
           Want{"insufficient-gpu", "pod/team-i/train-bert", "2 Insufficient nvidia.com/gpu", "kgpu doctor --collect"},
       }) {
    expect_finding(fs, w);
  }
  // A liveness kill of something that is not a model server is not this finding.
  EXPECT_EQ(find(fs, "probe-killed-model-loading", "pod/team-h/web-1"), nullptr) << dump(fs);
  // A pod that waits for CPU is not a GPU finding.
  for (const auto& f : fs) EXPECT_EQ(f.object.find("team-j"), std::string::npos) << f.rule << " " << f.object;
  // Namespace and node targets select the events' pods.
  Options ns;
  ns.target = {Target::Kind::kNamespace, "team-c", ""};
  ns.checklist = false;
  const auto only = run(load("partial-events-pods"), ns);
  EXPECT_NE(find(only, "admission-out-of-resource", "pod/team-c/pinned"), nullptr) << dump(only);
  EXPECT_EQ(find(only, "admission-device-error"), nullptr) << dump(only);
}

// In a full snapshot, events of pods and ReplicaSets that are gone are history, not findings.
TEST(DoctorPartial, EventsOfDeletedObjectsInAFullSnapshotAreHistory) {
  auto s = Snapshot::load({kData + "healthy/snapshot.json", kData + "partial-events-pods/snapshot.json"});
  ASSERT_TRUE(s.has_value());
  const auto fs = run(*s);
  EXPECT_EQ(find(fs, "probe-killed-model-loading"), nullptr) << dump(fs);       // llm's pods were collected
  EXPECT_EQ(find(fs, "admission-device-error"), nullptr) << dump(fs);           // and team-a's
  EXPECT_NE(find(fs, "admission-out-of-resource", "pod/team-c/pinned"), nullptr)  // team-c has none
      << dump(fs);
}

TEST(DoctorCatalog, EveryFindingOfEveryFixtureIsACatalogRuleWithItsLayerAndSeverity) {
  size_t snapshots = 0;
  for (const auto& dir : std::filesystem::directory_iterator(kData)) {
    if (!dir.is_directory()) continue;
    std::vector<std::string> files;
    for (const auto& f : std::filesystem::directory_iterator(dir.path())) {
      if (f.path().extension() == ".json") files.push_back(f.path().string());
    }
    if (files.empty()) continue;
    auto s = Snapshot::load(files);
    if (!s) continue;
    ++snapshots;
    for (const auto& f : run(*s)) {
      const RuleInfo* r = find_rule(f.rule);
      ASSERT_NE(r, nullptr) << dir.path() << ": rule '" << f.rule << "' is not in the catalog";
      EXPECT_EQ(f.layer, r->layer) << f.rule;
      EXPECT_EQ(f.severity, r->severity) << f.rule;
    }
  }
  EXPECT_GT(snapshots, 40u);
}

// Findings are made from a RuleId only: no source file of the doctor sets a finding's rule, layer or
// severity itself, and every catalog rule is emitted somewhere (no dead entries).
TEST(DoctorCatalog, RulesAreEmittedFromTheCatalogOnly) {
  const std::filesystem::path src = std::filesystem::path(KGPU_SOURCE_DIR) / "src" / "doctor";
  const std::regex assign(R"(\.(rule|layer|severity)\s*=[^=])");
  std::string all;
  size_t files = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(src)) {
    if (!e.is_regular_file() || e.path().filename() == "catalog.cc") continue;
    std::ifstream in(e.path());
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
      EXPECT_FALSE(std::regex_search(line, assign)) << e.path().string() << ":" << n << ": " << line;
      all += line;
      all += '\n';
    }
    ++files;
  }
  EXPECT_GT(files, 10u);
  std::set<std::string> ids;
  for (const auto& r : rule_catalog()) {
    EXPECT_TRUE(ids.insert(r.id).second) << "duplicate id " << r.id;
    // The enumerator's name is the id in CamelCase: "gpu-request-fractional" is RuleId::kGpuRequestFractional.
    std::string name = "RuleId::k";
    bool up = true;
    for (const char* c = r.id; *c != '\0'; ++c) {
      if (*c == '-') {
        up = true;
        continue;
      }
      name += up ? static_cast<char>(std::toupper(static_cast<unsigned char>(*c))) : *c;
      up = false;
    }
    EXPECT_NE(all.find(name), std::string::npos) << r.id << " (" << name << ") is never emitted";
  }
}

TEST(DoctorCatalog, DocsListEveryRule) {
  std::ifstream in(std::string(KGPU_SOURCE_DIR) + "/docs/doctor.md");
  const std::string doc((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_FALSE(doc.empty());
  for (const auto& r : rule_catalog()) {
    EXPECT_NE(doc.find("`" + std::string(r.id) + "`"), std::string::npos) << r.id << " is not in docs/doctor.md";
  }
}

// One Severity for lint and doctor, and one exit status scale (common/severity.h).
static_assert(std::is_same_v<Severity, lint::Severity>);

TEST(Doctor, ExitCodesAreLintsToo) {
  const auto with = [](Severity s) {
    Finding f;
    f.severity = s;
    return std::vector<Finding>{f};
  };
  EXPECT_EQ(exit_code({}), exit_code_for(std::nullopt));
  for (Severity s : {Severity::kInfo, Severity::kWarning, Severity::kCritical}) {
    EXPECT_EQ(exit_code(with(s)), exit_code_for(s));
  }
  EXPECT_EQ(exit_code(with(Severity::kInfo)), 0);
  EXPECT_EQ(exit_code(with(Severity::kWarning)), 1);
  EXPECT_EQ(exit_code(with(Severity::kCritical)), 3);
  EXPECT_EQ(kExitInputError, 2);
}

TEST(Doctor, ParseTime) {
  EXPECT_EQ(parse_time("1970-01-02T00:00:00Z"), 86400);
  EXPECT_EQ(parse_time("1970-01-02T01:00:00.123+01:00"), 86400);
  EXPECT_FALSE(parse_time("yesterday").has_value());
}

// ---- the binary and the collector ----

struct Ran {
  int status = -1;
  std::string out;
};

Ran sh(const std::string& cmd) {
  Ran r;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

TEST(DoctorCli, ExitCodesAndOutputs) {
  const std::string kgpu = KGPU_BINARY;
  EXPECT_EQ(sh(kgpu + " doctor --snapshot " + kData + "healthy/snapshot.json").status, 0);
  EXPECT_EQ(sh(kgpu + " doctor --snapshot " + kData + "mig-pending/snapshot.json").status, 1);
  auto r = sh(kgpu + " doctor --output json --snapshot " + kData + "insufficient-gpu/snapshot.json");
  EXPECT_EQ(r.status, 3);
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["findings"][0]["rule"], "insufficient-gpu");
  r = sh(kgpu + " doctor --pod team-a/train-bert --snapshot " + kData + "insufficient-gpu/snapshot.json");
  EXPECT_NE(r.out.find("critical [scheduler] insufficient-gpu pod/team-a/train-bert"), std::string::npos) << r.out;
  EXPECT_EQ(sh(kgpu + " doctor --snapshot /nonexistent.json 2>/dev/null").status, 2);
  EXPECT_EQ(sh(kgpu + " doctor --pod a/b --node n --snapshot " + kData + "healthy/snapshot.json 2>/dev/null").status,
            2);
  EXPECT_EQ(sh(kgpu + " doctor --pod default/missing --snapshot " + kData + "healthy/snapshot.json 2>/dev/null").status,
            2);
  r = sh(kgpu + " doctor --list-rules");
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("dra-claim-unsatisfiable"), std::string::npos);
}

TEST(DoctorCli, PartialSnapshotOfEventsIsDiagnosed) {
  const std::string kgpu = KGPU_BINARY;
  auto r = sh(kgpu + " doctor --snapshot " + kData + "partial-events-rs/snapshot.json");
  EXPECT_EQ(r.status, 3) << r.out;
  EXPECT_NE(r.out.find("critical [spec] gpu-request-limit-mismatch deployment/llm/whisper"), std::string::npos) << r.out;
  r = sh(kgpu + " doctor --namespace team-c --snapshot " + kData + "partial-events-pods/snapshot.json");
  EXPECT_EQ(r.status, 3) << r.out;
  EXPECT_NE(r.out.find("admission-out-of-resource pod/team-c/pinned"), std::string::npos) << r.out;
}

TEST(DoctorCli, HostileSnapshotsFailFastWithALine) {
  const std::string kgpu = KGPU_BINARY;
  const std::string bomb = std::string(KGPU_SOURCE_DIR) + "/test/data/lint/input-alias-bomb.yaml";
  auto r = sh(kgpu + " doctor --snapshot " + bomb + " 2>&1");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("input-alias-bomb.yaml:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("YAML expands to more than"), std::string::npos) << r.out;
  r = sh(kgpu + " doctor --output json --snapshot " + kData + "invalid-quantity/snapshot.json");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("\"invalid-quantity\""), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("gpu-not-advertised"), std::string::npos) << r.out;
}

// ---- Regressions: hand-written snapshots for review findings ----

Options no_checklist() {
  Options o;
  o.checklist = false;
  return o;
}

TEST(DoctorRegression, ControlBytesAndInvalidUtf8InEvidence) {
  const Snapshot s = load("evidence-control-bytes");
  const auto fs = run(s, no_checklist());
  const std::string text = to_text(fs);
  EXPECT_NE(text.find("Installing Linux kernel headers...\\x1b[2J\\x07 "), std::string::npos) << text;
  EXPECT_EQ(text.find('\033'), std::string::npos);
  EXPECT_EQ(text.find('\a'), std::string::npos);
  // --output json replaces the invalid UTF-8 instead of throwing.
  auto r = sh(std::string(KGPU_BINARY) + " doctor --no-checklist --output json --snapshot " + kData +
              "evidence-control-bytes/snapshot.json");
  EXPECT_EQ(r.status, 3);
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out.substr(0, 400);
  EXPECT_NE(j.dump().find("\xef\xbf\xbd"), std::string::npos);  // U+FFFD
}

TEST(DoctorRegression, HostileQuantitiesSaturate) {
  {
    const Snapshot s = load("huge-allocatable");  // allocatable nvidia.com/gpu: 1e12
    EXPECT_EQ(s.cluster("nvidia.com/gpu").node(0).gpus(), sched::kMaxGpusPerNode);
    EXPECT_TRUE(run(s, no_checklist()).empty());
  }
  {
    const Snapshot s = load("gpu-request-overflow");  // a pod asking 4294967297 GPUs
    const auto* p = s.pod("default", "p");
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(sched::pod_from_k8s(*p->doc, p->v, "nvidia.com/gpu").num_gpu, std::numeric_limits<int>::max());
    EXPECT_NE(find(run(s, no_checklist()), "insufficient-gpu", "pod/default/p"), nullptr);
  }
  {
    const Snapshot s = load("huge-memory");  // 2 x 8Ei of memory, 2 x 9e28 CPUs
    const auto* p = s.pod("default", "p");
    ASSERT_NE(p, nullptr);
    const auto sp = sched::pod_from_k8s(*p->doc, p->v, "nvidia.com/gpu");
    EXPECT_GT(sp.memory_mib, int64_t{1} << 40);
    EXPECT_GT(sp.cpu_milli, 0);
    EXPECT_GE(s.cluster("nvidia.com/gpu").node(0).memory_free, 0);
    const auto fs = run(s, no_checklist());
    EXPECT_EQ(find(fs, "gpu-request-fractional"), nullptr) << dump(fs);
  }
}

TEST(DoctorRegression, InvalidQuantitiesAreInputErrorsNotDiagnoses) {
  // gpu-l4-2's allocatable nvidia.com/gpu is "NaN" and its capacity 1e999999999; the Pending pod
  // team-a/bad-limits asks for a 5,000-digit number of GPUs. The API server stores neither.
  const Snapshot s = load("invalid-quantity");
  ASSERT_EQ(s.invalid_fields.size(), 3u);
  const auto fs = run(s, no_checklist());
  EXPECT_EQ(find(fs, "gpu-not-advertised"), nullptr) << dump(fs);
  EXPECT_EQ(find(fs, "insufficient-gpu"), nullptr) << dump(fs);
  for (const auto& f : fs) EXPECT_NE(f.severity, Severity::kCritical) << dump(fs);
  const Finding* node = find(fs, "invalid-quantity", "node/gpu-l4-2");
  ASSERT_NE(node, nullptr) << dump(fs);
  EXPECT_EQ(node->layer, Layer::kSpec);
  std::string all;
  for (const auto& f : fs) {
    if (f.rule == "invalid-quantity") all += f.summary + "\n";
  }
  EXPECT_NE(all.find(".status.allocatable.nvidia.com/gpu: invalid quantity 'NaN'"), std::string::npos) << all;
  EXPECT_NE(all.find(".status.capacity.nvidia.com/gpu: quantity '1e999999999' is out of range"), std::string::npos)
      << all;
  const Finding* pod = find(fs, "invalid-quantity", "pod/team-a/bad-limits");
  ASSERT_NE(pod, nullptr) << dump(fs);
  EXPECT_NE(pod->summary.find("limits.nvidia.com/gpu: quantity '11111111111111111111111111111111... (5000 characters)'"),
            std::string::npos)
      << pod->summary;
  EXPECT_TRUE(any_evidence(*pod, "invalid-quantity/snapshot.json:")) << dump(fs);
  // A target elsewhere does not report them.
  Options other = no_checklist();
  other.target = {Target::Kind::kNode, "", "gpu-l4-1"};
  EXPECT_EQ(find(run(s, other), "invalid-quantity"), nullptr);
}

TEST(DoctorRegression, ScaleOutIsNotARollingUpdate) {
  const auto fs = run(load("scale-out"), no_checklist());
  EXPECT_EQ(find(fs, "rolling-update-second-gpu"), nullptr) << dump(fs);
  EXPECT_NE(find(fs, "insufficient-gpu", "pod/llm/web-abc-3"), nullptr) << dump(fs);
  // A real rollout still is.
  EXPECT_NE(find(run(load("rolling-update")), "rolling-update-second-gpu"), nullptr);
}

TEST(DoctorRegression, RecoveredToolkitErrorIsHistory) {
  const auto fs = run(load("toolkit-recovered"), no_checklist());
  EXPECT_EQ(find(fs, "toolkit-init-error"), nullptr) << dump(fs);
  EXPECT_TRUE(fs.empty()) << dump(fs);
}

TEST(DoctorRegression, CordonedAndNotReadyNodes) {
  for (const char* fixture : {"node-cordoned", "node-cordoned-no-taint"}) {
    const Snapshot s = load(fixture);
    const auto fs = run(s, no_checklist());
    const Finding* f = find(fs, "gpu-node-unavailable", "pod/default/p");
    ASSERT_NE(f, nullptr) << fixture << ":\n" << dump(fs);
    EXPECT_EQ(f->layer, Layer::kNode);
    EXPECT_TRUE(any_of(f->details, "node(s) were unschedulable")) << dump(fs);
    EXPECT_TRUE(any_of(f->fix, "kubectl uncordon n1")) << dump(fs);
    EXPECT_FALSE(any_of(f->fix, "tolerations")) << dump(fs);
    EXPECT_EQ(fs.size(), 1u) << dump(fs);
  }
  const auto fs = run(load("node-not-ready"), no_checklist());
  const Finding* f = find(fs, "gpu-node-unavailable", "pod/default/p");
  ASSERT_NE(f, nullptr) << dump(fs);
  EXPECT_TRUE(any_of(f->details, "node n1 is NotReady")) << dump(fs);
  EXPECT_TRUE(any_evidence(*f, "node.kubernetes.io/not-ready")) << dump(fs);
  EXPECT_FALSE(any_of(f->fix, "tolerations")) << dump(fs);
  EXPECT_EQ(find(fs, "gpu-taint-not-tolerated"), nullptr);
}

TEST(DoctorRegression, DuplicateObjectsAcrossFilesKeepTheLast) {
  auto s = Snapshot::load({kData + "multi-file"});
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->nodes.size(), 1u);
  EXPECT_EQ(s->cluster("nvidia.com/gpu").nodes().size(), 1u);
  const auto fs = run(*s, no_checklist());
  const Finding* f = find(fs, "insufficient-gpu", "pod/default/p");
  ASSERT_NE(f, nullptr) << dump(fs);
  EXPECT_TRUE(any_of(f->details, "0/1 nodes are available")) << dump(fs);
}

TEST(DoctorRegression, QuotaEventsResolveTheirOwnerNotANamePrefix) {
  // Deployments vllm (no GPU) and vllm-small; the event is on ReplicaSet vllm-small-7c9d8.
  const auto fs = run(load("quota-name-prefix"), no_checklist());
  EXPECT_NE(find(fs, "quota-exhausted", "deployment/llm/vllm-small"), nullptr) << dump(fs);
  EXPECT_EQ(find(fs, "quota-exhausted", "deployment/llm/vllm"), nullptr) << dump(fs);
}

TEST(DoctorRegression, ZeroGpuRequestIsNoGpuPod) {
  const auto fs = run(load("gpu-request-zero"), no_checklist());
  EXPECT_TRUE(fs.empty()) << dump(fs);
  // A GPU pod blocked on CPU: no `kubectl taint` advice for a node that has the GPU taint already.
  const auto tainted = run(load("gpu-node-cpu-full-tainted"), no_checklist());
  const Finding* f = find(tainted, "gpu-node-cpu-memory-full", "pod/default/cpu-heavy");
  ASSERT_NE(f, nullptr) << dump(tainted);
  EXPECT_FALSE(any_of(f->fix, "kubectl taint")) << dump(tainted);
  EXPECT_TRUE(any_of(find(run(load("gpu-node-cpu-full")), "gpu-node-cpu-memory-full")->fix, "kubectl taint nodes"));
}

TEST(DoctorRegression, SnapshotWithoutNodes) {
  const auto fs = run(load("no-nodes"), no_checklist());
  ASSERT_EQ(fs.size(), 1u) << dump(fs);
  EXPECT_EQ(fs[0].rule, "snapshot-no-nodes");
  EXPECT_NE(fs[0].summary.find("kgpu doctor --collect"), std::string::npos);
}

TEST(DoctorRegression, PinnedPodRejectedByKubeletAdmission) {
  const auto fs = run(load("admission-out-of-gpu"), no_checklist());
  const Finding* f = find(fs, "admission-out-of-resource", "pod/default/pinned");
  ASSERT_NE(f, nullptr) << dump(fs);
  EXPECT_EQ(f->severity, Severity::kCritical);
  EXPECT_TRUE(any_evidence(*f, "Node didn't have enough resource: nvidia.com/gpu")) << dump(fs);
  EXPECT_TRUE(any_of(f->details, "default/hold holds 1 nvidia.com/gpu on n1")) << dump(fs);
  EXPECT_TRUE(any_of(f->fix, "spec.nodeName")) << dump(fs);
}

TEST(DoctorRegression, RenamedSharedResource) {
  const auto fs = run(load("resource-name-shared"), no_checklist());
  const Finding* f = find(fs, "gpu-resource-name-mismatch", "pod/default/p");
  ASSERT_NE(f, nullptr) << dump(fs);
  EXPECT_NE(f->summary.find("nvidia.com/gpu.shared"), std::string::npos);
  EXPECT_TRUE(any_of(f->details, "renameByDefault")) << dump(fs);
  EXPECT_EQ(find(fs, "gpu-not-advertised"), nullptr) << dump(fs);
}

TEST(DoctorRegression, DraOnlyNodesAndFirstAvailable) {
  EXPECT_TRUE(run(load("dra-only-node"), no_checklist()).empty());
  // firstAvailable: the alternatives are evaluated, not a DeviceClass named "".
  auto fs = run(load("dra-first-available"), no_checklist());
  EXPECT_TRUE(fs.empty()) << dump(fs);
  fs = run(load("dra-first-available-taken"), no_checklist());
  const Finding* f = find(fs, "dra-claim-unsatisfiable", "pod/default/dra2");
  ASSERT_NE(f, nullptr) << dump(fs);
  EXPECT_EQ(f->summary.find("DeviceClass ,"), std::string::npos) << dump(fs);
  EXPECT_TRUE(any_of(f->details, "none of the firstAvailable alternatives (gpu/big, gpu/small)")) << dump(fs);
}

}  // namespace
}  // namespace kgpu::doctor

namespace kgpu::doctor {
namespace {

// The dra-unsatisfiable fixture with its claim's selector replaced by `expression`.
std::vector<Finding> dra_with_selector(const std::string& expression) {
  std::ifstream in(kData + "dra-unsatisfiable/snapshot.json");
  nlohmann::json j = nlohmann::json::parse(in);
  bool replaced = false;
  const std::function<void(nlohmann::json&)> walk = [&](nlohmann::json& x) {
    if (x.is_object()) {
      if (auto c = x.find("cel"); c != x.end() && c->is_object() && c->contains("expression") &&
                                  (*c)["expression"].get<std::string>().find("40Gi") != std::string::npos) {
        (*c)["expression"] = expression;
        replaced = true;
      }
      for (auto& [k, v] : x.items()) walk(v);
    } else if (x.is_array()) {
      for (auto& v : x) walk(v);
    }
  };
  walk(j);
  EXPECT_TRUE(replaced);
  const auto path = std::filesystem::temp_directory_path() / ("kgpu-dra-" + std::to_string(::getpid()) + ".json");
  std::ofstream(path) << j.dump();
  auto s = Snapshot::load({path.string()});
  std::filesystem::remove(path);
  EXPECT_TRUE(s.has_value());
  return run(*s);
}

TEST(DoctorDra, SelectorsAreEvaluatedAsCel) {
  // Satisfiable with a selector the old subset could not read: no finding.
  auto fs = dra_with_selector(
      R"(cel.bind(m, device.capacity["gpu.nvidia.com"].memory, m.compareTo(quantity("1Gi")) >= 0 && m.isLessThan(quantity("1Ti"))))");
  EXPECT_EQ(find(fs, "dra-claim-unsatisfiable"), nullptr) << dump(fs);
  // Unsatisfiable through a function the old subset took as "true".
  fs = dra_with_selector(R"(device.attributes["gpu.nvidia.com"].productName.lowerAscii().matches("b200"))");
  const Finding* f = find(fs, "dra-claim-unsatisfiable");
  ASSERT_NE(f, nullptr) << dump(fs);
  EXPECT_NE(f->summary.find("no device satisfies claim request gpu"), std::string::npos) << f->summary;
  // A type error is what the API server would refuse.
  fs = dra_with_selector(R"(device.driver > 3)");
  f = find(fs, "dra-claim-unsatisfiable");
  ASSERT_NE(f, nullptr) << dump(fs);
  EXPECT_NE(f->summary.find("does not compile"), std::string::npos) << f->summary;
  EXPECT_NE(f->summary.find("'_>_' applied to '(string, int)'"), std::string::npos) << f->summary;
  // A lookup of an attribute the device lacks aborts the allocation in Kubernetes.
  fs = dra_with_selector(R"(device.attributes["gpu.nvidia.com"].profile == "1g.10gb")");
  f = find(fs, "dra-claim-unsatisfiable");
  ASSERT_NE(f, nullptr) << dump(fs);
  EXPECT_NE(f->summary.find("no such key: profile"), std::string::npos) << f->summary;
  EXPECT_NE(f->summary.find("aborts the allocation"), std::string::npos) << f->summary;
  EXPECT_TRUE(any_of(f->fix, "has(device.attributes"));
}

}  // namespace
}  // namespace kgpu::doctor
