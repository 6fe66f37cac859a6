// Manifests and `kubectl get -o json` snapshots into positioned trees and typed views; selector,
// toleration and effective-request helpers.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <random>
#include <sstream>

#include "k8s/document.h"
#include "k8s/objects.h"
#include "../integration/paths.h"

namespace kgpu::k8s {

void PrintTo(const LoadError& e, std::ostream* os) { *os << e.to_string(); }

namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

std::string data(const std::string& name) { return std::string(KGPU_SOURCE_DIR) + "/test/data/k8s/" + name; }

LoadResult load(const std::string& name) {
  auto r = load_file(data(name));
  EXPECT_TRUE(r.has_value()) << r.error().message;
  return r ? std::move(*r) : LoadResult{};
}

const Document* find(const LoadResult& r, std::string_view kind, std::string_view name) {
  for (const Document& d : r.documents) {
    if (d.kind == kind && d.metadata.name == name) return &d;
  }
  ADD_FAILURE() << "no " << kind << "/" << name;
  return nullptr;
}

Quantity q(const char* text) { return *Quantity::parse(text); }

// ---------------------------------------------------------------------------------------------
// Trees and positions

TEST(Load, YamlDocumentsKeepLinesOfNestedFields) {
  const LoadResult r = load("workloads.yaml");
  EXPECT_THAT(r.errors, IsEmpty());
  ASSERT_THAT(r.documents, SizeIs(5));
  const Document& d = r.documents[0];
  EXPECT_EQ(d.kind, "Deployment");
  EXPECT_EQ(d.api_version, "apps/v1");
  EXPECT_EQ(d.api_group(), "apps");
  EXPECT_EQ(d.api_version_only(), "v1");
  EXPECT_EQ(d.line, 2);
  EXPECT_EQ(d.metadata.name, "trainer");
  EXPECT_EQ(d.metadata.name_line, 5);
  EXPECT_EQ(d.metadata.namespace_, "ml");
  EXPECT_EQ(d.metadata.labels_line, 7);
  EXPECT_EQ(d.metadata.labels.at("tier"), "gpu");
  EXPECT_EQ(d.ref(), "Deployment/ml/trainer");
  EXPECT_THAT(d.where(62), HasSubstr("workloads.yaml:62"));

  const Value* limits = d.root->at({"spec", "template", "spec", "containers"});
  ASSERT_NE(limits, nullptr);
  ASSERT_TRUE(limits->is_seq());
  const Value& container = limits->items()[0];
  EXPECT_EQ(container.line(), 42);  // "- name: train"
  const Entry* gpu = container.at({"resources", "limits"})->find_entry("nvidia.com/gpu");
  ASSERT_NE(gpu, nullptr);
  EXPECT_EQ(gpu->key_line(), 62);
  EXPECT_EQ(gpu->value().line(), 62);
  EXPECT_EQ(gpu->value().text(), "0.5");
  EXPECT_EQ(gpu->value().type(), ValueType::kNumber);
  // A block value starts on the line after its key.
  const Entry* resources = container.find_entry("resources");
  EXPECT_EQ(resources->key_line(), 56);
  EXPECT_EQ(resources->value().line(), 57);

  EXPECT_EQ(r.documents[1].kind, "Pod");
  EXPECT_EQ(r.documents[1].line, 89);
  EXPECT_EQ(r.documents[1].metadata.uid, "0b7c2a52-1111-4a3e-9a1b-000000000001");
  EXPECT_EQ(r.documents[1].metadata.creation_timestamp, "2024-05-01T10:00:00Z");
  ASSERT_THAT(r.documents[1].metadata.owner_references, SizeIs(1));
  EXPECT_EQ(r.documents[1].metadata.owner_references[0].kind, "StatefulSet");
  EXPECT_TRUE(r.documents[1].metadata.owner_references[0].controller);
  EXPECT_EQ(r.documents[1].metadata.owner_references[0].line, 98);
  // Unknown kinds are kept as generic objects; typed views decline them.
  EXPECT_EQ(r.documents[4].kind, "Widget");
  EXPECT_EQ(r.documents[4].root->at({"spec", "anything"})->size(), 2u);
  EXPECT_FALSE(as_pod(r.documents[4]));
  EXPECT_FALSE(as_workload(r.documents[4]));
}

TEST(Load, ScalarTypesFollowKubernetesYaml) {
  const LoadResult r =
      load_text("kind: X\na: yes\nb: \"yes\"\nc: ~\nd: 10\ne: 1.5e3\nf: off\ng: text\nh: '1'\n", "t.yaml");
  ASSERT_THAT(r.documents, SizeIs(1));
  const Value* root = r.documents[0].root;
  EXPECT_EQ(root->find("a")->type(), ValueType::kBool);
  EXPECT_EQ(root->find("a")->as_bool(), true);
  EXPECT_EQ(root->find("b")->type(), ValueType::kString);
  EXPECT_TRUE(root->find("c")->is_null());
  EXPECT_EQ(root->find("d")->as_int(), 10);
  EXPECT_EQ(root->find("e")->as_double(), 1500.0);
  EXPECT_EQ(root->find("e")->as_int(), std::nullopt);
  EXPECT_EQ(root->find("f")->as_bool(), false);
  EXPECT_EQ(root->find("g")->type(), ValueType::kString);
  EXPECT_EQ(root->find("h")->as_int(), std::nullopt);
  EXPECT_EQ(root->find("h")->as_int(true), 1);
  EXPECT_EQ(root->find("missing"), nullptr);
}

TEST(Load, JsonListItemsBecomeDocumentsWithLines) {
  const LoadResult r = load("cluster.json");
  EXPECT_THAT(r.errors, IsEmpty());
  ASSERT_THAT(r.documents, SizeIs(3));
  const Document& node = r.documents[0];
  EXPECT_EQ(node.kind, "Node");
  EXPECT_EQ(node.line, 4);
  EXPECT_EQ(node.metadata.name, "gpu-node-1");
  EXPECT_EQ(node.metadata.name_line, 12);
  EXPECT_EQ(node.metadata.labels.at("nvidia.com/gpu.count"), "8");
  EXPECT_EQ(node.root->find_entry("kind")->key_line(), 6);
  const Entry* gpus = node.root->at({"status", "capacity"})->find_entry("nvidia.com/gpu");
  EXPECT_EQ(gpus->key_line(), 33);
  EXPECT_EQ(gpus->value().line(), 33);
  EXPECT_EQ(node.root->at({"spec", "taints"})->items()[0].line(), 17);
  const Document& event = r.documents[1];
  EXPECT_EQ(event.kind, "Event");
  EXPECT_EQ(event.root->find_entry("count")->key_line(), 53);
  // Escapes are decoded (\u00e9, \", \\).
  EXPECT_EQ(event.root->find("message")->text(),
            "0/3 nodes are available: 3 Insufficient nvidia.com/gpu. \xc3\xa9\"\\");
  EXPECT_EQ(r.documents[2].line, 74);
}

TEST(Load, SingleJsonObject) {
  const LoadResult r = load("single.json");
  EXPECT_THAT(r.errors, IsEmpty());
  ASSERT_THAT(r.documents, SizeIs(1));
  EXPECT_EQ(r.documents[0].kind, "Pod");
  EXPECT_EQ(r.documents[0].line, 1);
  auto pod = as_pod(r.documents[0]);
  ASSERT_TRUE(pod);
  const auto& limit = pod->spec.containers.at(0).resources.limits.at("nvidia.com/gpu");
  EXPECT_EQ(limit.line, 15);
  EXPECT_EQ(limit.value, q("1"));
}

TEST(Load, JsonStreamsAndTopLevelArrays) {
  const LoadResult r = load_text("{\"kind\":\"A\"}\n{\"kind\":\"B\"}\n[{\"kind\":\"C\"},\n 3]", "<stdin>");
  ASSERT_THAT(r.documents, SizeIs(3));
  EXPECT_EQ(r.documents[2].kind, "C");
  ASSERT_THAT(r.errors, SizeIs(1));
  EXPECT_EQ(r.errors[0].line, 4);
  EXPECT_THAT(r.errors[0].message, HasSubstr("not a mapping"));
}

TEST(Load, YamlListKind) {
  const LoadResult r = load_text(
      "apiVersion: v1\nkind: PodList\nitems:\n- kind: Pod\n  metadata: {name: a}\n- kind: Pod\n  metadata: {name: b}\n",
      "list.yaml");
  ASSERT_THAT(r.documents, SizeIs(2));
  EXPECT_EQ(r.documents[1].metadata.name, "b");
  EXPECT_EQ(r.documents[1].line, 6);
}

TEST(Load, MalformedDocumentsAreReportedAndSkipped) {
  const LoadResult r = load("broken.yaml");
  ASSERT_THAT(r.documents, SizeIs(2));
  EXPECT_EQ(r.documents[0].metadata.name, "first");
  EXPECT_EQ(r.documents[1].metadata.name, "last");
  EXPECT_EQ(r.documents[1].line, 21);
  ASSERT_THAT(r.errors, SizeIs(3));
  EXPECT_THAT(r.errors[0].message, HasSubstr("invalid YAML"));
  EXPECT_GE(r.errors[0].line, 8);
  EXPECT_LE(r.errors[0].line, 11);
  EXPECT_EQ(r.errors[1].line, 12);
  EXPECT_THAT(r.errors[1].message, HasSubstr("not a mapping"));
  EXPECT_EQ(r.errors[2].line, 15);
  EXPECT_THAT(r.errors[2].message, HasSubstr("no kind"));
  EXPECT_THAT(r.errors[2].to_string(), HasSubstr("broken.yaml:15: object has no kind"));
}

TEST(Load, JsonSyntaxErrorsHavePositions) {
  const LoadResult r = load_text("{\"kind\": \"A\"}\n{\n  \"kind\": \"B\",\n  \"x\": [1, 2,, 3]\n}\n", "bad.json");
  ASSERT_THAT(r.documents, SizeIs(1));
  ASSERT_THAT(r.errors, SizeIs(1));
  EXPECT_EQ(r.errors[0].line, 4);
  EXPECT_THAT(r.errors[0].to_string(), HasSubstr("bad.json:4: unexpected ','"));
}

TEST(Load, TruncatedAndGarbageInputNeverCrash) {
  std::ifstream in(data("cluster.json"));
  const std::string json{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  std::ifstream yin(data("workloads.yaml"));
  const std::string yaml{std::istreambuf_iterator<char>(yin), std::istreambuf_iterator<char>()};
  for (size_t cut = 0; cut < json.size(); cut += 7) {
    const LoadResult r = load_text(json.substr(0, cut), "cut.json");
    if (cut > 0 && cut < json.size() - 2) {
      EXPECT_FALSE(r.errors.empty()) << cut;
    }
  }
  for (size_t cut = 0; cut < yaml.size(); cut += 13) (void)load_text(yaml.substr(0, cut), "cut.yaml");
  std::mt19937 rng(42);
  for (int i = 0; i < 300; ++i) {
    std::string s = i % 2 ? json : yaml;
    for (int k = 0; k < 20; ++k) s[rng() % s.size()] = static_cast<char>(rng() % 256);
    const LoadResult r = load_text(s, i % 2 ? "g.json" : "g.yaml");
    for (const Document& d : r.documents) {
      (void)as_pod(d);
      (void)as_workload(d);
      (void)as_node(d);
    }
  }
  EXPECT_THAT(load_text(std::string(100000, '['), "deep.json").errors, SizeIs(1));
  EXPECT_THAT(load_text(std::string(5000, '['), "deep.yaml").documents, IsEmpty());
  EXPECT_THAT(load_text("", "empty.yaml").documents, IsEmpty());
  EXPECT_THAT(load_text("", "empty.yaml").errors, IsEmpty());
}

TEST(Load, PathsRecurseIntoDirectoriesAndStdin) {
  auto r = load_paths({data("tree")});
  ASSERT_TRUE(r.has_value()) << r.error().message;
  ASSERT_THAT(r->documents, SizeIs(3));
  EXPECT_EQ(r->documents[0].metadata.name, "a");
  EXPECT_EQ(r->documents[1].metadata.name, "b");
  EXPECT_EQ(r->documents[2].metadata.name, "c");
  EXPECT_EQ(r->documents[2].source, data("tree/sub/c.json"));
  auto missing = load_paths({data("nope.yaml")});
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  std::istringstream in("kind: Namespace\nmetadata: {name: s}\n");
  const LoadResult s = load_stream(in);
  ASSERT_THAT(s.documents, SizeIs(1));
  EXPECT_EQ(s.documents[0].source, "<stdin>");
}

TEST(Load, DocumentsOutliveTheResult) {
  Document kept;
  {
    LoadResult r = load_text("{\"kind\": \"Pod\", \"metadata\": {\"name\": \"x\"}}", "x.json");
    kept = r.documents.at(0);
  }
  EXPECT_EQ(kept.metadata.name, "x");
  EXPECT_EQ(kept.root->find("kind")->text(), "Pod");
}

// ---------------------------------------------------------------------------------------------
// Typed views

TEST(Views, DeploymentTemplate) {
  const LoadResult r = load("workloads.yaml");
  auto w = as_workload(r.documents[0]);
  ASSERT_TRUE(w);
  EXPECT_EQ(w->replicas.value, 2);
  EXPECT_EQ(w->replicas.line, 11);
  EXPECT_EQ(*w->strategy_type, "Recreate");
  EXPECT_EQ(w->selector.line, 14);
  EXPECT_TRUE(w->selector.matches({{"app", "trainer"}, {"tier", "gpu"}}));
  EXPECT_FALSE(w->selector.matches({{"app", "trainer"}, {"tier", "web"}}));
  EXPECT_TRUE(w->selector.matches(w->pod_template.metadata.labels));
  EXPECT_EQ(w->pod_template.line, 19);

  const PodSpec& spec = w->pod_template.spec;
  EXPECT_EQ(spec.node_selector.at("nvidia.com/gpu.product"), "NVIDIA-H100-80GB-HBM3");
  ASSERT_THAT(spec.required_node_affinity, SizeIs(1));
  EXPECT_EQ(spec.required_node_affinity[0].match_expressions[0].op, "Gt");
  EXPECT_EQ(spec.required_node_affinity[0].match_expressions[0].line, 32);
  ASSERT_THAT(spec.tolerations, SizeIs(1));
  EXPECT_EQ(spec.tolerations[0].line, 36);
  EXPECT_EQ(*spec.priority_class_name, "high");
  EXPECT_EQ(*spec.runtime_class_name, "nvidia");

  ASSERT_THAT(spec.containers, SizeIs(1));
  const Container& c = spec.containers[0];
  EXPECT_EQ(c.name, "train");
  EXPECT_EQ(c.line, 42);
  EXPECT_EQ(*c.image, "registry.example.com/train:1.2");
  ASSERT_THAT(c.command, SizeIs(2));
  EXPECT_EQ(c.args.at(0).value, "--epochs=3");
  ASSERT_THAT(c.env, SizeIs(3));
  EXPECT_EQ(*c.env[0].value, "INFO");
  EXPECT_FALSE(c.env[1].value);  // `value: 1` is a number: an issue, not a string
  EXPECT_TRUE(c.env[2].value_from);
  EXPECT_EQ(c.resources.line, 56);
  EXPECT_EQ(c.resources.requests.at("cpu").value, q("500m"));
  const Field<Quantity>& gpu = c.resources.limits.at("nvidia.com/gpu");
  EXPECT_EQ(gpu.line, 62);
  EXPECT_FALSE(gpu->is_integer());  // "nvidia.com/gpu: 0.5"
  EXPECT_FALSE(c.resources.limits.contains("example.com/bad"));
  EXPECT_EQ(c.privileged.value_or(false), true);
  EXPECT_EQ(c.privileged.line, 68);
  ASSERT_TRUE(c.startup_probe);
  EXPECT_EQ(c.startup_probe->line, 69);
  EXPECT_EQ(c.startup_probe->initial_delay_seconds.value, 10);
  EXPECT_EQ(c.startup_probe->initial_delay_seconds.line, 71);
  EXPECT_EQ(c.startup_probe->failure_threshold.value, 60);
  EXPECT_FALSE(c.readiness_probe);
  EXPECT_EQ(c.liveness_probe->timeout_seconds.value, 3);
  EXPECT_EQ(c.volume_mounts.at(0).mount_path, "/dev/shm");

  ASSERT_THAT(spec.volumes, SizeIs(3));
  EXPECT_TRUE(spec.volumes[0].empty_dir);
  EXPECT_EQ(*spec.volumes[0].empty_dir_medium, "Memory");
  EXPECT_EQ(spec.volumes[0].empty_dir_size_limit.value, q("8Gi"));
  EXPECT_EQ(spec.volumes[0].empty_dir_size_limit.line, 81);
  EXPECT_EQ(*spec.volumes[1].host_path, "/data/models");
  EXPECT_EQ(spec.volumes[1].host_path.line, 84);
  EXPECT_EQ(*spec.volumes[2].persistent_volume_claim, "cache-pvc");

  ASSERT_THAT(w->issues, SizeIs(2));
  EXPECT_EQ(w->issues[0].line, 51);
  EXPECT_THAT(w->issues[0].message, HasSubstr("env[1].value: expected a string, found a number ('1')"));
  EXPECT_EQ(w->issues[1].line, 63);
  EXPECT_THAT(w->issues[1].message, HasSubstr("limits.example.com/bad: invalid quantity '1GB'"));
}

TEST(Views, PodStatusAndEffectiveRequests) {
  const LoadResult r = load("workloads.yaml");
  auto pod = as_pod(r.documents[1]);
  ASSERT_TRUE(pod);
  EXPECT_THAT(pod->issues, IsEmpty());
  EXPECT_EQ(*pod->spec.node_name, "gpu-node-1");
  EXPECT_TRUE(pod->spec.init_containers[1].is_sidecar());
  ASSERT_THAT(pod->spec.resource_claims, SizeIs(1));
  EXPECT_EQ(*pod->spec.resource_claims[0].resource_claim_template_name, "two-gpus");
  EXPECT_EQ(*pod->status.phase, "Running");
  EXPECT_EQ(*pod->status.start_time, "2024-05-01T10:00:05Z");
  const Condition* ready = find_condition(pod->status.conditions, "Ready");
  ASSERT_NE(ready, nullptr);
  EXPECT_EQ(ready->status, "False");
  EXPECT_EQ(ready->reason, "ContainersNotReady");
  ASSERT_THAT(pod->status.container_statuses, SizeIs(1));
  const ContainerStatus& s = pod->status.container_statuses[0];
  EXPECT_EQ(s.restart_count, 7);
  EXPECT_FALSE(s.ready);
  EXPECT_EQ(s.state.state, "waiting");
  EXPECT_EQ(s.state.reason, "CrashLoopBackOff");
  EXPECT_EQ(s.last_state.state, "terminated");
  EXPECT_EQ(s.last_state.reason, "OOMKilled");
  EXPECT_EQ(s.last_state.exit_code, 137);

  // cpu: containers 1 (limit-defaulted) + 100m, sidecar 250m -> 1350m; init "fetch" 2 -> max 2; + 100m overhead.
  EXPECT_EQ(pod_request(pod->spec, "cpu").to_string(), "2100m");
  EXPECT_EQ(pod_request(pod->spec, "nvidia.com/gpu"), q("2"));  // only limits set
  EXPECT_EQ(pod_request(pod->spec, "memory"), q("1Gi"));
  EXPECT_TRUE(pod_request(pod->spec, "example.com/none").is_zero());
  const auto all = pod_requests(pod->spec);
  EXPECT_THAT(all, SizeIs(3));
  EXPECT_EQ(all.at("cpu"), q("2.1"));
  EXPECT_EQ(effective_requests(pod->spec.containers[0]).at("nvidia.com/gpu").value, q("2"));
}

TEST(Views, SidecarsStartedBeforeAnInitContainerAddToIt) {
  const LoadResult r = load_text(R"(kind: Pod
spec:
  initContainers:
    - {name: side, restartPolicy: Always, resources: {requests: {cpu: "1"}}}
    - {name: init, resources: {requests: {cpu: "3"}}}
  containers:
    - {name: main, resources: {requests: {cpu: "1"}}}
)",
                                 "p.yaml");
  auto pod = as_pod(r.documents.at(0));
  EXPECT_EQ(pod_request(pod->spec, "cpu"), q("4"));  // max(1 + 1, 3 + 1)
}

TEST(Views, JobAndCronJob) {
  const LoadResult r = load("workloads.yaml");
  auto job = as_job(r.documents[2]);
  ASSERT_TRUE(job);
  EXPECT_EQ(job->backoff_limit.value, 2);
  EXPECT_EQ(job->active_deadline_seconds.value, 3600);
  EXPECT_EQ(job->ttl_seconds_after_finished.value, 600);
  EXPECT_EQ(job->completions.value, 1);
  EXPECT_EQ(*job->pod_template.spec.restart_policy, "Never");
  EXPECT_EQ(job->status.failed.value, 3);
  EXPECT_EQ(find_condition(job->status.conditions, "Failed")->reason, "BackoffLimitExceeded");
  auto cron = as_cron_job(r.documents[3]);
  ASSERT_TRUE(cron);
  EXPECT_EQ(*cron->schedule, "0 3 * * *");
  EXPECT_EQ(*cron->concurrency_policy, "Forbid");
  EXPECT_EQ(cron->job_template.backoff_limit.value, 1);
  EXPECT_EQ(pod_request(cron->job_template.pod_template.spec, "nvidia.com/gpu"), q("1"));
  EXPECT_FALSE(as_cron_job(r.documents[2]));
}

TEST(Views, NodeEventAndTolerations) {
  const LoadResult r = load("cluster.json");
  auto node = as_node(r.documents[0]);
  ASSERT_TRUE(node);
  EXPECT_THAT(node->issues, IsEmpty());
  ASSERT_THAT(node->taints, SizeIs(1));
  EXPECT_EQ(node->taints[0].key, "nvidia.com/gpu");
  EXPECT_EQ(node->taints[0].line, 17);
  EXPECT_EQ(node->allocatable.at("cpu").value, q("95.5"));
  EXPECT_EQ(node->capacity.at("nvidia.com/gpu").value.value(), 8);
  EXPECT_EQ(node->capacity.at("nvidia.com/gpu").line, 33);
  EXPECT_EQ(node->allocatable.at("memory").value.bytes(), 2056437620LL * 1024);
  EXPECT_EQ(find_condition(node->conditions, "Ready")->status, "True");
  EXPECT_EQ(node->node_info.kubelet_version, "v1.30.2");
  EXPECT_EQ(node->node_info.kernel_version, "5.15.0-105-generic");
  EXPECT_EQ(node->node_info.container_runtime_version, "containerd://1.7.13");
  EXPECT_FALSE(node->unschedulable);

  auto event = as_event(r.documents[1]);
  ASSERT_TRUE(event);
  EXPECT_EQ(event->involved_object.kind, "Pod");
  EXPECT_EQ(event->involved_object.name, "infer-0");
  EXPECT_EQ(event->involved_object.namespace_, "ml");
  EXPECT_EQ(event->reason, "FailedScheduling");
  EXPECT_EQ(event->type, "Warning");
  EXPECT_EQ(event->count, 12);
  EXPECT_EQ(event->source_component, "default-scheduler");
  EXPECT_EQ(event->last_timestamp, "2024-05-01T10:30:00Z");

  const LoadResult w = load("workloads.yaml");
  const auto tolerations = as_workload(w.documents[0])->pod_template.spec.tolerations;
  EXPECT_TRUE(tolerates(tolerations, node->taints[0]));
  EXPECT_EQ(first_untolerated(node->taints, tolerations), nullptr);
  auto pod = as_pod(r.documents[2]);
  EXPECT_EQ(first_untolerated(node->taints, pod->spec.tolerations), &node->taints[0]);
}

TEST(Helpers, TolerationSemantics) {
  const Taint gpu{"nvidia.com/gpu", "present", "NoSchedule", 0};
  EXPECT_TRUE(tolerates(Toleration{"nvidia.com/gpu", "Exists", "", "", {}, 0}, gpu));
  EXPECT_TRUE(tolerates(Toleration{"", "Exists", "", "", {}, 0}, gpu));  // empty key + Exists: everything
  EXPECT_TRUE(tolerates(Toleration{"nvidia.com/gpu", "Equal", "present", "NoSchedule", {}, 0}, gpu));
  EXPECT_TRUE(tolerates(Toleration{"nvidia.com/gpu", "", "present", "", {}, 0}, gpu));  // "" = Equal
  EXPECT_FALSE(tolerates(Toleration{"nvidia.com/gpu", "Equal", "absent", "", {}, 0}, gpu));
  EXPECT_FALSE(tolerates(Toleration{"nvidia.com/gpu", "Exists", "", "NoExecute", {}, 0}, gpu));
  EXPECT_FALSE(tolerates(Toleration{"other", "Exists", "", "", {}, 0}, gpu));
  EXPECT_FALSE(tolerates(Toleration{"nvidia.com/gpu", "Bogus", "", "", {}, 0}, gpu));
  // An empty key needs Exists (API validation): with Equal (or no operator) it tolerates nothing,
  // not even a taint whose value it names.
  EXPECT_FALSE(tolerates(Toleration{"", "Equal", "present", "", {}, 0}, gpu));
  EXPECT_FALSE(tolerates(Toleration{"", "", "present", "", {}, 0}, gpu));
  EXPECT_FALSE(tolerates(Toleration{"", "Exists", "", "NoExecute", {}, 0}, gpu));  // the effect still counts
  const Taint prefer{"x", "", "PreferNoSchedule", 0};
  EXPECT_EQ(first_untolerated(std::vector<Taint>{prefer}, {}), nullptr);  // not a filter
}

TEST(Helpers, FlatMapKeepsStdMapSemantics) {
  // Initialisation keeps the first of duplicate keys (std::map); assign_last_wins the last (what
  // decoding `m[key] = value` in source order gave). Iteration is sorted by key.
  StringMap init{{"b", "1"}, {"a", "2"}, {"b", "3"}};
  ASSERT_EQ(init.size(), 2u);
  EXPECT_EQ(init.begin()->first, "a");
  EXPECT_EQ(init.at("b"), "1");
  StringMap m;
  m.assign_last_wins({{"z", "1"}, {"a", "x"}, {"m", "2"}, {"a", "y"}, {"z", "3"}});
  std::vector<std::string> seen;
  for (const auto& [k, v] : m) seen.push_back(std::string(k) + "=" + std::string(v));
  EXPECT_EQ(seen, (std::vector<std::string>{"a=y", "m=2", "z=3"}));
  EXPECT_TRUE(m.contains("m"));
  EXPECT_EQ(m.count("q"), 0u);
  EXPECT_EQ(m.find("q"), m.end());
  EXPECT_THROW((void)m.at("q"), std::out_of_range);
  m["b"] = "new";
  EXPECT_EQ(std::next(m.begin())->first, "b");
  EXPECT_FALSE(m.try_emplace("b", "other").second);
  EXPECT_EQ(m.at("b"), "new");
  EXPECT_EQ(m, (StringMap{{"a", "y"}, {"b", "new"}, {"m", "2"}, {"z", "3"}}));
}

TEST(Helpers, SelectorSemantics) {
  const StringMap labels{{"app", "a"}, {"gpu", "h100"}, {"count", "8"}};
  LabelSelector s;
  EXPECT_TRUE(s.matches(labels));  // empty: everything
  s.match_labels = {{"app", "a"}};
  EXPECT_TRUE(s.matches(labels));
  s.match_expressions = {{"gpu", "NotIn", {"a100"}, 0}, {"zone", "DoesNotExist", {}, 0}, {"app", "Exists", {}, 0}};
  EXPECT_TRUE(s.matches(labels));
  s.match_expressions.push_back({"gpu", "In", {"a100", "l4"}, 0});
  EXPECT_FALSE(s.matches(labels));
  s.match_expressions = {{"gpu", "Bogus", {}, 0}};
  EXPECT_FALSE(s.matches(labels));

  const NodeSelectorTerm gt{{{"count", "Gt", {"4"}, 0}}, {}, 0};
  EXPECT_TRUE(matches(gt, labels, "n1"));
  EXPECT_FALSE(matches(NodeSelectorTerm{{{"count", "Lt", {"4"}, 0}}, {}, 0}, labels, "n1"));
  EXPECT_FALSE(matches(NodeSelectorTerm{{{"count", "Gt", {"x"}, 0}}, {}, 0}, labels, "n1"));
  EXPECT_FALSE(matches(NodeSelectorTerm{}, labels, "n1"));  // an empty term matches nothing
  EXPECT_TRUE(matches(NodeSelectorTerm{{}, {{"metadata.name", "In", {"n1"}, 0}}, 0}, labels, "n1"));
  EXPECT_FALSE(matches(NodeSelectorTerm{{}, {{"metadata.name", "In", {"n1"}, 0}}, 0}, labels, "n2"));
  EXPECT_TRUE(matches_any(std::vector<NodeSelectorTerm>{NodeSelectorTerm{}, gt}, labels, "n1"));
  EXPECT_FALSE(matches_any({}, labels, "n1"));
  EXPECT_TRUE(matches_node_selector({{"gpu", "h100"}}, labels));
  EXPECT_FALSE(matches_node_selector({{"gpu", "a100"}}, labels));
}

TEST(Views, QuotaPriorityPdbServicePvcHpaRulesNamespaceConfigMap) {
  const LoadResult r = load("misc.yaml");
  EXPECT_THAT(r.errors, IsEmpty());
  auto quota = as_resource_quota(*find(r, "ResourceQuota", "gpu-quota"));
  ASSERT_TRUE(quota);
  EXPECT_EQ(quota->hard.at("requests.nvidia.com/gpu").value, q("8"));
  EXPECT_EQ(quota->hard.at("requests.nvidia.com/gpu").line, 6);
  EXPECT_EQ(quota->status_used.at("requests.nvidia.com/gpu").value, q("6"));
  EXPECT_EQ(quota->hard.at("limits.memory").value, q("512Gi"));

  auto pc = as_priority_class(*find(r, "PriorityClass", "high"));
  EXPECT_EQ(pc->value.value, 100000);
  EXPECT_FALSE(pc->global_default.value);
  EXPECT_EQ(*pc->preemption_policy, "Never");

  auto pdb = as_pod_disruption_budget(*find(r, "PodDisruptionBudget", "trainer"));
  EXPECT_TRUE(pdb->min_available->is_string);
  EXPECT_EQ(pdb->min_available->string_value, "50%");
  EXPECT_EQ(pdb->min_available.line, 25);
  EXPECT_FALSE(pdb->max_unavailable);
  EXPECT_TRUE(pdb->selector.matches({{"app", "trainer"}}));
  auto strict = as_pod_disruption_budget(*find(r, "PodDisruptionBudget", "strict"));
  EXPECT_EQ(strict->max_unavailable->int_value, 0);
  EXPECT_FALSE(strict->max_unavailable->is_string);
  EXPECT_GT(strict->selector.line, 0);  // present and empty: selects every pod

  auto svc = as_service(*find(r, "Service", "infer"));
  EXPECT_EQ(svc->selector.at("app"), "infer");
  EXPECT_EQ(svc->ports.at(0).port, 80);
  EXPECT_EQ(svc->ports.at(0).target_port.string_value, "http-alt");

  auto pvc = as_persistent_volume_claim(*find(r, "PersistentVolumeClaim", "cache-pvc"));
  EXPECT_EQ(*pvc->storage_class_name, "fast");
  EXPECT_EQ(pvc->access_modes.at(0).value, "ReadWriteOnce");
  EXPECT_EQ(pvc->storage.value, q("100Gi"));
  EXPECT_EQ(pvc->storage.line, 54);

  auto hpa = as_horizontal_pod_autoscaler(*find(r, "HorizontalPodAutoscaler", "infer"));
  EXPECT_EQ(hpa->scale_target_ref.kind, "StatefulSet");
  EXPECT_EQ(hpa->max_replicas.value, 4);
  ASSERT_THAT(hpa->metrics, SizeIs(2));
  EXPECT_EQ(hpa->metrics[0].type, "Resource");
  EXPECT_EQ(hpa->metrics[0].name, "nvidia.com/gpu");
  EXPECT_EQ(hpa->metrics[0].target_type, "Utilization");
  EXPECT_EQ(hpa->metrics[1].name, "DCGM_FI_DEV_GPU_UTIL");

  auto rules = as_prometheus_rule(*find(r, "PrometheusRule", "gpu-rules"));
  ASSERT_THAT(rules->groups, SizeIs(1));
  ASSERT_THAT(rules->groups[0].rules, SizeIs(2));
  EXPECT_EQ(*rules->groups[0].rules[0].alert, "GpuHot");
  EXPECT_EQ(rules->groups[0].rules[0].line, 80);
  EXPECT_EQ(rules->groups[0].rules[0].expr.line, 81);
  EXPECT_EQ(*rules->groups[0].rules[0].for_, "5m");
  EXPECT_EQ(rules->groups[0].rules[0].labels.at("severity"), "warning");
  EXPECT_EQ(*rules->groups[0].rules[1].record, "gpu:util:avg");

  const Document* ns = find(r, "Namespace", "ml");
  EXPECT_EQ(*as_namespace(*ns)->phase, "Active");
  EXPECT_EQ(ns->metadata.labels.at("team"), "ai");
  auto cm = as_config_map(*find(r, "ConfigMap", "cfg"));
  EXPECT_EQ(*cm->data.at("config.yaml"), "version: v1\n");
  EXPECT_EQ(*cm->data.at("enabled"), "true");
}

TEST(Views, DynamicResourceAllocation) {
  const LoadResult r = load("dra.yaml");
  EXPECT_THAT(r.errors, IsEmpty());
  const Document* claim_doc = find(r, "ResourceClaim", "pair");
  EXPECT_EQ(claim_doc->api_version_only(), "v1");
  auto claim = as_resource_claim(*claim_doc);
  ASSERT_TRUE(claim);
  ASSERT_THAT(claim->spec.requests, SizeIs(2));
  const DeviceRequest& gpu = claim->spec.requests[0];
  EXPECT_EQ(gpu.name, "gpu");
  EXPECT_TRUE(gpu.exactly);
  EXPECT_EQ(*gpu.request.device_class_name, "gpu.nvidia.com");
  EXPECT_EQ(gpu.request.count.value, 2);
  EXPECT_EQ(gpu.request.count.line, 11);
  EXPECT_EQ(*gpu.request.allocation_mode, "ExactCount");
  ASSERT_THAT(gpu.request.selectors, SizeIs(1));
  EXPECT_THAT(std::string(*gpu.request.selectors[0].expression), HasSubstr("compareTo(quantity('40Gi'))"));
  EXPECT_EQ(gpu.request.selectors[0].expression.line, 14);
  const DeviceRequest& any = claim->spec.requests[1];
  ASSERT_THAT(any.first_available, SizeIs(2));
  EXPECT_EQ(any.first_available[1].name, "small");
  EXPECT_EQ(*any.first_available[1].device_class_name, "mig.nvidia.com");
  EXPECT_EQ(any.first_available[1].line, 19);
  ASSERT_THAT(claim->spec.constraints, SizeIs(1));
  EXPECT_THAT(claim->spec.constraints[0].requests, ElementsAre("gpu"));
  EXPECT_EQ(*claim->spec.constraints[0].match_attribute, "gpu.nvidia.com/parentUUID");
  EXPECT_TRUE(claim->allocated);
  EXPECT_THAT(claim->reserved_for, ElementsAre("infer-0"));

  const Document* tmpl_doc = find(r, "ResourceClaimTemplate", "two-gpus");
  EXPECT_EQ(tmpl_doc->api_version_only(), "v1beta1");
  auto tmpl = as_resource_claim_template(*tmpl_doc);
  ASSERT_TRUE(tmpl);
  EXPECT_EQ(tmpl->claim_metadata.labels.at("claim"), "two");
  ASSERT_THAT(tmpl->spec.requests, SizeIs(1));
  EXPECT_FALSE(tmpl->spec.requests[0].exactly);  // v1beta1 flat form
  EXPECT_EQ(tmpl->spec.requests[0].request.count.value, 2);
  EXPECT_EQ(tmpl->spec.requests[0].request.count.line, 42);
  EXPECT_EQ(*tmpl->spec.requests[0].request.selectors.at(0).expression, "device.driver == 'gpu.nvidia.com'");
  EXPECT_FALSE(as_resource_claim(*tmpl_doc));

  auto cls = as_device_class(*find(r, "DeviceClass", "gpu.nvidia.com"));
  ASSERT_THAT(cls->selectors, SizeIs(1));
  EXPECT_EQ(cls->selectors[0].expression.line, 52);

  auto slice = as_resource_slice(*find(r, "ResourceSlice", "node-1-gpu"));
  ASSERT_TRUE(slice);
  EXPECT_EQ(*slice->driver, "gpu.nvidia.com");
  EXPECT_EQ(*slice->node_name, "gpu-node-1");
  EXPECT_EQ(*slice->pool_name, "gpu-node-1");
  EXPECT_EQ(slice->pool_generation.value, 3);
  ASSERT_THAT(slice->devices, SizeIs(1));
  EXPECT_EQ(slice->devices[0].name, "gpu-0");
  EXPECT_EQ(slice->devices[0].attributes.at("productName").type, "string");
  EXPECT_EQ(slice->devices[0].attributes.at("productName").value->text(), "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(slice->devices[0].attributes.at("index").value->as_int(), 0);
  EXPECT_EQ(slice->devices[0].capacity.at("memory").value, q("80Gi"));
  EXPECT_EQ(slice->devices[0].capacity.at("memory").line, 67);
  auto old = as_resource_slice(*find(r, "ResourceSlice", "node-2-gpu"));
  ASSERT_THAT(old->devices, SizeIs(1));
  EXPECT_EQ(old->devices[0].capacity.at("memory").value, q("40Gi"));  // devices[].basic flattened
  EXPECT_EQ(old->devices[0].attributes.at("productName").value->text(), "NVIDIA A100");
}

// "Billion laughs": each level a list of nine aliases of the level before.
std::string alias_bomb(int levels) {
  std::string y = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: lol\ndata:\n  l0: &l0 [x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i < levels; ++i) {
    y += fmt::format("  l{}: &l{} [", i, i);
    for (int j = 0; j < 9; ++j) y += fmt::format("{}*l{}", j == 0 ? "" : ", ", i - 1);
    y += "]\n";
  }
  return y;
}

TEST(Limits, AliasBombStopsAtTheNodeBudgetWithALine) {
  // 9^7 = 4.8 million nodes from 0.4 KB: over the budget of 1,000,000 + one per input byte.
  for (int levels : {7, 12}) {
    const LoadResult r = load_text(alias_bomb(levels) + "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: after\n",
                                   "bomb.yaml");
    EXPECT_THAT(r.documents, IsEmpty()) << levels;
    ASSERT_THAT(r.errors, SizeIs(1)) << levels;
    EXPECT_EQ(r.errors[0].source, "bomb.yaml");
    EXPECT_GE(r.errors[0].line, 6);
    EXPECT_LE(r.errors[0].line, 6 + levels);
    EXPECT_THAT(r.errors[0].message, HasSubstr("expands to more than 1000"));
    EXPECT_THAT(r.errors[0].message, HasSubstr("billion laughs"));
  }
}

TEST(Limits, ModestAliasUseStillLoads) {
  // 9^5 = 59,049 expanded nodes: far under the budget, and YAML aliases are legal.
  const LoadResult r = load_text(alias_bomb(5), "anchors.yaml");
  EXPECT_THAT(r.errors, IsEmpty());
  ASSERT_THAT(r.documents, SizeIs(1));
  const Value* l4 = r.documents[0].root->at({"data", "l4"});
  ASSERT_NE(l4, nullptr);
  ASSERT_EQ(l4->size(), 9u);
  EXPECT_EQ(l4->items()[8].items()[8].items()[8].items()[8].items()[8].text(), "x");
}

TEST(Limits, YamlOverSixtyFourMiBIsRefusedJsonIsNot) {
  std::string yaml = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big\ndata:\n  blob: \"";
  yaml.append((64u << 20) + 1, 'a');
  yaml += "\"\n";
  const LoadResult y = load_text(yaml, "big.yaml");
  EXPECT_THAT(y.documents, IsEmpty());
  ASSERT_THAT(y.errors, SizeIs(1));
  EXPECT_EQ(y.errors[0].line, 1);
  EXPECT_THAT(y.errors[0].message, HasSubstr("over kgpu's limit of 64 MiB for YAML"));

  std::string json = R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"big"},"data":{"blob":")";
  json.append((64u << 20) + 1, 'a');
  json += "\"}}";
  const LoadResult j = load_text(std::move(json), "big.json");
  EXPECT_THAT(j.errors, IsEmpty());
  ASSERT_THAT(j.documents, SizeIs(1));
  EXPECT_EQ(j.documents[0].root->at({"data", "blob"})->text().size(), (64u << 20) + 1);
}

TEST(Limits, NulAndControlBytesAreNamedWithTheirLine) {
  const std::string text = std::string("apiVersion: v1\nkind: Pod\nmetadata:\n  name: a") + '\0' +
                           "b\n---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: ok\n---\napiVersion: v1\n"
                           "kind: Pod\nmetadata:\n  name: \"esc\x1b[0m\"\n---\nkind: Pod\nmetadata: {name: del\x7f}\n";
  const LoadResult r = load_text(text, "bytes.yaml");
  ASSERT_THAT(r.documents, SizeIs(1));
  EXPECT_EQ(r.documents[0].metadata.name, "ok");
  ASSERT_THAT(r.errors, SizeIs(3));
  EXPECT_EQ(r.errors[0].to_string(), "bytes.yaml:4: NUL byte (\\0) at line 4, column 10: not valid in YAML (a binary file?)");
  EXPECT_EQ(r.errors[1].line, 14);
  EXPECT_THAT(r.errors[1].message, HasSubstr("control byte 0x1b at line 14, column 13"));
  EXPECT_THAT(r.errors[1].message, HasSubstr("\\x1b"));
  EXPECT_EQ(r.errors[2].line, 17);
  EXPECT_THAT(r.errors[2].message, HasSubstr("control byte 0x7f at line 17"));
}

TEST(Limits, InvalidQuantitiesAreFlaggedWithTheirField) {
  const LoadResult r = load_text(R"(apiVersion: v1
kind: Pod
metadata:
  name: p
spec:
  containers:
  - name: main
    resources:
      limits:
        nvidia.com/gpu: 1e999999999
        memory: .inf
      requests:
        cpu: NaN
        memory: [1]
---
apiVersion: v1
kind: Node
metadata:
  name: n
status:
  capacity:
    nvidia.com/gpu: "+Inf"
  allocatable:
    nvidia.com/gpu: "NaN"
    cpu: "8"
)",
                                 "q.yaml");
  ASSERT_THAT(r.errors, IsEmpty());
  ASSERT_THAT(r.documents, SizeIs(2));
  const auto pod = quantity_issues(r.documents[0]);
  ASSERT_THAT(pod, SizeIs(4));
  EXPECT_EQ(pod[0].line, 10);
  EXPECT_THAT(pod[0].message, HasSubstr("resources.limits.nvidia.com/gpu: quantity '1e999999999' is out of range"));
  EXPECT_EQ(pod[1].line, 11);
  EXPECT_THAT(pod[1].message, HasSubstr("limits.memory: invalid quantity '.inf'"));
  EXPECT_EQ(pod[2].line, 13);
  EXPECT_EQ(pod[3].line, 14);
  EXPECT_THAT(pod[3].message, HasSubstr("expected a quantity, found a list"));
  const auto node = quantity_issues(r.documents[1]);
  ASSERT_THAT(node, SizeIs(2));
  EXPECT_EQ(node[0].line, 22);
  EXPECT_THAT(node[0].message, HasSubstr("capacity.nvidia.com/gpu: invalid quantity '+Inf'"));
  EXPECT_EQ(node[1].line, 24);
  EXPECT_THAT(node[1].message, HasSubstr("allocatable.nvidia.com/gpu: invalid quantity 'NaN'"));
  // Other type problems are not quantity issues.
  const LoadResult other = load_text("kind: Deployment\nmetadata: {name: d}\nspec: {replicas: many}\n", "d.yaml");
  ASSERT_THAT(other.documents, SizeIs(1));
  EXPECT_THAT(quantity_issues(other.documents[0]), IsEmpty());
}

TEST(KindFilter, DropsUnwantedKindsOfListsArraysAndYaml) {
  const auto pods_only = [](std::string_view kind) { return kind == "Pod"; };
  const std::string list = "{\"apiVersion\": \"v1\", \"items\": [\n"
                           "{\"kind\": \"ConfigMap\", \"metadata\": {\"name\": \"cm\"}},\n"
                           "{\"kind\": \"Pod\", \"metadata\": {\"name\": \"a\"}},\n"
                           "{\"metadata\": {\"name\": \"cm2\"}, \"kind\": \"ConfigMap\", \"data\": {\"k\": \"v\\u00e9\"}},\n"
                           "{\"kind\": \"Pod\", \"metadata\": {\"name\": \"b\"}, \"spec\": {\"x\": [1, 2]}}\n"
                           "], \"kind\": \"List\"}\n";
  const LoadResult r = load_text(list, "s.json", InputFormat::kAuto, pods_only);
  EXPECT_THAT(r.errors, IsEmpty());
  ASSERT_THAT(r.documents, SizeIs(2));
  EXPECT_EQ(r.documents[0].metadata.name, "a");
  EXPECT_EQ(r.documents[0].line, 3);
  EXPECT_EQ(r.documents[1].metadata.name, "b");
  EXPECT_EQ(r.documents[1].line, 5);
  EXPECT_EQ(r.documents[1].root->at({"spec", "x"})->items()[1].text(), "2");
  // Without a filter everything stays.
  EXPECT_THAT(load_text(list, "s.json").documents, SizeIs(4));
  const LoadResult arr = load_text("[{\"kind\": \"Secret\"}, {\"kind\": \"Pod\", \"metadata\": {\"name\": \"c\"}}]",
                                   "a.json", InputFormat::kAuto, pods_only);
  ASSERT_THAT(arr.documents, SizeIs(1));
  EXPECT_EQ(arr.documents[0].metadata.name, "c");
  const LoadResult yaml =
      load_text("kind: ConfigMap\nmetadata: {name: x}\n---\nkind: Pod\nmetadata: {name: y}\n", "y.yaml",
                InputFormat::kAuto, pods_only);
  ASSERT_THAT(yaml.documents, SizeIs(1));
  EXPECT_EQ(yaml.documents[0].metadata.name, "y");
  EXPECT_EQ(yaml.documents[0].line, 4);
}

}  // namespace
}  // namespace kgpu::k8s
