// The live scheduler below HTTP: the extender wire format, the assignment split, and the model's
// accounting (choices, their expiry, reports, pods of other schedulers) on an injected clock.
#include <gtest/gtest.h>

#include "common/clock.h"
#include "scheduler/extender.h"
#include "scheduler/scheduler.h"
#include "report_node.h"

namespace kgpu::scheduler {
namespace {

using nlohmann::json;

std::vector<std::string> names_of(const ExtenderArgs& a) { return {a.node_names.begin(), a.node_names.end()}; }

TEST(Extender, ArgsInEitherFormAndRepliesInTheSameForm) {
  auto names = parse_extender_args(R"({"Pod":{"metadata":{"name":"p","uid":"u"}},"Nodes":null,"NodeNames":["a","b"]})");
  ASSERT_TRUE(names) << names.error().message;
  EXPECT_TRUE(names->names_only);
  EXPECT_EQ(names_of(*names), (std::vector<std::string>{"a", "b"}));
  const json r1 = json::parse(encode_filter_result({{"b"}, {{"a", "why"}}, {}, ""}, *names));
  EXPECT_EQ(r1["NodeNames"], json::array({"b"}));
  EXPECT_TRUE(r1["Nodes"].is_null());
  EXPECT_EQ(r1["FailedNodes"]["a"], "why");
  EXPECT_EQ(r1["Error"], "");

  auto objects = parse_extender_args(
      R"({"Pod":{"metadata":{"name":"p"}},"Nodes":{"items":[{"metadata":{"name":"a"},"x":1},{"metadata":{"name":"b"}}]}})");
  ASSERT_TRUE(objects) << objects.error().message;
  EXPECT_FALSE(objects->names_only);
  const json r2 = json::parse(encode_filter_result({{"a"}, {}, {{"b", "taint"}}, ""}, *objects));
  ASSERT_EQ(r2["Nodes"]["items"].size(), 1u);
  EXPECT_EQ(r2["Nodes"]["items"][0]["x"], 1);  // the object as it came
  EXPECT_EQ(r2["FailedAndUnresolvableNodes"]["b"], "taint");
  EXPECT_TRUE(r2["NodeNames"].is_null());
}

// NodeNames bodies are parsed by a reused per-thread parser, larger ones by a parser of their own;
// both give the same names, escapes decoded, and the node-count bound holds in both.
TEST(Extender, LargeAndEscapedNodeListsParseTheSameWay) {
  auto escaped = parse_extender_args(R"({"Pod":{"metadata":{"name":"p\u0031"}},"NodeNames":["a\u0062","c\"d"]})");
  ASSERT_TRUE(escaped) << escaped.error().message;
  EXPECT_EQ(names_of(*escaped), (std::vector<std::string>{"ab", "c\"d"}));
  // The names live in the args: moving them keeps the views valid, and the parser's next use
  // does not touch them.
  ExtenderArgs moved = std::move(*escaped);
  ASSERT_TRUE(parse_extender_args(R"({"Pod":{"metadata":{"name":"q"}},"NodeNames":["zz","yy"]})"));
  EXPECT_EQ(names_of(moved), (std::vector<std::string>{"ab", "c\"d"}));
  EXPECT_EQ(moved.pod["metadata"]["name"], "p1");
  const auto body = [](size_t count, size_t width) {
    std::string b = R"({"Pod":{"metadata":{"name":"p"}},"NodeNames":[)";
    for (size_t i = 0; i < count; ++i) {
      std::string name = "node-" + std::to_string(i);
      name.resize(width, 'x');
      b += (i ? ",\"" : "\"") + name + "\"";
    }
    return b + "]}";
  };
  for (size_t width : {12, 120}) {  // 0.7 MB and 6.1 MB: both parsers
    const std::string b = body(kMaxExtenderNodes, width);
    auto r = parse_extender_args(b);
    ASSERT_TRUE(r) << b.size() << ": " << r.error().message;
    ASSERT_EQ(r->node_names.size(), kMaxExtenderNodes);
    EXPECT_EQ(r->node_names.back().substr(0, 11), "node-49999x");
    EXPECT_EQ(r->node_names.back().size(), width);
    auto over = parse_extender_args(body(kMaxExtenderNodes + 1, width));
    ASSERT_FALSE(over);
    EXPECT_NE(over.error().message.find("more than the 50000 accepted"), std::string::npos) << over.error().message;
  }
}

TEST(Extender, HostileOrMalformedBodiesNameTheField) {
  struct Case {
    std::string body, field;
  } cases[] = {
      {"", "not JSON"},
      {"[1]", "not a JSON object"},
      {R"({"NodeNames":["a"]})", "Pod"},
      {R"({"Pod":{"metadata":{}}})", "Pod.metadata.name"},
      {R"({"Pod":{"metadata":{"name":"p"}},"NodeNames":["a",3]})", "NodeNames[1]"},
      {R"({"Pod":{"metadata":{"name":"p"}},"Nodes":{"items":[{"metadata":{}}]}})", "Nodes.items[0].metadata.name"},
      {R"({"Pod":{"metadata":{"name":"p"}},"Nodes":"x"})", "NodeList"},
      {std::string(5000, '[') + std::string(5000, ']'), "nested deeper"},
  };
  for (const auto& c : cases) {
    auto r = parse_extender_args(c.body);
    ASSERT_FALSE(r) << c.body.substr(0, 40);
    EXPECT_NE(r.error().message.find(c.field), std::string::npos) << r.error().message;
  }
  EXPECT_FALSE(parse_extender_args(std::string(kMaxExtenderBody + 1, ' ')));
  auto bind = parse_binding_args(R"({"PodName":"p","PodNamespace":"ns","PodUID":"u"})");
  ASSERT_FALSE(bind);
  EXPECT_NE(bind.error().message.find("Node: missing"), std::string::npos);
  auto ok = parse_binding_args(R"({"PodName":"p","PodNamespace":"ns","PodUID":"u","Node":"n"})");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->node, "n");
}

TEST(Extender, PreemptionVictimsAsPodsOrUidsAndTheReply) {
  auto full = parse_preemption_args(
      R"({"Pod":{"metadata":{"name":"p"}},"NodeNameToVictims":{"n1":{"Pods":[{"metadata":{"uid":"v1"}}],"NumPDBViolations":2}}})");
  ASSERT_TRUE(full) << full.error().message;
  EXPECT_EQ(full->victims["n1"].uids, std::vector<std::string>{"v1"});
  EXPECT_EQ(full->victims["n1"].pdb_violations, 2);
  auto meta = parse_preemption_args(
      R"({"Pod":{"metadata":{"name":"p"}},"NodeNameToMetaVictims":{"n2":{"Pods":[{"UID":"v2"}]}}})");
  ASSERT_TRUE(meta);
  EXPECT_EQ(meta->victims["n2"].uids, std::vector<std::string>{"v2"});
  EXPECT_FALSE(parse_preemption_args(R"({"Pod":{"metadata":{"name":"p"}},"NodeNameToMetaVictims":{"n":{"Pods":[{}]}}})"));
  const json reply = json::parse(encode_preemption_result(meta->victims));
  EXPECT_EQ(reply["NodeNameToMetaVictims"]["n2"]["Pods"][0]["UID"], "v2");
}

TEST(Assignment, ContainersInKubeletOrderWithInitContainersReusingGpus) {
  const json pod = json::parse(R"({"spec":{
    "initContainers":[{"name":"load","resources":{"limits":{"nvidia.com/gpu":"1"}}},
                      {"name":"proxy","restartPolicy":"Always","resources":{"requests":{"nvidia.com/gpu":1}}}],
    "containers":[{"name":"cpu"},{"name":"train","resources":{"limits":{"nvidia.com/gpu":"2"}}}]}})");
  auto decoded = k8s::api::decode_pod(pod);
  ASSERT_TRUE(decoded) << decoded.error().message;
  const auto cs = container_requests(*decoded, "nvidia.com/gpu");
  ASSERT_EQ(cs.size(), 3u);
  EXPECT_TRUE(cs[0].init);
  EXPECT_FALSE(cs[1].init);  // a sidecar keeps its GPU
  EXPECT_EQ(cs[2].units, 2);
  const auto a = split_assignment(cs, {"G0", "G1", "G2"}, false);
  EXPECT_EQ(k8s::format_assignment(a), "load:G0;proxy:G0;train:G1,G2");
  EXPECT_EQ(k8s::format_assignment(split_assignment({{"a", 2, false}, {"b", 1, false}}, {"G5"}, true)), "a:G5;b:G5");
}

// A node as its agent reports it.
json node(const std::string& name, int gpus, const std::string& resource = "nvidia.com/gpu", int replicas = 1,
          std::vector<std::pair<int, k8s::GpuUse>> used = {}) {
  return kgpu::testing::report_node(name, gpus, resource, replicas, std::move(used));
}

json pod(const std::string& name, int units, const std::string& node = "", const std::string& resource = "nvidia.com/gpu") {
  json p{{"metadata", {{"name", name}, {"namespace", "ns"}, {"uid", "uid-" + name}}},
         {"spec", {{"containers", json::array({json{{"name", "c"}, {"resources", {{"limits", {{resource, std::to_string(units)}}}}}}})}}}};
  if (!node.empty()) p["spec"]["nodeName"] = node;
  return p;
}

using kgpu::testing::args_for;

class Model : public ::testing::Test {
 protected:
  std::unique_ptr<GpuScheduler> make(SchedulerOptions o = {}) { return kgpu::testing::offline_scheduler(clock_, o); }
  FakeClock clock_;
};

TEST_F(Model, AChoiceIsChargedAtOnceAndForgottenWhenNotBound) {
  auto s = make(SchedulerOptions{.assume_ttl = std::chrono::seconds(5)});
  s->upsert_node(node("n1", 1));
  auto d = s->filter(args_for(pod("a", 1), {"n1"}));
  ASSERT_TRUE(d.node) << d.message;
  EXPECT_EQ(d.gpus, std::vector<std::string>{"n1-g0"});
  // The next pod sees the GPU taken.
  auto d2 = s->filter(args_for(pod("b", 1), {"n1"}));
  EXPECT_FALSE(d2.node);
  EXPECT_NE(d2.result.failed.at("n1").find("0 of 1 GPUs free"), std::string::npos) << d2.result.failed.at("n1");
  // Filtering "a" again replaces its own choice rather than adding one.
  EXPECT_TRUE(s->filter(args_for(pod("a", 1), {"n1"})).node);
  EXPECT_EQ(s->allocation("nvidia.com/gpu"), (std::pair<int64_t, int64_t>{1000, 1000}));
  // Never bound: forgotten after the TTL.
  clock_.advance(std::chrono::seconds(6));
  EXPECT_TRUE(s->filter(args_for(pod("b", 1), {"n1"})).node);
}

TEST_F(Model, OnlyTheGivenNodesAreCandidatesAndUnknownOnesAreUnresolvable) {
  auto s = make();
  s->upsert_node(node("n1", 2));
  s->upsert_node(node("n2", 2));
  s->upsert_node(json{{"metadata", {{"name", "cpu-only"}}}});
  auto d = s->filter(args_for(pod("a", 1), {"n2", "cpu-only", "ghost"}));
  ASSERT_TRUE(d.node);
  EXPECT_EQ(*d.node, "n2");
  EXPECT_EQ(d.result.nodes, std::vector<std::string>{"n2"});
  EXPECT_TRUE(d.result.failed.empty() && d.result.unresolvable.empty());  // only a failure is explained
  // Nothing fits: every candidate says why, and only those.
  auto none = s->filter(args_for(pod("big", 3), {"n2", "cpu-only", "ghost"}));
  ASSERT_FALSE(none.node);
  EXPECT_NE(none.result.unresolvable.at("cpu-only").find("no kgpu agent report"), std::string::npos);
  EXPECT_EQ(none.result.unresolvable.at("ghost"), "node unknown to kgpu");
  EXPECT_NE(none.result.failed.at("n2").find("Insufficient nvidia.com/gpu"), std::string::npos);
  EXPECT_FALSE(none.result.failed.contains("n1"));
  EXPECT_EQ(none.message, "0/3 nodes are available: 1 Insufficient nvidia.com/gpu, 1 no kgpu agent report "
                          "(kgpu.io/gpus), 1 node unknown to kgpu.");
}

// The candidate list is resolved once and reused while it repeats: a changed list, a node that
// arrives later, and a rebuilt pool each resolve it again.
TEST_F(Model, RepeatedCandidateListsAreResolvedAgainWhenTheyOrTheNodesChange) {
  auto s = make();
  s->upsert_node(node("n1", 4));
  s->upsert_node(node("n2", 4));
  const std::vector<std::string> both{"n1", "n2", "late"};
  auto a = s->filter(args_for(pod("a", 1), both));
  ASSERT_TRUE(a.node);
  const std::string first = *a.node;
  const std::string other = first == "n1" ? "n2" : "n1";
  // Only the other node this time: the previous list's answer must not leak in.
  auto b = s->filter(args_for(pod("b", 1), {other, "late"}));
  ASSERT_TRUE(b.node);
  EXPECT_EQ(*b.node, other);
  // The same list twice in a row, with a node that is unknown the first time and known the second.
  auto c = s->filter(args_for(pod("c", 8), {"late"}));
  EXPECT_FALSE(c.node);
  EXPECT_EQ(c.result.unresolvable.at("late"), "node unknown to kgpu");
  s->upsert_node(node("late", 8));
  auto c2 = s->filter(args_for(pod("c", 8), {"late"}));
  ASSERT_TRUE(c2.node) << c2.message;
  EXPECT_EQ(*c2.node, "late");
  // A node removed between two equal lists is no candidate any more.
  ASSERT_TRUE(s->filter(args_for(pod("d0", 1), {other})).node);
  s->remove_node(other);
  auto d = s->filter(args_for(pod("d", 1), {other}));
  EXPECT_FALSE(d.node);
  EXPECT_EQ(d.result.unresolvable.at(other), "node unknown to kgpu");
}

TEST_F(Model, ReportsPlacePodsOfOtherSchedulersAndDeletionsFreeThem) {
  auto s = make();
  s->upsert_node(node("n1", 2));
  s->upsert_pod(pod("other", 1, "n1"));  // not in the report yet: the default choice, GPU 0
  EXPECT_EQ(s->charges_on("n1").at("uid-other"), std::vector<std::string>{"n1-g0"});
  s->upsert_node(node("n1", 2, "nvidia.com/gpu", 1, {{1, {"ns", "other", "uid-other", "c", 1}}}));
  EXPECT_EQ(s->charges_on("n1").at("uid-other"), std::vector<std::string>{"n1-g1"});
  // A report entry for a pod the informer does not know holds its GPU too.
  s->upsert_node(node("n1", 2, "nvidia.com/gpu", 1,
                      {{1, {"ns", "other", "uid-other", "c", 1}}, {0, {"ns", "ghost", "uid-ghost", "c", 1}}}));
  EXPECT_FALSE(s->filter(args_for(pod("a", 1), {"n1"})).node);
  s->upsert_node(node("n1", 2, "nvidia.com/gpu", 1, {{1, {"ns", "other", "uid-other", "c", 1}}}));
  auto d = s->filter(args_for(pod("a", 1), {"n1"}));
  ASSERT_TRUE(d.node);
  EXPECT_EQ(d.gpus, std::vector<std::string>{"n1-g0"});
  s->remove_pod(pod("other", 1, "n1"));
  EXPECT_FALSE(s->charges_on("n1").contains("uid-other"));
}

TEST_F(Model, SharesTakeKOverROfOneGpuAndMultiplesOfRAreWholeGpus) {
  auto s = make();
  s->upsert_node(node("n1", 2, "nvidia.com/gpu.shared", 4));
  auto a = s->filter(args_for(pod("a", 1, "", "nvidia.com/gpu.shared"), {"n1"}));
  auto b = s->filter(args_for(pod("b", 3, "", "nvidia.com/gpu.shared"), {"n1"}));
  ASSERT_TRUE(a.node && b.node);
  EXPECT_EQ(a.gpus, b.gpus);  // packed: 1/4 + 3/4
  auto whole = s->filter(args_for(pod("w", 4, "", "nvidia.com/gpu.shared"), {"n1"}));
  ASSERT_TRUE(whole.node);
  EXPECT_NE(whole.gpus, a.gpus);
  EXPECT_EQ(s->allocation("nvidia.com/gpu.shared"), (std::pair<int64_t, int64_t>{2000, 2000}));
  auto none = s->filter(args_for(pod("x", 1, "", "nvidia.com/gpu.shared"), {"n1"}));
  EXPECT_FALSE(none.node);
  EXPECT_NE(none.result.failed.at("n1").find("insufficient GPU share"), std::string::npos) << none.result.failed.at("n1");
}

TEST_F(Model, PodsWithoutGpusPassThroughAndNodeRemovalRebuilds) {
  auto s = make();
  s->upsert_node(node("n1", 1));
  json cpu{{"metadata", {{"name", "web"}, {"namespace", "ns"}, {"uid", "w"}}}, {"spec", {{"containers", json::array({json{{"name", "c"}}})}}}};
  auto d = s->filter(args_for(cpu, {"n1", "n9"}));
  EXPECT_EQ(d.result.nodes, (std::vector<std::string>{"n1", "n9"}));
  s->remove_node("n1");
  EXPECT_EQ(s->allocation("nvidia.com/gpu"), (std::pair<int64_t, int64_t>{0, 0}));
  EXPECT_FALSE(s->filter(args_for(pod("a", 1), {"n1"})).node);
}

}  // namespace
}  // namespace kgpu::scheduler
