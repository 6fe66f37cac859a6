// The ResourceSlice publisher (src/dra/slices.h) against the API-server stand-in through the kube
// client: a node's pool published, changed (MIG re-layout, a GPU lost and back), split at the
// API's limits, stale slices removed and others' left alone, no writes for an unchanged set,
// retries; and the stand-in refusing what kube-apiserver refuses.
#include <gtest/gtest.h>
#include <httplib.h>

#include <set>

#include "dra/devices.h"
#include "dra_fixture.h"
#include "standin.h"
#include "test_env.h"

namespace kgpu::dra {
namespace {

TEST(DraSlices, PublishesTheNodesPool) {
  Cluster k;
  k.node("node-a");
  SlicePublisher p(*k.c, options());
  p.update(gpus(8));
  ASSERT_TRUE(p.sync_once());
  const auto slices = k.slices();
  ASSERT_EQ(slices.size(), 1u);
  const json& s = slices[0];
  EXPECT_EQ(s["metadata"]["name"], "node-a-gpu.nvidia.com-0");
  EXPECT_EQ(s["spec"]["driver"], "gpu.nvidia.com");
  EXPECT_EQ(s["spec"]["nodeName"], "node-a");
  EXPECT_EQ(s["spec"]["pool"]["name"], "node-a");
  EXPECT_EQ(s["spec"]["pool"]["generation"], 1);
  EXPECT_EQ(s["spec"]["pool"]["resourceSliceCount"], 1);
  EXPECT_EQ(s["spec"]["devices"].size(), 8u);
  EXPECT_FALSE(s["spec"]["devices"][0].contains("taints"));
  const auto node = k.c->get(res::kNodes, "", "node-a");
  ASSERT_TRUE(node);
  const json& owner = s["metadata"]["ownerReferences"][0];
  EXPECT_EQ(owner["kind"], "Node");
  EXPECT_EQ(owner["name"], "node-a");
  EXPECT_EQ(owner["uid"], (*node)["metadata"]["uid"]);
  EXPECT_EQ(owner["controller"], true);
  const auto st = p.stats();
  EXPECT_EQ(st.creates, 1u);
  EXPECT_EQ(st.generation, 1);
  EXPECT_EQ(st.published, st.wanted);
}

TEST(DraSlices, AnUnchangedSetWritesNothing) {
  Cluster k;
  k.node("node-a");
  {
    SlicePublisher p(*k.c, options());
    p.update(gpus(8));
    ASSERT_TRUE(p.sync_once());
    k.requests(true);
    p.update(gpus(8));
    ASSERT_TRUE(p.sync_once());
    EXPECT_EQ(k.writes(), 0u) << ::testing::PrintToString(k.requests());
  }
  // A restarted agent (a new publisher) with the same devices: nothing written either.
  SlicePublisher again(*k.c, options());
  again.update(gpus(8));
  ASSERT_TRUE(again.sync_once());
  EXPECT_EQ(k.writes(), 0u) << ::testing::PrintToString(k.requests());
  EXPECT_EQ(again.stats().generation, 1);
  EXPECT_EQ(k.slices()[0]["spec"]["pool"]["generation"], 1);
}

TEST(DraSlices, MigRelayoutAdvancesTheGeneration) {
  Cluster k;
  k.node("node-a");
  SlicePublisher p(*k.c, options());
  p.update(gpus(2));
  ASSERT_TRUE(p.sync_once());
  // GPU 1 becomes 7 MIG devices.
  auto next = gpus(1);
  for (int i = 0; i < 7; ++i) next.push_back({mig_device(1, i), {}});
  p.update(next);
  ASSERT_TRUE(p.sync_once());
  const auto slices = k.slices();
  ASSERT_EQ(slices.size(), 1u);
  EXPECT_EQ(slices[0]["spec"]["pool"]["generation"], 2);
  const auto names = device_names(slices);
  EXPECT_EQ(names.size(), 8u);
  EXPECT_FALSE(names.contains("gpu-1"));
  EXPECT_TRUE(names.contains("gpu-1-mig-1g10gb-19-6"));
  EXPECT_EQ(p.stats().updates, 1u);
}

TEST(DraSlices, LostGpuIsTaintedNoExecuteAndClearedOnRecovery) {
  Cluster k;
  k.node("node-a");
  SlicePublisher p(*k.c, options());
  auto devices = gpus(4);
  p.update(devices);
  ASSERT_TRUE(p.sync_once());
  devices[2].health = DeviceHealth{false, false, true, "GPU lost (fell off the bus)",
                                   std::chrono::system_clock::time_point(std::chrono::seconds(1'790'000'000))};
  p.update(devices);
  ASSERT_TRUE(p.sync_once());
  auto slices = k.slices();
  ASSERT_EQ(slices.size(), 1u);
  EXPECT_EQ(slices[0]["spec"]["pool"]["generation"], 2);
  const json* d = device(slices, "gpu-2");
  ASSERT_NE(d, nullptr);
  ASSERT_TRUE(d->contains("taints")) << d->dump();
  const json& t = (*d)["taints"][0];
  EXPECT_EQ(t["key"], "gpu.nvidia.com/unreachable");
  EXPECT_EQ(t["effect"], "NoExecute");
  EXPECT_EQ(t["value"], "GPU-lost-fell-off-the-bus");
  EXPECT_EQ(t["timeAdded"], "2026-09-21T14:13:20Z");
  EXPECT_FALSE(device(slices, "gpu-1")->contains("taints"));

  // A reset-class XID on another GPU: NoSchedule, reset-required.
  devices[1].health = DeviceHealth{false, true, false, "XID 79", {}};
  p.update(devices);
  ASSERT_TRUE(p.sync_once());
  slices = k.slices();
  EXPECT_EQ(slices[0]["spec"]["pool"]["generation"], 3);
  EXPECT_EQ((*device(slices, "gpu-1"))["taints"][0]["key"], "gpu.nvidia.com/reset-required");
  EXPECT_EQ((*device(slices, "gpu-1"))["taints"][0]["effect"], "NoSchedule");
  EXPECT_EQ((*device(slices, "gpu-1"))["taints"][0]["value"], "XID-79");

  // Both recovered (the device plugin's recovery rule said so): taints gone, generation 4.
  devices[1].health = {};
  devices[2].health = {};
  p.update(devices);
  ASSERT_TRUE(p.sync_once());
  slices = k.slices();
  EXPECT_EQ(slices[0]["spec"]["pool"]["generation"], 4);
  for (const auto& dev : slices[0]["spec"]["devices"]) EXPECT_FALSE(dev.contains("taints")) << dev.dump();
}

TEST(DraSlices, SplitsAtTheApiLimits) {
  Cluster k;
  k.node("node-a");
  SlicePublisher p(*k.c, options());
  auto devices = migs(20);  // 140 devices
  p.update(devices);
  ASSERT_TRUE(p.sync_once()) << p.stats().last_error;
  auto slices = k.slices();
  ASSERT_EQ(slices.size(), 2u);
  size_t total = 0;
  for (const auto& s : slices) {
    EXPECT_EQ(s["spec"]["pool"]["resourceSliceCount"], 2);
    EXPECT_EQ(s["spec"]["pool"]["generation"], 1);
    EXPECT_LE(s["spec"]["devices"].size(), 128u);
    total += s["spec"]["devices"].size();
  }
  EXPECT_EQ(total, 140u);
  EXPECT_EQ(device_names(slices).size(), 140u);

  // One tainted device: at most 64 per slice, so three slices.
  devices[5].health = DeviceHealth{false, false, false, "XID 31", {}};
  p.update(devices);
  ASSERT_TRUE(p.sync_once()) << p.stats().last_error;
  slices = k.slices();
  ASSERT_EQ(slices.size(), 3u);
  for (const auto& s : slices) {
    EXPECT_EQ(s["spec"]["pool"]["resourceSliceCount"], 3);
    EXPECT_EQ(s["spec"]["pool"]["generation"], 2);
    EXPECT_LE(s["spec"]["devices"].size(), 64u);
  }
  // Back to a small pool: the extra slices are deleted.
  p.update(gpus(8));
  ASSERT_TRUE(p.sync_once());
  slices = k.slices();
  ASSERT_EQ(slices.size(), 1u);
  EXPECT_EQ(slices[0]["spec"]["pool"]["generation"], 3);
  EXPECT_EQ(slices[0]["spec"]["pool"]["resourceSliceCount"], 1);
  EXPECT_EQ(p.stats().deletes, 2u);
}

TEST(DraSlices, CounterSetsGoInSlicesOfTheirOwnBeforeTheDevices) {
  Cluster k;
  k.node("node-a");
  SlicePublisher p(*k.c, options());
  // Nine partitionable GPUs: nine counter sets (eight per slice), 70 devices consuming them.
  std::vector<CounterSet> sets;
  for (unsigned g = 0; g < 9; ++g) sets.push_back({counter_set_name(g), {{"compute-slices", 7}, {"memory-slice-0", 1}}});
  auto devices = migs(10);
  for (auto& d : devices) {
    d.device["consumesCounters"] = json::array(
        {{{"counterSet", "gpu-0-counter-set"}, {"counters", {{"compute-slices", {{"value", "1"}}}}}}});
  }
  p.update(devices, sets);
  ASSERT_TRUE(p.sync_once()) << p.stats().last_error;
  auto slices = k.slices();
  ASSERT_EQ(slices.size(), 4u);  // 2 counter slices + 70 devices at 64 a slice
  size_t counter_slices = 0, total_sets = 0, total_devices = 0;
  for (const auto& sl : slices) {
    EXPECT_EQ(sl["spec"]["pool"]["resourceSliceCount"], 4);
    EXPECT_EQ(sl["spec"]["pool"]["generation"], 1);
    EXPECT_FALSE(sl["spec"].contains("sharedCounters") && sl["spec"].contains("devices")) << sl.dump();
    if (sl["spec"].contains("sharedCounters")) {
      ++counter_slices;
      EXPECT_LE(sl["spec"]["sharedCounters"].size(), kMaxCounterSetsPerSlice);
      total_sets += sl["spec"]["sharedCounters"].size();
      EXPECT_EQ(sl["spec"]["sharedCounters"][0]["counters"]["compute-slices"]["value"], "7");
    } else {
      EXPECT_LE(sl["spec"]["devices"].size(), 64u);
      total_devices += sl["spec"]["devices"].size();
    }
  }
  EXPECT_EQ(counter_slices, 2u);
  EXPECT_EQ(total_sets, 9u);
  EXPECT_EQ(total_devices, 70u);
  EXPECT_FALSE(p.stats().counters_dropped);
  // The same pool again writes nothing; without counter sets their slices go.
  p.update(devices, sets);
  ASSERT_TRUE(p.sync_once());
  EXPECT_EQ(k.slices()[0]["spec"]["pool"]["generation"], 1);
  for (auto& d : devices) d.device.erase("consumesCounters");
  p.update(devices);
  ASSERT_TRUE(p.sync_once());
  slices = k.slices();
  ASSERT_EQ(slices.size(), 1u);
  EXPECT_FALSE(slices[0]["spec"].contains("sharedCounters"));
}

json foreign_slice(const std::string& name, const std::string& node, const std::string& driver,
                   const std::string& pool) {
  return json{{"metadata", {{"name", name}}},
              {"spec",
               {{"driver", driver},
                {"nodeName", node},
                {"pool", {{"name", pool}, {"generation", 7}, {"resourceSliceCount", 1}}},
                {"devices", json::array({gpu_device(0)})}}}};
}

TEST(DraSlices, RemovesStaleSlicesAndLeavesOthersAlone) {
  Cluster k;
  k.node("node-a");
  k.node("node-b");
  for (const auto& s : {foreign_slice("node-a-old-layout", "node-a", "gpu.nvidia.com", "node-a"),
                        foreign_slice("node-a-renamed-pool", "node-a", "gpu.nvidia.com", "old-pool"),
                        foreign_slice("node-b-gpu", "node-b", "gpu.nvidia.com", "node-b"),
                        foreign_slice("node-a-other-driver", "node-a", "other.example.com", "node-a")}) {
    auto r = k.c->create(res::kResourceSlices, "", s);
    ASSERT_TRUE(r) << r.error().text();
  }
  SlicePublisher p(*k.c, options());
  p.update(gpus(2));
  ASSERT_TRUE(p.sync_once()) << p.stats().last_error;
  std::set<std::string> names;
  for (const auto& s : k.slices()) names.insert(s["metadata"]["name"].get<std::string>());
  EXPECT_EQ(names, (std::set<std::string>{"node-a-gpu.nvidia.com-0", "node-b-gpu", "node-a-other-driver"}));
  // Above the stale slice's generation, so the scheduler never mixes them.
  const auto ours = k.slices("spec.nodeName=node-a,spec.driver=gpu.nvidia.com");
  ASSERT_EQ(ours.size(), 1u);
  EXPECT_EQ(ours[0]["spec"]["pool"]["generation"], 8);
  EXPECT_EQ(p.stats().deletes, 2u);
  // The list asked for this node's and driver's slices only.
  bool selected = false;
  httplib::SSLClient h("127.0.0.1", k.s.port());
  h.enable_server_certificate_verification(false);
  for (const auto& e : json::parse(h.Get("/standin/v1/requests")->body)) {
    if (e["method"] == "GET" && e["path"] == "/apis/resource.k8s.io/v1/resourceslices") {
      selected |= e["query"].dump().find("spec.nodeName=node-a,spec.driver=gpu.nvidia.com") != std::string::npos;
    }
  }
  EXPECT_TRUE(selected);
}

TEST(DraSlices, RepairsSlicesChangedByOthers) {
  Cluster k;
  k.node("node-a");
  SlicePublisher p(*k.c, options());
  p.update(gpus(3));
  ASSERT_TRUE(p.sync_once());
  // Someone removes a device from our slice: the next pass puts it back under a new generation.
  auto s = k.c->get(res::kResourceSlices, "", "node-a-gpu.nvidia.com-0");
  ASSERT_TRUE(s);
  (*s)["spec"]["devices"].erase(0);
  (*s)["metadata"]["annotations"]["kgpu.io/slice-content"] = "tampered";
  ASSERT_TRUE(k.c->update(res::kResourceSlices, "", "node-a-gpu.nvidia.com-0", *s));
  ASSERT_TRUE(p.sync_once());
  auto slices = k.slices();
  EXPECT_EQ(device_names(slices).size(), 3u);
  EXPECT_EQ(slices[0]["spec"]["pool"]["generation"], 2);
  // The same with our content annotation left in place: the device list still tells.
  s = k.c->get(res::kResourceSlices, "", "node-a-gpu.nvidia.com-0");
  ASSERT_TRUE(s);
  (*s)["spec"]["devices"].erase(2);
  ASSERT_TRUE(k.c->update(res::kResourceSlices, "", "node-a-gpu.nvidia.com-0", *s));
  ASSERT_TRUE(p.sync_once());
  slices = k.slices();
  EXPECT_EQ(device_names(slices).size(), 3u);
  EXPECT_EQ(slices[0]["spec"]["pool"]["generation"], 3);
}

TEST(DraSlices, WorkerRetriesWithBackoffUntilPublished) {
  Cluster k;
  SlicePublisher p(*k.c, options());
  p.start();
  const uint64_t v = p.update(gpus(2));
  // No Node yet: the pass fails and is retried.
  ASSERT_TRUE(kgpu::testing::eventually([&] { return p.stats().failures >= 2; }));
  EXPECT_NE(p.stats().last_error.find("node-a"), std::string::npos) << p.stats().last_error;
  EXPECT_TRUE(k.slices().empty());
  // Transient server errors on create, then the Node appears.
  k.s.fault(json{{"status", 500}, {"path", "/resourceslices"}, {"method", "POST"}, {"times", 2}});
  k.node("node-a");
  ASSERT_TRUE(p.wait_published(v, std::chrono::seconds(10))) << p.stats().last_error;
  EXPECT_EQ(k.slices().size(), 1u);
  EXPECT_TRUE(p.stats().last_error.empty());
  // A later change is published by the worker too.
  auto next = gpus(2);
  next[0].health = DeviceHealth{false, false, true, "GPU lost", {}};
  const uint64_t v2 = p.update(next);
  ASSERT_TRUE(p.wait_published(v2, std::chrono::seconds(10)));
  EXPECT_EQ(k.slices()[0]["spec"]["pool"]["generation"], 2);
  p.stop();
}

TEST(DraSlices, RemoveAllDeletesOnlyThisNodesSlices) {
  Cluster k;
  k.node("node-a");
  ASSERT_TRUE(k.c->create(res::kResourceSlices, "", foreign_slice("node-b-gpu", "node-b", "gpu.nvidia.com", "node-b")));
  SlicePublisher p(*k.c, options());
  p.update(migs(20));
  ASSERT_TRUE(p.sync_once());
  auto removed = p.remove_all();
  ASSERT_TRUE(removed);
  EXPECT_EQ(*removed, 2u);
  ASSERT_EQ(k.slices().size(), 1u);
}

// The device model (dra::build_devices) of an 8-GPU H100 node, GPU 7 in MIG mode with 7 x 1g.10gb,
// as the pool's content: accepted by the stand-in's validation, NVIDIA's names published.
TEST(DraSlices, PublishesTheDeviceModelOfAnInventory) {
  gpu::Inventory inv;
  inv.driver_version = "570.86.15";
  inv.cuda_driver_version = 12080;
  for (unsigned i = 0; i < 8; ++i) {
    gpu::GpuInfo g;
    g.index = i;
    g.minor_number = i;
    g.uuid = "GPU-0000000" + std::to_string(i) + "-0000-4000-8000-000000000000";
    g.name = "NVIDIA H100 80GB HBM3";
    g.architecture_name = "Hopper";
    g.cc_major = 9;
    g.cc_minor = 0;
    g.memory_total_mib = 81559;
    if (i == 7) {
      g.mig_enabled = true;
      for (unsigned k = 0; k < 7; ++k) {
        gpu::MigDevice m;
        m.index = k;
        m.uuid = "MIG-0000000" + std::to_string(k) + "-0000-4000-8000-000000000000";
        m.gpu_instance_id = 7 + k;
        m.profile = "1g.10gb";
        m.profile_id = 19;
        m.gpu_slices = m.compute_slices = 1;
        m.memory_mib = 9856;
        m.sm_count = 16;
        m.placement_start = k;
        m.placement_size = 1;
        g.mig_devices.push_back(m);
      }
    }
    inv.gpus.push_back(g);
  }
  const DeviceSet set = build_devices(inv);
  ASSERT_EQ(set.devices.size(), 14u) << ::testing::PrintToString(set.problems);
  std::vector<PublishedDevice> devices;
  for (const auto& d : set.devices) devices.push_back({slice_device_json(d), {}});
  devices.back().health = DeviceHealth{false, true, false, "XID 79", {}};
  Cluster k;
  k.node("node-a");
  SlicePublisher p(*k.c, options());
  p.update(devices);
  ASSERT_TRUE(p.sync_once()) << p.stats().last_error;
  const auto slices = k.slices();
  ASSERT_EQ(slices.size(), 1u);
  const auto names = device_names(slices);
  EXPECT_TRUE(names.contains("gpu-0"));
  EXPECT_TRUE(names.contains("gpu-7-mig-1g10gb-19-6"));
  EXPECT_FALSE(names.contains("gpu-7"));
  const json* mig = device(slices, "gpu-7-mig-1g10gb-19-6");
  ASSERT_NE(mig, nullptr);
  EXPECT_EQ((*mig)["attributes"]["type"]["string"], "mig");
  EXPECT_EQ((*mig)["taints"][0]["key"], "gpu.nvidia.com/reset-required");
}

TEST(DraSlices, SliceNamesAreValidForLongNodeNames) {
  PublisherOptions o;
  o.node_name = std::string(240, 'n');
  const std::string n = slice_name(o, 3);
  EXPECT_LE(n.size(), 253u);
  EXPECT_TRUE(n.ends_with("-3"));
  o.node_name = "node-a";
  EXPECT_EQ(slice_name(o, 0), "node-a-gpu.nvidia.com-0");
}

// The stand-in refuses what kube-apiserver refuses, naming the field.
struct Refusal {
  std::string what;
  std::function<void(json&)> change;
  std::string field;
};

TEST(DraSlices, StandInRefusesInvalidSlices) {
  Cluster k;
  const std::vector<Refusal> cases = {
      {"129 devices",
       [](json& s) {
         for (int i = 1; i < 129; ++i) s["spec"]["devices"].push_back(gpu_device(i + 1000));
       },
       "spec.devices: Too many: 129: must have at most 128 items"},
      {"65 devices with a taint",
       [](json& s) {
         for (int i = 1; i < 65; ++i) s["spec"]["devices"].push_back(gpu_device(i + 1000));
         s["spec"]["devices"][0]["taints"] = json::array({json{{"key", "k"}, {"effect", "NoSchedule"}}});
       },
       "spec.devices: Too many: 65: must have at most 64 items"},
      {"no node selection", [](json& s) { s["spec"].erase("nodeName"); },
       "spec: Required value: exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is "
       "required"},
      {"two node selections", [](json& s) { s["spec"]["allNodes"] = true; }, "but multiple fields are set"},
      {"device name", [](json& s) { s["spec"]["devices"][0]["name"] = "GPU_0"; },
       "spec.devices[0].name: Invalid value: \"GPU_0\": a lowercase RFC 1123 label"},
      {"duplicate device", [](json& s) { s["spec"]["devices"].push_back(s["spec"]["devices"][0]); },
       "spec.devices[1].name: Duplicate value: \"gpu-0\""},
      {"33 attributes and capacities",
       [](json& s) {
         for (int i = 0; i < 28; ++i) s["spec"]["devices"][0]["attributes"]["a" + std::to_string(i)] = {{"int", i}};
       },
       "spec.devices[0]: Too many: 34: the total number of attributes and capacities must not exceed 32"},
      {"taint effect",
       [](json& s) {
         s["spec"]["devices"][0]["taints"] =
             json::array({json{{"key", "gpu.nvidia.com/x"}, {"effect", "PreferNoSchedule"}}});
       },
       "spec.devices[0].taints[0].effect: Unsupported value: \"PreferNoSchedule\""},
      {"five taints",
       [](json& s) {
         json t = json::array();
         for (int i = 0; i < 5; ++i) t.push_back(json{{"key", "k" + std::to_string(i)}, {"effect", "NoSchedule"}});
         s["spec"]["devices"][0]["taints"] = t;
       },
       "spec.devices[0].taints: Too many: 5: must have at most 4 items"},
      {"attribute without value", [](json& s) { s["spec"]["devices"][0]["attributes"]["type"] = json::object(); },
       "spec.devices[0].attributes[type]: Required value: exactly one value must be specified"},
      {"version",
       [](json& s) {
         s["spec"]["devices"][0]["attributes"]["driverVersion"] = {{"version", "570.86"}};
       },
       "spec.devices[0].attributes[driverVersion].version: Invalid value"},
      {"pool count", [](json& s) { s["spec"]["pool"]["resourceSliceCount"] = 0; },
       "spec.pool.resourceSliceCount: Invalid value: 0: must be greater than zero"},
      {"driver", [](json& s) { s["spec"].erase("driver"); }, "spec.driver: Required value"},
  };
  for (const auto& c : cases) {
    json s = foreign_slice("bad", "node-a", "gpu.nvidia.com", "node-a");
    c.change(s);
    auto r = k.c->create(res::kResourceSlices, "", s);
    ASSERT_FALSE(r) << c.what;
    EXPECT_EQ(r.error().code, 422) << c.what;
    EXPECT_NE(r.error().message.find(c.field), std::string::npos) << c.what << ": " << r.error().message;
  }
  // A valid one is accepted; its driver and nodeName cannot change afterwards.
  ASSERT_TRUE(k.c->create(res::kResourceSlices, "", foreign_slice("good", "node-a", "gpu.nvidia.com", "node-a")));
  auto got = k.c->get(res::kResourceSlices, "", "good");
  ASSERT_TRUE(got);
  (*got)["spec"]["nodeName"] = "node-b";
  auto r = k.c->update(res::kResourceSlices, "", "good", *got);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("spec.nodeName: Invalid value: \"node-b\": field is immutable"), std::string::npos)
      << r.error().message;
}

TEST(DraSlices, KubectlReadsThePublishedSlicesAndAppliesTheDeviceClasses) {
  if (KGPU_KUBECTL.empty()) GTEST_SKIP() << "kubectl is not in .tools/kube (scripts/setup.sh fetches it)";
  Cluster k;
  k.node("node-a");
  SlicePublisher p(*k.c, options());
  auto devices = migs(20);
  devices[3].health = DeviceHealth{false, false, true, "GPU lost", {}};
  p.update(devices);
  ASSERT_TRUE(p.sync_once()) << p.stats().last_error;
  kgpu::testing::TempDir d;
  const std::string kubectl = std::string(KGPU_KUBECTL) + " --kubeconfig " + k.s.kubeconfig() + " --cache-dir " +
                              (d.path() / "cache").string() + " ";
  auto out =
      kgpu::testing::run_command(kubectl + "get resourceslices --field-selector spec.nodeName=node-a -o json 2>&1");
  ASSERT_EQ(out.status, 0) << out.text;
  const json list = json::parse(out.text);
  ASSERT_EQ(list["items"].size(), 3u);
  size_t total = 0;
  for (const auto& s : list["items"]) total += s["spec"]["devices"].size();
  EXPECT_EQ(total, 140u);
  out = kgpu::testing::run_command(kubectl + "get resourceslices 2>&1");
  EXPECT_EQ(out.status, 0) << out.text;
  EXPECT_NE(out.text.find("node-a-gpu.nvidia.com-2"), std::string::npos) << out.text;
  out = kgpu::testing::run_command(kubectl + "apply -f " + KGPU_SOURCE_DIR + "/deploy/dra/deviceclasses.yaml 2>&1");
  ASSERT_EQ(out.status, 0) << out.text;
  EXPECT_NE(out.text.find("deviceclass.resource.k8s.io/gpu.nvidia.com created"), std::string::npos) << out.text;
  EXPECT_NE(out.text.find("deviceclass.resource.k8s.io/mig.nvidia.com created"), std::string::npos) << out.text;
  out = kgpu::testing::run_command(kubectl +
                                   "get deviceclass gpu.nvidia.com -o jsonpath={.spec.extendedResourceName} 2>&1");
  EXPECT_EQ(out.text, "nvidia.com/gpu");
  // Applying again changes nothing.
  out = kgpu::testing::run_command(kubectl + "apply -f " + KGPU_SOURCE_DIR + "/deploy/dra/deviceclasses.yaml 2>&1");
  EXPECT_NE(out.text.find("deviceclass.resource.k8s.io/gpu.nvidia.com unchanged"), std::string::npos) << out.text;
}

}  // namespace
}  // namespace kgpu::dra
