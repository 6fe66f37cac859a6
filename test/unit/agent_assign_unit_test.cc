// The pure pieces of the agent's assignment handling: candidate choice, the allocation table and
// its checkpoint, device choice, MPS limits and the node report.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "agent/allocation_table.h"
#include "agent/assignment.h"
#include "agent/device_choice.h"
#include "common/timestamp.h"

namespace kgpu::agent {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using nlohmann::json;

json pod(const std::string& name, const std::string& bound_at, const std::string& assignment,
         std::vector<std::pair<std::string, std::string>> containers, const std::string& resource = "nvidia.com/gpu") {
  json spec{{"containers", json::array()}};
  for (const auto& [c, n] : containers) {
    json ct{{"name", c}, {"resources", {{"requests", {{resource, n}}}}}};
    spec[c.starts_with("init") ? "initContainers" : "containers"].push_back(ct);
  }
  json ann{{"kgpu.io/gpu-resource", resource}, {"kgpu.io/bound-at", bound_at}};
  if (!assignment.empty()) ann["kgpu.io/gpu-assignment"] = assignment;
  return {{"metadata",
           {{"namespace", "ns"},
            {"name", name},
            {"uid", "uid-" + name},
            {"creationTimestamp", "2026-01-01T00:00:00Z"},
            {"annotations", ann}}},
          {"spec", spec}};
}

std::string chosen(const std::vector<json>& pods, int64_t n, const Served& served = {}) {
  std::vector<PodInfo> infos;
  for (const auto& p : pods) infos.push_back(pod_info(p));
  auto c = choose_candidate(infos, "nvidia.com/gpu", n, served);
  return c ? c->pod->name + "/" + c->container->name : "none";
}

TEST(Candidate, EarliestBoundAtWinsToTheMicrosecond) {
  const std::vector<json> pods{pod("b", "2026-01-01T00:00:01.000200Z", "c:GPU-b", {{"c", "1"}}),
                               pod("a", "2026-01-01T00:00:01.000100Z", "c:GPU-a", {{"c", "1"}})};
  EXPECT_EQ(chosen(pods, 1), "a/c");
  EXPECT_EQ(chosen(pods, 1, {{"uid-a", "c"}}), "b/c");  // served already
  EXPECT_EQ(chosen(pods, 2), "none");                   // no pod asks for two
}

TEST(Candidate, TiesGoByCreationThenName) {
  auto x = pod("x", "2026-01-01T00:00:01Z", "c:GPU-x", {{"c", "1"}});
  auto y = pod("y", "2026-01-01T00:00:01Z", "c:GPU-y", {{"c", "1"}});
  EXPECT_EQ(chosen({y, x}, 1), "x/c");
  y["metadata"]["creationTimestamp"] = "2025-12-31T23:59:59Z";
  EXPECT_EQ(chosen({x, y}, 1), "y/c");
}

TEST(Candidate, InitContainersFirstThenContainersNotAllocated) {
  auto p = pod("p", "2026-01-01T00:00:01Z", "init:GPU-1;main:GPU-2,GPU-3", {{"init", "1"}, {"main", "2"}});
  EXPECT_EQ(chosen({p}, 1), "p/init");
  EXPECT_EQ(chosen({p}, 2), "none");  // init is next, and it asks for one
  p["metadata"]["annotations"]["kgpu.io/gpu-allocated"] = "init:GPU-1";
  EXPECT_EQ(chosen({p}, 2), "p/main");
  EXPECT_EQ(chosen({p}, 2, {{"uid-p", "main"}}), "none");
}

TEST(Candidate, FinishedDeletingUnassignedAndOtherResourcesAreSkipped) {
  auto done = pod("done", "2026-01-01T00:00:01Z", "c:GPU-1", {{"c", "1"}});
  done["status"]["phase"] = "Succeeded";
  auto deleting = pod("deleting", "2026-01-01T00:00:01Z", "c:GPU-1", {{"c", "1"}});
  deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:05Z";
  auto unassigned = pod("free", "2026-01-01T00:00:01Z", "", {{"c", "1"}});
  auto shared = pod("shared", "2026-01-01T00:00:01Z", "c:GPU-1", {{"c", "1"}}, "nvidia.com/gpu.shared");
  EXPECT_EQ(chosen({done, deleting, unassigned, shared}, 1), "none");
  // A malformed assignment is a candidate, so that Allocate refuses it with the parser's words.
  auto bad = pod("bad", "2026-01-01T00:00:01Z", "c:", {{"c", "1"}});
  EXPECT_EQ(chosen({bad}, 1), "bad/c");
  EXPECT_FALSE(pod_info(bad).assignment_error.empty());
}

TEST(Candidate, QuantitiesInLimitsAndNumbers) {
  json p = pod("p", "2026-01-01T00:00:01Z", "c:GPU-1,GPU-2", {});
  p["spec"]["containers"] = json::array({json{{"name", "c"}, {"resources", {{"limits", {{"nvidia.com/gpu", 2}}}}}}});
  EXPECT_EQ(chosen({p}, 2), "p/c");
  EXPECT_TRUE(earlier("2026-01-01T00:00:01.5Z", "2026-01-01T00:00:01.6Z"));
  EXPECT_TRUE(earlier("2026-01-01T00:00:01Z", "not a time"));
}

// A plan with whole GPUs A, B (nvidia.com/gpu) and GPU C with two replicas (nvidia.com/gpu.shared).
sharing::Plan plan() {
  sharing::Plan p;
  sharing::PlannedResource shared;
  shared.name = "nvidia.com/gpu.shared";
  shared.sharing = sharing::SharingKind::kMps;
  for (int r = 0; r < 2; ++r) {
    sharing::PlannedDevice d;
    d.id = "GPU-C::" + std::to_string(r);
    d.uuid = d.gpu_uuid = "GPU-C";
    d.gpu_index = 2;
    d.replica = r;
    d.replicas = 2;
    shared.devices.push_back(d);
  }
  sharing::PlannedResource whole;
  whole.name = "nvidia.com/gpu";
  for (auto [uuid, index] : {std::pair{"GPU-A", 0u}, {"GPU-B", 1u}}) {
    sharing::PlannedDevice d;
    d.id = d.uuid = d.gpu_uuid = uuid;
    d.gpu_index = index;
    whole.devices.push_back(d);
  }
  p.resources = {whole, shared};
  return p;
}

const HealthyFn kAllHealthy = [](const std::string&) { return true; };

Result<std::vector<std::string>> assign(const std::string& resource, const std::string& assignment, int64_t n,
                                        const InUse& used, const HealthyFn& healthy = kAllHealthy) {
  const auto p = plan();
  const auto info = pod_info(pod("p", "2026-01-01T00:00:01Z", assignment, {{"c", std::to_string(n)}}, resource));
  return assigned_devices(p, *p.find(resource), info, info.containers[0], n, healthy, used);
}

TEST(DeviceChoice, AssignedWholeGpusAndShares) {
  EXPECT_THAT(assign("nvidia.com/gpu", "c:GPU-B,GPU-A", 2, {}).value(), ElementsAre("GPU-B", "GPU-A"));
  EXPECT_THAT(assign("nvidia.com/gpu.shared", "c:GPU-C", 1, {{"GPU-C::0", "pod ns/x container y"}}).value(),
              ElementsAre("GPU-C::1"));
  EXPECT_THAT(assign("nvidia.com/gpu.shared", "c:GPU-C", 2, {}).value(), ElementsAre("GPU-C::0", "GPU-C::1"));
}

TEST(DeviceChoice, RefusalsNameThePodTheContainerAndTheGpu) {
  auto msg = [](const Result<std::vector<std::string>>& r) { return r ? std::string("accepted") : r.error().message; };
  const std::string prefix = "cannot honour the assignment: pod ns/p container c: ";
  EXPECT_EQ(msg(assign("nvidia.com/gpu", "c:GPU-Z", 1, {})), prefix + "GPU GPU-Z is not on this node");
  EXPECT_EQ(msg(assign("nvidia.com/gpu", "c:GPU-C", 1, {})),
            prefix + "GPU GPU-C is advertised under nvidia.com/gpu.shared, not nvidia.com/gpu");
  EXPECT_EQ(msg(assign("nvidia.com/gpu", "c:GPU-A", 1, {{"GPU-A", "pod ns/q container d"}})),
            prefix + "GPU GPU-A is already in use by pod ns/q container d");
  EXPECT_EQ(msg(assign("nvidia.com/gpu", "c:GPU-A", 1, {}, [](const std::string& u) { return u != "GPU-A"; })),
            prefix + "GPU GPU-A is unhealthy");
  EXPECT_EQ(msg(assign("nvidia.com/gpu", "c:GPU-A", 2, {})),
            prefix + "the assignment gives it 1 GPU(s) but it requests 2 of nvidia.com/gpu");
  EXPECT_EQ(msg(assign("nvidia.com/gpu", "other:GPU-A", 1, {})), prefix + "kgpu.io/gpu-assignment names no GPU for it");
  EXPECT_EQ(msg(assign("nvidia.com/gpu.shared", "c:GPU-C", 2, {{"GPU-C::1", "pod ns/q container d"}})),
            prefix + "GPU GPU-C has 1 of 2 replicas free, it requests 2 (in use by pod ns/q container d)");
}

TEST(DeviceChoice, ANextContainerReusesItsPodsInitContainerGpus) {
  auto p = pod_info(pod("p", "2026-01-01T00:00:01Z", "init:GPU-A;main:GPU-A", {{"init", "1"}, {"main", "1"}}));
  const std::vector<AllocationTable::Holding> held{{"uid-p", "ns", "p", "init", "nvidia.com/gpu", {"GPU-A"}}};
  const auto pl = plan();
  auto got = assigned_devices(pl, *pl.find("nvidia.com/gpu"), p, p.containers[1], 1, kAllHealthy, in_use(held, &p));
  EXPECT_THAT(got.value(), ElementsAre("GPU-A"));
  EXPECT_EQ(in_use(held).size(), 1u);  // for anyone else it is taken
  p.containers[0].sidecar = true;      // a sidecar keeps running: taken for its pod too
  EXPECT_EQ(in_use(held, &p).size(), 1u);
  json side = pod("s", "2026-01-01T00:00:01Z", "", {{"init", "1"}});
  side["spec"]["initContainers"][0]["restartPolicy"] = "Always";
  EXPECT_TRUE(pod_info(side).containers[0].sidecar);
}

TEST(DeviceChoice, UnassignedKeepsFreeKubeletIdsAndNeverGivesADeviceTwice) {
  const auto p = plan();
  const auto& whole = *p.find("nvidia.com/gpu");
  auto got = unassigned_devices(whole, {"GPU-A"}, {}, sharing::SharedPolicy::kDistributed, kAllHealthy, {});
  EXPECT_THAT(got.value(), ElementsAre("GPU-A"));
  got = unassigned_devices(whole, {"GPU-A"}, {}, sharing::SharedPolicy::kDistributed, kAllHealthy, {{"GPU-A", "x"}});
  EXPECT_THAT(got.value(), ElementsAre("GPU-B"));
  got = unassigned_devices(whole, {"GPU-A", "GPU-B"}, {}, sharing::SharedPolicy::kDistributed, kAllHealthy,
                           {{"GPU-A", "x"}});
  ASSERT_FALSE(got);
  EXPECT_THAT(got.error().message, HasSubstr("really in use"));
  // A replica held means that replica, not the GPU's other replicas.
  const auto& shared = *p.find("nvidia.com/gpu.shared");
  got = unassigned_devices(shared, {"GPU-C::0"}, {}, sharing::SharedPolicy::kDistributed, kAllHealthy,
                           {{"GPU-C::0", "x"}});
  EXPECT_THAT(got.value(), ElementsAre("GPU-C::1"));
}

TEST(DeviceChoice, UnassignedPodsStayOffGpusAssignedToPodsNotAdmittedYet) {
  const auto p = plan();
  const std::vector<PodInfo> pods{
      pod_info(pod("w", "2026-01-01T00:00:01Z", "c:GPU-A", {{"c", "1"}})),
      pod_info(pod("s", "2026-01-01T00:00:02Z", "c:GPU-C", {{"c", "1"}}, "nvidia.com/gpu.shared"))};
  InUse used;
  reserve_assigned(*p.find("nvidia.com/gpu"), pods, {}, used);
  EXPECT_EQ(used.at("GPU-A"), "pod ns/w container c (assigned, not admitted yet)");
  // The kubelet passes GPU-A to a pod no assignment speaks for: it gets GPU-B.
  auto got = unassigned_devices(*p.find("nvidia.com/gpu"), {"GPU-A"}, {}, sharing::SharedPolicy::kDistributed,
                                kAllHealthy, used);
  EXPECT_THAT(got.value(), ElementsAre("GPU-B"));
  // A share reserves as many replicas as it asks for, not the GPU.
  InUse shared_used{{"GPU-C::0", "pod ns/x container y"}};
  reserve_assigned(*p.find("nvidia.com/gpu.shared"), pods, {}, shared_used);
  EXPECT_EQ(shared_used.size(), 2u);
  EXPECT_EQ(shared_used.at("GPU-C::1"), "pod ns/s container c (assigned, not admitted yet)");
  // Served containers reserve nothing.
  InUse none;
  reserve_assigned(*p.find("nvidia.com/gpu"), pods, {{"uid-w", "c"}}, none);
  EXPECT_TRUE(none.empty());
}

TEST(DeviceChoice, MpsClientLimits) {
  EXPECT_EQ(mps_client_limits(1, 4, 23034),
            (std::map<std::string, std::string>{{"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "25"},
                                                {"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "0=5758M"}}));
  EXPECT_EQ(mps_client_limits(3, 4, 81920).at("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"), "0=61440M");
  EXPECT_EQ(mps_client_limits(3, 4, 81920).at("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), "75");
}

TEST(DeviceChoice, NodeReportJoinsPlanTopologyAndHoldings) {
  gpu::Inventory inv;
  for (auto [uuid, index] : {std::pair{"GPU-A", 0u}, {"GPU-B", 1u}, {"GPU-C", 2u}}) {
    gpu::GpuInfo g;
    g.index = index;
    g.uuid = uuid;
    g.name = "NVIDIA H100";
    g.memory_total_mib = 81559;
    inv.gpus.push_back(g);
  }
  using gpu::Link;
  inv.topology = {{Link::kSelf, Link::kNvLink, Link::kSystem},
                  {Link::kNvLink, Link::kSelf, Link::kSystem},
                  {Link::kSystem, Link::kSystem, Link::kSelf}};
  const std::vector<AllocationTable::Holding> holdings{
      {"u1", "ns", "a", "c", "nvidia.com/gpu", {"GPU-B"}},
      {"u2", "ns", "b", "c", "nvidia.com/gpu.shared", {"GPU-C::0", "GPU-C::1"}}};
  const auto r = node_report(inv, plan(), [](const std::string& u) { return u != "GPU-A"; }, holdings, "t");
  ASSERT_EQ(r.gpus.size(), 3u);
  EXPECT_FALSE(r.gpus[0].healthy);
  EXPECT_THAT(r.gpus[0].nvlink_peers, ElementsAre(1));
  EXPECT_TRUE(r.gpus[0].used.empty());
  EXPECT_EQ(r.gpus[1].used, (std::vector<k8s::GpuUse>{{"ns", "a", "u1", "c", 1}}));
  EXPECT_EQ(r.gpus[2].resource, "nvidia.com/gpu.shared");
  EXPECT_EQ(r.gpus[2].replicas, 2);
  EXPECT_EQ(r.gpus[2].used.at(0).replicas, 2);
  // What the agent writes, the scheduler's parser reads back.
  EXPECT_EQ(k8s::parse_node_report(k8s::format_node_report(r)).value(), r);
}

AllocationEntry entry(std::string pod, std::vector<std::string> kubelet, std::vector<std::string> actual,
                      std::string at = "2026-01-01T00:00:00Z") {
  AllocationEntry e;
  if (!pod.empty()) {
    e.uid = "uid-" + pod;
    e.ns = "ns";
    e.pod = pod;
    e.container = "c";
  }
  e.resource = "nvidia.com/gpu";
  e.kubelet_ids = std::move(kubelet);
  e.actual_ids = std::move(actual);
  e.allocated_at = std::move(at);
  return e;
}

TEST(AllocationTable, ReconcileNamesUnidentifiedEntriesAndDropsGoneOnes) {
  AllocationTable t;
  t.add(entry("a", {"GPU-A"}, {"GPU-B"}));
  t.add(entry("", {"GPU-B"}, {"GPU-A"}));
  t.add(entry("gone", {"GPU-C"}, {"GPU-C"}));
  t.add(entry("new", {"GPU-D"}, {"GPU-D"}, "2026-01-01T00:00:50Z"));
  const std::vector<kubelet::ContainerDevice> listed{{"ns", "a", "c", "nvidia.com/gpu", "GPU-A"},
                                                     {"ns", "x", "y", "nvidia.com/gpu", "GPU-B"}};
  const auto now = *parse_rfc3339("2026-01-01T00:01:00Z");
  EXPECT_TRUE(t.reconcile(listed, now, std::chrono::seconds(30)));
  ASSERT_EQ(t.entries().size(), 3u);  // "gone" dropped; "new" is within its grace
  EXPECT_EQ(t.entries()[1].pod, "x");
  EXPECT_EQ(t.entries()[2].pod, "new");
  EXPECT_FALSE(t.reconcile(listed, now, std::chrono::seconds(30)));
  // Metrics see the actual devices.
  const auto translated = t.translate(listed);
  std::vector<std::string> seen;
  for (const auto& d : translated) seen.push_back(d.pod + ":" + d.device_id);
  EXPECT_THAT(seen, ElementsAre("a:GPU-B", "x:GPU-A", "new:GPU-D"));
  EXPECT_EQ(t.served(), (std::set<std::pair<std::string, std::string>>{{"uid-a", "c"}, {"uid-new", "c"}}));
}

TEST(AllocationTable, HoldingsCountContainersTheTableDoesNotKnow) {
  AllocationTable t;
  t.add(entry("", {"GPU-B"}, {"GPU-A"}));
  const std::vector<kubelet::ContainerDevice> listed{{"ns", "old", "c", "nvidia.com/gpu", "GPU-C"},
                                                     {"ns", "x", "y", "nvidia.com/gpu", "GPU-B"}};
  const auto used = in_use(t.holdings(listed));
  EXPECT_EQ(used.size(), 2u);  // GPU-A (the table) and GPU-C (before the table); not GPU-B
  EXPECT_TRUE(used.contains("GPU-A"));
  EXPECT_EQ(used.at("GPU-C"), "pod ns/old container c");
}

TEST(AllocationTable, CheckpointRoundTripAndBounds) {
  AllocationTable t;
  t.add(entry("a", {"GPU-A"}, {"GPU-B"}));
  t.add(entry("", {"GPU-B::1"}, {"GPU-A::0"}));
  auto back = AllocationTable::parse(t.to_json());
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->entries(), t.entries());

  auto err = [](const std::string& text) {
    auto r = AllocationTable::parse(text);
    return r ? std::string("parsed") : r.error().message;
  };
  EXPECT_EQ(err("[]"), "not a JSON object");
  EXPECT_EQ(err(R"({"version":"1","entries":[]})"), "version: expected 1");
  EXPECT_EQ(err(R"({"version":1,"entries":[{"resource":"r","actualIDs":[7]}]})"),
            "entries[0].actualIDs[0]: expected a device ID (1 to 256 characters)");
  EXPECT_EQ(err(R"({"version":1,"entries":[{"resource":"r","actualIDs":[]}]})"), "entries[0].actualIDs: empty");
  EXPECT_EQ(err(R"({"version":1,"entries":[{"actualIDs":["a"]}]})"), "entries[0].resource: missing");
  EXPECT_THAT(err(std::string(kMaxCheckpointBytes + 1, ' ')), HasSubstr("more than the limit"));
  json many{{"version", 1}, {"entries", json::array()}};
  for (size_t i = 0; i <= kMaxCheckpointEntries; ++i) many["entries"].push_back(json::object());
  EXPECT_THAT(err(many.dump()), HasSubstr("entries: 4097, more than the limit of 4096"));
  EXPECT_THAT(err(std::string(100, '[') + std::string(100, ']')), HasSubstr("nested deeper"));
}

}  // namespace
}  // namespace kgpu::agent
