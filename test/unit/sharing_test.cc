// The sharing config (NVIDIA v1 format), the plan, Allocate responses and preferred allocation.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "agent/mps.h"
#include "sharing/allocate.h"
#include "sharing/config.h"
#include "sharing/plan.h"
#include "sharing_config.h"

namespace kgpu::sharing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string uuid(unsigned i) { return fmt::format("GPU-{:08x}-0000-4000-8000-00000000000{}", 0xabc00 + i, i % 10); }

// An HGX-like node: 8 GPUs, NVLink within {0..3} and within {4..7}, PCIe switch pairs across
// the halves' neighbours, SYS otherwise; NUMA 0 for 0-3, 1 for 4-7.
gpu::Inventory hgx(unsigned n = 8, const std::string& name = "NVIDIA H100 80GB HBM3") {
  gpu::Inventory inv;
  inv.driver_version = "550.54.15";
  inv.cuda_driver_version = 12040;
  for (unsigned i = 0; i < n; ++i) {
    gpu::GpuInfo g;
    g.index = i;
    g.uuid = uuid(i);
    g.name = name;
    g.minor_number = i;
    g.memory_total_mib = 81559;
    g.numa_node = i < n / 2 ? 0 : 1;
    inv.gpus.push_back(g);
  }
  inv.topology.assign(n, std::vector<gpu::Link>(n, gpu::Link::kSystem));
  for (unsigned i = 0; i < n; ++i) {
    for (unsigned j = 0; j < n; ++j) {
      if (i == j) inv.topology[i][j] = gpu::Link::kSelf;
      else if ((i < n / 2) == (j < n / 2)) inv.topology[i][j] = gpu::Link::kNvLink;
    }
  }
  return inv;
}

void enable_mig(gpu::GpuInfo& g, const std::vector<std::string>& profiles) {
  g.mig_capable = true;
  g.mig_enabled = true;
  unsigned k = 0;
  for (const auto& p : profiles) {
    gpu::MigDevice m;
    m.index = k;
    m.uuid = fmt::format("MIG-{:08x}-1111-4000-8000-0000000000{:02}", 0xdef00 + g.index, k);
    m.gpu_instance_id = k + 1;
    m.compute_instance_id = 0;
    m.profile = p;
    g.mig_devices.push_back(m);
    ++k;
  }
}

using test_support::config;

std::string config_error(const std::string& yaml, const Overrides& o = {}) {
  auto c = parse_config(yaml, "config.yaml");
  if (!c) return c.error().message;
  auto ok = finalize(*c, o);
  return ok ? "" : ok.error().message;
}

constexpr const char* kTimeSlicing4 = R"(version: v1
flags:
  migStrategy: none
sharing:
  timeSlicing:
    renameByDefault: false
    failRequestsGreaterThanOne: true
    resources:
    - name: nvidia.com/gpu
      replicas: 4
)";

TEST(SharingConfig, ParsesNvidiaTimeSlicingExample) {
  const Config c = config(kTimeSlicing4);
  EXPECT_EQ(c.mig_strategy, MigStrategy::kNone);
  EXPECT_EQ(c.sharing.kind, SharingKind::kTimeSlicing);
  EXPECT_TRUE(c.sharing.fail_requests_greater_than_one);
  ASSERT_EQ(c.sharing.resources.size(), 1u);
  EXPECT_EQ(c.sharing.resources[0].name, "nvidia.com/gpu");
  EXPECT_EQ(c.sharing.resources[0].replicas, 4);
  EXPECT_EQ(c.sharing.resources[0].line, 9);
  EXPECT_TRUE(c.warnings.empty());
}

TEST(SharingConfig, DefaultsAndEmptyDocument) {
  const Config c = config("");
  EXPECT_EQ(c.mig_strategy, MigStrategy::kNone);
  EXPECT_THAT(c.list_strategies, ElementsAre(ListStrategy::kCdiCri));
  EXPECT_EQ(c.id_strategy, IdStrategy::kUuid);
  EXPECT_EQ(c.gfd_sleep_interval, std::chrono::seconds(60));
  EXPECT_EQ(c.sharing.kind, SharingKind::kNone);
}

TEST(SharingConfig, FlagsFromFile) {
  const Config c = config(R"(version: v1
flags:
  migStrategy: mixed
  failOnInitError: false
  nvidiaDriverRoot: /run/nvidia/driver
  plugin:
    passDeviceSpecs: true
    deviceListStrategy: [envvar, cdi-annotations]
    deviceIDStrategy: index
  gfd:
    sleepInterval: 1m30s
    noTimestamp: true
)");
  EXPECT_EQ(c.mig_strategy, MigStrategy::kMixed);
  EXPECT_FALSE(c.fail_on_init_error);
  EXPECT_EQ(c.nvidia_driver_root, "/run/nvidia/driver");
  EXPECT_EQ(c.dev_root(), "/run/nvidia/driver");
  EXPECT_TRUE(c.pass_device_specs);
  EXPECT_THAT(c.list_strategies, ElementsAre(ListStrategy::kEnvvar, ListStrategy::kCdiAnnotations));
  EXPECT_EQ(c.id_strategy, IdStrategy::kIndex);
  EXPECT_EQ(c.gfd_sleep_interval, std::chrono::seconds(90));
  EXPECT_TRUE(c.gfd_no_timestamp);
}

TEST(SharingConfig, FlagsAndEnvironmentWinOverTheFile) {
  Overrides o;
  o.mig_strategy = "single";
  o.device_list_strategy = "volume-mounts";
  const Config c = config("flags:\n  migStrategy: mixed\n  plugin:\n    deviceListStrategy: envvar\n", o);
  EXPECT_EQ(c.mig_strategy, MigStrategy::kSingle);
  EXPECT_THAT(c.list_strategies, ElementsAre(ListStrategy::kVolumeMounts));
  o.mig_strategy = "sometimes";
  EXPECT_THAT(config_error("", o), HasSubstr("--mig-strategy: unknown MIG strategy 'sometimes'"));
}

TEST(SharingConfig, ErrorsNameFileLineAndField) {
  EXPECT_EQ(config_error("sharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 1\n"),
            "config.yaml:5: sharing.timeSlicing.resources[0].replicas: must be at least 2, got 1");
  EXPECT_THAT(config_error("sharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: two\n"),
              HasSubstr("config.yaml:5: sharing.timeSlicing.resources[0].replicas: expected a whole number"));
  EXPECT_THAT(config_error("version: v2\n"), HasSubstr("config.yaml:1: version: unsupported version 'v2'"));
  EXPECT_THAT(config_error("flags:\n  migStrategy: [a\n"), HasSubstr("config.yaml:"));
  EXPECT_THAT(config_error("flags:\n  migStrategy: [a\n"), HasSubstr("not valid YAML"));
  EXPECT_EQ(config_error("flags:\n  plugin:\n    deviceIDStrategy: serial\n"),
            "config.yaml:3: flags.plugin.deviceIDStrategy: unknown device ID strategy 'serial' (uuid, index)");
  EXPECT_THAT(config_error("sharing:\n  timeSlicing:\n    resources:\n    - replicas: 2\n"),
              HasSubstr("config.yaml:4: sharing.timeSlicing.resources[0].name: required"));
  EXPECT_THAT(config_error("sharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 2\n"
                           "      devices: [0, banana]\n"),
              HasSubstr("config.yaml:6: sharing.timeSlicing.resources[0].devices[1]: 'banana' is not a GPU index"));
}

TEST(SharingConfig, ForbiddenCombinations) {
  EXPECT_THAT(config_error("sharing:\n  timeSlicing:\n    resources: [{name: nvidia.com/gpu, replicas: 2}]\n"
                           "  mps:\n    resources: [{name: nvidia.com/gpu, replicas: 2}]\n"),
              HasSubstr("timeSlicing and mps cannot be combined"));
  EXPECT_THAT(config_error("flags: {migStrategy: mixed}\nsharing:\n  mps:\n    resources: [{name: nvidia.com/gpu, "
                           "replicas: 2}]\n"),
              HasSubstr("sharing.mps cannot be used with migStrategy mixed"));
  EXPECT_THAT(config_error("flags: {migStrategy: single}\nsharing:\n  mps:\n    resources: [{name: "
                           "nvidia.com/mig-1g.10gb, replicas: 2}]\n"),
              HasSubstr("MPS shares whole GPUs only"));
  // NVIDIA skips rules for resources the node does not have (one ConfigMap, many node types).
  EXPECT_EQ(config_error("sharing:\n  timeSlicing:\n    resources: [{name: nvidia.com/mig-1g.10gb, replicas: 2}]\n"),
            "");
}

TEST(SharingConfig, ResourceNamesAreNormalizedAndValidated) {
  const Config c = config("sharing:\n  timeSlicing:\n    resources:\n    - {name: gpu, rename: gpu.shared, replicas: 2}\n");
  EXPECT_EQ(c.sharing.resources[0].name, "nvidia.com/gpu");
  EXPECT_EQ(c.sharing.resources[0].rename, "nvidia.com/gpu.shared");
  EXPECT_THAT(config_error("sharing:\n  timeSlicing:\n    resources:\n    - {name: nvidia.com/gpu, rename: gpu/shared, "
                           "replicas: 2}\n"),
              HasSubstr("config.yaml:4: sharing.timeSlicing.resources[0].rename: 'gpu/shared' is not a valid resource name"));
  EXPECT_THAT(config_error("sharing:\n  timeSlicing:\n    resources:\n    - {name: example.com/gpu, replicas: 2}\n"),
              HasSubstr("'example.com/gpu' is not a valid resource name"));
}

TEST(SharingConfig, MpsForcesFailRequestsGreaterThanOne) {
  const Config c = config("sharing:\n  mps:\n    failRequestsGreaterThanOne: false\n    resources:\n"
                          "    - name: nvidia.com/gpu\n      replicas: 4\n");
  EXPECT_EQ(c.sharing.kind, SharingKind::kMps);
  EXPECT_TRUE(c.sharing.fail_requests_greater_than_one);
}

TEST(SharingConfig, UnknownKeysAreWarnings) {
  const Config c = config("flags:\n  migStrategy: none\n  futureFlag: 1\nsharing:\n  timeSlicing:\n    resources:\n"
                          "    - name: nvidia.com/gpu\n      replicas: 2\n      colour: blue\n");
  ASSERT_EQ(c.warnings.size(), 2u);
  EXPECT_EQ(c.warnings[0], "config.yaml:3: flags.futureFlag: unknown field, ignored");
  EXPECT_EQ(c.warnings[1], "config.yaml:9: sharing.timeSlicing.resources[0].colour: unknown field, ignored");
}

TEST(SharingConfig, LimitsAreCheckedBeforeAnythingIsAllocated) {
  auto ts = [](const std::string& replicas) {
    return "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: " +
           replicas + "\n";
  };
  // The probe's reload: two billion replicas once grew the agent until it aborted.
  auto huge = parse_config(ts("2000000000"), "config.yaml");
  ASSERT_FALSE(huge);
  EXPECT_EQ(huge.error().message, "config.yaml:6: sharing.timeSlicing.resources[0].replicas: at most 1024, got 2000000000");
  EXPECT_TRUE(parse_config(ts("1024"), "config.yaml"));
  auto mps = parse_config("sharing:\n  mps:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 101\n", "c.yaml");
  ASSERT_FALSE(mps);
  EXPECT_THAT(mps.error().message, HasSubstr("c.yaml:5: sharing.mps.resources[0].replicas: at most 100 with MPS"));

  // More than a ConfigMap can hold.
  auto big = parse_config("# " + std::string(kMaxConfigBytes, 'x') + "\n", "cm.yaml");
  ASSERT_FALSE(big);
  EXPECT_THAT(big.error().message, HasSubstr("cm.yaml: 1048579 bytes, more than the limit of 1048576 bytes"));

  // An alias bomb: nine levels of nine aliases.
  std::string bomb;
  for (int i = 0; i < 10; ++i) {
    bomb += i == 0 ? "a0: &a0 [x, x, x, x, x, x, x, x, x]\n"
                   : fmt::format("a{}: &a{} [*a{}, *a{}, *a{}, *a{}, *a{}, *a{}, *a{}, *a{}, *a{}]\n", i, i, i - 1,
                                 i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1);
  }
  auto aliases = parse_config(bomb, "bomb.yaml");
  ASSERT_FALSE(aliases);
  EXPECT_THAT(aliases.error().message, HasSubstr("more than 20000 YAML nodes (aliases expanded)"));
  EXPECT_THAT(aliases.error().message, HasSubstr("bomb.yaml:"));

  auto nul = parse_config(std::string("version: v1\nflags:\n  migStrategy: no\0ne\n", 38), "nul.yaml");
  ASSERT_FALSE(nul);
  EXPECT_EQ(nul.error().message, "nul.yaml: NUL byte (\\0) at line 3, column 18: not valid in YAML (a binary file?)");

  std::string many = "sharing:\n  timeSlicing:\n    resources:\n";
  for (int i = 0; i < 65; ++i) many += "    - {name: nvidia.com/gpu, replicas: 2}\n";
  auto entries = parse_config(many, "c.yaml");
  ASSERT_FALSE(entries);
  EXPECT_THAT(entries.error().message, HasSubstr("sharing.timeSlicing.resources: 65 entries, at most 64"));
}

TEST(SharingConfig, RepeatedWarningsAreSummarised) {
  std::string text = "flags:\n";
  for (int i = 0; i < 5000; ++i) text += fmt::format("  unknown{}: 1\n", i);
  const Config c = config(text);
  ASSERT_EQ(c.warnings.size(), kMaxWarnings + 1);
  EXPECT_EQ(c.warnings.back(), "config.yaml: 4980 more warnings like these, not listed");
}

TEST(SharingPlan, AdvertisedDevicesAreBounded) {
  // 1024 replicas of 16 GPUs would be 16,384 IDs plus the unshared ones: one rule over the limit.
  auto c = config("sharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 1024\n");
  EXPECT_TRUE(make_plan(hgx(8), c));
  auto plan = make_plan(hgx(17), c);
  ASSERT_FALSE(plan);
  EXPECT_THAT(plan.error().message,
              HasSubstr("config.yaml:4: nvidia.com/gpu: 1024 replicas of 17 devices make more than 16384 device IDs"));
}

TEST(SharingConfig, Durations) {
  EXPECT_EQ(parse_duration("60s").value(), std::chrono::seconds(60));
  EXPECT_EQ(parse_duration("1h2m3s").value(), std::chrono::seconds(3723));
  EXPECT_EQ(parse_duration("45").value(), std::chrono::seconds(45));
  EXPECT_FALSE(parse_duration("5 parsecs").has_value());
  EXPECT_FALSE(parse_duration("").has_value());
}

TEST(SharingPlan, ExclusiveWholeGpus) {
  auto plan = make_plan(hgx(), config(""));
  ASSERT_TRUE(plan) << plan.error().message;
  ASSERT_EQ(plan->resources.size(), 1u);
  const auto& r = plan->resources[0];
  EXPECT_EQ(r.name, "nvidia.com/gpu");
  EXPECT_EQ(r.socket_name, "nvidia-gpu.sock");
  ASSERT_EQ(r.devices.size(), 8u);
  EXPECT_EQ(r.devices[3].id, uuid(3));
  EXPECT_EQ(r.devices[3].index, "3");
  EXPECT_EQ(r.devices[5].numa_node, 1);
}

TEST(SharingPlan, TimeSlicingReplicas) {
  auto plan = make_plan(hgx(), config(kTimeSlicing4));
  ASSERT_TRUE(plan) << plan.error().message;
  ASSERT_EQ(plan->resources.size(), 1u);
  const auto& r = plan->resources[0];
  EXPECT_EQ(r.name, "nvidia.com/gpu");
  EXPECT_EQ(r.sharing, SharingKind::kTimeSlicing);
  ASSERT_EQ(r.devices.size(), 32u);
  EXPECT_EQ(r.devices[0].id, uuid(0) + "::0");
  EXPECT_EQ(r.devices[31].id, uuid(7) + "::3");
  EXPECT_EQ(strip_replica(r.devices[31].id), uuid(7));
}

TEST(SharingPlan, RenameByDefault) {
  auto plan = make_plan(hgx(2), config("sharing:\n  timeSlicing:\n    renameByDefault: true\n    resources:\n"
                                       "    - name: nvidia.com/gpu\n      replicas: 3\n"));
  ASSERT_TRUE(plan);
  ASSERT_EQ(plan->resources.size(), 1u);
  EXPECT_EQ(plan->resources[0].name, "nvidia.com/gpu.shared");
  EXPECT_EQ(plan->resources[0].socket_name, "nvidia-gpu.shared.sock");
  EXPECT_EQ(plan->resources[0].devices.size(), 6u);
}

TEST(SharingPlan, PerGpuReplicaCountsWithDevices) {
  // The kgpu extension: GPUs 0-3 get 2 replicas, GPUs 4-5 get 4, GPUs 6-7 stay exclusive.
  auto plan = make_plan(hgx(), config(R"(sharing:
  timeSlicing:
    resources:
    - name: nvidia.com/gpu
      replicas: 2
      devices: [0, 1, 2, 3]
    - name: nvidia.com/gpu
      replicas: 4
      devices: ["4", ")" + uuid(5) + R"("]
    - name: nvidia.com/gpu
      rename: gpu.whole
      replicas: 2
      devices: [7]
)"));
  ASSERT_TRUE(plan) << plan.error().message;
  const auto* shared = plan->find("nvidia.com/gpu");
  ASSERT_NE(shared, nullptr);
  // 4x2 + 2x4 replicas + GPU 6 exclusive.
  EXPECT_EQ(shared->devices.size(), 17u);
  int whole = 0;
  for (const auto& d : shared->devices) {
    if (d.replica < 0) {
      ++whole;
      EXPECT_EQ(d.id, uuid(6));
    }
    if (d.gpu_index == 5) {
      EXPECT_EQ(d.replicas, 4);
    }
    if (d.gpu_index == 1) {
      EXPECT_EQ(d.replicas, 2);
    }
  }
  EXPECT_EQ(whole, 1);
  const auto* renamed = plan->find("nvidia.com/gpu.whole");
  ASSERT_NE(renamed, nullptr);
  EXPECT_EQ(renamed->devices.size(), 2u);
  EXPECT_EQ(renamed->devices[0].gpu_index, 7u);
}

TEST(SharingPlan, DeviceSharedTwiceIsAnError) {
  auto plan = make_plan(hgx(), config("sharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n"
                                      "      replicas: 2\n      devices: [0, 1]\n    - name: nvidia.com/gpu\n"
                                      "      replicas: 3\n      devices: [1]\n"));
  ASSERT_FALSE(plan);
  EXPECT_THAT(plan.error().message, HasSubstr("config.yaml:7: device 1"));
  EXPECT_THAT(plan.error().message, HasSubstr("already shared by the rule at config.yaml:4"));
}

TEST(SharingPlan, MigSingleUniform) {
  auto inv = hgx(2, "NVIDIA A100-SXM4-80GB");
  for (auto& g : inv.gpus) enable_mig(g, std::vector<std::string>(7, "1g.10gb"));
  auto plan = make_plan(inv, config("flags: {migStrategy: single}\n"));
  ASSERT_TRUE(plan) << plan.error().message;
  ASSERT_EQ(plan->resources.size(), 1u);
  EXPECT_EQ(plan->resources[0].name, "nvidia.com/gpu");
  EXPECT_TRUE(plan->resources[0].mig);
  ASSERT_EQ(plan->resources[0].devices.size(), 14u);
  EXPECT_THAT(plan->resources[0].devices[8].id, ::testing::StartsWith("MIG-"));
  EXPECT_EQ(plan->resources[0].devices[8].index, "1:1");
}

TEST(SharingPlan, MigSingleRejectsMixedLayouts) {
  auto inv = hgx(2, "NVIDIA A100-SXM4-80GB");
  enable_mig(inv.gpus[0], {"3g.40gb", "3g.40gb"});
  enable_mig(inv.gpus[1], {"1g.10gb"});
  auto plan = make_plan(inv, config("flags: {migStrategy: single}\n"));
  ASSERT_FALSE(plan);
  EXPECT_THAT(plan.error().message, HasSubstr("one MIG profile on every GPU, found 1g.10gb, 3g.40gb"));
  auto inv2 = hgx(2, "NVIDIA A100-SXM4-80GB");
  enable_mig(inv2.gpus[0], {"1g.10gb"});
  auto plan2 = make_plan(inv2, config("flags: {migStrategy: single}\n"));
  ASSERT_FALSE(plan2);
  EXPECT_THAT(plan2.error().message, HasSubstr("GPU 1"));
}

TEST(SharingPlan, MigMixedResourceNames) {
  auto inv = hgx(2);
  enable_mig(inv.gpus[1], {"3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb+me"});
  auto plan = make_plan(inv, config("flags: {migStrategy: mixed}\n"));
  ASSERT_TRUE(plan) << plan.error().message;
  std::vector<std::string> names;
  for (const auto& r : plan->resources) names.push_back(r.name + "=" + std::to_string(r.devices.size()));
  EXPECT_THAT(names, ElementsAre("nvidia.com/gpu=1", "nvidia.com/mig-1g.10gb=1", "nvidia.com/mig-1g.10gb.me=1",
                                 "nvidia.com/mig-2g.20gb=1", "nvidia.com/mig-3g.40gb=1"));
  EXPECT_EQ(plan->find("nvidia.com/mig-1g.10gb.me")->socket_name, "nvidia-mig-1g.10gb.me.sock");
}

TEST(SharingPlan, MigMixedWithTimeSlicedProfile) {
  auto inv = hgx(1);
  enable_mig(inv.gpus[0], {"1g.10gb", "1g.10gb", "3g.40gb"});
  auto plan = make_plan(inv, config("flags: {migStrategy: mixed}\nsharing:\n  timeSlicing:\n    resources:\n"
                                    "    - name: nvidia.com/mig-1g.10gb\n      replicas: 2\n"));
  ASSERT_TRUE(plan) << plan.error().message;
  EXPECT_EQ(plan->find("nvidia.com/mig-1g.10gb")->devices.size(), 4u);
  EXPECT_EQ(plan->find("nvidia.com/mig-3g.40gb")->devices.size(), 1u);
}

TEST(SharingPlan, MpsLimitsPerGpu) {
  auto plan = make_plan(hgx(2), config("sharing:\n  mps:\n    resources:\n    - name: nvidia.com/gpu\n"
                                       "      replicas: 4\n"));
  ASSERT_TRUE(plan);
  const auto& r = plan->resources[0];
  EXPECT_EQ(r.sharing, SharingKind::kMps);
  ASSERT_EQ(r.mps.size(), 2u);
  EXPECT_EQ(r.mps[1].pinned_memory_mib, 81559u / 4);
  EXPECT_EQ(r.mps[1].active_thread_percentage, 25);
  EXPECT_THAT(agent::mps_commands(r), ElementsAre("set_default_device_pinned_mem_limit 0 20389M",
                                                  "set_default_device_pinned_mem_limit 1 20389M",
                                                  "set_default_active_thread_percentage 25"));
}

TEST(SharingPlan, ResourcesSectionIsIgnoredAsByNvidia) {
  auto inv = hgx(2);
  inv.gpus[1].name = "NVIDIA L4";
  const Config c = config("resources:\n  gpus:\n  - pattern: '*L4*'\n    name: l4\n");
  ASSERT_EQ(c.warnings.size(), 1u);
  EXPECT_THAT(c.warnings[0], HasSubstr("config.yaml:2: resources: customizing resource names is not supported"));
  auto plan = make_plan(inv, c);
  ASSERT_TRUE(plan) << plan.error().message;
  ASSERT_EQ(plan->resources.size(), 1u);
  EXPECT_EQ(plan->resources[0].name, "nvidia.com/gpu");
  EXPECT_EQ(plan->resources[0].devices.size(), 2u);
}

TEST(SharingPlan, MpsOnMigDevicesIsRejected) {
  auto inv = hgx(1, "NVIDIA A100-SXM4-80GB");
  enable_mig(inv.gpus[0], std::vector<std::string>(7, "1g.10gb"));
  auto plan = make_plan(inv, config("flags: {migStrategy: single}\nsharing:\n  mps:\n    resources:\n"
                                    "    - name: nvidia.com/gpu\n      replicas: 2\n"));
  ASSERT_FALSE(plan);
  EXPECT_THAT(plan.error().message, HasSubstr("MPS cannot be used with MIG"));
}

TEST(SharingPlan, SameAdvertisement) {
  auto a = make_plan(hgx(), config(kTimeSlicing4));
  auto b = make_plan(hgx(), config(std::string(kTimeSlicing4) + "flags:\n  plugin:\n    deviceListStrategy: envvar\n"));
  auto c = make_plan(hgx(), config(""));
  ASSERT_TRUE(a && b && c);
  EXPECT_TRUE(same_advertisement(a->resources[0], b->resources[0]));
  EXPECT_FALSE(same_advertisement(a->resources[0], c->resources[0]));
}

HostFacts no_host() {
  HostFacts h;
  h.exists = [](const std::string& p) { return p != "/dev/nvidia-modeset"; };
  return h;
}

TEST(SharingAllocate, EachDeviceListStrategy) {
  auto plan = make_plan(hgx(), config(""));
  ASSERT_TRUE(plan);
  const auto& r = plan->resources[0];
  Overrides o;
  o.device_list_strategy = "envvar";
  auto e = allocate(r, config("", o), no_host(), {{uuid(1), uuid(2)}}, "u1");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->at(0).envs.at("NVIDIA_VISIBLE_DEVICES"), uuid(1) + "," + uuid(2));

  o.device_list_strategy = "volume-mounts";
  e = allocate(r, config("", o), no_host(), {{uuid(1)}}, "u1");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->at(0).envs.at("NVIDIA_VISIBLE_DEVICES"), "/var/run/nvidia-container-devices");
  ASSERT_EQ(e->at(0).mounts.size(), 1u);
  EXPECT_EQ(e->at(0).mounts[0].container_path, "/var/run/nvidia-container-devices/" + uuid(1));
  EXPECT_EQ(e->at(0).mounts[0].host_path, "/dev/null");

  o.device_list_strategy = "cdi-annotations";
  e = allocate(r, config("", o), no_host(), {{uuid(1), uuid(2)}}, "u1");
  ASSERT_TRUE(e);
  ASSERT_EQ(e->at(0).annotations.size(), 1u);
  EXPECT_EQ(e->at(0).annotations.begin()->first, "cdi.k8s.io/kgpu-device-plugin_u1-0");
  EXPECT_EQ(e->at(0).annotations.begin()->second,
            "k8s.device-plugin.nvidia.com/gpu=" + uuid(1) + ",k8s.device-plugin.nvidia.com/gpu=" + uuid(2));
  EXPECT_EQ(e->at(0).envs.at("NVIDIA_VISIBLE_DEVICES"), "void");

  e = allocate(r, config(""), no_host(), {{uuid(1)}, {uuid(7)}}, "u1");  // default: cdi-cri
  ASSERT_TRUE(e);
  ASSERT_EQ(e->size(), 2u);
  EXPECT_THAT(e->at(1).cdi_devices, ElementsAre("k8s.device-plugin.nvidia.com/gpu=" + uuid(7)));
  // The image's NVIDIA_VISIBLE_DEVICES=all must not reach the legacy hook.
  EXPECT_EQ(e->at(1).envs.at("NVIDIA_VISIBLE_DEVICES"), "void");
  EXPECT_TRUE(e->at(1).devices.empty());

  // Fixed order: volume-mounts' value wins whatever the list order.
  o.device_list_strategy = "volume-mounts,envvar";
  e = allocate(r, config("", o), no_host(), {{uuid(1)}}, "u1");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->at(0).envs.at("NVIDIA_VISIBLE_DEVICES"), "/var/run/nvidia-container-devices");
}

TEST(SharingAllocate, IndexIdsAndDeviceSpecs) {
  Overrides o;
  o.device_list_strategy = "envvar";
  o.device_id_strategy = "index";
  o.pass_device_specs = "true";
  const Config c = config("", o);
  auto plan = make_plan(hgx(), c);
  auto e = allocate(plan->resources[0], c, no_host(), {{uuid(3), uuid(5)}}, "x");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->at(0).envs.at("NVIDIA_VISIBLE_DEVICES"), "3,5");
  std::vector<std::string> paths;
  for (const auto& d : e->at(0).devices) paths.push_back(d.container_path + ":" + d.permissions);
  EXPECT_THAT(paths, ElementsAre("/dev/nvidia3:rw", "/dev/nvidia5:rw", "/dev/nvidiactl:rw", "/dev/nvidia-uvm:rw",
                                 "/dev/nvidia-uvm-tools:rw"));
}

TEST(SharingAllocate, ReplicasAreStrippedAndDeduplicated) {
  Overrides o;
  o.device_list_strategy = "envvar";
  const Config c = config("sharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n", o);
  auto plan = make_plan(hgx(2), c);
  auto e = allocate(plan->resources[0], c, no_host(), {{uuid(0) + "::1", uuid(0) + "::3", uuid(1) + "::0"}}, "x");
  ASSERT_TRUE(e) << e.error().message;
  EXPECT_EQ(e->at(0).envs.at("NVIDIA_VISIBLE_DEVICES"), uuid(0) + "," + uuid(1));
}

TEST(SharingAllocate, FailRequestsGreaterThanOne) {
  const Config c = config(kTimeSlicing4);
  auto plan = make_plan(hgx(2), c);
  auto e = allocate(plan->resources[0], c, no_host(), {{uuid(0) + "::1", uuid(1) + "::0"}}, "x");
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().message,
            "invalid allocation request for \"nvidia.com/gpu\": invalid request: maximum request size for shared "
            "resources is 1");
  EXPECT_TRUE(allocate(plan->resources[0], c, no_host(), {{uuid(0) + "::1"}}, "x"));
}

TEST(SharingAllocate, UnknownDeviceId) {
  const Config c = config("");
  auto plan = make_plan(hgx(2), c);
  auto e = allocate(plan->resources[0], c, no_host(), {{"GPU-not-here"}}, "x");
  ASSERT_FALSE(e);
  EXPECT_THAT(e.error().message, HasSubstr("unknown device ID 'GPU-not-here' for resource nvidia.com/gpu"));
}

TEST(SharingAllocate, MpsPipeAndShm) {
  const Config c = config("flags: {mpsRoot: /run/nvidia/mps}\nsharing:\n  mps:\n    resources:\n"
                          "    - name: nvidia.com/gpu\n      replicas: 2\n");
  auto plan = make_plan(hgx(1), c);
  auto e = allocate(plan->resources[0], c, no_host(), {{uuid(0) + "::1"}}, "x");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->at(0).envs.at("CUDA_MPS_PIPE_DIRECTORY"), "/mps/nvidia.com/gpu/pipe");
  ASSERT_EQ(e->at(0).mounts.size(), 2u);
  EXPECT_EQ(e->at(0).mounts[0].host_path, "/run/nvidia/mps/nvidia.com/gpu/pipe");
  EXPECT_EQ(e->at(0).mounts[1].container_path, "/dev/shm");
  EXPECT_EQ(e->at(0).mounts[1].host_path, "/run/nvidia/mps/shm");
}

TEST(SharingAllocate, MigCapabilityNodes) {
  Overrides o;
  o.pass_device_specs = "true";
  o.mig_strategy = "mixed";
  o.device_list_strategy = "envvar";  // with CDI only, the CDI spec carries the device nodes
  const Config c = config("", o);
  auto inv = hgx(1);
  enable_mig(inv.gpus[0], {"3g.40gb"});
  auto plan = make_plan(inv, c);
  HostFacts h = no_host();
  h.mig_caps = parse_mig_minors("config 1\nmonitor 2\ngpu0/gi1/access 12\ngpu0/gi1/ci0/access 13\n");
  auto e = allocate(*plan->find("nvidia.com/mig-3g.40gb"), c, h, {{inv.gpus[0].mig_devices[0].uuid}}, "x");
  ASSERT_TRUE(e);
  std::vector<std::string> paths;
  for (const auto& d : e->at(0).devices) paths.push_back(d.container_path);
  EXPECT_THAT(paths, ::testing::IsSupersetOf({"/dev/nvidia0", "/dev/nvidia-caps/nvidia-cap12",
                                              "/dev/nvidia-caps/nvidia-cap13"}));
}

TEST(SharingAllocate, CdiSpecNamesEveryDeviceByUuidAndIndex) {
  Overrides o;
  o.nvidia_driver_root = "/run/nvidia/driver";
  const Config c = config("", o);
  auto plan = make_plan(hgx(2), c);
  HostFacts h = no_host();
  h.driver = discover_driver_files("/run/nvidia/driver", "550.54.15", [](const std::string& dir) {
    if (dir == "/run/nvidia/driver/usr/lib/x86_64-linux-gnu") {
      return std::vector<DirEntry>{{"libc.so.6", ""},
                                   {"libcuda.so.1", "libcuda.so.550.54.15"},
                                   {"libcuda.so.550.54.15", ""},
                                   {"libnvidia-ml.so.1", "libnvidia-ml.so.550.54.15"},
                                   {"libnvidia-ml.so.550.54.15", ""}};
    }
    if (dir == "/run/nvidia/driver/usr/bin") return std::vector<DirEntry>{{"nvidia-smi", ""}, {"bash", ""}};
    return std::vector<DirEntry>{};
  });
  h.hook_tool = "/usr/bin/nvidia-ctk";
  auto specs = cdi_specs(*plan, c, h);
  ASSERT_TRUE(specs) << specs.error().message;
  const auto spec = nlohmann::json::parse(specs->at(0).text);
  EXPECT_EQ(spec["containerEdits"]["env"][0], "NVIDIA_VISIBLE_DEVICES=void");
  const auto& ldcache = spec["containerEdits"]["hooks"][2];
  EXPECT_EQ(ldcache["hookName"], "createContainer");
  EXPECT_THAT(ldcache["args"], ElementsAre("nvidia-ctk", "hook", "update-ldcache", "--folder", "/usr/lib/x86_64-linux-gnu"));
  EXPECT_EQ(spec["kind"], "k8s.device-plugin.nvidia.com/gpu");
  EXPECT_EQ(spec["cdiVersion"], "0.5.0");
  ASSERT_EQ(spec["devices"].size(), 4u);
  EXPECT_EQ(spec["devices"][0]["name"], uuid(0));
  EXPECT_EQ(spec["devices"][1]["name"], "0");
  EXPECT_EQ(spec["devices"][2]["containerEdits"]["deviceNodes"][0]["path"], "/dev/nvidia1");
  EXPECT_EQ(spec["devices"][2]["containerEdits"]["deviceNodes"][0]["hostPath"], "/run/nvidia/driver/dev/nvidia1");
  const auto& mounts = spec["containerEdits"]["mounts"];
  ASSERT_EQ(mounts.size(), 3u);  // libcuda, libnvidia-ml (versioned files), nvidia-smi; not libc or bash
  EXPECT_EQ(mounts[0]["containerPath"], "/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15");
  EXPECT_EQ(mounts[0]["hostPath"], "/run/nvidia/driver/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15");
  EXPECT_EQ(mounts[2]["containerPath"], "/usr/bin/nvidia-smi");
}

TEST(SharingAllocate, CdiRuntimeWarning) {
  EXPECT_FALSE(cdi_runtime_warning(""));
  // containerd 2.x (config version 3): CDI on by default.
  EXPECT_FALSE(cdi_runtime_warning("version = 3\n[plugins.'io.containerd.cri.v1.runtime']\n"));
  EXPECT_FALSE(cdi_runtime_warning("version = 2\n[plugins.\"io.containerd.grpc.v1.cri\"]\n  enable_cdi = true\n"));
  auto off = cdi_runtime_warning("version = 3\n  enable_cdi = false # no\n");
  ASSERT_TRUE(off);
  EXPECT_THAT(*off, HasSubstr("enable_cdi = false"));
  auto old = cdi_runtime_warning("version = 2\n[plugins.\"io.containerd.grpc.v1.cri\"]\n  # enable_cdi = true\n");
  ASSERT_TRUE(old);
  EXPECT_THAT(*old, HasSubstr("containerd 1.x"));
}

TEST(PreferredAllocation, PrefersNvLinkedSets) {
  auto inv = hgx();
  auto plan = make_plan(inv, config(""));
  const auto& r = plan->resources[0];
  // GPU 0 alone on its NVLink island, 4 and 5 linked: the pair is 4+5.
  EXPECT_THAT(preferred_allocation(r, inv.topology, SharedPolicy::kDistributed, {uuid(0), uuid(4), uuid(5)}, {}, 2),
              ElementsAre(uuid(4), uuid(5)));
  // must_include 0: its NVLink peer 1 beats 4 and 5.
  EXPECT_THAT(preferred_allocation(r, inv.topology, SharedPolicy::kDistributed, {uuid(0), uuid(1), uuid(4), uuid(5)},
                                   {uuid(0)}, 2),
              ElementsAre(uuid(0), uuid(1)));
  // Four of eight: one whole NVLink island.
  auto four = preferred_allocation(r, inv.topology, SharedPolicy::kDistributed,
                                   {uuid(0), uuid(2), uuid(4), uuid(5), uuid(6), uuid(7), uuid(1)}, {}, 4);
  EXPECT_THAT(four, ElementsAre(uuid(4), uuid(5), uuid(6), uuid(7)));
}

TEST(PreferredAllocation, PcieSwitchBeforeNumaBeforeSystem) {
  auto inv = hgx(4);
  for (auto& row : inv.topology) {
    for (auto& l : row) l = l == gpu::Link::kSelf ? l : gpu::Link::kSystem;
  }
  inv.topology[0][2] = inv.topology[2][0] = gpu::Link::kNumaNode;
  inv.topology[1][3] = inv.topology[3][1] = gpu::Link::kPcieSwitch;
  auto plan = make_plan(inv, config(""));
  EXPECT_THAT(preferred_allocation(plan->resources[0], inv.topology, SharedPolicy::kDistributed,
                                   {uuid(0), uuid(1), uuid(2), uuid(3)}, {}, 2),
              ElementsAre(uuid(1), uuid(3)));
  EXPECT_GT(link_score(gpu::Link::kNvLink), link_score(gpu::Link::kPcieSwitch));
  EXPECT_GT(link_score(gpu::Link::kPcieSwitch), link_score(gpu::Link::kHostBridge));
  EXPECT_GT(link_score(gpu::Link::kHostBridge), link_score(gpu::Link::kNumaNode));
  EXPECT_GT(link_score(gpu::Link::kNumaNode), link_score(gpu::Link::kSystem));
}

TEST(PreferredAllocation, ReplicasDistributedOrPacked) {
  auto inv = hgx(2);
  auto plan = make_plan(inv, config(kTimeSlicing4));
  const auto& r = plan->resources[0];
  // GPU 0 has one replica in use (::0 missing), GPU 1 none.
  const std::vector<std::string> available{uuid(0) + "::1", uuid(0) + "::2", uuid(0) + "::3", uuid(1) + "::0",
                                           uuid(1) + "::1", uuid(1) + "::2", uuid(1) + "::3"};
  EXPECT_THAT(preferred_allocation(r, inv.topology, SharedPolicy::kDistributed, available, {}, 1),
              ElementsAre(uuid(1) + "::0"));
  EXPECT_THAT(preferred_allocation(r, inv.topology, SharedPolicy::kPacked, available, {}, 1),
              ElementsAre(uuid(0) + "::1"));
  EXPECT_THAT(preferred_allocation(r, inv.topology, SharedPolicy::kDistributed, available, {}, 3),
              ElementsAre(uuid(1) + "::0", uuid(0) + "::1", uuid(1) + "::1"));
}

}  // namespace
}  // namespace kgpu::sharing
