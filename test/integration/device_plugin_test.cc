// The real `kgpu agent` binary on the fake NVML, driven by a kubelet peer that speaks the Device
// Plugin v1beta1 wire contract by hand (test/peers/device_plugin_peer.h): registration, device
// lists, Allocate for every strategy, preferred allocation on an NVLink topology, health changes
// on injected XIDs and lost GPUs, kubelet restarts, config hot reload (good and bad), MIG layouts,
// MPS limits and node labels.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "agent_fixture.h"

namespace kgpu::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}


size_t count_health(const std::vector<DeviceEntry>& list, const std::string& health) {
  return static_cast<size_t>(
      std::count_if(list.begin(), list.end(), [&](const DeviceEntry& d) { return d.health == health; }));
}

using Agent = PluginAgent;

// A time-slicing config: every GPU with `replicas` replicas (the count is the file's line 5).
std::string time_slicing(const std::string& replicas) {
  return "sharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: " + replicas + "\n";
}

constexpr const char* kH100 = "preset: hgx-h100-8\n";
constexpr const char* kL4 = "preset: pcie-l4-4\n";

// A dev root with the device nodes of `gpus` GPUs and the control nodes (plain files: the agent
// only checks that they exist).
std::string dev_root(const TempDir& dir, unsigned gpus) {
  for (unsigned i = 0; i < gpus; ++i) dir.write("dev/nvidia" + std::to_string(i), "");
  dir.write("dev/nvidiactl", "");
  return dir.path().string();
}

TEST(DevicePlugin, ExclusiveGpusRegisterListAndAllocateWithCdi) {
  TempDir dev;
  Agent agent(kH100, "", {"--dev-root", dev_root(dev, 8)});
  auto regs = agent.registrations(1);
  ASSERT_EQ(regs.size(), 1u);
  EXPECT_EQ(regs[0].version, "v1beta1");
  EXPECT_EQ(regs[0].resource_name, "nvidia.com/gpu");
  EXPECT_EQ(regs[0].endpoint, "nvidia-gpu.sock");
  EXPECT_TRUE(regs[0].options.get_preferred_allocation_available);
  EXPECT_FALSE(regs[0].options.pre_start_required);

  PluginClient client(agent.kubelet().plugin_socket(regs[0]));
  auto options = client.options();
  ASSERT_TRUE(options);
  EXPECT_TRUE(options->get_preferred_allocation_available);
  auto list = first_list(client, 8);
  ASSERT_EQ(list.size(), 8u);
  EXPECT_EQ(count_health(list, "Healthy"), 8u);
  EXPECT_THAT(list[0].numa_nodes, ElementsAre(0));
  EXPECT_THAT(list[7].numa_nodes, ElementsAre(1));

  auto alloc = client.allocate({{list[2].id}, {list[3].id, list[4].id}});
  ASSERT_TRUE(alloc) << alloc.error().message;
  ASSERT_EQ(alloc->size(), 2u);
  EXPECT_THAT(alloc->at(0).cdi_devices, ElementsAre("k8s.device-plugin.nvidia.com/gpu=" + list[2].id));
  EXPECT_EQ(alloc->at(1).cdi_devices.size(), 2u);
  EXPECT_EQ(alloc->at(0).envs.at("NVIDIA_VISIBLE_DEVICES"), "void") << "the image's value must not reach the hook";
  EXPECT_TRUE(client.pre_start({list[2].id}));

  const auto spec = nlohmann::json::parse(slurp(agent.dir().path() / "cdi" / "k8s.device-plugin.nvidia.com-gpu.json"));
  EXPECT_EQ(spec["kind"], "k8s.device-plugin.nvidia.com/gpu");
  EXPECT_EQ(spec["devices"].size(), 16u);  // 8 GPUs, by UUID and by index
  EXPECT_EQ(spec["devices"][0]["name"], list[0].id);
  EXPECT_EQ(spec["devices"][0]["containerEdits"]["deviceNodes"][0]["hostPath"], dev.path().string() + "/dev/nvidia0");
  const auto valid = run_command("/usr/bin/python3 " + KGPU_SOURCE_DIR + "/test/data/cdi/validate.py " +
                                 (agent.dir().path() / "cdi" / "k8s.device-plugin.nvidia.com-gpu.json").string());
  EXPECT_EQ(valid.status, 0) << valid.text;

  auto bad = client.allocate({{"GPU-nope"}});
  ASSERT_FALSE(bad);
  EXPECT_THAT(bad.error().message, HasSubstr("unknown device ID 'GPU-nope'"));
}

// A device whose node is missing must never reach the CDI spec: CDI runtimes reject the whole
// file for one device without edits, which would fail every GPU container of the node. The spec
// in place stays, the failure is reported, and the spec is written again once the node is back.
TEST(DevicePlugin, CdiSpecKeepsTheLastGoodOneWhenADeviceNodeIsMissing) {
  TempDir dev;
  Agent agent(kL4, "version: v1\n", {"--dev-root", dev_root(dev, 4)});
  auto regs = agent.registrations(1);
  const auto path = agent.dir().path() / "cdi" / "k8s.device-plugin.nvidia.com-gpu.json";
  ASSERT_TRUE(eventually([&] { return std::filesystem::exists(path); })) << agent.log();
  const std::string good = slurp(path);
  EXPECT_THAT(agent.metrics(), HasSubstr("\nkgpu_device_plugin_cdi_spec_last_write_successful 1\n"));

  // The node of GPU 2 goes away, then a config change makes the agent write the spec again.
  std::filesystem::remove(dev.path() / "dev" / "nvidia2");
  std::ofstream(agent.config_path()) << "flags:\n  plugin:\n    deviceListStrategy: [cdi-cri, cdi-annotations]\n";
  // The gauge turns 0 before the error reaches the log (it is logged after the state is set): wait
  // for both.
  const std::string missing = "has no device node (" + dev.path().string() + "/dev/nvidia2)";
  ASSERT_TRUE(eventually([&] {
    return agent.metrics().find("\nkgpu_device_plugin_cdi_spec_last_write_successful 0\n") != std::string::npos &&
           agent.log().find(missing) != std::string::npos;
  })) << agent.log();
  EXPECT_EQ(slurp(path), good) << "the last good spec must stay in place";
  const auto valid = run_command("/usr/bin/python3 " + KGPU_SOURCE_DIR + "/test/data/cdi/validate.py " + path.string());
  EXPECT_EQ(valid.status, 0) << valid.text;

  // The node is back (the driver finished loading): written again within a health round.
  dev.write("dev/nvidia2", "");
  ASSERT_TRUE(eventually([&] {
    return agent.metrics().find("\nkgpu_device_plugin_cdi_spec_last_write_successful 1\n") != std::string::npos;
  })) << agent.log();
  EXPECT_EQ(nlohmann::json::parse(slurp(path))["devices"].size(), 8u);
}

// gdsEnabled, mofedEnabled, gdrcopyEnabled and an IMEX channel, end to end: the agent finds the
// device nodes under the dev root, writes one CDI spec per class (each valid for the CDI schema),
// and Allocate names them after the GPU, with NVIDIA's variables.
TEST(DevicePlugin, GdsMofedGdrcopyAndImexChannelsReachTheContainer) {
  TempDir dev;
  const std::string root = dev_root(dev, 4);
  for (const char* n : {"dev/nvidia-fs0", "dev/gdrdrv", "dev/infiniband/uverbs0", "dev/infiniband/rdma_cm",
                        "dev/nvidia-caps-imex-channels/channel0"}) {
    dev.write(n, "");
  }
  Agent agent(kL4, "version: v1\nflags:\n  gdsEnabled: true\n  mofedEnabled: true\nimex:\n  channelIDs: [0]\n  required: true\n",
              {"--dev-root", root, "--gdrcopy-enabled"});
  auto regs = agent.registrations(1);
  PluginClient client(agent.kubelet().plugin_socket(regs[0]));
  auto list = first_list(client, 4);
  auto a = client.allocate({{list[0].id}});
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_THAT(a->at(0).cdi_devices,
              ElementsAre("k8s.device-plugin.nvidia.com/gpu=" + list[0].id, "k8s.device-plugin.nvidia.com/gds=all",
                          "k8s.device-plugin.nvidia.com/mofed=all", "k8s.device-plugin.nvidia.com/gdrcopy=all",
                          "k8s.device-plugin.nvidia.com/imex-channel=0"));
  EXPECT_EQ(a->at(0).envs.at("NVIDIA_GDS"), "enabled");
  EXPECT_EQ(a->at(0).envs.at("NVIDIA_MOFED"), "enabled");
  EXPECT_EQ(a->at(0).envs.at("NVIDIA_GDRCOPY"), "enabled");
  std::string files;
  for (const char* cls : {"gpu", "gds", "mofed", "gdrcopy", "imex-channel"}) {
    const auto f = agent.dir().path() / "cdi" / (std::string("k8s.device-plugin.nvidia.com-") + cls + ".json");
    ASSERT_TRUE(std::filesystem::exists(f)) << cls << "\n" << agent.log();
    files += " " + f.string();
  }
  const auto valid = run_command("/usr/bin/python3 " + KGPU_SOURCE_DIR + "/test/data/cdi/validate.py" + files);
  EXPECT_EQ(valid.status, 0) << valid.text;
  const auto mofed = nlohmann::json::parse(slurp(agent.dir().path() / "cdi" / "k8s.device-plugin.nvidia.com-mofed.json"));
  EXPECT_EQ(mofed["devices"][0]["containerEdits"]["deviceNodes"].size(), 2u);

  // GDS switched off: its spec goes, its CDI name too.
  std::ofstream(agent.config_path()) << "version: v1\nflags:\n  mofedEnabled: true\n";
  ASSERT_TRUE(eventually([&] {
    return !std::filesystem::exists(agent.dir().path() / "cdi" / "k8s.device-plugin.nvidia.com-gds.json");
  })) << agent.log();
  auto b = client.allocate({{list[0].id}});
  ASSERT_TRUE(b);
  EXPECT_FALSE(b->at(0).envs.contains("NVIDIA_GDS"));
}

// imex.required with the channel missing: refused at start with the path, as NVIDIA's plugin.
TEST(DevicePlugin, RequiredImexChannelThatDoesNotExistStopsTheAgent) {
  TempDir dev;
  Agent agent(kL4, "version: v1\nimex:\n  channelIDs: [0]\n  required: true\n", {"--dev-root", dev_root(dev, 4)});
  const std::string want = dev.path().string() + "/dev/nvidia-caps-imex-channels/channel0 not found";
  ASSERT_TRUE(eventually([&] { return agent.log().find(want) != std::string::npos; })) << agent.log();
  EXPECT_TRUE(agent.kubelet().registrations().empty());
}

// NVLink-fabric GPUs get nvidia.com/gpu.clique, a vGPU guest nvidia.com/vgpu.present, from NVML
// (the fake's fabric and virtualizationMode fields).
TEST(DevicePlugin, CliqueAndVgpuLabels) {
  std::string node = "preset: hgx-h100-8\ngpus:\n";
  for (int i = 0; i < 8; ++i) {
    node += "  - index: " + std::to_string(i) +
            "\n    virtualizationMode: vgpu\n    fabric: {clusterUuid: c8d4e9a2-1f3b-4c5d-8e6f-0a1b2c3d4e5f, cliqueId: 4, "
            "state: completed, status: SUCCESS}\n";
  }
  Agent agent(node, "");
  const auto path = agent.dir().path() / "features.d" / "gfd";
  ASSERT_TRUE(eventually([&] { return slurp(path).find("gpu.clique") != std::string::npos; })) << agent.log();
  const auto labels = slurp(path);
  EXPECT_THAT(labels, HasSubstr("nvidia.com/gpu.clique=c8d4e9a2-1f3b-4c5d-8e6f-0a1b2c3d4e5f.4\n"));
  EXPECT_THAT(labels, HasSubstr("nvidia.com/vgpu.present=true\n"));
}

TEST(DevicePlugin, TimeSlicingReplicasAndMaximumRequestSize) {
  Agent agent(kL4, R"(version: v1
sharing:
  timeSlicing:
    failRequestsGreaterThanOne: true
    resources:
    - name: nvidia.com/gpu
      replicas: 4
)", {"--device-list-strategy", "envvar"});
  auto regs = agent.registrations(1);
  ASSERT_EQ(regs[0].resource_name, "nvidia.com/gpu");
  PluginClient client(agent.kubelet().plugin_socket(regs[0]));
  auto list = first_list(client, 16);
  ASSERT_EQ(list.size(), 16u);
  EXPECT_THAT(list[5].id, ::testing::EndsWith("::1"));
  auto two = client.allocate({{list[0].id, list[5].id}});
  ASSERT_FALSE(two);
  EXPECT_THAT(two.error().message, ::testing::EndsWith("invalid request: maximum request size for shared resources is 1"));
  auto one = client.allocate({{list[5].id}});
  ASSERT_TRUE(one) << one.error().message;
  const std::string gpu1 = list[5].id.substr(0, list[5].id.find("::"));
  EXPECT_EQ(one->at(0).envs.at("NVIDIA_VISIBLE_DEVICES"), gpu1);
}

TEST(DevicePlugin, RenamedSharedResourceAndPerGpuReplicas) {
  Agent agent(kL4, R"(version: v1
sharing:
  timeSlicing:
    resources:
    - name: nvidia.com/gpu
      rename: nvidia.com/gpu.shared
      replicas: 2
      devices: [0, 1]
    - name: nvidia.com/gpu
      rename: nvidia.com/gpu.shared
      replicas: 8
      devices: [2]
)");
  auto regs = agent.registrations(2);
  std::map<std::string, std::string> endpoints;
  for (const auto& r : regs) endpoints[r.resource_name] = r.endpoint;
  EXPECT_EQ(endpoints["nvidia.com/gpu"], "nvidia-gpu.sock");
  EXPECT_EQ(endpoints["nvidia.com/gpu.shared"], "nvidia-gpu.shared.sock");
  PluginClient whole(agent.socket("nvidia-gpu.sock")), shared(agent.socket("nvidia-gpu.shared.sock"));
  EXPECT_EQ(first_list(whole, 1).size(), 1u);       // GPU 3 stays exclusive
  EXPECT_EQ(first_list(shared, 12).size(), 12u);    // 2 + 2 + 8
}

TEST(DevicePlugin, AllocateForEveryDeviceListStrategy) {
  struct Case {
    std::string flags;
    std::function<void(const ContainerAllocation&, const std::string&)> check;
  };
  const std::vector<Case> cases{
      {"envvar",
       [](const ContainerAllocation& a, const std::string& id) {
         EXPECT_EQ(a.envs.at("NVIDIA_VISIBLE_DEVICES"), id);
         EXPECT_TRUE(a.mounts.empty());
       }},
      {"volume-mounts",
       [](const ContainerAllocation& a, const std::string& id) {
         EXPECT_EQ(a.envs.at("NVIDIA_VISIBLE_DEVICES"), "/var/run/nvidia-container-devices");
         ASSERT_EQ(a.mounts.size(), 1u);
         EXPECT_EQ(a.mounts[0].container_path, "/var/run/nvidia-container-devices/" + id);
         EXPECT_EQ(a.mounts[0].host_path, "/dev/null");
       }},
      {"cdi-annotations",
       [](const ContainerAllocation& a, const std::string& id) {
         ASSERT_EQ(a.annotations.size(), 1u);
         EXPECT_THAT(a.annotations.begin()->first, ::testing::StartsWith("cdi.k8s.io/"));
         EXPECT_EQ(a.annotations.begin()->second, "k8s.device-plugin.nvidia.com/gpu=" + id);
       }},
      {"cdi-cri",
       [](const ContainerAllocation& a, const std::string& id) {
         EXPECT_THAT(a.cdi_devices, ElementsAre("k8s.device-plugin.nvidia.com/gpu=" + id));
       }},
  };
  // One agent; the strategy changes by hot reload (same advertisement: no re-registration).
  Agent agent(kL4, "flags:\n  plugin:\n    deviceListStrategy: envvar\n");
  auto regs = agent.registrations(1);
  PluginClient client(agent.kubelet().plugin_socket(regs[0]));
  auto list = first_list(client, 4);
  ASSERT_EQ(list.size(), 4u);
  int generation = 1;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.flags);
    if (c.flags != "envvar") {
      std::ofstream(agent.config_path()) << "flags:\n  plugin:\n    deviceListStrategy: " << c.flags << "\n";
      ++generation;
      ASSERT_TRUE(eventually([&] {
        return agent.metrics().find("kgpu_device_plugin_config_generation " + std::to_string(generation)) !=
               std::string::npos;
      })) << agent.log();
    }
    auto a = client.allocate({{list[1].id}});
    ASSERT_TRUE(a) << a.error().message;
    c.check(a->at(0), list[1].id);
  }
  EXPECT_EQ(agent.kubelet().registrations().size(), 1u) << "a list-strategy change must not re-register";
  // Index IDs and device specs.
  std::ofstream(agent.config_path()) << "flags:\n  plugin:\n    deviceListStrategy: envvar\n"
                                        "    deviceIDStrategy: index\n    passDeviceSpecs: true\n"
                                        "  nvidiaDevRoot: " << agent.dir().path().string() << "\n";
  std::filesystem::create_directories(agent.dir().path() / "dev");
  for (const char* n : {"nvidia1", "nvidiactl", "nvidia-uvm"}) std::ofstream(agent.dir().path() / "dev" / n) << "";
  ASSERT_TRUE(eventually([&] {
    auto a = client.allocate({{list[1].id}});
    return a && a->at(0).envs.count("NVIDIA_VISIBLE_DEVICES") && a->at(0).envs.at("NVIDIA_VISIBLE_DEVICES") == "1";
  })) << agent.log();
  auto a = client.allocate({{list[1].id}});
  ASSERT_TRUE(a);
  std::vector<std::string> specs;
  for (const auto& d : a->at(0).devices) specs.push_back(d.container_path + "<-" + d.host_path + ":" + d.permissions);
  const std::string root = agent.dir().path().string();
  EXPECT_THAT(specs, ElementsAre("/dev/nvidia1<-" + root + "/dev/nvidia1:rw", "/dev/nvidiactl<-" + root +
                                                                                  "/dev/nvidiactl:rw",
                                 "/dev/nvidia-uvm<-" + root + "/dev/nvidia-uvm:rw"));
}

TEST(DevicePlugin, PreferredAllocationFollowsNvLink) {
  // Two NVLink islands on an A100 node without NVSwitch: {0,1,2,3} and {4,5,6,7}.
  Agent agent("preset: dgx-a100-8\ntopology:\n  nvlink: [[0, 1, 2, 3], [4, 5, 6, 7]]\n", "");
  auto regs = agent.registrations(1);
  PluginClient client(agent.kubelet().plugin_socket(regs[0]));
  auto list = first_list(client, 8);
  ASSERT_EQ(list.size(), 8u);
  auto id = [&](int i) { return list[static_cast<size_t>(i)].id; };
  auto pref = client.preferred({{{id(0), id(4), id(5)}, {}, 2}, {{id(0), id(1), id(4), id(5)}, {id(4)}, 2},
                                {{id(0), id(2), id(3), id(4), id(5), id(6), id(7)}, {}, 4}});
  ASSERT_TRUE(pref) << pref.error().message;
  ASSERT_EQ(pref->size(), 3u);
  EXPECT_THAT(pref->at(0), ElementsAre(id(4), id(5)));
  EXPECT_THAT(pref->at(1), ElementsAre(id(4), id(5)));
  EXPECT_THAT(pref->at(2), ElementsAre(id(4), id(5), id(6), id(7)));
}

// The recovery rule's timing (quiet minutes, XIDs that need a reset, --health-recovery 0) is tested
// in-process on a fake clock (plugin_health_test.cc); here the whole path, on real time.
TEST(DevicePlugin, XidMarksUnhealthyAndTheRecoveryRuleReturnsIt) {
  Agent agent(kL4 + std::string("faults:\n  xids: []\n"),
              "sharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 2\n",
              {"--health-recovery", "2s"});
  auto regs = agent.registrations(1);
  PluginClient client(agent.kubelet().plugin_socket(regs[0]));
  auto list = first_list(client, 8);
  ASSERT_EQ(list.size(), 8u);
  // An application XID (31) on GPU 0 is ignored; a contained ECC error (94) on GPU 2 is not. The
  // events are handled in order, so the list that shows GPU 2's mark was made after XID 31.
  // XIDs injected before the agent's event set is registered would never reach it.
  ASSERT_TRUE(eventually([&] { return agent.log().find("watching XID events") != std::string::npos; })) << agent.log();
  const auto t0 = std::chrono::steady_clock::now();
  agent.fake().rewrite(kL4 + std::string("faults:\n  xids:\n  - {gpu: 0, xid: 31}\n  - {gpu: 2, xid: 94}\n"));
  auto bad = client.wait_for_list([](const auto& l) { return count_health(l, "Unhealthy") > 0; }, 5s);
  ASSERT_TRUE(bad) << agent.log();
  EXPECT_EQ(count_health(*bad, "Unhealthy"), 2u);
  EXPECT_EQ((*bad)[0].health, "Healthy");  // XID 31 ignored
  EXPECT_EQ((*bad)[4].health, "Unhealthy");  // both replicas of GPU 2
  EXPECT_EQ((*bad)[5].health, "Unhealthy");
  EXPECT_THAT(agent.metrics(), HasSubstr("kgpu_device_plugin_devices{resource=\"nvidia.com/gpu\",health=\"unhealthy\"} 2"));
  // Recovery: no new fault for 2 s and the GPU answers.
  auto good = client.wait_for_list([](const auto& l) { return count_health(l, "Unhealthy") == 0; }, 6s);
  ASSERT_TRUE(good) << agent.log();
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 1900ms);
  EXPECT_THAT(agent.log(), HasSubstr("returned to Healthy"));
}

TEST(DevicePlugin, LostGpuIsUnhealthyAndOthersStayHealthy) {
  Agent agent(kL4, "", {"--health-recovery", "0"});
  auto regs = agent.registrations(1);
  PluginClient client(agent.kubelet().plugin_socket(regs[0]));
  auto list = first_list(client, 4);
  agent.fake().rewrite(kL4 + std::string("faults:\n  lost: [3]\n"));
  auto bad = client.wait_for_list([](const auto& l) { return count_health(l, "Unhealthy") == 1; }, 5s);
  ASSERT_TRUE(bad) << agent.log();
  EXPECT_EQ((*bad)[3].health, "Unhealthy");
  EXPECT_EQ(bad->size(), 4u) << "a lost GPU stays advertised (capacity), as Unhealthy";
  // That it stays Unhealthy when it answers again (--health-recovery 0) is tested on a fake
  // clock (plugin_health_test.cc).
  auto ok = client.allocate({{list[0].id}});
  EXPECT_TRUE(ok) << "the other GPUs keep working";
}

TEST(DevicePlugin, KubeletRestartMeansServeAndRegisterAgainWithinASecond) {
  Agent agent("preset: dgx-a100-8\ngpus:\n  - index: 0\n    mig:\n      enabled: true\n      instances: "
              "[{profile: 3g.40gb}, {profile: 3g.40gb}]\n",
              "", {"--mig-strategy", "mixed"});
  auto regs = agent.registrations(2);
  ASSERT_EQ(regs.size(), 2u);
  const auto t0 = std::chrono::steady_clock::now();
  agent.kubelet().restart();  // deletes every socket, then serves a new kubelet.sock
  regs = agent.registrations(4);
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_LT(took, 1s) << "re-registration took "
                      << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms";
  std::set<std::string> again{regs[2].resource_name, regs[3].resource_name};
  EXPECT_THAT(again, ElementsAre("nvidia.com/gpu", "nvidia.com/mig-3g.40gb"));
  // The plugin serves on its socket again.
  PluginClient client(agent.socket("nvidia-mig-3g.40gb.sock"));
  EXPECT_EQ(first_list(client, 2).size(), 2u);
}

TEST(DevicePlugin, OwnSocketDeletedMeansServeAndRegisterAgain) {
  Agent agent(kL4, "");
  agent.registrations(1);
  ::unlink(agent.socket("nvidia-gpu.sock").c_str());
  agent.registrations(2);
  struct stat st {};
  EXPECT_EQ(::stat(agent.socket("nvidia-gpu.sock").c_str(), &st), 0);
}

TEST(DevicePlugin, HotReloadReRegistersOnlyWhatChanged) {
  // MIG mixed on GPU 0, whole GPUs 1-7; the reload changes only nvidia.com/gpu (replicas).
  const std::string node = "preset: dgx-a100-8\ngpus:\n  - index: 0\n    mig:\n      enabled: true\n"
                           "      instances: [{profile: 3g.40gb}, {profile: 3g.40gb}]\n";
  Agent agent(node, "flags:\n  migStrategy: mixed\n");
  auto regs = agent.registrations(2);
  PluginClient mig(agent.socket("nvidia-mig-3g.40gb.sock"));
  ASSERT_EQ(first_list(mig, 2).size(), 2u);
  // ConfigMap-style update: the file is a symlink through ..data, swapped atomically.
  const auto dir = agent.dir().path();
  std::filesystem::create_directories(dir / "cm" / "..v1");
  std::ofstream(dir / "cm" / "..v1" / "config.yaml")
      << "flags:\n  migStrategy: mixed\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n"
         "      replicas: 3\n";
  std::filesystem::create_directory_symlink("..v1", dir / "cm" / "..data");
  std::filesystem::create_symlink("..data/config.yaml", dir / "cm" / "config.yaml");
  // Point the watched path at the ConfigMap layout by replacing it with a symlink.
  std::filesystem::remove(agent.config_path());
  std::filesystem::create_symlink(dir / "cm" / "config.yaml", agent.config_path());
  // The changed resource gets its new list on the open stream: no restart, no re-registration
  // (a restart would make the kubelet mark the resource unhealthy meanwhile).
  PluginClient gpu(agent.socket("nvidia-gpu.sock"));
  ASSERT_EQ(first_list(gpu, 7).size(), 7u);
  ASSERT_TRUE(gpu.wait_for_list([](const auto& l) { return l.size() == 21; }, 5s)) << agent.log();  // 7 x 3
  // The labels are written last when a config is applied: once they show 3 replicas, any restart
  // or registration the change would cause has happened.
  ASSERT_TRUE(eventually([&] {
    return slurp(agent.dir().path() / "features.d" / "gfd").find("nvidia.com/gpu.replicas=3\n") != std::string::npos;
  })) << slurp(agent.dir().path() / "features.d" / "gfd");
  EXPECT_EQ(agent.kubelet().registrations().size(), 2u);
  EXPECT_FALSE(mig.stream_ended());
  EXPECT_FALSE(gpu.stream_ended());
  // A second swap, as the kubelet does it: new ..v2 directory, ..data re-pointed by rename.
  std::filesystem::create_directories(dir / "cm" / "..v2");
  std::ofstream(dir / "cm" / "..v2" / "config.yaml")
      << "flags:\n  migStrategy: mixed\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n"
         "      replicas: 2\n";
  std::filesystem::create_directory_symlink("..v2", dir / "cm" / "..data_tmp");
  std::filesystem::rename(dir / "cm" / "..data_tmp", dir / "cm" / "..data");
  ASSERT_TRUE(gpu.wait_for_list([](const auto& l) { return l.size() == 14; }, 5s)) << agent.log();
  EXPECT_EQ(agent.kubelet().registrations().size(), 2u);
  EXPECT_THAT(agent.metrics(), HasSubstr("kgpu_device_plugin_config_reloads_total{result=\"success\"} 2"));
}

TEST(DevicePlugin, BadConfigIsRejectedAndTheLastGoodKeepsRunning) {
  const std::string good = time_slicing("2");
  Agent agent(kL4, good, {"--device-list-strategy", "envvar"});
  auto regs = agent.registrations(1);
  PluginClient client(agent.kubelet().plugin_socket(regs[0]));
  auto list = first_list(client, 8);
  std::ofstream(agent.config_path()) << time_slicing("1");
  ASSERT_TRUE(eventually([&] {
    return agent.metrics().find("\nkgpu_device_plugin_config_last_reload_successful 0\n") != std::string::npos;
  })) << agent.log();
  EXPECT_THAT(agent.log(), HasSubstr(agent.config_path() +
                                     ":5: sharing.timeSlicing.resources[0].replicas: must be at least 2, got 1"));
  EXPECT_THAT(agent.log(), HasSubstr("keeping the last good config"));
  EXPECT_THAT(agent.metrics(), HasSubstr("kgpu_device_plugin_config_reloads_total{result=\"failure\"} 1"));
  auto a = client.allocate({{list[3].id}});
  ASSERT_TRUE(a) << "the old plan still answers";
  EXPECT_EQ(client.lists().back().size(), 8u);
  EXPECT_FALSE(client.stream_ended());
  // Not YAML at all: rejected too.
  std::ofstream(agent.config_path()) << "sharing: [unclosed\n";
  ASSERT_TRUE(eventually([&] { return agent.log().find("not valid YAML") != std::string::npos; })) << agent.log();
  // Fixed: applied, and the gauge returns to 1.
  std::ofstream(agent.config_path()) << good << "      devices: all\n";
  ASSERT_TRUE(eventually([&] {
    return agent.metrics().find("\nkgpu_device_plugin_config_last_reload_successful 1\n") != std::string::npos;
  })) << agent.log();
  EXPECT_EQ(agent.kubelet().registrations().size(), 1u);
}

TEST(DevicePlugin, HostileReloadsAreRejectedQuicklyAndTheLastGoodKeepsServing) {
  const std::string good = time_slicing("2");
  Agent agent(kL4, good, {"--device-list-strategy", "envvar"});
  auto regs = agent.registrations(1);
  PluginClient client(agent.kubelet().plugin_socket(regs[0]));
  auto list = first_list(client, 8);
  // Two billion replicas once grew the agent without limit inside the planner.
  std::ofstream(agent.config_path()) << time_slicing("2000000000");
  ASSERT_TRUE(eventually([&] {
    return agent.log().find("replicas: at most 1024, got 2000000000") != std::string::npos;
  })) << agent.log();
  EXPECT_THAT(agent.log(), HasSubstr(agent.config_path() + ":5: sharing.timeSlicing.resources[0].replicas"));
  // 50 MB: refused by size, without reading it, and logged once.
  {
    std::ofstream big(agent.config_path());
    big << good;
    const std::string line = "unknownKey: " + std::string(100, 'x') + "\n";
    for (int i = 0; i < 450'000; ++i) big << line;
  }
  ASSERT_TRUE(eventually([&] { return agent.log().find("more than the limit of 1048576 bytes") != std::string::npos; }))
      << agent.log().substr(0, 4000);
  auto a = client.allocate({{list[3].id}});
  EXPECT_TRUE(a) << "the last good plan still answers";
  EXPECT_EQ(client.lists().back().size(), 8u);
  // A good config later: applied on a later poll, by which time a re-logged rejection would show.
  std::ofstream(agent.config_path()) << time_slicing("3");
  ASSERT_TRUE(eventually([&] { return client.lists().back().size() == 12u; })) << agent.log();
  const std::string log = agent.log();
  size_t mentions = 0;
  for (size_t at = log.find("more than the limit"); at != std::string::npos; at = log.find("more than the limit", at + 1)) {
    ++mentions;
  }
  EXPECT_EQ(mentions, 1u) << "a rejected file is reported once, not on every poll";
}

TEST(DevicePlugin, GpuUpAndDeviceHealthFollowOneRule) {
  // GPU 1: a call returns GPU_IS_LOST (down for both); GPU 2: a reading fails otherwise (a missing
  // value: up and Healthy for both).
  // GPU_IS_LOST from a reading reaches the plugin through the sampler: within one collection
  // interval (200 ms here) plus one health interval (100 ms).
  Agent agent(kL4, "", {"--health-recovery", "0", "-c", "200"});
  auto regs = agent.registrations(1);
  PluginClient client(agent.kubelet().plugin_socket(regs[0]));
  first_list(client, 4);
  agent.fake().rewrite(kL4 + std::string("faults:\n  calls:\n"
                                         "  - {call: nvmlDeviceGetClockInfo, gpu: 1, error: GPU_IS_LOST}\n"
                                         "  - {call: nvmlDeviceGetPowerUsage, gpu: 2, error: UNKNOWN}\n"));
  auto bad = client.wait_for_list([](const auto& l) { return count_health(l, "Unhealthy") >= 1; }, 5s);
  ASSERT_TRUE(bad) << agent.log();
  EXPECT_EQ((*bad)[1].health, "Unhealthy");
  EXPECT_EQ(count_health(*bad, "Unhealthy"), 1u);
  std::string m;
  ASSERT_TRUE(eventually([&] {
    m = agent.metrics();
    return m.find("kgpu_nvml_errors_total{call=\"nvmlDeviceGetPowerUsage\"}") != std::string::npos;
  })) << m;
  auto up = [&](int gpu) {
    for (size_t at = m.find("\nkgpu_gpu_up{"); at != std::string::npos; at = m.find("\nkgpu_gpu_up{", at + 1)) {
      const auto end = m.find('\n', at + 1);
      const std::string line = m.substr(at + 1, end - at - 1);
      if (line.find("gpu=\"" + std::to_string(gpu) + "\"") != std::string::npos) return line.substr(line.size() - 1);
    }
    return std::string("?");
  };
  EXPECT_EQ(up(1), "0");
  EXPECT_EQ(up(2), "1");
  EXPECT_EQ(up(0), "1");
}

TEST(DevicePlugin, MigSingleUniformLayout) {
  std::string node = "preset: dgx-a100-8\ngpus:\n";
  for (int i = 0; i < 8; ++i) {
    node += "  - index: " + std::to_string(i) +
            "\n    mig: {enabled: true, instances: [{profile: 2g.20gb}, {profile: 2g.20gb}, {profile: 2g.20gb}]}\n";
  }
  Agent agent(node, "flags:\n  migStrategy: single\n");
  auto regs = agent.registrations(1);
  EXPECT_EQ(regs[0].resource_name, "nvidia.com/gpu");
  PluginClient client(agent.kubelet().plugin_socket(regs[0]));
  auto list = first_list(client, 24);
  ASSERT_EQ(list.size(), 24u);
  EXPECT_THAT(list[0].id, ::testing::StartsWith("MIG-"));
  const auto path = agent.dir().path() / "features.d" / "gfd";
  ASSERT_TRUE(eventually([&] { return slurp(path).find("mig.strategy") != std::string::npos; })) << agent.log();
  const auto labels = slurp(path);
  EXPECT_THAT(labels, HasSubstr("nvidia.com/mig.strategy=single\n"));
  EXPECT_THAT(labels, HasSubstr("nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB-MIG-2g.20gb\n"));
  EXPECT_THAT(labels, HasSubstr("nvidia.com/gpu.count=24\n"));
}

// GPU Feature Discovery's rule for a layout migStrategy single cannot use: the node is labelled
// <model>-MIG-INVALID with count 0 and nothing is advertised; the agent stays up (it used to exit)
// so the labels and the metric say what is wrong, and a config that fits is applied without a restart.
TEST(DevicePlugin, MigSingleWithMixedLayoutsIsLabelledInvalid) {
  const std::string node = slurp(std::string(KGPU_SOURCE_DIR) + "/examples/nodes/dgx-a100-mig.yaml");
  Agent agent(node, "flags:\n  migStrategy: single\n");
  const auto path = agent.dir().path() / "features.d" / "gfd";
  ASSERT_TRUE(eventually([&] { return slurp(path).find("MIG-INVALID") != std::string::npos; })) << agent.log();
  const auto labels = slurp(path);
  EXPECT_THAT(labels, HasSubstr("nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB-MIG-INVALID\n"));
  EXPECT_THAT(labels, HasSubstr("nvidia.com/gpu.count=0\n"));
  EXPECT_THAT(labels, HasSubstr("nvidia.com/mig.strategy=single\n"));
  EXPECT_THAT(agent.log(), HasSubstr("use migStrategy mixed or make the MIG layout uniform"));
  EXPECT_THAT(agent.metrics(), HasSubstr("\nkgpu_device_plugin_mig_layout_invalid 1\n"));
  EXPECT_TRUE(agent.kubelet().registrations().empty());

  std::ofstream(agent.config_path()) << "flags:\n  migStrategy: mixed\n";
  auto regs = agent.registrations(4);
  EXPECT_EQ(regs.size(), 4u);
  ASSERT_TRUE(eventually([&] {
    return agent.metrics().find("\nkgpu_device_plugin_mig_layout_invalid 0\n") != std::string::npos;
  })) << agent.log();
}

TEST(DevicePlugin, MigMixedLayout) {
  const std::string node = slurp(std::string(KGPU_SOURCE_DIR) + "/examples/nodes/dgx-a100-mig.yaml");
  Agent agent(node, "flags:\n  migStrategy: mixed\n");
  auto regs = agent.registrations(4);
  std::set<std::string> names;
  for (const auto& r : regs) names.insert(r.resource_name);
  EXPECT_THAT(names, ElementsAre("nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "nvidia.com/mig-2g.20gb",
                                 "nvidia.com/mig-3g.40gb"));
  PluginClient small(agent.socket("nvidia-mig-1g.10gb.sock"));
  EXPECT_EQ(first_list(small, 9).size(), 9u);
  PluginClient whole(agent.socket("nvidia-gpu.sock"));
  EXPECT_EQ(first_list(whole, 6).size(), 6u);
  const auto path = agent.dir().path() / "features.d" / "gfd";
  ASSERT_TRUE(eventually([&] { return slurp(path).find("mig.strategy") != std::string::npos; })) << agent.log();
  const auto labels = slurp(path);
  EXPECT_THAT(labels, HasSubstr("nvidia.com/mig.strategy=mixed\n"));
  EXPECT_THAT(labels, HasSubstr("nvidia.com/mig-1g.10gb.count=9\n"));
}

TEST(DevicePlugin, MigMixedWithATimeSlicedProfile) {
  const std::string node = slurp(std::string(KGPU_SOURCE_DIR) + "/examples/nodes/dgx-a100-mig.yaml");
  Agent agent(node, "flags:\n  migStrategy: mixed\nsharing:\n  timeSlicing:\n    resources:\n"
                    "    - name: nvidia.com/mig-1g.10gb\n      replicas: 2\n");
  agent.registrations(4);
  PluginClient small(agent.socket("nvidia-mig-1g.10gb.sock"));
  EXPECT_EQ(first_list(small, 18).size(), 18u);  // 9 MIG devices x 2
  const auto path = agent.dir().path() / "features.d" / "gfd";
  ASSERT_TRUE(eventually([&] { return slurp(path).find("mig-1g.10gb.replicas") != std::string::npos; }));
  const auto labels = slurp(path);
  EXPECT_THAT(labels, HasSubstr("nvidia.com/mig-1g.10gb.replicas=2\n"));
  EXPECT_THAT(labels, HasSubstr("nvidia.com/mig-1g.10gb.product=NVIDIA-A100-SXM4-80GB-MIG-1g.10gb-SHARED\n"));
  EXPECT_THAT(labels, HasSubstr("nvidia.com/mig-1g.10gb.sharing-strategy=time-slicing\n"));
  EXPECT_THAT(labels, HasSubstr("nvidia.com/mig-3g.40gb.replicas=1\n"));
}

TEST(DevicePlugin, MpsLimitsGoToTheControlDaemon) {
  TempDir bin;
  const std::string record = (bin.path() / "mps.log").string();
  const std::string script = bin.write("nvidia-cuda-mps-control",
                                       "#!/bin/sh\n{ echo \"args:$*\"; echo \"pipe:$CUDA_MPS_PIPE_DIRECTORY\";"
                                       " echo \"visible:$CUDA_VISIBLE_DEVICES\"; cat; } >> " +
                                           record + "\n");
  ::chmod(script.c_str(), 0755);
  TempDir mps;
  const char* path = std::getenv("PATH");
  Agent agent(kL4,
              "flags:\n  mpsRoot: " + mps.path().string() +
                  "\nsharing:\n  mps:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n",
              {}, {"PATH=" + bin.path().string() + ":" + (path ? path : "/usr/bin:/bin")});
  auto regs = agent.registrations(1);
  PluginClient client(agent.kubelet().plugin_socket(regs[0]));
  auto list = first_list(client, 16);
  auto a = client.allocate({{list[0].id}});
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_EQ(a->at(0).envs.at("CUDA_MPS_PIPE_DIRECTORY"), "/mps/nvidia.com/gpu/pipe");
  ASSERT_EQ(a->at(0).mounts.size(), 2u);
  EXPECT_EQ(a->at(0).mounts[0].host_path, mps.path().string() + "/nvidia.com/gpu/pipe");
  const std::string log = slurp(record);
  EXPECT_THAT(log, HasSubstr("args:-d\npipe:" + mps.path().string() + "/nvidia.com/gpu/pipe\n"));
  EXPECT_THAT(log, HasSubstr("set_default_device_pinned_mem_limit 0 5758M\n"));  // 23034 MiB / 4
  EXPECT_THAT(log, HasSubstr("set_default_device_pinned_mem_limit 3 5758M\n"));
  EXPECT_THAT(log, HasSubstr("set_default_active_thread_percentage 25\n"));
  auto two = client.allocate({{list[0].id, list[1].id}});
  ASSERT_FALSE(two);
  EXPECT_THAT(two.error().message, ::testing::EndsWith("invalid request: maximum request size for shared resources is 1"));
}

TEST(DevicePlugin, MpsWithoutTheControlToolSaysLimitsAreNotEnforced) {
  Agent agent(kL4, "sharing:\n  mps:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 2\n", {},
              {"PATH=/nonexistent"});
  agent.registrations(1);
  EXPECT_THAT(agent.log(), HasSubstr("limits are NOT enforced"));
}

TEST(DevicePlugin, LabelsForTimeSlicing) {
  Agent agent(kL4, "sharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n");
  agent.registrations(1);
  const auto path = agent.dir().path() / "features.d" / "gfd";
  ASSERT_TRUE(eventually([&] { return std::filesystem::exists(path); }));
  const auto labels = slurp(path);
  EXPECT_THAT(labels, HasSubstr("nvidia.com/gpu.product=NVIDIA-L4-SHARED\n"));
  EXPECT_THAT(labels, HasSubstr("nvidia.com/gpu.count=4\n"));
  EXPECT_THAT(labels, HasSubstr("nvidia.com/gpu.replicas=4\n"));
  EXPECT_THAT(labels, HasSubstr("nvidia.com/gpu.sharing-strategy=time-slicing\n"));
  EXPECT_THAT(labels, HasSubstr("nvidia.com/gpu.machine=DGX-H100\n"));
  // Relabelled on config change.
  std::ofstream(agent.config_path()) << "";
  ASSERT_TRUE(eventually([&] { return slurp(path).find("nvidia.com/gpu.product=NVIDIA-L4\n") != std::string::npos; }))
      << agent.log();
  EXPECT_THAT(slurp(path), HasSubstr("nvidia.com/gpu.sharing-strategy=none\n"));
}

}  // namespace
}  // namespace kgpu::testing
