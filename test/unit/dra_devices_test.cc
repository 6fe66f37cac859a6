// The DRA device model: NVIDIA's device names, attributes and capacities from real (fake-NVML)
// inventories, the ResourceSlice rendering, and the guide's selectors evaluated on every device.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "../integration/test_env.h"
#include "cel/cel.h"
#include "dra/devices.h"
#include "gpu/mig_manage.h"

namespace kgpu::dra {
namespace {

using kgpu::testing::FakeNodeFile;
using kgpu::testing::open_fake;

gpu::Inventory inventory_of(const std::string& yaml) {
  FakeNodeFile f(yaml);
  auto node = open_fake();
  EXPECT_TRUE(node);
  if (!node) return {};
  auto inv = node->inventory();
  EXPECT_TRUE(inv) << (inv ? "" : inv.error().message);
  return inv ? *inv : gpu::Inventory{};
}

std::string example(const char* file) {
  std::ifstream in(std::string(KGPU_SOURCE_DIR) + "/examples/nodes/" + file);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> names(const DeviceSet& set) {
  std::vector<std::string> out;
  for (const auto& d : set.devices) out.push_back(d.name);
  return out;
}

std::string str(const Device& d, const std::string& attribute) {
  auto it = d.attributes.find(attribute);
  if (it == d.attributes.end()) return "<missing>";
  if (const auto* s = std::get_if<std::string>(&it->second)) return *s;
  if (const auto* v = std::get_if<cel::Semver>(&it->second)) return "v" + v->to_string();
  return "<other>";
}

TEST(DraDevices, H100WholeGpus) {
  const auto inv = inventory_of("preset: hgx-h100-8\ndriverVersion: '580.105.08'\ncudaDriverVersion: 12090\n");
  const DeviceSet set = build_devices(inv);
  EXPECT_TRUE(set.problems.empty()) << set.problems.front();
  EXPECT_EQ(names(set),
            (std::vector<std::string>{"gpu-0", "gpu-1", "gpu-2", "gpu-3", "gpu-4", "gpu-5", "gpu-6", "gpu-7"}));
  const Device& d = set.devices[0];
  EXPECT_EQ(d.type, DeviceType::kGpu);
  EXPECT_EQ(d.gpu_index, 0u);
  EXPECT_EQ(d.uuid, inv.gpus[0].uuid);
  EXPECT_TRUE(d.parent_uuid.empty());
  EXPECT_EQ(str(d, "type"), "gpu");
  EXPECT_EQ(str(d, "uuid"), inv.gpus[0].uuid);
  EXPECT_EQ(str(d, "productName"), "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(str(d, "brand"), "Nvidia");
  EXPECT_EQ(str(d, "architecture"), "Hopper");
  EXPECT_EQ(str(d, "cudaComputeCapability"), "v9.0.0");
  EXPECT_EQ(str(d, "driverVersion"), "v580.105.8");  // Masterminds' loose parse drops the leading zero
  EXPECT_EQ(str(d, "cudaDriverVersion"), "v12.9.0");
  EXPECT_EQ(str(d, "resource.kubernetes.io/pciBusID"), "0000:18:00.0");
  EXPECT_EQ(d.attributes.count("parentUUID"), 0u);
  EXPECT_EQ(d.attributes.count("resource.kubernetes.io/pcieRoot"), 0u);  // no sysfs root given

  const nlohmann::json j = slice_device_json(d);
  EXPECT_EQ(j["name"], "gpu-0");
  EXPECT_EQ(j["attributes"]["type"], nlohmann::json({{"string", "gpu"}}));
  EXPECT_EQ(j["attributes"]["driverVersion"], nlohmann::json({{"version", "580.105.8"}}));
  EXPECT_EQ(j["attributes"]["resource.kubernetes.io/pciBusID"], nlohmann::json({{"string", "0000:18:00.0"}}));
  EXPECT_EQ(j["capacity"], nlohmann::json({{"memory", {{"value", "81559Mi"}}}}));
  EXPECT_LE(j["attributes"].size() + j["capacity"].size(), 32u);  // the API's per-device limit
}

TEST(DraDevices, A100MigLayoutNamesAndCapacities) {
  const auto inv = inventory_of(example("dgx-a100-mig.yaml"));
  const DeviceSet set = build_devices(inv);
  EXPECT_TRUE(set.problems.empty()) << set.problems.front();
  const auto n = names(set);
  // GPU 0: 1g,1g,2g,3g placed at the first free allowed starts; GPU 1: seven 1g; GPU 3's MIG
  // mode is only pending, so it is a whole GPU.
  const std::vector<std::string> gpu0 = {"gpu-0-mig-1g10gb-19-0", "gpu-0-mig-1g10gb-19-1", "gpu-0-mig-2g20gb-14-2",
                                         "gpu-0-mig-3g40gb-9-4"};
  for (const auto& name : gpu0) EXPECT_NE(std::find(n.begin(), n.end(), name), n.end()) << name;
  for (int s = 0; s < 7; ++s) {
    const std::string name = "gpu-1-mig-1g10gb-19-" + std::to_string(s);
    EXPECT_NE(std::find(n.begin(), n.end(), name), n.end()) << name;
  }
  EXPECT_EQ(std::find(n.begin(), n.end(), "gpu-0"), n.end());
  EXPECT_EQ(std::find(n.begin(), n.end(), "gpu-1"), n.end());
  EXPECT_NE(std::find(n.begin(), n.end(), "gpu-3"), n.end());
  EXPECT_EQ(set.devices.size(), 4u + 7u + 6u);

  const Device* m = find_device(set.devices, "gpu-0-mig-3g40gb-9-4");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->type, DeviceType::kMig);
  EXPECT_TRUE(m->uuid.starts_with("MIG-"));
  EXPECT_EQ(m->parent_uuid, inv.gpus[0].uuid);
  EXPECT_TRUE(m->gpu_instance_id.has_value());
  EXPECT_EQ(m->gpu_index, 0u);
  EXPECT_EQ(m->profile, "3g.40gb");
  EXPECT_EQ(str(*m, "type"), "mig");
  EXPECT_EQ(str(*m, "parentUUID"), inv.gpus[0].uuid);
  EXPECT_EQ(str(*m, "profile"), "3g.40gb");
  EXPECT_EQ(str(*m, "productName"), "NVIDIA A100-SXM4-80GB");
  EXPECT_EQ(str(*m, "architecture"), "Ampere");
  EXPECT_EQ(str(*m, "cudaComputeCapability"), "v8.0.0");
  const nlohmann::json j = slice_device_json(*m);
  EXPECT_EQ(j["capacity"]["multiprocessors"]["value"], "42");
  EXPECT_EQ(j["capacity"]["copyEngines"]["value"], "3");
  EXPECT_EQ(j["capacity"]["decoders"]["value"], "2");
  EXPECT_EQ(j["capacity"]["memory"]["value"], "40192Mi");  // the A100-80GB 3g profile (fake NVML model)
  for (const char* slice : {"memorySlice4", "memorySlice5", "memorySlice6", "memorySlice7"}) {
    EXPECT_EQ(j["capacity"][slice]["value"], "1") << slice;
  }
  EXPECT_FALSE(j["capacity"].contains("memorySlice3"));
  EXPECT_LE(j["attributes"].size() + j["capacity"].size(), 32u);
}

TEST(DraDevices, PartitionableGpuPublishesEveryPlacementAgainstItsCounters) {
  FakeNodeFile f("preset: hgx-h100-8\ngpus:\n  - index: 0\n    mig: {enabled: true}\n"
                 "  - index: 1\n    mig:\n      enabled: true\n      instances: [{profile: 3g.40gb}]\n");
  auto node = open_fake();
  ASSERT_TRUE(node);
  auto inv = node->inventory();
  ASSERT_TRUE(inv);
  auto offers = gpu::mig::offers(*node, 0);
  ASSERT_TRUE(offers) << offers.error().message;
  BuildOptions o;
  o.partitionable[0] = *offers;
  const DeviceSet set = build_devices(*inv, o);
  std::vector<const Device*> parts;
  for (const auto& d : set.devices)
    if (d.partition) parts.push_back(&d);
  // 7 x 1g.10gb, 7 x 1g.10gb+me, 4 x 1g.20gb, 3 x 2g.20gb, 2 x 3g.40gb, 4g.40gb, 7g.80gb.
  ASSERT_EQ(parts.size(), 25u);
  for (const auto* p : parts) EXPECT_EQ(p->gpu_index, 0u) << p->name;
  ASSERT_EQ(set.counter_sets.size(), 1u);
  EXPECT_EQ(set.counter_sets[0].name, "gpu-0-counter-set");
  EXPECT_EQ(set.counter_sets[0].counters.at("compute-slices"), 7);
  EXPECT_EQ(set.counter_sets[0].counters.at("memory-slice-7"), 1);
  EXPECT_EQ(set.counter_sets[0].counters.at("media-extensions"), 1);
  // GPU 1 is not partitionable here: its instance is published as it is; GPUs 2-7 whole.
  EXPECT_NE(find_device(set.devices, "gpu-1-mig-3g40gb-9-0"), nullptr) << ::testing::PrintToString(names(set));
  EXPECT_NE(find_device(set.devices, "gpu-7"), nullptr);

  const Device* d = find_device(set.devices, "gpu-0-mig-3g40gb-9-4");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(str(*d, "profile"), "3g.40gb");
  EXPECT_EQ(str(*d, "uuid"), "<missing>");
  EXPECT_EQ(str(*d, "parentUUID"), inv->gpus[0].uuid);
  const nlohmann::json j = slice_device_json(*d);
  ASSERT_EQ(j["consumesCounters"].size(), 1u) << j.dump();
  const auto& c = j["consumesCounters"][0];
  EXPECT_EQ(c["counterSet"], "gpu-0-counter-set");
  EXPECT_EQ(c["counters"]["compute-slices"]["value"], "3");
  for (int i = 4; i < 8; ++i) EXPECT_EQ(c["counters"]["memory-slice-" + std::to_string(i)]["value"], "1");
  EXPECT_FALSE(c["counters"].contains("memory-slice-3"));
  EXPECT_FALSE(c["counters"].contains("media-extensions"));
  EXPECT_EQ(j["capacity"]["memorySlice4"]["value"], "1");
  const Device* me = find_device(set.devices, "gpu-0-mig-1g10gb-me-20-6");
  ASSERT_NE(me, nullptr) << names(set).size();
  EXPECT_EQ(me->consumes.at("media-extensions"), 1);
  EXPECT_EQ(slice_device_json(*find_device(set.devices, "gpu-2")).count("consumesCounters"), 0u);
}

TEST(DraDevices, MediaEngineProfileName) {
  const auto inv = inventory_of(
      "preset: hgx-h200-8\ngpus:\n  - index: 2\n    mig:\n      enabled: true\n"
      "      instances: [{profile: 1g.18gb+me, start: 6}, {profile: 3g.71gb}]\n");
  const DeviceSet set = build_devices(inv);
  EXPECT_TRUE(set.problems.empty()) << set.problems.front();
  const Device* me = find_device(set.devices, "gpu-2-mig-1g18gb-me-20-6");
  ASSERT_NE(me, nullptr) << ::testing::PrintToString(names(set));
  EXPECT_EQ(me->profile, "1g.18gb+me");
  EXPECT_EQ(str(*me, "profile"), "1g.18gb+me");
  EXPECT_NE(find_device(set.devices, "gpu-2-mig-3g71gb-9-0"), nullptr);
  EXPECT_EQ(slice_device_json(*me)["capacity"]["memorySlice6"]["value"], "1");
}

TEST(DraDevices, NameRulesAndVersions) {
  EXPECT_EQ(rfc1123_name("1g10gb+me"), "1g10gb-me");
  EXPECT_EQ(rfc1123_name("-1G10GB+GFX-"), "1g10gb-gfx");
  EXPECT_EQ(rfc1123_name("a_b"), "a-b");
  EXPECT_EQ(rfc1123_name("x\xc3\xa9y"), "x-y");
  EXPECT_EQ(rfc1123_name(std::string(300, 'a')).size(), 253u);

  const auto v = [](std::string_view text) {
    auto r = loose_version(text);
    return r ? r->to_string() : "error: " + r.error().message;
  };
  EXPECT_EQ(v("535.104.05"), "535.104.5");
  EXPECT_EQ(v("570.86.10"), "570.86.10");
  EXPECT_EQ(v("12.4"), "12.4.0");
  EXPECT_EQ(v("9"), "9.0.0");
  EXPECT_EQ(v("v1.2.3-rc1+b5"), "1.2.3-rc1+b5");
  EXPECT_NE(v("1.2.3.4").find("error"), std::string::npos);
  EXPECT_NE(v("").find("error"), std::string::npos);
  EXPECT_NE(v("abc").find("abc"), std::string::npos);

  EXPECT_EQ(published_bus_id("00000000:B9:00.0"), "0000:b9:00.0");
  EXPECT_EQ(published_bus_id("00000001:18:00.1"), "0001:18:00.1");
}

TEST(DraDevices, LeftOutDevicesAreNamed) {
  gpu::Inventory inv;
  inv.driver_version = "550.54.15";
  gpu::GpuInfo lost;
  lost.index = 0;
  lost.uuid = "GPU-lost";
  lost.lost = true;
  gpu::GpuInfo no_minor;
  no_minor.index = 1;
  no_minor.uuid = "GPU-nominor";
  gpu::GpuInfo mig;
  mig.index = 2;
  mig.uuid = "GPU-mig";
  mig.minor_number = 2;
  mig.mig_enabled = true;
  gpu::MigDevice no_profile;
  no_profile.uuid = "MIG-x";
  no_profile.profile = "1g.10gb";
  gpu::MigDevice ok = no_profile;
  ok.uuid = "MIG-y";
  ok.profile_id = 19;
  ok.placement_start = 3;
  ok.placement_size = 1;
  gpu::MigDevice twin = ok;  // a second compute instance of the same GPU instance
  twin.uuid = "MIG-z";
  mig.mig_devices = {no_profile, ok, twin};
  inv.gpus = {lost, no_minor, mig};
  const DeviceSet set = build_devices(inv);
  ASSERT_EQ(names(set), std::vector<std::string>{"gpu-2-mig-1g10gb-19-3"});
  ASSERT_EQ(set.problems.size(), 4u);
  EXPECT_NE(set.problems[0].find("GPU 0 (GPU-lost): lost"), std::string::npos);
  EXPECT_NE(set.problems[1].find("no minor number"), std::string::npos);
  EXPECT_NE(set.problems[2].find("MIG-x"), std::string::npos);
  EXPECT_NE(set.problems[3].find("MIG-z"), std::string::npos);
  // No engines read: the SM count and memory still published, the engine counts not invented.
  const auto j = slice_device_json(set.devices[0]);
  EXPECT_TRUE(j["capacity"].contains("multiprocessors"));
  EXPECT_FALSE(j["capacity"].contains("copyEngines"));
  EXPECT_FALSE(j["attributes"].contains("cudaDriverVersion"));  // the inventory had none
}

TEST(DraDevices, PcieRootFromSysfs) {
  kgpu::testing::TempDir dir;
  namespace fs = std::filesystem;
  const fs::path root = dir.path();
  fs::create_directories(root / "devices/pci0000:17/0000:17:01.0/0000:18:00.0");
  fs::create_directories(root / "bus/pci/devices");
  fs::create_symlink("../../../devices/pci0000:17/0000:17:01.0/0000:18:00.0", root / "bus/pci/devices/0000:18:00.0");
  EXPECT_EQ(pcie_root(root.string(), "0000:18:00.0"), "pci0000:17");
  EXPECT_EQ(pcie_root(root.string(), "0000:19:00.0"), std::nullopt);

  const auto inv = inventory_of("preset: hgx-h100-8\n");
  const DeviceSet set = build_devices(inv, BuildOptions{root.string(), {}});
  EXPECT_EQ(str(set.devices[0], "resource.kubernetes.io/pcieRoot"), "pci0000:17");
  EXPECT_EQ(set.devices[1].attributes.count("resource.kubernetes.io/pcieRoot"), 0u);
}

// The guide's selectors, compiled by the CEL evaluator and run on every device of each node:
// none may fail to evaluate, and each selects exactly the devices it should.
TEST(DraDevices, GuideSelectorsOnEveryDevice) {
  struct Selector {
    const char* expression;
    std::function<bool(const Device&)> expect;
  };
  const auto has_mem = [](const Device& d, int64_t gib) { return d.capacity.at("memory").value() >= (gib << 30); };
  const std::vector<Selector> selectors = {
      {R"(device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0)",
       [&](const Device& d) { return has_mem(d, 40); }},
      {R"(device.attributes["gpu.nvidia.com"].productName.lowerAscii().matches("^.*a100.*$"))",
       [](const Device& d) { return str(d, "productName").find("A100") != std::string::npos; }},
      {R"(device.attributes["gpu.nvidia.com"].driverVersion.compareTo(semver("570.0.0")) >= 0)",
       [](const Device&) { return true; }},  // every node below runs 580.x
      {R"(device.driver == "gpu.nvidia.com" && device.attributes["gpu.nvidia.com"].type == "mig" && )"
       R"(device.attributes["gpu.nvidia.com"].profile == "1g.10gb")",
       [](const Device& d) { return d.type == DeviceType::kMig && d.profile == "1g.10gb"; }},
      {R"(device.attributes["gpu.nvidia.com"].type == "gpu")",
       [](const Device& d) { return d.type == DeviceType::kGpu; }},
      {R"(device.attributes["resource.kubernetes.io"].pciBusID.startsWith("0000:"))",
       [](const Device&) { return true; }},
      {R"(device.attributes["gpu.nvidia.com"].cudaComputeCapability.isGreaterThan(semver("8.0.0")))",
       [](const Device& d) { return str(d, "architecture") == "Hopper"; }},
  };
  const std::string versions = "driverVersion: '580.95.05'\ncudaDriverVersion: 13000\n";
  std::map<std::string, int> matched;
  for (const std::string& yaml : {"preset: hgx-h100-8\n" + versions, example("dgx-a100-mig.yaml") + versions,
                                  example("hgx-h200.yaml") + versions}) {
    const DeviceSet set = build_devices(inventory_of(yaml));
    ASSERT_FALSE(set.devices.empty());
    for (const Selector& s : selectors) {
      auto program = cel::compile(s.expression);
      ASSERT_TRUE(program) << s.expression << ": " << program.error().message;
      for (const Device& d : set.devices) {
        auto r = program->matches(cel_input(d));
        ASSERT_TRUE(r) << d.name << " / " << s.expression << ": " << r.error().message;
        EXPECT_EQ(*r, s.expect(d)) << d.name << " / " << s.expression;
        matched[s.expression] += *r ? 1 : 0;
      }
    }
  }
  for (const Selector& s : selectors) EXPECT_GT(matched[s.expression], 0) << "never matched: " << s.expression;
  // Another driver's name does not match the driver test.
  const DeviceSet set = build_devices(inventory_of(example("dgx-a100-mig.yaml")));
  auto p = cel::compile(R"(device.driver == "gpu.nvidia.com")");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->matches(cel_input(set.devices[0], "gpu.example.com")), false);
}

}  // namespace
}  // namespace kgpu::dra
