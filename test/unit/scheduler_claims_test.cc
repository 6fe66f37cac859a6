// The scheduler's DRA claim allocator on its own: node-local pools of ResourceSlices, DeviceClass
// and request selectors through src/cel, counts and allocation modes, devices taken by other
// claims or by pending choices, taints and tolerations, shared claims pinned to their node,
// claims from templates, prioritized alternatives, the allocation written, expiry of choices.
#include <gtest/gtest.h>

#include "common/clock.h"
#include "scheduler/claims.h"
#include "scheduler/scheduler.h"

namespace kgpu::scheduler {
namespace {

using nlohmann::json;

json device(const std::string& name, const std::string& product, const std::string& memory,
            const std::string& type = "gpu", json taints = nullptr) {
  json d = {{"name", name},
            {"attributes",
             {{"type", {{"string", type}}},
              {"productName", {{"string", product}}},
              {"driverVersion", {{"version", "580.105.8"}}}}},
            {"capacity", {{"memory", {{"value", memory}}}}}};
  if (!taints.is_null()) d["taints"] = taints;
  return d;
}

json slice(const std::string& node, std::vector<json> devices, int64_t generation = 1,
           const std::string& suffix = "0") {
  return {{"metadata", {{"name", node + "-gpu.nvidia.com-" + suffix}}},
          {"spec",
           {{"driver", "gpu.nvidia.com"},
            {"nodeName", node},
            {"pool", {{"name", node}, {"generation", generation}, {"resourceSliceCount", 1}}},
            {"devices", devices}}}};
}

json gpu_class(json config = nullptr) {
  json c = {{"metadata", {{"name", "gpu.nvidia.com"}}},
            {"spec",
             {{"selectors", json::array({{{"cel",
                                           {{"expression",
                                             "device.driver == 'gpu.nvidia.com' && "
                                             "device.attributes['gpu.nvidia.com'].type == 'gpu'"}}}}})}}}};
  if (!config.is_null()) c["spec"]["config"] = config;
  return c;
}

json request(const std::string& name, std::vector<std::string> selectors = {}, int64_t count = 1,
             const std::string& mode = "ExactCount") {
  json sels = json::array();
  for (const auto& s : selectors) sels.push_back({{"cel", {{"expression", s}}}});
  json ex = {{"deviceClassName", "gpu.nvidia.com"}, {"allocationMode", mode}, {"selectors", sels}};
  if (mode == "ExactCount") ex["count"] = count;
  return {{"name", name}, {"exactly", ex}};
}

json claim(const std::string& name, std::vector<json> requests, const std::string& uid = "") {
  return {{"metadata", {{"name", name}, {"namespace", "default"}, {"uid", uid.empty() ? "uid-" + name : uid}}},
          {"spec", {{"devices", {{"requests", requests}}}}}};
}

json allocated(json c, const std::string& node, std::vector<std::string> devices,
               std::vector<std::string> reserved = {}) {
  json results = json::array();
  for (const auto& d : devices)
    results.push_back({{"request", "gpu"}, {"driver", "gpu.nvidia.com"}, {"pool", node}, {"device", d}});
  const json field = {{"key", "metadata.name"}, {"operator", "In"}, {"values", json::array({node})}};
  const json term = {{"matchFields", json::array({field})}};
  c["status"]["allocation"] = {{"devices", {{"results", results}}},
                               {"nodeSelector", {{"nodeSelectorTerms", json::array({term})}}}};
  for (const auto& r : reserved) c["status"]["reservedFor"].push_back({{"resource", "pods"}, {"name", r}, {"uid", r}});
  return c;
}

json pod(const std::string& name, std::vector<std::string> claims) {
  json rcs = json::array();
  for (const auto& c : claims) rcs.push_back({{"name", c}, {"resourceClaimName", c}});
  return {{"metadata", {{"name", name}, {"namespace", "default"}, {"uid", "pod-" + name}}},
          {"spec", {{"resourceClaims", rcs}, {"containers", json::array()}}}};
}

constexpr const char* kMem40 = "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0";
constexpr const char* kH100 = "device.attributes['gpu.nvidia.com'].productName.lowerAscii().matches('^.*h100.*$')";

class Claims : public ::testing::Test {
 protected:
  Claims() : a(clock, std::chrono::seconds(60)) {
    a.upsert_class(gpu_class());
    // n1: two 24Gi L4s; n2: two H100s and a MIG device; n3: one H100.
    a.upsert_slice(slice("n1", {device("gpu-0", "NVIDIA L4", "23034Mi"), device("gpu-1", "NVIDIA L4", "23034Mi")}));
    a.upsert_slice(slice(
        "n2", {device("gpu-0", "NVIDIA H100 80GB HBM3", "81559Mi"), device("gpu-1", "NVIDIA H100 80GB HBM3", "81559Mi"),
               device("gpu-2-mig-1g10gb-19-0", "NVIDIA H100 80GB HBM3", "9856Mi", "mig")}));
    a.upsert_slice(slice("n3", {device("gpu-0", "NVIDIA H100 80GB HBM3", "81559Mi")}));
  }
  ClaimFilterResult filter(const json& p, std::vector<std::string_view> nodes = {"n1", "n2", "n3"}) {
    return a.filter(p, nodes);
  }
  std::vector<std::string> devices_of(const std::string& pod_uid) {
    std::vector<std::string> out;
    auto c = a.choice(pod_uid);
    if (!c) return out;
    for (const auto& cc : c->claims)
      for (const auto& [req, id] : cc.results) out.push_back(c->node + "/" + req + "/" + id.device);
    return out;
  }
  FakeClock clock;
  ClaimAllocator a;
};

TEST_F(Claims, SelectorsChooseTheNodeAndPackingTheDevice) {
  a.upsert_claim(claim("big", {request("gpu", {kMem40, kH100})}));
  auto r = filter(pod("p", {"big"}));
  ASSERT_TRUE(r.node) << r.message;
  // n2 and n3 both fit; n3 is left with fewer free devices (0 against 2).
  EXPECT_EQ(*r.node, "n3");
  EXPECT_EQ(devices_of("pod-p"), (std::vector<std::string>{"n3/gpu/gpu-0"}));
  EXPECT_TRUE(r.failed.empty() && r.unresolvable.empty());

  // Two devices: only n2 has two H100s (its MIG device is not of the class).
  a.upsert_claim(claim("two", {request("gpu", {kMem40}, 2)}));
  r = filter(pod("q", {"two"}));
  ASSERT_TRUE(r.node) << r.message;
  EXPECT_EQ(*r.node, "n2");
  EXPECT_EQ(devices_of("pod-q"), (std::vector<std::string>{"n2/gpu/gpu-0", "n2/gpu/gpu-1"}));

  // Nothing satisfies: every node explained, the selector named.
  a.upsert_claim(
      claim("huge", {request("gpu", {"device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('100Gi')) >= 0"})}));
  r = filter(pod("h", {"huge"}));
  EXPECT_FALSE(r.node);
  EXPECT_EQ(r.reason, "CannotAllocateClaims");
  ASSERT_EQ(r.unresolvable.size(), 3u) << r.message;
  EXPECT_NE(r.unresolvable["n2"].find("wants 1 device(s), 0 free"), std::string::npos) << r.unresolvable["n2"];
  EXPECT_NE(r.unresolvable["n2"].find("quantity('100Gi')"), std::string::npos) << r.unresolvable["n2"];
  EXPECT_NE(r.message.find("0/3 nodes are available"), std::string::npos) << r.message;
}

TEST_F(Claims, DevicesOfOtherClaimsAndPendingChoicesAreTaken) {
  a.upsert_claim(allocated(claim("held", {request("gpu")}), "n3", {"gpu-0"}, {"other"}));
  a.upsert_claim(claim("c1", {request("gpu", {kH100})}));
  a.upsert_claim(claim("c2", {request("gpu", {kH100})}));
  a.upsert_claim(claim("c3", {request("gpu", {kH100})}));
  auto r1 = filter(pod("p1", {"c1"}), {"n2", "n3"});
  ASSERT_TRUE(r1.node) << r1.message;
  auto r2 = filter(pod("p2", {"c2"}), {"n2", "n3"});
  ASSERT_TRUE(r2.node) << r2.message;
  EXPECT_EQ(devices_of("pod-p1"), (std::vector<std::string>{"n2/gpu/gpu-0"}));
  EXPECT_EQ(devices_of("pod-p2"), (std::vector<std::string>{"n2/gpu/gpu-1"}));
  // n2's two H100s are chosen, n3's is allocated: a third claim waits; another claim's devices
  // may free up, so preemption could help (failed, not unresolvable).
  auto r3 = filter(pod("p3", {"c3"}), {"n2", "n3"});
  EXPECT_FALSE(r3.node);
  EXPECT_NE(r3.failed["n3"].find("1 of them already allocated"), std::string::npos) << r3.failed["n3"];
  EXPECT_NE(r3.failed["n2"].find("2 of them already allocated"), std::string::npos) << r3.failed["n2"];
  // A choice not bound within the TTL is forgotten.
  clock.advance(std::chrono::seconds(61));
  auto r4 = filter(pod("p3", {"c3"}), {"n2", "n3"});
  ASSERT_TRUE(r4.node) << r4.message;
  EXPECT_EQ(*r4.node, "n2");
  EXPECT_FALSE(a.choice("pod-p1"));
  // A pod gone: its choice goes too.
  a.forget_pod("pod-p3");
  EXPECT_FALSE(a.choice("pod-p3"));
}

TEST_F(Claims, TaintsKeepDevicesUnlessTolerated) {
  const json taint =
      json::array({{{"key", "gpu.nvidia.com/unreachable"}, {"value", "GPU-lost"}, {"effect", "NoExecute"}}});
  a.upsert_slice(slice("n3", {device("gpu-0", "NVIDIA H100 80GB HBM3", "81559Mi", "gpu", taint)}));
  a.upsert_claim(claim("c", {request("gpu", {kH100})}));
  auto r = filter(pod("p", {"c"}), {"n3"});
  EXPECT_FALSE(r.node);
  EXPECT_NE(r.unresolvable["n3"].find("1 tainted (not tolerated)"), std::string::npos) << r.message;
  json tolerant = request("gpu", {kH100});
  tolerant["exactly"]["tolerations"] = json::array({{{"key", "gpu.nvidia.com/unreachable"}, {"operator", "Exists"}}});
  a.upsert_claim(claim("t", {tolerant}));
  r = filter(pod("q", {"t"}), {"n3"});
  ASSERT_TRUE(r.node) << r.message;
  a.forget_pod("pod-q");
  // Effect None is only information.
  const json none = json::array({{{"key", "gpu.nvidia.com/note"}, {"value", "x"}, {"effect", "None"}}});
  a.upsert_slice(slice("n3", {device("gpu-0", "NVIDIA H100 80GB HBM3", "81559Mi", "gpu", none)}));
  r = filter(pod("p", {"c"}), {"n3"});
  EXPECT_TRUE(r.node) << r.message;
}

// Partitions of one GPU (KEP-4815, dynamic MIG): each consumes the memory slices of its placement
// and its compute slices from the GPU's counter set, published in a slice of its own.
json partition(const std::string& profile, unsigned compute, unsigned start, unsigned size) {
  json d = device("gpu-0-mig-" + profile + "-" + std::to_string(start), "NVIDIA H100 80GB HBM3", "40Gi", "mig");
  d["attributes"]["profile"] = {{"string", profile}};
  json counters = {{"compute-slices", {{"value", std::to_string(compute)}}}};
  for (unsigned i = start; i < start + size; ++i) counters["memory-slice-" + std::to_string(i)] = {{"value", "1"}};
  d["consumesCounters"] = json::array({{{"counterSet", "gpu-0-counter-set"}, {"counters", counters}}});
  return d;
}

json counter_slice(const std::string& node, unsigned compute_slices) {
  json counters = {{"compute-slices", {{"value", std::to_string(compute_slices)}}}};
  for (unsigned i = 0; i < 8; ++i) counters["memory-slice-" + std::to_string(i)] = {{"value", "1"}};
  json s = slice(node, {}, 1, "counters");
  s["spec"].erase("devices");
  s["spec"]["sharedCounters"] = json::array({{{"name", "gpu-0-counter-set"}, {"counters", counters}}});
  return s;
}

json mig_class() {
  json c = gpu_class();
  c["metadata"]["name"] = "mig.nvidia.com";
  c["spec"]["selectors"][0]["cel"]["expression"] = "device.attributes['gpu.nvidia.com'].type == 'mig'";
  return c;
}

json mig_request(const std::string& profile) {
  json r = request("gpu", {"device.attributes['gpu.nvidia.com'].profile == '" + profile + "'"});
  r["exactly"]["deviceClassName"] = "mig.nvidia.com";
  return r;
}

TEST_F(Claims, PartitionsFitTheCountersTheirGpuHasLeft) {
  a.upsert_class(mig_class());
  a.upsert_slice(counter_slice("m", 7));
  a.upsert_slice(slice("m",
                       {partition("4g40gb", 4, 0, 4), partition("3g40gb", 3, 4, 4), partition("1g10gb", 1, 0, 1),
                        partition("1g10gb", 1, 4, 1), partition("1g10gb", 1, 5, 1), partition("7g80gb", 7, 0, 8)}));
  a.upsert_claim(allocated(claim("four", {mig_request("4g40gb")}), "m", {"gpu-0-mig-4g40gb-0"}, {"x"}));
  // The 7g.80gb and the 1g.10gb at slice 0 overlap the 4g.40gb: the 1g.10gb goes to slice 4.
  a.upsert_claim(claim("one", {mig_request("1g10gb")}));
  auto r = filter(pod("p", {"one"}), {"m"});
  ASSERT_TRUE(r.node) << r.message;
  EXPECT_EQ(devices_of("pod-p"), (std::vector<std::string>{"m/gpu/gpu-0-mig-1g10gb-4"}));
  // Two more 1g.10gb in one claim: slice 5 is left, slice 4 is the pending choice's.
  a.upsert_claim(claim("two", {[] {
                                 json q = mig_request("1g10gb");
                                 q["exactly"]["count"] = 2;
                                 return q;
                               }()}));
  r = filter(pod("q", {"two"}), {"m"});
  EXPECT_FALSE(r.node);
  EXPECT_NE(r.failed["m"].find("wants 2 device(s), 1 free"), std::string::npos) << r.message;
  EXPECT_NE(r.failed["m"].find("1 of them already allocated"), std::string::npos) << r.message;
  EXPECT_NE(r.failed["m"].find("overlap allocated devices (their shared counters are used up)"), std::string::npos)
      << r.message;
  // The 3g.40gb would need slices 4-7 the 1g.10gb holds.
  a.upsert_claim(claim("three", {mig_request("3g40gb")}));
  r = filter(pod("t", {"three"}), {"m"});
  EXPECT_FALSE(r.node);
  EXPECT_NE(r.failed["m"].find("1 overlap allocated devices"), std::string::npos) << r.message;
  // Once the 1g.10gb choice is gone, the 3g.40gb fits beside the 4g.40gb (4 + 3 compute slices).
  a.forget_pod("pod-p");
  r = filter(pod("t", {"three"}), {"m"});
  ASSERT_TRUE(r.node) << r.message;
  EXPECT_EQ(devices_of("pod-t"), (std::vector<std::string>{"m/gpu/gpu-0-mig-3g40gb-4"}));
  a.forget_pod("pod-t");
  // With 6 compute slices on the GPU, 4 + 3 does not fit.
  a.upsert_slice(counter_slice("m", 6));
  r = filter(pod("t", {"three"}), {"m"});
  EXPECT_FALSE(r.node) << r.message;
  // A pool without the counter set its devices name: none of them is allocated.
  a.remove_slice(counter_slice("m", 6));
  r = filter(pod("p", {"one"}), {"m"});
  EXPECT_FALSE(r.node) << r.message;
}

TEST_F(Claims, AllocationModeAllTakesEveryMatchingDeviceOrNone) {
  a.upsert_claim(claim("all", {request("gpu", {kH100}, 0, "All")}));
  auto r = filter(pod("p", {"all"}), {"n2"});
  ASSERT_TRUE(r.node) << r.message;
  EXPECT_EQ(devices_of("pod-p"), (std::vector<std::string>{"n2/gpu/gpu-0", "n2/gpu/gpu-1"}));
  a.forget_pod("pod-p");
  a.upsert_claim(allocated(claim("one", {request("gpu")}), "n2", {"gpu-1"}, {"x"}));
  r = filter(pod("p", {"all"}), {"n2"});
  EXPECT_FALSE(r.node);
  EXPECT_NE(r.failed["n2"].find("allocationMode All"), std::string::npos) << r.message;
}

TEST_F(Claims, AnAllocatedSharedClaimPinsThePodToItsNode) {
  a.upsert_claim(allocated(claim("shared", {request("gpu")}), "n2", {"gpu-0"}, {"pod-first"}));
  auto r = filter(pod("second", {"shared"}));
  ASSERT_TRUE(r.node) << r.message;
  EXPECT_EQ(*r.node, "n2");
  auto c = a.choice("pod-second");
  ASSERT_TRUE(c);
  ASSERT_EQ(c->claims.size(), 1u);
  EXPECT_TRUE(c->claims[0].preallocated);
  EXPECT_EQ(r.unresolvable.size(), 0u);
  auto elsewhere = filter(pod("second", {"shared"}), {"n1", "n3"});
  EXPECT_FALSE(elsewhere.node);
  EXPECT_NE(elsewhere.unresolvable["n1"].find("is allocated on node n2"), std::string::npos) << elsewhere.message;
  // A claim two pods share, chosen for the first but not written yet: the second follows it.
  a.upsert_claim(claim("pair", {request("gpu", {kMem40})}));
  auto p1 = filter(pod("a", {"pair"}));
  ASSERT_TRUE(p1.node);
  auto p2 = filter(pod("b", {"pair"}));
  ASSERT_TRUE(p2.node) << p2.message;
  EXPECT_EQ(*p2.node, *p1.node);
  EXPECT_EQ(devices_of("pod-b"), devices_of("pod-a"));
}

TEST_F(Claims, TemplateClaimsWaitForTheirGeneratedClaim) {
  json p = {{"metadata", {{"name", "t"}, {"namespace", "default"}, {"uid", "pod-t"}}},
            {"spec", {{"resourceClaims", json::array({{{"name", "gpu"}, {"resourceClaimTemplateName", "tmpl"}}})}}}};
  auto r = filter(p);
  EXPECT_FALSE(r.node);
  EXPECT_EQ(r.reason, "WaitingForResourceClaim");
  EXPECT_NE(r.message.find("pod claim gpu (template tmpl)"), std::string::npos) << r.message;
  EXPECT_EQ(r.unresolvable.size(), 3u);
  p["status"]["resourceClaimStatuses"] = json::array({{{"name", "gpu"}, {"resourceClaimName", "t-gpu-abcde"}}});
  r = filter(p);
  EXPECT_NE(r.message.find("ResourceClaim default/t-gpu-abcde: it does not exist"), std::string::npos) << r.message;
  json c = claim("t-gpu-abcde", {request("gpu", {kH100})});
  c["metadata"]["ownerReferences"] = json::array({{{"uid", "someone-else"}, {"controller", true}}});
  a.upsert_claim(c);
  r = filter(p);
  EXPECT_NE(r.message.find("was not created for this pod"), std::string::npos) << r.message;
  c["metadata"]["ownerReferences"][0]["uid"] = "pod-t";
  a.upsert_claim(c);
  r = filter(p);
  ASSERT_TRUE(r.node) << r.message;
}

TEST_F(Claims, CelErrorsAbortTheNodeAndNameTheDevice) {
  a.upsert_claim(claim("bad", {request("gpu", {"device.attributes['gpu.nvidia.com'].noSuchThing == 'x'"})}));
  auto r = filter(pod("p", {"bad"}), {"n3"});
  EXPECT_FALSE(r.node);
  EXPECT_NE(r.unresolvable["n3"].find("fails on device gpu.nvidia.com/n3/gpu-0"), std::string::npos) << r.message;
  a.upsert_claim(claim("nocompile", {request("gpu", {"device.driver > 1"})}));
  r = filter(pod("p", {"nocompile"}), {"n3"});
  EXPECT_NE(r.unresolvable["n3"].find("does not compile"), std::string::npos) << r.message;
  json missing = request("gpu");
  missing["exactly"]["deviceClassName"] = "nope";
  a.upsert_claim(claim("noclass", {missing}));
  r = filter(pod("p", {"noclass"}), {"n3"});
  EXPECT_NE(r.unresolvable["n3"].find("DeviceClass nope does not exist"), std::string::npos) << r.message;
  json constrained = claim("con", {request("gpu")});
  constrained["spec"]["devices"]["constraints"] = json::array({{{"matchAttribute", "gpu.nvidia.com/productName"}}});
  a.upsert_claim(constrained);
  r = filter(pod("p", {"con"}), {"n3"});
  EXPECT_NE(r.unresolvable["n3"].find("constraints"), std::string::npos) << r.message;
}

TEST_F(Claims, FirstAvailableTakesTheFirstAlternativeThatFits) {
  json req = {{"name", "gpu"},
              {"firstAvailable", json::array({{{"name", "big"},
                                               {"deviceClassName", "gpu.nvidia.com"},
                                               {"selectors", json::array({{{"cel", {{"expression", kMem40}}}}})}},
                                              {{"name", "any"}, {"deviceClassName", "gpu.nvidia.com"}}})}};
  a.upsert_claim(claim("fa", {req}));
  auto r = filter(pod("p", {"fa"}), {"n1"});
  ASSERT_TRUE(r.node) << r.message;
  EXPECT_EQ(devices_of("pod-p"), (std::vector<std::string>{"n1/gpu/any/gpu-0"}));
  a.forget_pod("pod-p");
  r = filter(pod("p", {"fa"}), {"n3"});
  ASSERT_TRUE(r.node) << r.message;
  EXPECT_EQ(devices_of("pod-p"), (std::vector<std::string>{"n3/gpu/big/gpu-0"}));
}

TEST_F(Claims, OnlyTheNewestGenerationOfAPoolCounts) {
  // n3's pool rewritten with generation 2 in another slice: generation 1's devices are gone.
  a.upsert_slice(slice("n3", {device("gpu-7", "NVIDIA H100 80GB HBM3", "81559Mi")}, 2, "1"));
  a.upsert_claim(claim("c", {request("gpu", {kH100})}));
  auto r = filter(pod("p", {"c"}), {"n3"});
  ASSERT_TRUE(r.node) << r.message;
  EXPECT_EQ(devices_of("pod-p"), (std::vector<std::string>{"n3/gpu/gpu-7"}));
  EXPECT_EQ(a.pool_count(), 3u);
  a.remove_slice(slice("n3", {}, 2, "1"));
  a.forget_pod("pod-p");
  r = filter(pod("p", {"c"}), {"n3"});
  EXPECT_EQ(devices_of("pod-p"), (std::vector<std::string>{"n3/gpu/gpu-0"}));
}

TEST_F(Claims, TheAllocationCarriesClassAndClaimConfigAndTheNode) {
  const json opaque = {{"driver", "gpu.nvidia.com"},
                       {"parameters", {{"apiVersion", "resource.nvidia.com/v1beta1"}, {"kind", "GpuConfig"}}}};
  a.upsert_class(gpu_class(json::array({{{"opaque", opaque}}})));
  json c = claim("cfg", {request("gpu", {kH100})});
  c["spec"]["devices"]["config"] = json::array({{{"requests", {"gpu"}}, {"opaque", opaque}}});
  a.upsert_claim(c);
  auto r = filter(pod("p", {"cfg"}), {"n3"});
  ASSERT_TRUE(r.node) << r.message;
  auto ch = a.choice("pod-p");
  ASSERT_TRUE(ch);
  const json alloc = allocation_json(ch->claims[0], "n3", "2026-12-02T10:00:00Z");
  EXPECT_EQ(alloc["devices"]["results"],
            json::array({{{"request", "gpu"}, {"driver", "gpu.nvidia.com"}, {"pool", "n3"}, {"device", "gpu-0"}}}));
  ASSERT_EQ(alloc["devices"]["config"].size(), 2u);
  EXPECT_EQ(alloc["devices"]["config"][0]["source"], "FromClass");
  EXPECT_EQ(alloc["devices"]["config"][0]["requests"], json::array({"gpu"}));
  EXPECT_EQ(alloc["devices"]["config"][0]["opaque"], opaque);
  EXPECT_EQ(alloc["devices"]["config"][1]["source"], "FromClaim");
  EXPECT_EQ(alloc["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"], json::array({"n3"}));
  EXPECT_EQ(alloc["allocationTimestamp"], "2026-12-02T10:00:00Z");
}

// Through the scheduler's verbs: a DRA pod is placed by its claims, prioritize favours the choice,
// a pod asking for claims and a GPU resource is refused, and bind without API access fails.
TEST(ClaimsInTheScheduler, FilterPrioritizeAndBindTakeTheClaimPath) {
  FakeClock clock;
  SchedulerOptions o;
  o.clock = &clock;
  auto s = GpuScheduler::create(o, nullptr, nullptr);
  ASSERT_TRUE(s);
  ClaimAllocator& a = (*s)->claims();
  a.upsert_class(gpu_class());
  a.upsert_slice(slice("n2", {device("gpu-0", "NVIDIA H100 80GB HBM3", "81559Mi")}));
  a.upsert_claim(claim("c", {request("gpu", {kH100})}));
  const std::vector<std::string_view> names{"n1", "n2"};
  ExtenderArgs args;
  args.pod = pod("p", {"c"});
  args.set_node_names(names);
  args.names_only = true;
  const FilterDecision d = (*s)->filter(args);
  ASSERT_EQ(d.result.nodes, std::vector<std::string>{"n2"}) << d.message;
  EXPECT_EQ(d.node, "n2");
  const auto scores = (*s)->prioritize(args);
  ASSERT_EQ(scores.size(), 2u);
  EXPECT_EQ(scores[0], (std::pair<std::string, int64_t>{"n1", 0}));
  EXPECT_EQ(scores[1], (std::pair<std::string, int64_t>{"n2", kMaxExtenderPriority}));
  EXPECT_NE((*s)->bind({"p", "default", "pod-p", "n1"}).find("chosen on node n2"), std::string::npos);
  EXPECT_NE((*s)->bind({"p", "default", "pod-p", "n2"}).find("no API client"), std::string::npos);

  ExtenderArgs both;
  both.pod = pod("g", {"c"});
  both.pod["spec"]["containers"] =
      json::array({{{"name", "m"}, {"resources", {{"limits", {{"nvidia.com/gpu", "1"}}}}}}});
  both.set_node_names(names);
  both.names_only = true;
  const FilterDecision r = (*s)->filter(both);
  EXPECT_TRUE(r.result.nodes.empty());
  EXPECT_NE(r.result.unresolvable.at("n2").find("both nvidia.com/gpu and ResourceClaims"), std::string::npos)
      << r.message;
  EXPECT_EQ((*s)->stats().unschedulable, 1u);
}

}  // namespace
}  // namespace kgpu::scheduler
