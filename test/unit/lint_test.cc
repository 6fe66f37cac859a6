// `kgpu lint`: the rule table, one broken manifest per rule (test/data/lint), the guide's own
// manifests (test/data/guide) with every expected finding justified, the writers, and the CLI
// (exit codes, stdin, SARIF, disabling).
#include "lint/lint.h"

#include "doctor/diagnose.h"
#include "lint/rules.h"
#include "../integration/paths.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace kgpu::lint {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

using Hit = std::pair<std::string, int>;  // rule id, line

std::string source_path(const std::string& rel) { return std::string(KGPU_SOURCE_DIR) + "/" + rel; }

std::vector<Hit> hits(const std::vector<Finding>& findings) {
  std::vector<Hit> out;
  for (const Finding& f : findings) out.emplace_back(std::string(f.rule->id), f.line);
  return out;
}

Report lint_file(const std::string& rel, const Options& options = {}) {
  Report r = lint_paths({source_path(rel)}, options);
  EXPECT_THAT(r.errors, IsEmpty()) << rel;
  return r;
}

std::vector<Finding> lint_yaml(const std::string& yaml, const Options& options = {}) {
  k8s::LoadResult loaded = k8s::load_text(yaml, "test.yaml");
  EXPECT_THAT(loaded.errors, IsEmpty());
  return lint(loaded.documents, options);
}

std::vector<Hit> hits_of(const std::string& yaml, const Options& options = {}) {
  return hits(lint_yaml(yaml, options));
}

// -----------------------------------------------------------------------------------------------
// The rule table

TEST(Rules, IdsAreSequentialAndNamesUnique) {
  std::set<std::string_view> names;
  int n = 0;
  for (const RuleInfo& r : rules()) {
    EXPECT_EQ(r.id, fmt::format("GPU{:03}", ++n));
    EXPECT_TRUE(names.insert(r.name).second) << r.name;
    EXPECT_FALSE(r.summary.empty());
    EXPECT_FALSE(r.fix.empty());
    EXPECT_EQ(find_rule(r.id), &r);
    EXPECT_EQ(find_rule(r.name), &r);
  }
  EXPECT_EQ(n, 18);
  EXPECT_EQ(find_rule("gpu004"), find_rule("single-gpu-rolling-update"));
  EXPECT_EQ(find_rule("GPU999"), nullptr);
}

TEST(Rules, MakeOptionsResolvesNamesAndRejectsUnknownRules) {
  auto o = make_options({"GPU004", "sticky-xid-alert,gpu014"});
  ASSERT_TRUE(o.has_value());
  EXPECT_THAT(o->disabled, ElementsAre("GPU004", "GPU018", "GPU014"));
  auto bad = make_options({"GPU004,no-such-rule"});
  ASSERT_FALSE(bad.has_value());
  EXPECT_THAT(bad.error().message, HasSubstr("no-such-rule"));
}

// -----------------------------------------------------------------------------------------------
// One broken manifest per rule: exactly that rule, at the offending line.

struct Variant {
  const char* file;
  const char* rule;
  int line;
};

constexpr std::array kVariants = {
    Variant{"gpu001-request-not-limit.yaml", "GPU001", 16},  // requests.nvidia.com/gpu
    Variant{"gpu002-fractional.yaml", "GPU002", 16},         // limits.nvidia.com/gpu: 0.5
    Variant{"gpu003-resource-name.yaml", "GPU003", 16},      // nvidia.com/gpus
    Variant{"gpu004-rolling-update.yaml", "GPU004", 8},      // replicas: 1 (no strategy)
    Variant{"gpu005-no-toleration.yaml", "GPU005", 6},       // the pod's spec:
    Variant{"gpu006-privileged.yaml", "GPU006", 15},         // privileged: true
    Variant{"gpu007-host-device.yaml", "GPU007", 10},        // hostPath.path: /dev/nvidia0
    Variant{"gpu008-visible-devices.yaml", "GPU008", 12},    // value: all
    Variant{"gpu009-job-deadline.yaml", "GPU009", 6},        // the Job's spec:
    Variant{"gpu010-startup-probe.yaml", "GPU010", 50},      // startupProbe: (30 s)
    Variant{"gpu011-shm.yaml", "GPU011", 28},                // the vllm container
    Variant{"gpu012-model-cache.yaml", "GPU012", 31},        // the vllm container
    Variant{"gpu013-token-literal.yaml", "GPU013", 38},      // value: hf_...
    Variant{"gpu014-image-latest.yaml", "GPU014", 13},       // image: ...:latest
    Variant{"gpu015-hpa-cpu.yaml", "GPU015", 70},            // metrics[0]: Resource cpu
    Variant{"gpu016-time-slicing.yaml", "GPU016", 11},       // timeSlicing: inside the ConfigMap value
    Variant{"gpu017-dra-beta.yaml", "GPU017", 2},            // apiVersion: resource.k8s.io/v1beta2
    Variant{"gpu018-xid-alert.yaml", "GPU018", 11},          // expr: DCGM_FI_DEV_XID_ERRORS{...} > 0
};

TEST(Variants, EachBrokenManifestTriggersExactlyItsRule) {
  std::set<std::string> covered;
  for (const Variant& v : kVariants) {
    const Report r = lint_file(std::string("test/data/lint/") + v.file);
    EXPECT_THAT(hits(r.findings), ElementsAre(Hit{v.rule, v.line})) << v.file;
    // The exit status of doctor too: 3 for an error finding, 1 for a warning.
    EXPECT_EQ(r.exit_code(), find_rule(v.rule)->severity == Severity::kError ? 3 : 1) << v.file;
    covered.insert(v.rule);
  }
  EXPECT_EQ(covered.size(), rules().size()) << "a rule without a broken variant";
}

TEST(Variants, EachBrokenManifestIsCleanWithItsRuleDisabled) {
  for (const Variant& v : kVariants) {
    auto o = make_options({v.rule});
    ASSERT_TRUE(o.has_value());
    const Report r = lint_file(std::string("test/data/lint/") + v.file, *o);
    EXPECT_THAT(r.findings, IsEmpty()) << v.file;
    EXPECT_EQ(r.exit_code(), 0);
  }
}

TEST(Variants, FixedManifestsAreClean) {
  const Report r = lint_file("test/data/lint/fixed.yaml");
  for (const Finding& f : r.findings) ADD_FAILURE() << f.to_string();
  EXPECT_EQ(r.exit_code(), 0);
}

// -----------------------------------------------------------------------------------------------
// The guide's manifests: exactly the findings that are really there.

struct GuideExpectation {
  const char* file;
  std::vector<Hit> findings;
};

const std::vector<GuideExpectation>& guide_expectations() {
  static const std::vector<GuideExpectation> table = {
      // The smoke-test pod requests a GPU but has no toleration, while the guide tells users to taint
      // every GPU node nvidia.com/gpu=present:NoSchedule ("Taint your GPU nodes", and the checklist's
      // "GPU workloads have matching tolerations"): after following the guide it stays Pending.
      {"cuda-vectoradd.yaml", {{"GPU005", 6}}},
      // The DRA pod gets its GPU through a claim; it still runs on a tainted GPU node and has no
      // toleration. The ResourceClaimTemplate uses resource.k8s.io/v1: no GPU017.
      {"dra-gpu.yaml", {{"GPU005", 19}}},
      // GPUXidError: DCGM_FI_DEV_XID_ERRORS is a gauge holding the last XID seen, so "> 0" stays true
      // after the first XID and the alert never resolves. The other three rules are fine.
      {"gpu-alerts.yaml", {{"GPU018", 26}}},
      // Tolerates the taint, whole GPU in limits, pinned image: clean.
      {"gpu-pod.yaml", {}},
      // requests.nvidia.com/gpu is the right quota key: clean.
      {"gpu-quota.yaml", {}},
      // Same as cuda-vectoradd: a MIG slice (name spelled right) without the GPU taint's toleration.
      {"mig-pod.yaml", {{"GPU005", 6}}},
      // Sets failRequestsGreaterThanOne: true: clean.
      {"time-slicing-config.yaml", {}},
      // Namespace, Secret (a placeholder in a Secret is where tokens belong) and PVC: clean.
      {"vllm-base.yaml", {}},
      // The lab's Deployment follows every rule: Recreate with one replica, toleration, PVC at the HF
      // cache, memory /dev/shm, token from the Secret, pinned tag, 10 x 60 = 600 s startup budget.
      {"vllm-deploy.yaml", {}},
  };
  return table;
}

TEST(Guide, EveryManifestGivesExactlyTheDocumentedFindings) {
  std::set<std::string> listed;
  for (const GuideExpectation& g : guide_expectations()) {
    const Report r = lint_file(std::string("test/data/guide/") + g.file);
    EXPECT_THAT(hits(r.findings), ElementsAreArray(g.findings)) << g.file << "\n" << to_text(r);
    listed.insert(g.file);
  }
  for (const auto& entry : std::filesystem::directory_iterator(source_path("test/data/guide"))) {
    EXPECT_TRUE(listed.contains(entry.path().filename().string())) << "no expectation for " << entry.path();
  }
}

TEST(Guide, WholeDirectoryInOneRun) {
  const Report r = lint_file("test/data/guide");
  EXPECT_EQ(r.findings.size(), 4u);
  EXPECT_EQ(r.exit_code(), 1);
  const Finding& f = r.findings.front();
  EXPECT_THAT(f.file, HasSubstr("cuda-vectoradd.yaml"));
  EXPECT_EQ(f.object, "Pod cuda-vectoradd");
  EXPECT_THAT(f.fix, HasSubstr("nvidia.com/gpu"));
}

// -----------------------------------------------------------------------------------------------
// Rules in detail

std::string gpu_pod(const std::string& resources, const std::string& extra = "") {
  return "apiVersion: v1\n"
         "kind: Pod\n"
         "metadata:\n"
         "  name: p\n" +
         extra +
         "spec:\n"
         "  tolerations: [{key: nvidia.com/gpu, operator: Exists}]\n"
         "  containers:\n"
         "    - name: c\n"
         "      image: nvcr.io/nvidia/cuda:12.5.0-base-ubuntu22.04\n"
         "      resources:\n" +
         resources;
}

TEST(Resources, RequestDifferentFromLimit) {
  const auto f = lint_yaml(gpu_pod("        limits: {nvidia.com/gpu: 2}\n        requests: {nvidia.com/gpu: 1}\n"));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].rule->id, "GPU001");
  EXPECT_THAT(f[0].message, HasSubstr("requests nvidia.com/gpu: 1 but its limit is 2"));
  EXPECT_THAT(hits_of(gpu_pod("        limits: {nvidia.com/gpu: 2}\n        requests: {nvidia.com/gpu: \"2\"}\n")),
              IsEmpty());
}

TEST(Resources, FractionsInEveryFormAndOnMigSlices) {
  for (const char* q : {"0.5", "500m", "1.5", "\"0.5\""}) {
    const auto f = lint_yaml(gpu_pod(std::string("        limits:\n          nvidia.com/mig-1g.10gb: ") + q + "\n"));
    ASSERT_EQ(f.size(), 1u) << q;
    EXPECT_EQ(f[0].rule->id, "GPU002");
    EXPECT_EQ(f[0].line, 12);
    EXPECT_THAT(f[0].message, HasSubstr(std::string("nvidia.com/mig-1g.10gb: ") + (q[0] == '"' ? "0.5" : q)));
  }
  EXPECT_THAT(hits_of(gpu_pod("        limits: {nvidia.com/gpu: 2e0}\n")), IsEmpty());
}

TEST(Resources, MisspelledNamesSuggestTheIntendedOne) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"nvidia.com/gpus", "nvidia.com/gpu"},
      {"nvidia/gpu", "nvidia.com/gpu"},
      {"nvidia.com/GPU", "nvidia.com/gpu"},
      {"NVIDIA.com/gpu", "nvidia.com/gpu"},
      {"nvida.com/gpu", "nvidia.com/gpu"},
      {"gpu", "nvidia.com/gpu"},
      {"nvidia.com/mig-1g10gb", "nvidia.com/mig-1g.10gb"},
      {"nvidia.com/mig-1g.10GB", "nvidia.com/mig-1g.10gb"},
      {"nvidia.com/mig1g.10gb", "nvidia.com/mig-1g.10gb"},
      {"nvidia.com/mig-1g.10gb+me", "nvidia.com/mig-1g.10gb.me"},
      {"nvidia.com/gpu-shared", "nvidia.com/gpu.shared"},
      {"nvidia.com/gpu_shared", "nvidia.com/gpu.shared"},
  };
  for (const auto& [name, want] : cases) {
    const auto f = lint_yaml(gpu_pod("        limits:\n          \"" + name + "\": 1\n"));
    ASSERT_EQ(f.size(), 1u) << name;
    EXPECT_EQ(f[0].rule->id, "GPU003") << name;
    EXPECT_EQ(f[0].fix, "Did you mean '" + want + "'?") << name;
  }
  for (const char* ok : {"nvidia.com/gpu", "nvidia.com/gpu.shared", "nvidia.com/mig-3g.40gb",
                         "nvidia.com/mig-1g.10gb.me", "nvidia.com/mig-2g.20gb.shared", "nvidia.com/mig-1c.3g.40gb",
                         "amd.com/gpu", "gpu.intel.com/i915", "nvidia.com/TU104GL_Tesla_T4", "cpu", "memory"}) {
    EXPECT_THAT(hits_of(gpu_pod(std::string("        limits:\n          \"") + ok + "\": 1\n")), IsEmpty()) << ok;
  }
}

TEST(Resources, QuotaKeysAreChecked) {
  const auto f = lint_yaml(
      "apiVersion: v1\nkind: ResourceQuota\nmetadata: {name: q}\nspec:\n  hard:\n    requests.nvidia.com/gpus: "
      "\"4\"\n");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].line, 6);
  EXPECT_EQ(f[0].fix, "Did you mean 'requests.nvidia.com/gpu'?");
}

std::string deployment(const std::string& spec_extra, const std::string& resources = "nvidia.com/gpu: 1") {
  return "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n" + spec_extra +
         "  template:\n"
         "    spec:\n"
         "      tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]\n"
         "      containers:\n"
         "        - name: c\n"
         "          image: nvcr.io/nvidia/cuda:12.5.0-base-ubuntu22.04\n"
         "          resources: {limits: {" +
         resources + "}}\n";
}

TEST(Deployments, SingleReplicaRollingUpdate) {
  EXPECT_THAT(hits_of(deployment("")), ElementsAre(Hit{"GPU004", 4}));  // no replicas, no strategy: spec:
  EXPECT_THAT(hits_of(deployment("  replicas: 1\n  strategy:\n    type: RollingUpdate\n")),
              ElementsAre(Hit{"GPU004", 7}));
  EXPECT_THAT(hits_of(deployment("  replicas: 1\n  strategy:\n    type: Recreate\n")), IsEmpty());
  EXPECT_THAT(hits_of(deployment("  strategy:\n    rollingUpdate: {maxSurge: 0}\n")), IsEmpty());
  EXPECT_THAT(hits_of(deployment("  strategy:\n    rollingUpdate: {maxSurge: \"0%\"}\n")), IsEmpty());
  EXPECT_THAT(hits_of(deployment("  replicas: 3\n")), IsEmpty());
  EXPECT_THAT(hits_of(deployment("  replicas: 1\n", "cpu: 1")), IsEmpty());
}

TEST(Tolerations, OnlyTolerationsOfTheGpuTaintCount) {
  const auto with = [](const std::string& tol) {
    return "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  tolerations: " + tol +
           "\n  containers:\n    - name: c\n      image: a:1\n      resources: {limits: {nvidia.com/gpu: 1}}\n";
  };
  EXPECT_THAT(hits_of(with("[{operator: Exists}]")), IsEmpty());
  EXPECT_THAT(hits_of(with("[{key: nvidia.com/gpu, operator: Equal, value: present}]")), IsEmpty());
  EXPECT_THAT(hits_of(with("[{key: nvidia.com/gpu, operator: Equal, value: \"true\"}]")),
              ElementsAre(Hit{"GPU005", 4}));
  EXPECT_THAT(hits_of(with("[{key: nvidia.com/gpu, operator: Exists, effect: NoExecute}]")),
              ElementsAre(Hit{"GPU005", 4}));
  EXPECT_THAT(hits_of(with("[{key: dedicated, operator: Exists}]")), ElementsAre(Hit{"GPU005", 4}));
}

TEST(Security, PrivilegedOnlyMattersForGpuPodsDevicesAndVisibleDevicesAlways) {
  // A privileged pod that does not touch GPUs is outside this linter's scope.
  EXPECT_THAT(hits_of("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n    - name: c\n"
                      "      image: a:1\n      securityContext: {privileged: true}\n"),
              IsEmpty());
  // privileged + NVIDIA_VISIBLE_DEVICES: the classic "fix" for GPU access, two findings.
  EXPECT_THAT(hits_of("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n    - name: c\n"
                      "      image: a:1\n      securityContext: {privileged: true}\n"
                      "      env:\n        - name: NVIDIA_VISIBLE_DEVICES\n          value: \"0,1\"\n"),
              ElementsAre(Hit{"GPU006", 8}, Hit{"GPU008", 11}));
  // Hiding GPUs (void/none) or taking the value from elsewhere is not hand-assigning them.
  for (const char* env : {"value: void", "value: none", "valueFrom: {fieldRef: {fieldPath: metadata.name}}"}) {
    EXPECT_THAT(hits_of(std::string("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n"
                                    "    - name: c\n      image: a:1\n      env:\n"
                                    "        - name: NVIDIA_VISIBLE_DEVICES\n          ") +
                        env + "\n"),
                IsEmpty())
        << env;
  }
  EXPECT_THAT(hits_of("apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: d}\nspec:\n  template:\n    spec:\n"
                      "      volumes:\n        - name: ctl\n          hostPath: {path: /dev/nvidiactl}\n"
                      "      containers: [{name: c, image: 'a:1'}]\n"),
              ElementsAre(Hit{"GPU007", 9}));
}

TEST(Security, NodeGpuAgentsMaySeeEveryGpu) {
  // Device plugins and exporters (NVIDIA's and kgpu's) set NVIDIA_VISIBLE_DEVICES=all: they mount
  // the kubelet's device-plugin or pod-resources directory, which a workload never does.
  const auto agent = [](const std::string& path) {
    return "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: d}\nspec:\n  template:\n    spec:\n"
           "      volumes:\n        - name: k\n          hostPath: {path: " +
           path +
           "}\n"
           "      containers:\n        - name: c\n          image: a:1\n          env:\n"
           "            - {name: NVIDIA_VISIBLE_DEVICES, value: all}\n";
  };
  EXPECT_THAT(hits_of(agent("/var/lib/kubelet/device-plugins")), IsEmpty());
  EXPECT_THAT(hits_of(agent("/var/lib/kubelet/pod-resources/")), IsEmpty());
  EXPECT_THAT(hits_of(agent("/var/lib/kubelet/pods")), ElementsAre(Hit{"GPU008", 14}));
  EXPECT_THAT(hits_of(agent("/var/lib/kubelet/device-plugins-not")), ElementsAre(Hit{"GPU008", 14}));
}

TEST(Jobs, DeadlineOrTtlOnJobsAndCronJobs) {
  const std::string job =
      "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec:\n  EXTRA\n  template:\n    spec:\n"
      "      tolerations: [{operator: Exists}]\n      containers: [{name: c, image: 'a:1', resources: {limits: "
      "{nvidia.com/gpu: 1}}}]\n";
  const auto with = [&](const std::string& extra) {
    std::string s = job;
    s.replace(s.find("EXTRA"), 5, extra);
    return s;
  };
  EXPECT_THAT(hits_of(with("parallelism: 1")), ElementsAre(Hit{"GPU009", 4}));
  EXPECT_THAT(hits_of(with("activeDeadlineSeconds: 600")), IsEmpty());
  EXPECT_THAT(hits_of(with("ttlSecondsAfterFinished: 600")), IsEmpty());
  EXPECT_THAT(hits_of("apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: c}\nspec:\n  schedule: '@daily'\n"
                      "  jobTemplate:\n    spec:\n      template:\n        spec:\n"
                      "          tolerations: [{operator: Exists}]\n"
                      "          containers: [{name: c, image: 'a:1', resources: {limits: {nvidia.com/gpu: 1}}}]\n"),
              ElementsAre(Hit{"GPU009", 7}));
}

std::string server(const std::string& container_extra, const std::string& volumes = "",
                   const std::string& image = "vllm/vllm-openai:v0.32.0") {
  return "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: s, namespace: llm}\nspec:\n"
         "  template:\n"
         "    spec:\n"
         "      tolerations: [{operator: Exists}]\n"
         "      volumes:\n"
         "        - {name: shm, emptyDir: {medium: Memory}}\n" +
         volumes +
         "      containers:\n"
         "        - name: server\n"
         "          image: " +
         image +
         "\n"
         "          resources: {limits: {nvidia.com/gpu: 1}}\n"
         "          startupProbe: {httpGet: {path: /health, port: 8000}, failureThreshold: 30}\n" +
         container_extra;
}

TEST(Inference, StartupBudgetAndDefaults) {
  const std::string mounts =
      "          volumeMounts: [{name: shm, mountPath: /dev/shm}, {name: cache, mountPath: "
      "/root/.cache/huggingface}]\n";
  const std::string pvc = "        - {name: cache, persistentVolumeClaim: {claimName: c}}\n";
  EXPECT_THAT(hits_of(server(mounts, pvc)), IsEmpty());  // 10 (default period) x 30 = 300 s: just enough
  std::string s = server(mounts, pvc);
  s.replace(s.find("failureThreshold: 30"), 20, "failureThreshold: 29");
  const auto f = lint_yaml(s);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].rule->id, "GPU010");
  EXPECT_THAT(f[0].message, HasSubstr("allows 290 s"));
  EXPECT_THAT(f[0].fix, HasSubstr("failureThreshold to 60"));
  Options strict;
  strict.min_startup_budget_s = 600;
  EXPECT_THAT(hits_of(server(mounts, pvc), strict), ElementsAre(Hit{"GPU010", 15}));
}

TEST(Inference, ModelCacheFollowsHfHomeDownloadDirAndClaimTemplates) {
  const std::string shm = "{name: shm, mountPath: /dev/shm}";
  const std::string pvc = "        - {name: models, persistentVolumeClaim: {claimName: c}}\n";
  // HF_HOME points into the PVC.
  EXPECT_THAT(hits_of(server("          env: [{name: HF_HOME, value: /models/hf}]\n          volumeMounts: [" + shm +
                                 ", {name: models, mountPath: /models}]\n",
                             pvc)),
              IsEmpty());
  // --download-dir into the PVC.
  EXPECT_THAT(hits_of(server("          args: [--download-dir=/models]\n          volumeMounts: [" + shm +
                                 ", {name: models, mountPath: /models}]\n",
                             pvc)),
              IsEmpty());
  // A PVC mounted somewhere the server does not read models from.
  EXPECT_THAT(hits_of(server("          volumeMounts: [" + shm + ", {name: models, mountPath: /models}]\n", pvc)),
              ElementsAre(Hit{"GPU012", 12}));
  // StatefulSet volumeClaimTemplates are persistent volumes too.
  std::string sts = server("          volumeMounts: [" + shm + ", {name: data, mountPath: /root/.cache}]\n");
  sts += "  volumeClaimTemplates:\n    - metadata: {name: data}\n      spec: {accessModes: [ReadWriteOnce]}\n";
  EXPECT_THAT(hits_of(sts), IsEmpty());
}

TEST(Inference, ShmMustBeMemoryBacked) {
  const std::string s = server(
      "          volumeMounts: [{name: disk, mountPath: /dev/shm/}, {name: c, mountPath: /root/.cache/huggingface}]\n",
      "        - {name: disk, emptyDir: {}}\n        - {name: c, persistentVolumeClaim: {claimName: c}}\n");
  EXPECT_THAT(hits_of(s), ElementsAre(Hit{"GPU011", 17}));
}

TEST(Inference, OtherServersAreDetectedAndPlainCudaIsNot) {
  const std::string bare = "          volumeMounts: [{name: shm, mountPath: /dev/shm}]\n";
  for (const char* image : {"ghcr.io/huggingface/text-generation-inference:3.3.0",
                            "nvcr.io/nvidia/tritonserver:25.01-py3", "lmsysorg/sglang:v0.5.0"}) {
    EXPECT_THAT(hits_of(server(bare, "", image)), ElementsAre(Hit{"GPU012", 11})) << image;
  }
  EXPECT_THAT(hits_of(server(bare, "", "nvcr.io/nvidia/cuda:12.5.0-base-ubuntu22.04")), IsEmpty());
  // Detected by command too.
  EXPECT_THAT(hits_of(server(bare + "          command: [python3, -m, vllm.entrypoints.openai.api_server]\n", "",
                             "python:3.12")),
              ElementsAre(Hit{"GPU012", 11}));
}

TEST(Tokens, LiteralsInEnvAndArgs) {
  const std::string ok =
      "          volumeMounts: [{name: shm, mountPath: /dev/shm}, {name: c, mountPath: /root/.cache/huggingface}]\n";
  const std::string pvc = "        - {name: c, persistentVolumeClaim: {claimName: c}}\n";
  EXPECT_THAT(hits_of(server(ok + "          env: [{name: HUGGING_FACE_HUB_TOKEN, value: hf_x}, {name: VLLM_API_KEY, "
                                  "value: sk-1}, {name: MAX_TOKENS, value: '8'}]\n",
                             pvc)),
              ElementsAre(Hit{"GPU013", 17}, Hit{"GPU013", 17}));
  EXPECT_THAT(hits_of(server(ok + "          args: [--api-key, sk-123]\n", pvc)), ElementsAre(Hit{"GPU013", 17}));
  EXPECT_THAT(hits_of(server(ok + "          args: [--api-key, $(API_KEY)]\n", pvc)), IsEmpty());
}

TEST(Images, TagsAndDigests) {
  const auto pod = [](const std::string& image) {
    return "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  tolerations: [{operator: Exists}]\n"
           "  containers:\n    - name: c\n      image: " +
           image + "\n      resources: {limits: {nvidia.com/gpu: 1}}\n";
  };
  EXPECT_THAT(hits_of(pod("nvcr.io/nvidia/cuda")), ElementsAre(Hit{"GPU014", 8}));
  EXPECT_THAT(hits_of(pod("localhost:5000/cuda")), ElementsAre(Hit{"GPU014", 8}));  // a registry port is no tag
  EXPECT_THAT(hits_of(pod("cuda:latest")), ElementsAre(Hit{"GPU014", 8}));
  EXPECT_THAT(hits_of(pod("localhost:5000/cuda:12.5")), IsEmpty());
  EXPECT_THAT(hits_of(pod("cuda@sha256:abc")), IsEmpty());
}

TEST(Hpa, CpuMemoryOrDefaultMetricsOnInferenceTargetsOnly) {
  const std::string target = server(
      "          volumeMounts: [{name: shm, mountPath: /dev/shm}, {name: c, mountPath: /root/.cache/huggingface}]\n",
      "        - {name: c, persistentVolumeClaim: {claimName: c}}\n");
  const auto hpa = [](const std::string& kind, const std::string& tail) {
    return "---\napiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata: {name: h, namespace: llm}\n"
           "spec:\n  scaleTargetRef: {apiVersion: apps/v1, kind: " +
           kind + ", name: s}\n  maxReplicas: 4\n" + tail;
  };
  // Lines: the StatefulSet has 16 lines, the HPA starts at 18.
  EXPECT_THAT(hits_of(target + hpa("StatefulSet", "")), ElementsAre(Hit{"GPU015", 21}));
  EXPECT_THAT(
      hits_of(target + hpa("StatefulSet", "  metrics:\n    - type: Resource\n      resource: {name: memory}\n")),
      ElementsAre(Hit{"GPU015", 25}));
  EXPECT_THAT(hits_of(target + hpa("StatefulSet",
                                   "  metrics:\n    - type: External\n      external: {metric: {name: queue}}\n")),
              IsEmpty());
  EXPECT_THAT(hits_of(target + hpa("Deployment", "")), IsEmpty());  // another object
  const std::string v1 =
      "---\napiVersion: autoscaling/v1\nkind: HorizontalPodAutoscaler\nmetadata: {name: h}\n"
      "spec:\n  scaleTargetRef: {kind: StatefulSet, name: s}\n  targetCPUUtilizationPercentage: 50\n";
  EXPECT_THAT(hits_of(target + v1), ElementsAre(Hit{"GPU015", 23}));
}

TEST(TimeSlicing, PointsInsideTheConfigMapValue) {
  const std::string cm =
      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata:\n  a100: |\n    version: v1\n"
      "    sharing:\n      timeSlicing:\n        failRequestsGreaterThanOne: false\n"
      "        resources: [{name: nvidia.com/gpu, replicas: 2}]\n"
      "  plain: \"version: v1\\nsharing:\\n  timeSlicing:\\n    resources: []\\n\"\n"
      "  mps: |\n    sharing:\n      mps:\n        resources: [{name: nvidia.com/gpu, replicas: 2}]\n";
  EXPECT_THAT(hits_of(cm), ElementsAre(Hit{"GPU016", 9}, Hit{"GPU016", 11}));
}

TEST(Dra, BetaAndAlphaVersionsOfEveryKind) {
  for (const char* kind : {"ResourceClaim", "ResourceClaimTemplate", "DeviceClass", "ResourceSlice"}) {
    for (const char* version : {"v1beta1", "v1beta2", "v1alpha3"}) {
      EXPECT_THAT(hits_of(std::string("kind: ") + kind + "\napiVersion: resource.k8s.io/" + version +
                          "\nmetadata: {name: x}\n"),
                  ElementsAre(Hit{"GPU017", 2}))
          << kind << " " << version;
    }
    EXPECT_THAT(hits_of(std::string("kind: ") + kind + "\napiVersion: resource.k8s.io/v1\nmetadata: {name: x}\n"),
                IsEmpty());
  }
}

TEST(Alerts, StickyXidComparisons) {
  const auto rule = [](const std::string& expr) {
    return "apiVersion: monitoring.coreos.com/v1\nkind: PrometheusRule\nmetadata: {name: r}\nspec:\n  groups:\n"
           "    - name: g\n      rules:\n        - alert: A\n          expr: '" +
           expr + "'\n";
  };
  for (const char* bad :
       {"DCGM_FI_DEV_XID_ERRORS > 0", "DCGM_FI_DEV_XID_ERRORS != 0", "DCGM_FI_DEV_XID_ERRORS >= 1",
        "DCGM_FI_DEV_XID_ERRORS > bool 0", "DCGM_FI_DEV_XID_ERRORS{gpu=\"0\"} > 0",
        "max by (gpu) (DCGM_FI_DEV_XID_ERRORS) > 0", "max_over_time(DCGM_FI_DEV_XID_ERRORS[5m]) > 0"}) {
    EXPECT_THAT(hits_of(rule(bad)), ElementsAre(Hit{"GPU018", 9})) << bad;
  }
  for (const char* good : {"changes(DCGM_FI_DEV_XID_ERRORS[10m]) > 0", "increase(kgpu_xid_events_total[10m]) > 0",
                           "delta(DCGM_FI_DEV_XID_ERRORS{gpu=\"0\"}[5m]) != 0", "DCGM_FI_DEV_XID_ERRORS == 79",
                           "DCGM_FI_DEV_XID_ERRORS > 10", "DCGM_FI_DEV_XID_ERRORS_TOTAL > 0",
                           // The sticky comparison is guarded by a change function: it resolves.
                           "DCGM_FI_DEV_XID_ERRORS != 0 and changes(DCGM_FI_DEV_XID_ERRORS[10m]) > 0",
                           // The comparison is not on the XID gauge.
                           "DCGM_FI_DEV_XID_ERRORS == 79 and DCGM_FI_DEV_GPU_TEMP > 0"}) {
    EXPECT_THAT(hits_of(rule(good)), IsEmpty()) << good;
  }
}

// -----------------------------------------------------------------------------------------------
// Disabling, ordering, writers

TEST(Disable, AnnotationOnTheTopLevelObject) {
  const std::string annotated = "  annotations:\n    kgpu.io/lint-disable: \"GPU005, image-not-pinned\"\n";
  const std::string pod = gpu_pod("        limits: {nvidia.com/gpu: 1}\n", annotated);
  std::string untolerated = pod;
  untolerated.replace(untolerated.find("  tolerations"),
                      untolerated.find("  containers") - untolerated.find("  tolerations"), "");
  untolerated.replace(untolerated.find("12.5.0-base-ubuntu22.04"), 23, "latest");
  EXPECT_THAT(hits_of(untolerated), IsEmpty());
  std::string all = untolerated;
  all.replace(all.find("GPU005, image-not-pinned"), 24, "all");
  EXPECT_THAT(hits_of(all), IsEmpty());
  std::string other = untolerated;
  other.replace(other.find("GPU005, image-not-pinned"), 24, "GPU001");
  EXPECT_THAT(hits_of(other), ElementsAre(Hit{"GPU005", 7}, Hit{"GPU014", 10}));
}

TEST(Report, SortedByFileLineRuleAndExitCodes) {
  const Report r = lint_paths({source_path("test/data/lint/gpu018-xid-alert.yaml"),
                               source_path("test/data/lint/gpu001-request-not-limit.yaml")});
  ASSERT_EQ(r.findings.size(), 2u);
  EXPECT_EQ(r.findings[0].rule->id, "GPU001");  // "gpu001-..." sorts before "gpu018-..."
  EXPECT_EQ(r.exit_code(), 3);                   // GPU001 is an error
  Report bad = lint_paths(
      {source_path("test/data/lint/no-such-file.yaml"), source_path("test/data/lint/gpu005-no-toleration.yaml")});
  EXPECT_EQ(bad.errors.size(), 1u);
  EXPECT_EQ(bad.findings.size(), 1u);  // the good file is still linted
  EXPECT_EQ(bad.exit_code(), 2);
  EXPECT_EQ(Report{}.exit_code(), 0);
}

TEST(Report, InvalidQuantitiesAreInputErrorsWithTheirLine) {
  const Report r = lint_paths({source_path("test/data/lint/input-invalid-quantity.yaml")});
  std::vector<std::pair<int, std::string>> got;
  for (const k8s::LoadError& e : r.errors) {
    EXPECT_THAT(e.source, HasSubstr("input-invalid-quantity.yaml"));
    got.emplace_back(e.line, e.message);
  }
  ASSERT_EQ(got.size(), 4u) << to_text(r);
  EXPECT_EQ(got[0].first, 20);
  EXPECT_THAT(got[0].second, HasSubstr("Deployment ml/trainer: "));
  EXPECT_THAT(got[0].second, HasSubstr("limits.nvidia.com/gpu: quantity '1e999999999' is out of range"));
  EXPECT_EQ(got[1].first, 21);
  EXPECT_THAT(got[1].second, HasSubstr("limits.memory: invalid quantity 'NaN'"));
  EXPECT_EQ(got[2].first, 23);
  EXPECT_THAT(got[2].second, HasSubstr("requests.cpu: invalid quantity '.inf'"));
  EXPECT_EQ(got[3].first, 31);
  EXPECT_THAT(got[3].second, HasSubstr("Node gpu-1: .status.allocatable.nvidia.com/gpu: invalid quantity '+Inf'"));
  EXPECT_EQ(r.exit_code(), 2);
  EXPECT_THAT(to_text(r), HasSubstr("input-invalid-quantity.yaml:20: input error: Deployment ml/trainer: "));
  // The annotation that disables rules does not hide input errors.
  EXPECT_THAT(input_errors(k8s::load_text("kind: Pod\nmetadata:\n  name: p\n  annotations: {kgpu.io/lint-disable: all}\n"
                                          "spec:\n  containers:\n  - name: c\n    resources: {limits: {cpu: 1e99}}\n",
                                          "p.yaml")
                                   .documents),
              ::testing::SizeIs(1));
}

TEST(Report, TextJsonAndSarif) {
  Report r = lint_file("test/data/guide/gpu-alerts.yaml");
  r.errors.push_back(k8s::LoadError{"broken.yaml", 3, "bad indentation"});
  const std::string text = to_text(r);
  EXPECT_THAT(text, HasSubstr("gpu-alerts.yaml:26: warning GPU018 (sticky-xid-alert): alert 'GPUXidError'"));
  EXPECT_THAT(text, HasSubstr("[PrometheusRule gpu-operator/gpu-alerts]"));
  EXPECT_THAT(text, HasSubstr("fix: Alert on increase(kgpu_xid_events_total[10m]) > 0"));
  EXPECT_THAT(text, HasSubstr("broken.yaml:3: input error: bad indentation"));

  const nlohmann::json j = to_json(r);
  ASSERT_EQ(j["findings"].size(), 1u);
  EXPECT_EQ(j["findings"][0]["rule"], "GPU018");
  EXPECT_EQ(j["findings"][0]["line"], 26);
  EXPECT_EQ(j["findings"][0]["severity"], "warning");
  EXPECT_EQ(j["summary"]["warnings"], 1);
  EXPECT_EQ(j["errors"][0]["file"], "broken.yaml");

  const nlohmann::json s = to_sarif(r);
  EXPECT_EQ(s["version"], "2.1.0");
  const auto& run = s["runs"][0];
  ASSERT_EQ(run["tool"]["driver"]["rules"].size(), rules().size());
  const auto& rule17 = run["tool"]["driver"]["rules"][17];
  EXPECT_EQ(rule17["id"], "GPU018");
  EXPECT_EQ(rule17["defaultConfiguration"]["level"], "warning");
  EXPECT_FALSE(rule17["shortDescription"]["text"].get<std::string>().empty());
  const auto& result = run["results"][0];
  EXPECT_EQ(result["ruleId"], "GPU018");
  EXPECT_EQ(result["ruleIndex"], 17);
  EXPECT_EQ(result["level"], "warning");
  EXPECT_THAT(result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].get<std::string>(),
              HasSubstr("gpu-alerts.yaml"));
  EXPECT_EQ(result["locations"][0]["physicalLocation"]["region"]["startLine"], 26);
  EXPECT_EQ(run["invocations"][0]["executionSuccessful"], false);
}

// -----------------------------------------------------------------------------------------------
// The CLI: the built binary.

struct CliRun {
  int status = -1;
  std::string out;
};

// Runs `kgpu ARGS` through the shell, with `input` (when given) on stdin.
CliRun run_kgpu(const std::string& args, const std::string& input = "") {
  std::string redirect;
  std::string path;
  if (!input.empty()) {
    // One file per call: ctest runs test cases as parallel processes that share TempDir().
    path = ::testing::TempDir() + "lint_stdin.XXXXXX";
    const int fd = mkstemp(path.data());
    if (fd < 0) return {};
    ::close(fd);
    std::ofstream(path) << input;
    redirect = " < '" + path + "'";
  }
  const std::string cmd = std::string(KGPU_BINARY) + " " + args + redirect + " 2>&1";
  CliRun r;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 4096> buf;
  size_t n = 0;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  if (!path.empty()) ::unlink(path.c_str());
  return r;
}

std::string data_arg(const std::string& rel) { return "'" + source_path(rel) + "'"; }

TEST(Cli, ExitCodes) {
  EXPECT_EQ(run_kgpu("lint " + data_arg("test/data/guide/vllm-deploy.yaml")).status, 0);
  const CliRun findings = run_kgpu("lint " + data_arg("test/data/guide"));
  EXPECT_EQ(findings.status, 1);
  EXPECT_THAT(findings.out, HasSubstr("4 findings (0 errors, 4 warnings, 0 info)"));
  const CliRun missing =
      run_kgpu("lint /nonexistent/manifests.yaml " + data_arg("test/data/lint/gpu002-fractional.yaml"));
  EXPECT_EQ(missing.status, 2);
  EXPECT_THAT(missing.out, HasSubstr("/nonexistent/manifests.yaml"));
  EXPECT_THAT(missing.out, HasSubstr("GPU002"));
  EXPECT_EQ(run_kgpu("lint --disable NO999 " + data_arg("test/data/guide")).status, 2);
  EXPECT_EQ(run_kgpu("lint --output xml " + data_arg("test/data/guide")).status, 2);
  EXPECT_EQ(run_kgpu("lint").status, 2);
}

TEST(Cli, StdinAndBadYaml) {
  const CliRun clean = run_kgpu("lint - < " + data_arg("test/data/lint/fixed.yaml"));
  EXPECT_EQ(clean.status, 0) << clean.out;
  const CliRun broken = run_kgpu("lint - < " + data_arg("test/data/lint/gpu014-image-latest.yaml"));
  EXPECT_EQ(broken.status, 1);
  EXPECT_THAT(broken.out, HasSubstr("<stdin>:13: warning GPU014"));
  const CliRun bad = run_kgpu("lint -", "kind: Pod\nmetadata: {name: [\n");
  EXPECT_EQ(bad.status, 2) << bad.out;
}

TEST(Cli, HostileYamlFailsFastWithALine) {
  const CliRun bomb = run_kgpu("lint " + data_arg("test/data/lint/input-alias-bomb.yaml"));
  EXPECT_EQ(bomb.status, 2) << bomb.out;
  EXPECT_THAT(bomb.out, HasSubstr("input-alias-bomb.yaml:"));
  EXPECT_THAT(bomb.out, HasSubstr("input error: YAML expands to more than 1000"));
  const CliRun nul = run_kgpu("lint -", std::string("kind: Pod\nmetadata:\n  name: a\0b\n", 32));
  EXPECT_EQ(nul.status, 2) << nul.out;
  EXPECT_THAT(nul.out, HasSubstr("<stdin>:3: input error: NUL byte (\\0) at line 3, column 10: not valid in YAML"));
}

TEST(Cli, SarifAndJsonOutput) {
  const CliRun r = run_kgpu("lint --output sarif " + data_arg("test/data/guide"));
  EXPECT_EQ(r.status, 1);
  const auto s = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(s.is_discarded()) << r.out;
  EXPECT_EQ(s["version"], "2.1.0");
  EXPECT_EQ(s["runs"][0]["tool"]["driver"]["rules"].size(), rules().size());
  ASSERT_EQ(s["runs"][0]["results"].size(), 4u);
  for (const auto& result : s["runs"][0]["results"]) {
    EXPECT_TRUE(result.contains("ruleId"));
    EXPECT_TRUE(result["message"].contains("text"));
    EXPECT_GT(result["locations"][0]["physicalLocation"]["region"]["startLine"].get<int>(), 0);
  }
  const CliRun j = run_kgpu("lint -o json " + data_arg("test/data/guide/gpu-alerts.yaml"));
  const auto parsed = nlohmann::json::parse(j.out, nullptr, false);
  ASSERT_FALSE(parsed.is_discarded()) << j.out;
  EXPECT_EQ(parsed["findings"][0]["rule"], "GPU018");
  const CliRun rules_json = run_kgpu("lint --list-rules -o json");
  EXPECT_EQ(rules_json.status, 0);
  EXPECT_EQ(nlohmann::json::parse(rules_json.out, nullptr, false).size(), rules().size());
}

TEST(Cli, DisableByFlagAndAnnotation) {
  EXPECT_EQ(run_kgpu("lint --disable GPU005 --disable sticky-xid-alert " + data_arg("test/data/guide")).status, 0);
  EXPECT_EQ(run_kgpu("lint --disable GPU005,GPU018 " + data_arg("test/data/guide")).status, 0);
  const CliRun annotated = run_kgpu("lint -",
                                    "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  annotations:\n"
                                    "    kgpu.io/lint-disable: gpu-taint-not-tolerated\nspec:\n  containers:\n"
                                    "    - {name: c, image: 'a:1', resources: {limits: {nvidia.com/gpu: 1}}}\n");
  EXPECT_EQ(annotated.status, 0) << annotated.out;
  EXPECT_THAT(annotated.out, HasSubstr("no findings"));
}


TEST(Review, ArgumentsMentioningAServerDoNotMakeAServer) {
  // A Helm test pod that curls the vLLM service is not an inference server.
  const std::string yaml = R"(apiVersion: v1
kind: Pod
metadata: {name: release-test}
spec:
  restartPolicy: Never
  containers:
    - name: test
      image: busybox:1.36
      command: ["wget"]
      args: ["-qO-", "release-vllm:8000/health"]
)";
  EXPECT_THAT(hits_of(yaml), IsEmpty());
  // A generic image started as `vllm serve` is one.
  const std::string server = R"(apiVersion: v1
kind: Pod
metadata: {name: s}
spec:
  tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
  containers:
    - name: s
      image: python:3.12
      command: ["vllm", "serve", "m"]
      resources: {limits: {nvidia.com/gpu: 1}}
)";
  EXPECT_THAT(hits_of(server), ::testing::Contains(::testing::Field(&Hit::first, "GPU010")));
}

TEST(Review, HpaKeepingTwoReplicasSparesTheRollingUpdateRule) {
  const std::string deployment = R"(apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: ml}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
      containers:
        - name: c
          image: nvcr.io/nvidia/cuda:12.5.0-base-ubuntu22.04
          resources: {limits: {nvidia.com/gpu: 1}}
)";
  EXPECT_THAT(hits_of(deployment), ElementsAre(Hit{"GPU004", 4}));
  const std::string hpa = R"(---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: web, namespace: ml}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  minReplicas: 2
  maxReplicas: 4
  metrics:
    - type: Pods
      pods: {metric: {name: queue_depth}, target: {type: AverageValue, averageValue: "5"}}
)";
  EXPECT_THAT(hits_of(deployment + hpa), IsEmpty());
}

TEST(Review, HugeProbeValuesDoNotWrap) {
  const std::string yaml = R"(apiVersion: v1
kind: Pod
metadata: {name: s}
spec:
  tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
  volumes:
    - {name: shm, emptyDir: {medium: Memory}}
    - {name: cache, persistentVolumeClaim: {claimName: c}}
  containers:
    - name: s
      image: vllm/vllm-openai:v0.32.0
      resources: {limits: {nvidia.com/gpu: 1}}
      volumeMounts:
        - {name: shm, mountPath: /dev/shm}
        - {name: cache, mountPath: /root/.cache/huggingface}
      startupProbe:
        httpGet: {path: /health, port: 8000}
        periodSeconds: 9223372036854775807
        failureThreshold: 2
)";
  EXPECT_THAT(hits_of(yaml), IsEmpty());
}



// -----------------------------------------------------------------------------------------------
// lint and doctor on the same manifest: where both check a guide rule (image pinned, inference
// server startup probe, HPA of an inference server on CPU/memory) they give the same answer.

struct Agreement {
  std::string image, command, probe, metrics;
  bool image_finding, probe_finding, hpa_finding;  // what lint finds (so the agreement is not vacuous)
};

class SameAnswerAsDoctor : public ::testing::TestWithParam<Agreement> {};

TEST_P(SameAnswerAsDoctor, OnTheSameManifest) {
  const Agreement& a = GetParam();
  const std::string yaml = fmt::format(R"(apiVersion: v1
kind: Node
metadata:
  name: gpu-1
  labels: {{nvidia.com/gpu.present: "true", nvidia.com/gpu.product: NVIDIA-L4}}
spec:
  taints: [{{key: nvidia.com/gpu, value: present, effect: NoSchedule}}]
status:
  capacity: {{nvidia.com/gpu: "1", cpu: "8", memory: 32Gi}}
  allocatable: {{nvidia.com/gpu: "1", cpu: "8", memory: 32Gi}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: web, namespace: team-x}}
spec:
  replicas: 2
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      tolerations: [{{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}}]
      containers:
      - name: server
        image: {}
        command: [{}]
        resources: {{limits: {{nvidia.com/gpu: 1}}}}
{}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {{name: web, namespace: team-x}}
spec:
  scaleTargetRef: {{apiVersion: apps/v1, kind: Deployment, name: web}}
  minReplicas: 2
  maxReplicas: 4
{}
)",
                                       a.image, a.command, a.probe, a.metrics);
  k8s::LoadResult for_lint = k8s::load_text(yaml, "same.yaml");
  ASSERT_THAT(for_lint.errors, IsEmpty());
  std::set<std::string> lint_ids;
  for (const Finding& f : lint(for_lint.documents)) lint_ids.insert(std::string(f.rule->id));

  const doctor::Snapshot snapshot = doctor::Snapshot::from(k8s::load_text(yaml, "same.yaml"));
  auto found = doctor::diagnose(snapshot, {});
  ASSERT_TRUE(found.has_value());
  std::set<std::string> doctor_rules;
  for (const doctor::Finding& f : *found) doctor_rules.insert(f.rule);

  EXPECT_EQ(lint_ids.contains("GPU014"), a.image_finding) << yaml;
  EXPECT_EQ(lint_ids.contains("GPU010"), a.probe_finding) << yaml;
  EXPECT_EQ(lint_ids.contains("GPU015"), a.hpa_finding) << yaml;
  EXPECT_EQ(lint_ids.contains("GPU014"), doctor_rules.contains("checklist-image-pinned")) << yaml;
  EXPECT_EQ(lint_ids.contains("GPU010"), doctor_rules.contains("checklist-startup-probe")) << yaml;
  EXPECT_EQ(lint_ids.contains("GPU015"), doctor_rules.contains("checklist-autoscale-queue-depth")) << yaml;
}

constexpr const char* kLongProbe =
    "        startupProbe: {httpGet: {path: /health, port: 8000}, periodSeconds: 10, failureThreshold: 60}";
constexpr const char* kShortProbe =
    "        startupProbe: {httpGet: {path: /health, port: 8000}, periodSeconds: 5, failureThreshold: 3}";
constexpr const char* kCpu =
    "  metrics: [{type: Resource, resource: {name: cpu, target: {type: Utilization, averageUtilization: 70}}}]";
constexpr const char* kCpuAndQueue =
    "  metrics: [{type: Resource, resource: {name: cpu, target: {type: Utilization, averageUtilization: 70}}},\n"
    "            {type: Pods, pods: {metric: {name: vllm_num_requests_waiting}, target: {type: AverageValue, "
    "averageValue: 5}}}]";
constexpr const char* kQueue =
    "  metrics: [{type: Pods, pods: {metric: {name: vllm_num_requests_waiting}, target: {type: AverageValue, "
    "averageValue: 5}}}]";

INSTANTIATE_TEST_SUITE_P(
    Lint, SameAnswerAsDoctor,
    ::testing::Values(Agreement{"vllm/vllm-openai:v0.6.0", "vllm", kLongProbe, kQueue, false, false, false},
                      Agreement{"vllm/vllm-openai", "vllm", "", kCpu, true, true, true},
                      Agreement{"vllm/vllm-openai:latest", "vllm", kShortProbe, "", true, true, true},
                      Agreement{"vllm/vllm-openai@sha256:0123", "vllm", kShortProbe, kCpuAndQueue, false, true, true},
                      Agreement{"registry:5000/team/trainer", "python", "", kCpu, true, false, false},
                      Agreement{"registry:5000/team/trainer:1.2", "python", "", "", false, false, false},
                      Agreement{"nvcr.io/nvidia/tritonserver:24.08-py3", "tritonserver", kLongProbe, kCpu, false,
                                false, true}));

// The exported predicates on their own.
TEST(Predicates, ImagePinnedAndStartupBudget) {
  EXPECT_TRUE(image_pinned("vllm/vllm-openai:v0.6.0"));
  EXPECT_TRUE(image_pinned("vllm/vllm-openai@sha256:0123"));
  EXPECT_FALSE(image_pinned("vllm/vllm-openai"));
  EXPECT_FALSE(image_pinned("vllm/vllm-openai:latest"));
  EXPECT_FALSE(image_pinned("registry:5000/team/trainer"));  // a port is not a tag
  k8s::Probe p;
  EXPECT_EQ(startup_budget_s(p), 30);  // the API's defaults: 0 + 10 x 3
}

}  // namespace
}  // namespace kgpu::lint
