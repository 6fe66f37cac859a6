#include "labels/labels.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace kgpu::labels {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::Contains;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr uint32_t kPci3dController = 0x030200;

gpu::GpuInfo make_gpu(unsigned index, const std::string& name, uint64_t memory_mib, int cc_major, int cc_minor,
                      const std::string& family, bool mig_capable) {
  gpu::GpuInfo g;
  g.index = index;
  g.uuid = "GPU-" + std::to_string(index);
  g.name = name;
  g.memory_total_mib = memory_mib;
  g.cc_major = cc_major;
  g.cc_minor = cc_minor;
  g.family = family;
  g.mig_capable = mig_capable;
  if (mig_capable) {
    g.mig_enabled = false;
    g.mig_pending_enabled = false;
  }
  return g;
}

gpu::GpuInfo h100(unsigned index) { return make_gpu(index, "NVIDIA H100 80GB HBM3", 81559, 9, 0, "hopper", true); }
gpu::GpuInfo l4(unsigned index) { return make_gpu(index, "NVIDIA L4", 23034, 8, 9, "ada-lovelace", false); }
gpu::GpuInfo t4(unsigned index) { return make_gpu(index, "Tesla T4", 15360, 7, 5, "turing", false); }
gpu::GpuInfo a100(unsigned index) { return make_gpu(index, "NVIDIA A100-SXM4-80GB", 81920, 8, 0, "ampere", true); }

gpu::MigDevice mig(unsigned index, const std::string& profile, unsigned profile_id, unsigned slices,
                   uint64_t memory_mib, unsigned sms, unsigned start, unsigned size) {
  gpu::MigDevice d;
  d.index = index;
  d.uuid = "MIG-" + std::to_string(index);
  d.gpu_instance_id = index + 1;
  d.profile = profile;
  d.profile_id = profile_id;
  d.gpu_slices = slices;
  d.compute_slices = slices;
  d.memory_mib = memory_mib;
  d.sm_count = sms;
  d.placement_start = start;
  d.placement_size = size;
  return d;
}

// A100-80GB MIG devices (memory and SMs as NVML reports them).
gpu::MigDevice a100_1g(unsigned index) { return mig(index, "1g.10gb", 19, 1, 9856, 14, index, 1); }
gpu::MigDevice a100_2g(unsigned index, unsigned start) { return mig(index, "2g.20gb", 14, 2, 19968, 28, start, 2); }
gpu::MigDevice a100_3g(unsigned index, unsigned start) { return mig(index, "3g.40gb", 9, 3, 40192, 42, start, 4); }

void enable_mig(gpu::GpuInfo& g, std::vector<gpu::MigDevice> devices) {
  g.mig_enabled = true;
  g.mig_pending_enabled = true;
  g.mig_devices = std::move(devices);
}

gpu::Inventory inventory(std::vector<gpu::GpuInfo> gpus, std::string driver = "550.54.15", int cuda = 12040) {
  gpu::Inventory inv;
  inv.driver_version = std::move(driver);
  inv.nvml_version = "12.550.54.15";
  inv.cuda_driver_version = cuda;
  inv.gpus = std::move(gpus);
  return inv;
}

LabelOptions compute_options(const gpu::Inventory& inv, std::string mig_strategy = "none") {
  LabelOptions o;
  o.mig_strategy = std::move(mig_strategy);
  for (const auto& g : inv.gpus) o.pci_class[g.index] = kPci3dController;
  return o;
}

LabelSharing time_slicing(int replicas) {
  LabelSharing s;
  s.strategy = "time-slicing";
  s.replicas = replicas;
  return s;
}

// The version labels of driver 550.54.15 with CUDA 12.4.
Labels versions_550() {
  return {
      {"nvidia.com/cuda.driver-version.full", "550.54.15"},
      {"nvidia.com/cuda.driver-version.major", "550"},
      {"nvidia.com/cuda.driver-version.minor", "54"},
      {"nvidia.com/cuda.driver-version.revision", "15"},
      {"nvidia.com/cuda.driver.major", "550"},
      {"nvidia.com/cuda.driver.minor", "54"},
      {"nvidia.com/cuda.driver.rev", "15"},
      {"nvidia.com/cuda.runtime-version.full", "12.4"},
      {"nvidia.com/cuda.runtime-version.major", "12"},
      {"nvidia.com/cuda.runtime-version.minor", "4"},
      {"nvidia.com/cuda.runtime.major", "12"},
      {"nvidia.com/cuda.runtime.minor", "4"},
  };
}

Labels merged(Labels a, const Labels& b) {
  for (const auto& [k, v] : b) a[k] = v;
  return a;
}

void expect_all_valid(const Labels& labels) {
  for (const auto& [k, v] : labels) {
    EXPECT_TRUE(is_valid_label_key(k)) << k;
    EXPECT_TRUE(is_valid_label_value(v)) << k << "=" << v;
  }
}

// Builds labels, checks every key and value is valid, and returns them with the warnings.
struct Labelled {
  Labels labels;
  std::vector<std::string> warnings;
};
Labelled label(const gpu::Inventory& inv, const LabelSharing& sharing, const LabelOptions& opt) {
  Labelled r;
  r.labels = gfd_labels(inv, sharing, opt, &r.warnings);
  expect_all_valid(r.labels);
  return r;
}

TEST(GfdLabels, HgxH100FullSet) {
  std::vector<gpu::GpuInfo> gpus;
  for (unsigned i = 0; i < 8; ++i) gpus.push_back(h100(i));
  const auto inv = inventory(gpus);
  auto opt = compute_options(inv);
  opt.machine = "PowerEdge XE9680\n";
  opt.timestamp = 1700000000;

  const auto r = label(inv, LabelSharing{}, opt);
  EXPECT_EQ(r.labels, merged(versions_550(), {
                                                 {"nvidia.com/gfd.timestamp", "1700000000"},
                                                 {"nvidia.com/gpu.compute.major", "9"},
                                                 {"nvidia.com/gpu.compute.minor", "0"},
                                                 {"nvidia.com/gpu.count", "8"},
                                                 {"nvidia.com/gpu.family", "hopper"},
                                                 {"nvidia.com/gpu.machine", "PowerEdge-XE9680"},
                                                 {"nvidia.com/gpu.memory", "81559"},
                                                 {"nvidia.com/gpu.mode", "compute"},
                                                 {"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"},
                                                 {"nvidia.com/gpu.replicas", "1"},
                                                 {"nvidia.com/gpu.sharing-strategy", "none"},
                                                 {"nvidia.com/mig.capable", "true"},
                                                 {"nvidia.com/mps.capable", "false"},
                                                 {"kgpu.io/gpu.models", "1"},
                                                 {"kgpu.io/gpu-model.NVIDIA-H100-80GB-HBM3", "8"},
                                             }));
  EXPECT_THAT(r.warnings, IsEmpty());
}

TEST(GfdLabels, TeslaT4TimeSlicedFullSet) {
  const auto inv = inventory({t4(0), t4(1)}, "535.104.05", 12020);
  const auto r = label(inv, time_slicing(4), LabelOptions{});
  EXPECT_EQ(r.labels, (Labels{
                          {"nvidia.com/cuda.driver-version.full", "535.104.05"},
                          {"nvidia.com/cuda.driver-version.major", "535"},
                          {"nvidia.com/cuda.driver-version.minor", "104"},
                          {"nvidia.com/cuda.driver-version.revision", "05"},
                          {"nvidia.com/cuda.driver.major", "535"},
                          {"nvidia.com/cuda.driver.minor", "104"},
                          {"nvidia.com/cuda.driver.rev", "05"},
                          {"nvidia.com/cuda.runtime-version.full", "12.2"},
                          {"nvidia.com/cuda.runtime-version.major", "12"},
                          {"nvidia.com/cuda.runtime-version.minor", "2"},
                          {"nvidia.com/cuda.runtime.major", "12"},
                          {"nvidia.com/cuda.runtime.minor", "2"},
                          {"nvidia.com/gpu.compute.major", "7"},
                          {"nvidia.com/gpu.compute.minor", "5"},
                          {"nvidia.com/gpu.count", "2"},
                          {"nvidia.com/gpu.family", "turing"},
                          {"nvidia.com/gpu.machine", "unknown"},
                          {"nvidia.com/gpu.memory", "15360"},
                          {"nvidia.com/gpu.mode", "unknown"},
                          {"nvidia.com/gpu.product", "Tesla-T4-SHARED"},
                          {"nvidia.com/gpu.replicas", "4"},
                          {"nvidia.com/gpu.sharing-strategy", "time-slicing"},
                          {"nvidia.com/mig.capable", "false"},
                          {"nvidia.com/mps.capable", "false"},
                          {"kgpu.io/gpu.models", "1"},
                          {"kgpu.io/gpu-model.Tesla-T4", "2"},
                      }));
  EXPECT_THAT(r.warnings, IsEmpty());
}

TEST(GfdLabels, RenamedSharedResourceHasNoSuffix) {
  auto sharing = time_slicing(4);
  sharing.renamed = true;
  const auto r = label(inventory({t4(0), t4(1)}), sharing, LabelOptions{});
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.product"), "Tesla-T4");
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.replicas"), "4");
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.sharing-strategy"), "time-slicing");
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.count"), "2");
}

TEST(GfdLabels, Mps) {
  LabelSharing sharing;
  sharing.strategy = "mps";
  sharing.replicas = 4;
  const auto r = label(inventory({t4(0), t4(1)}), sharing, LabelOptions{});
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.product"), "Tesla-T4-SHARED");
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.replicas"), "4");
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.sharing-strategy"), "mps");
  EXPECT_EQ(r.labels.at("nvidia.com/mps.capable"), "true");
}

TEST(GfdLabels, MpsIsNotCapableWithMigEnabled) {
  auto g0 = a100(0);
  enable_mig(g0, {a100_1g(0)});
  LabelSharing sharing;
  sharing.strategy = "mps";
  sharing.replicas = 2;
  const auto r = label(inventory({g0, a100(1)}), sharing, LabelOptions{});
  EXPECT_EQ(r.labels.at("nvidia.com/mps.capable"), "false");
  EXPECT_THAT(r.warnings, Contains(HasSubstr("MPS")));
}

TEST(GfdLabels, OneReplicaIsNotShared) {
  const auto r = label(inventory({t4(0)}), time_slicing(1), LabelOptions{});
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.product"), "Tesla-T4");
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.replicas"), "1");
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.sharing-strategy"), "none");
}

TEST(GfdLabels, InconsistentSharingIsNormalizedWithWarnings) {
  LabelSharing none_with_replicas;
  none_with_replicas.replicas = 4;
  auto r = label(inventory({t4(0)}), none_with_replicas, LabelOptions{});
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.replicas"), "1");
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.product"), "Tesla-T4");
  EXPECT_THAT(r.warnings, Contains(HasSubstr("sharing strategy none")));

  LabelSharing bogus;
  bogus.strategy = "vgpu";
  r = label(inventory({t4(0)}), bogus, LabelOptions{});
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.sharing-strategy"), "none");
  EXPECT_THAT(r.warnings, Contains(HasSubstr("\"vgpu\"")));
}

TEST(GfdLabels, PerGpuReplicasLabelTheMinimumAndTheMaximum) {
  auto sharing = time_slicing(2);
  sharing.replicas_by_gpu = {{1, 4}, {7, 3}};
  const auto r = label(inventory({t4(0), t4(1)}), sharing, LabelOptions{});
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.replicas"), "2");
  EXPECT_EQ(r.labels.at("kgpu.io/gpu.replicas.max"), "4");
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.product"), "Tesla-T4-SHARED");
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.sharing-strategy"), "time-slicing");
  EXPECT_THAT(r.warnings, Contains(HasSubstr("GPU 7")));

  // One GPU not shared, one shared: the resource is shared (suffix), the minimum is 1.
  sharing = time_slicing(1);
  sharing.replicas_by_gpu = {{1, 4}};
  const auto mixed = label(inventory({t4(0), t4(1)}), sharing, LabelOptions{});
  EXPECT_EQ(mixed.labels.at("nvidia.com/gpu.replicas"), "1");
  EXPECT_EQ(mixed.labels.at("kgpu.io/gpu.replicas.max"), "4");
  EXPECT_EQ(mixed.labels.at("nvidia.com/gpu.product"), "Tesla-T4-SHARED");

  EXPECT_FALSE(label(inventory({t4(0)}), time_slicing(4), LabelOptions{}).labels.contains("kgpu.io/gpu.replicas.max"));
}

TEST(GfdLabels, MigSingleUniformFullSet) {
  auto g0 = a100(0), g1 = a100(1);
  std::vector<gpu::MigDevice> sevens;
  for (unsigned i = 0; i < 7; ++i) sevens.push_back(a100_1g(i));
  enable_mig(g0, sevens);
  enable_mig(g1, sevens);
  const auto inv = inventory({g0, g1});
  const auto r = label(inv, LabelSharing{}, compute_options(inv, "single"));
  EXPECT_EQ(r.labels, merged(versions_550(), {
                                                 {"nvidia.com/gpu.compute.major", "8"},
                                                 {"nvidia.com/gpu.compute.minor", "0"},
                                                 {"nvidia.com/gpu.count", "14"},
                                                 {"nvidia.com/gpu.engines.copy", "1"},
                                                 {"nvidia.com/gpu.engines.decoder", "0"},
                                                 {"nvidia.com/gpu.engines.encoder", "0"},
                                                 {"nvidia.com/gpu.engines.jpeg", "0"},
                                                 {"nvidia.com/gpu.engines.ofa", "0"},
                                                 {"nvidia.com/gpu.family", "ampere"},
                                                 {"nvidia.com/gpu.machine", "unknown"},
                                                 {"nvidia.com/gpu.memory", "9856"},
                                                 {"nvidia.com/gpu.mode", "compute"},
                                                 {"nvidia.com/gpu.multiprocessors", "14"},
                                                 {"nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb"},
                                                 {"nvidia.com/gpu.replicas", "1"},
                                                 {"nvidia.com/gpu.sharing-strategy", "none"},
                                                 {"nvidia.com/gpu.slices.ci", "1"},
                                                 {"nvidia.com/gpu.slices.gi", "1"},
                                                 {"nvidia.com/mig.capable", "true"},
                                                 {"nvidia.com/mig.strategy", "single"},
                                                 {"nvidia.com/mps.capable", "false"},
                                                 {"kgpu.io/gpu.models", "1"},
                                                 {"kgpu.io/gpu-model.NVIDIA-A100-SXM4-80GB", "2"},
                                             }));
  EXPECT_THAT(r.warnings, IsEmpty());
}

TEST(GfdLabels, MigSingleTimeSlicedMigDevices) {
  auto g0 = a100(0);
  enable_mig(g0, {a100_1g(0), a100_1g(1)});
  const auto inv = inventory({g0});
  const auto r = label(inv, time_slicing(2), compute_options(inv, "single"));
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.product"), "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb-SHARED");
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.replicas"), "2");
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.count"), "2");
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.sharing-strategy"), "time-slicing");
}

void expect_invalid_single(const Labelled& r, const std::string& reason) {
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.product"), "NVIDIA-A100-SXM4-80GB-MIG-INVALID");
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.count"), "0");
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.replicas"), "0");
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.memory"), "0");
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.sharing-strategy"), "none");
  EXPECT_EQ(r.labels.at("nvidia.com/mig.strategy"), "single");
  EXPECT_FALSE(r.labels.contains("nvidia.com/gpu.multiprocessors"));
  EXPECT_FALSE(r.labels.contains("nvidia.com/gpu.engines.copy"));
  EXPECT_THAT(r.warnings, Contains(AllOf(HasSubstr("migStrategy single"), HasSubstr(reason))));
}

TEST(GfdLabels, MigSingleNonUniformIsInvalid) {
  auto g0 = a100(0), g1 = a100(1);
  enable_mig(g0, {a100_1g(0), a100_1g(1), a100_1g(2), a100_1g(3), a100_1g(4), a100_1g(5), a100_1g(6)});
  enable_mig(g1, {a100_3g(0, 0), a100_3g(1, 4)});
  const auto inv = inventory({g0, g1});
  const auto r = label(inv, time_slicing(4), compute_options(inv, "single"));
  expect_invalid_single(r, "more than one MIG profile (1g.10gb, 3g.40gb)");
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.family"), "ampere");  // the whole-GPU attributes stay
}

TEST(GfdLabels, MigSingleWithMigDisabledOrEmptyGpuIsInvalid) {
  auto g0 = a100(0);
  enable_mig(g0, {a100_1g(0)});
  auto inv = inventory({g0, a100(1)});
  expect_invalid_single(label(inv, LabelSharing{}, compute_options(inv, "single")), "MIG is disabled on GPU 1");

  auto g1 = a100(1);
  enable_mig(g1, {});
  inv = inventory({g0, g1});
  expect_invalid_single(label(inv, LabelSharing{}, compute_options(inv, "single")),
                        "no MIG devices on MIG-enabled GPU 1");
}

TEST(GfdLabels, MigSingleWithoutMigEnabledGpusLabelsWholeGpus) {
  const auto inv = inventory({a100(0), a100(1)});
  const auto r = label(inv, LabelSharing{}, compute_options(inv, "single"));
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.product"), "NVIDIA-A100-SXM4-80GB");
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.count"), "2");
  EXPECT_EQ(r.labels.at("nvidia.com/mig.strategy"), "single");
  EXPECT_FALSE(r.labels.contains("nvidia.com/gpu.slices.gi"));
}

TEST(GfdLabels, MigMixed) {
  auto g0 = a100(0);
  enable_mig(g0, {a100_3g(0, 0), a100_2g(1, 4), a100_1g(6)});
  auto g2 = a100(2);
  enable_mig(g2, {a100_1g(0), a100_1g(1)});
  const auto inv = inventory({g0, a100(1), g2});
  const auto r = label(inv, time_slicing(2), compute_options(inv, "mixed"));

  // Whole GPUs: all three counted; only GPU 1 (MIG disabled) is shared.
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.product"), "NVIDIA-A100-SXM4-80GB-SHARED");
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.count"), "3");
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.replicas"), "2");
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.memory"), "81920");
  EXPECT_EQ(r.labels.at("nvidia.com/mig.strategy"), "mixed");

  Labels mig3;
  for (const auto& [k, v] : r.labels) {
    if (k.starts_with("nvidia.com/mig-3g.40gb.")) mig3[k] = v;
  }
  EXPECT_EQ(mig3, (Labels{
                      {"nvidia.com/mig-3g.40gb.count", "1"},
                      {"nvidia.com/mig-3g.40gb.engines.copy", "3"},
                      {"nvidia.com/mig-3g.40gb.engines.decoder", "2"},
                      {"nvidia.com/mig-3g.40gb.engines.encoder", "0"},
                      {"nvidia.com/mig-3g.40gb.engines.jpeg", "0"},
                      {"nvidia.com/mig-3g.40gb.engines.ofa", "0"},
                      {"nvidia.com/mig-3g.40gb.memory", "40192"},
                      {"nvidia.com/mig-3g.40gb.multiprocessors", "42"},
                      {"nvidia.com/mig-3g.40gb.product", "NVIDIA-A100-SXM4-80GB-MIG-3g.40gb"},
                      {"nvidia.com/mig-3g.40gb.replicas", "1"},
                      {"nvidia.com/mig-3g.40gb.sharing-strategy", "none"},
                      {"nvidia.com/mig-3g.40gb.slices.ci", "3"},
                      {"nvidia.com/mig-3g.40gb.slices.gi", "3"},
                  }));
  EXPECT_EQ(r.labels.at("nvidia.com/mig-1g.10gb.count"), "3");
  EXPECT_EQ(r.labels.at("nvidia.com/mig-1g.10gb.product"), "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb");
  EXPECT_EQ(r.labels.at("nvidia.com/mig-2g.20gb.count"), "1");
  EXPECT_EQ(r.labels.at("nvidia.com/mig-2g.20gb.engines.decoder"), "1");
  EXPECT_THAT(r.warnings, IsEmpty());
}

TEST(GfdLabels, MigMixedTimeSlicedProfile) {
  auto g0 = a100(0);
  enable_mig(g0, {a100_3g(0, 0), a100_1g(6)});
  const auto inv = inventory({g0});
  LabelSharing sharing;
  sharing.mig_replicas["1g.10gb"] = 3;
  const auto r = label(inv, sharing, compute_options(inv, "mixed"));
  EXPECT_EQ(r.labels.at("nvidia.com/mig-1g.10gb.product"), "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb-SHARED");
  EXPECT_EQ(r.labels.at("nvidia.com/mig-1g.10gb.replicas"), "3");
  EXPECT_EQ(r.labels.at("nvidia.com/mig-1g.10gb.sharing-strategy"), "time-slicing");
  EXPECT_EQ(r.labels.at("nvidia.com/mig-1g.10gb.count"), "1");  // physical MIG devices
  EXPECT_EQ(r.labels.at("nvidia.com/mig-3g.40gb.replicas"), "1");
  EXPECT_EQ(r.labels.at("nvidia.com/mig-3g.40gb.sharing-strategy"), "none");
  sharing.renamed = true;
  const auto renamed = label(inv, sharing, compute_options(inv, "mixed"));
  EXPECT_EQ(renamed.labels.at("nvidia.com/mig-1g.10gb.product"), "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb");
}

TEST(GfdLabels, MigMixedAllEnabledParentsHaveZeroReplicas) {
  auto g0 = a100(0);
  enable_mig(g0, {mig(0, "1g.10gb+me", 20, 1, 9856, 14, 0, 1), a100_3g(1, 4)});
  const auto inv = inventory({g0});
  const auto r = label(inv, time_slicing(4), compute_options(inv, "mixed"));
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.product"), "NVIDIA-A100-SXM4-80GB");
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.replicas"), "0");
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.sharing-strategy"), "none");
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.count"), "1");
  // '+' is not allowed in names: the resource is mig-1g.10gb.me.
  EXPECT_EQ(r.labels.at("nvidia.com/mig-1g.10gb.me.product"), "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb.me");
  EXPECT_EQ(r.labels.at("nvidia.com/mig-1g.10gb.me.engines.ofa"), "1");
  EXPECT_EQ(r.labels.at("nvidia.com/mig-1g.10gb.me.engines.jpeg"), "1");
}

TEST(GfdLabels, MigNoneIgnoresMigDevices) {
  auto g0 = a100(0);
  enable_mig(g0, {a100_1g(0)});
  const auto inv = inventory({g0, a100(1)});
  const auto r = label(inv, LabelSharing{}, compute_options(inv));
  EXPECT_FALSE(r.labels.contains("nvidia.com/mig.strategy"));
  EXPECT_FALSE(r.labels.contains("nvidia.com/mig-1g.10gb.count"));
  EXPECT_FALSE(r.labels.contains("nvidia.com/gpu.slices.gi"));
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.count"), "2");
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.replicas"), "1");
}

TEST(GfdLabels, SeveralModelsLabelTheMostNumerousAndCountEach) {
  const auto inv = inventory({l4(0), h100(1), h100(2), l4(3), h100(4), h100(5)});
  const auto r = label(inv, LabelSharing{}, compute_options(inv));
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.product"), "NVIDIA-H100-80GB-HBM3");
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.count"), "4");
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.memory"), "81559");
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.family"), "hopper");
  EXPECT_EQ(r.labels.at("nvidia.com/mig.capable"), "true");
  EXPECT_EQ(r.labels.at("kgpu.io/gpu.models"), "2");
  EXPECT_EQ(r.labels.at("kgpu.io/gpu-model.NVIDIA-H100-80GB-HBM3"), "4");
  EXPECT_EQ(r.labels.at("kgpu.io/gpu-model.NVIDIA-L4"), "2");
  EXPECT_THAT(r.warnings, Contains(AllOf(HasSubstr("2 GPU models"), HasSubstr("NVIDIA L4 x2"))));
}

TEST(GfdLabels, SeveralModelsTieGoesToTheLowestGpuIndex) {
  const auto inv = inventory({h100(1), l4(0), h100(3), l4(2)});  // inventory order does not matter
  const auto r = label(inv, LabelSharing{}, compute_options(inv));
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.product"), "NVIDIA-L4");
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.count"), "2");
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.family"), "ada-lovelace");
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.compute.minor"), "9");
}

TEST(GfdLabels, LostAndUnreadableGpusAreNotCounted) {
  std::vector<gpu::GpuInfo> gpus;
  for (unsigned i = 0; i < 8; ++i) gpus.push_back(h100(i));
  gpus[3].lost = true;
  gpus[5].error = "UNKNOWN_ERROR";
  const auto inv = inventory(gpus);
  const auto r = label(inv, LabelSharing{}, compute_options(inv));
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.count"), "6");
  EXPECT_EQ(r.labels.at("kgpu.io/gpu-model.NVIDIA-H100-80GB-HBM3"), "6");
  EXPECT_THAT(r.warnings, Contains(AllOf(HasSubstr("GPU 3"), HasSubstr("lost"))));
  EXPECT_THAT(r.warnings, Contains(AllOf(HasSubstr("GPU 5"), HasSubstr("UNKNOWN_ERROR"))));

  gpu::Inventory none = inventory({h100(0)});
  none.gpus[0].lost = true;
  LabelOptions opt;
  opt.timestamp = 5;
  EXPECT_EQ(label(none, LabelSharing{}, opt).labels, (Labels{{"nvidia.com/gfd.timestamp", "5"}}));
}

TEST(GfdLabels, Timestamp) {
  const auto inv = inventory({t4(0)});
  LabelOptions opt;
  EXPECT_FALSE(label(inv, LabelSharing{}, opt).labels.contains("nvidia.com/gfd.timestamp"));
  opt.timestamp = 1718000000;
  EXPECT_EQ(label(inv, LabelSharing{}, opt).labels.at("nvidia.com/gfd.timestamp"), "1718000000");
}

TEST(GfdLabels, DriverVersions) {
  auto r = label(inventory({t4(0)}, "470.57"), LabelSharing{}, LabelOptions{});
  EXPECT_EQ(r.labels.at("nvidia.com/cuda.driver-version.full"), "470.57");
  EXPECT_EQ(r.labels.at("nvidia.com/cuda.driver-version.minor"), "57");
  EXPECT_EQ(r.labels.at("nvidia.com/cuda.driver-version.revision"), "");  // as GFD writes it
  EXPECT_EQ(r.labels.at("nvidia.com/cuda.driver.rev"), "");

  for (const char* bad : {"", "550", "550.54.15.1", "550.x.1", "550..1", "550.54."}) {
    r = label(inventory({t4(0)}, bad), LabelSharing{}, LabelOptions{});
    EXPECT_FALSE(r.labels.contains("nvidia.com/cuda.driver-version.full")) << bad;
    EXPECT_THAT(r.warnings, Contains(HasSubstr("is not X.Y[.Z]"))) << bad;
  }

  auto no_cuda = inventory({t4(0)});
  no_cuda.cuda_driver_version.reset();
  r = label(no_cuda, LabelSharing{}, LabelOptions{});
  EXPECT_FALSE(r.labels.contains("nvidia.com/cuda.runtime-version.full"));
  EXPECT_THAT(r.warnings, Contains(HasSubstr("CUDA driver version unknown")));
  EXPECT_EQ(label(inventory({t4(0)}, "580.65.06", 13000), LabelSharing{}, LabelOptions{})
                .labels.at("nvidia.com/cuda.runtime-version.full"),
            "13.0");
}

TEST(GfdLabels, GpuModeFromPciClass) {
  const auto inv = inventory({t4(0), t4(1)});
  LabelOptions opt;
  EXPECT_EQ(label(inv, LabelSharing{}, opt).labels.at("nvidia.com/gpu.mode"), "unknown");
  opt.pci_class = {{0, 0x030000}, {1, 0x030000}};
  EXPECT_EQ(label(inv, LabelSharing{}, opt).labels.at("nvidia.com/gpu.mode"), "graphics");
  opt.pci_class = {{1, 0x030200}};
  EXPECT_EQ(label(inv, LabelSharing{}, opt).labels.at("nvidia.com/gpu.mode"), "compute");
  opt.pci_class = {{0, 0x030200}, {1, 0x030000}};
  const auto r = label(inv, LabelSharing{}, opt);
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.mode"), "compute");
  EXPECT_THAT(r.warnings, Contains(HasSubstr("PCI classes")));
}

TEST(GfdLabels, MachineTypeIsMadeValid) {
  LabelOptions opt;
  opt.machine = "ProLiant DL380 Gen10 (P20174-B21)";
  const auto r = label(inventory({t4(0)}), LabelSharing{}, opt);
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.machine"), "ProLiant-DL380-Gen10-P20174-B21");
  EXPECT_THAT(r.warnings, Contains(HasSubstr("machine type")));
  opt.machine = " \n";
  EXPECT_EQ(label(inventory({t4(0)}), LabelSharing{}, opt).labels.at("nvidia.com/gpu.machine"), "unknown");
}

TEST(GfdLabels, ProductNamesFollowGfdSanitizing) {
  const auto r = label(inventory({make_gpu(0, "NVIDIA TITAN X (Pascal)", 12288, 6, 1, "pascal", false)}),
                       LabelSharing{}, LabelOptions{});
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.product"), "NVIDIA-TITAN-X-Pascal");
  EXPECT_EQ(r.labels.at("kgpu.io/gpu-model.NVIDIA-TITAN-X-Pascal"), "1");
  EXPECT_THAT(r.warnings, IsEmpty());
}

TEST(GfdLabels, LongMigProductKeepsTheProfile) {
  // NVIDIA issue #1876: 67 characters before shortening.
  auto g = make_gpu(0, "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition", 97887, 12, 0, "blackwell", true);
  enable_mig(g, {mig(0, "1g.24gb", 14, 1, 24000, 46, 0, 1), mig(1, "1g.24gb", 14, 1, 24000, 46, 1, 1)});
  const auto inv = inventory({g});
  const auto r = label(inv, LabelSharing{}, compute_options(inv, "single"));
  const std::string& product = r.labels.at("nvidia.com/gpu.product");
  EXPECT_EQ(product, "NVIDIA-RTX-PRO-6000-Blackwell-Max-Q-Workstation-Edi-MIG-1g.24gb");
  EXPECT_EQ(product.size(), 63u);
  EXPECT_THAT(r.warnings, Contains(HasSubstr("longer than 63")));
  // Not in the engine tables: engines are left out, not invented.
  EXPECT_FALSE(r.labels.contains("nvidia.com/gpu.engines.copy"));
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.multiprocessors"), "46");
  EXPECT_THAT(r.warnings, Contains(HasSubstr("engines.* left out")));

  const auto shared = label(inv, time_slicing(2), compute_options(inv, "single"));
  EXPECT_THAT(shared.labels.at("nvidia.com/gpu.product"), EndsWith("-MIG-1g.24gb-SHARED"));
  EXPECT_LE(shared.labels.at("nvidia.com/gpu.product").size(), 63u);
}

TEST(GfdLabels, LongModelNameInTheModelLabelKey) {
  const std::string name = "NVIDIA Extremely Long Product Name For A Hypothetical Accelerator 96GB";
  const auto r = label(inventory({make_gpu(0, name, 98304, 9, 0, "hopper", false)}), LabelSharing{}, LabelOptions{});
  std::string key;
  for (const auto& [k, v] : r.labels) {
    if (k.starts_with("kgpu.io/gpu-model.")) key = k;
  }
  ASSERT_FALSE(key.empty());
  EXPECT_LE(key.size() - std::string("kgpu.io/").size(), 63u);
  EXPECT_THAT(key, ::testing::StartsWith("kgpu.io/gpu-model.NVIDIA-Extremely-Long"));
  EXPECT_THAT(r.warnings, Contains(HasSubstr("too long for a label name")));
}

gpu::GpuFabric fabric(const std::string& cluster, unsigned clique, bool attached = true) {
  gpu::GpuFabric f;
  f.cluster_uuid = cluster;
  f.clique_id = clique;
  f.attached = attached;
  return f;
}

TEST(GfdLabels, CliqueOfNvLinkFabricGpus) {
  const std::string cluster = "c8d4e9a2-1f3b-4c5d-8e6f-0a1b2c3d4e5f";
  std::vector<gpu::GpuInfo> gpus;
  for (unsigned i = 0; i < 4; ++i) {
    gpus.push_back(h100(i));
    gpus.back().fabric = fabric(cluster, 32766);
  }
  gpus[3].fabric->attached = false;  // still registering: skipped, as GFD does
  gpus[3].fabric->clique_id = 0;
  auto r = label(inventory(gpus), LabelSharing{}, compute_options(inventory(gpus)));
  EXPECT_EQ(r.labels.at("nvidia.com/gpu.clique"), cluster + ".32766");
  EXPECT_THAT(r.warnings, IsEmpty());

  // GPUs that disagree: no label, a warning.
  gpus[1].fabric->clique_id = 7;
  r = label(inventory(gpus), LabelSharing{}, compute_options(inventory(gpus)));
  EXPECT_FALSE(r.labels.contains("nvidia.com/gpu.clique"));
  EXPECT_THAT(r.warnings, Contains(HasSubstr("1 cluster UUIDs and 2 clique IDs")));
  // No fabric at all (PCIe GPUs, or an older driver): no label.
  r = label(inventory({l4(0)}), LabelSharing{}, compute_options(inventory({l4(0)})));
  EXPECT_FALSE(r.labels.contains("nvidia.com/gpu.clique"));
}

TEST(GfdLabels, VgpuPresentInAGuest) {
  auto g = l4(0);
  g.virtualization_mode = 2;  // NVML_GPU_VIRTUALIZATION_MODE_VGPU
  auto r = label(inventory({g}), LabelSharing{}, compute_options(inventory({g})));
  EXPECT_EQ(r.labels.at("nvidia.com/vgpu.present"), "true");
  for (int mode : {0, 1, 3}) {  // none, passthrough, host running the vGPU manager
    g.virtualization_mode = mode;
    r = label(inventory({g}), LabelSharing{}, compute_options(inventory({g})));
    EXPECT_FALSE(r.labels.contains("nvidia.com/vgpu.present")) << mode;
  }
}

TEST(SanitizeLabelValue, EdgeCases) {
  EXPECT_EQ(sanitize_label_value("Tesla T4"), "Tesla-T4");
  EXPECT_EQ(sanitize_label_value("NVIDIA TITAN X (Pascal)"), "NVIDIA-TITAN-X-Pascal");
  EXPECT_EQ(sanitize_label_value("A ( B"), "A-B");  // removed characters do not leave double dashes
  EXPECT_EQ(sanitize_label_value("  a \t  b  "), "a-b");
  EXPECT_EQ(sanitize_label_value(""), "");
  EXPECT_EQ(sanitize_label_value("---"), "");
  EXPECT_EQ(sanitize_label_value("(!)"), "");
  EXPECT_EQ(sanitize_label_value("-_.x._-"), "x");
  EXPECT_EQ(sanitize_label_value("Grafikkarte \xc3\xa9t\xc3\xa9"), "Grafikkarte-t");
  EXPECT_EQ(sanitize_label_value("a/b:c=d"), "abcd");
  EXPECT_EQ(sanitize_label_value(std::string(100, 'x')), std::string(63, 'x'));
  // Cut at 63, then trimmed so it ends alphanumeric.
  EXPECT_EQ(sanitize_label_value(std::string(62, 'x') + "-yz"), std::string(62, 'x'));
  for (const std::string& raw : std::vector<std::string>{"a", "!a!", std::string(70, '.') + "b", "x y z", "\n\n"}) {
    EXPECT_TRUE(is_valid_label_value(sanitize_label_value(raw))) << raw;
  }
}

TEST(LabelValidity, ValuesAndKeys) {
  EXPECT_TRUE(is_valid_label_value(""));
  EXPECT_TRUE(is_valid_label_value("NVIDIA-A100-SXM4-80GB-MIG-1g.10gb"));
  EXPECT_FALSE(is_valid_label_value("-a"));
  EXPECT_FALSE(is_valid_label_value("a."));
  EXPECT_FALSE(is_valid_label_value("a b"));
  EXPECT_FALSE(is_valid_label_value(std::string(64, 'a')));
  EXPECT_TRUE(is_valid_label_value(std::string(63, 'a')));

  EXPECT_TRUE(is_valid_label_key("nvidia.com/gpu.product"));
  EXPECT_TRUE(is_valid_label_key("kgpu.io/gpu-model.NVIDIA-L4"));
  EXPECT_TRUE(is_valid_label_key("plain"));
  EXPECT_FALSE(is_valid_label_key("nvidia.com/"));
  EXPECT_FALSE(is_valid_label_key("/name"));
  EXPECT_FALSE(is_valid_label_key("NVIDIA.com/x"));
  EXPECT_FALSE(is_valid_label_key("nvidia..com/x"));
  EXPECT_FALSE(is_valid_label_key("kgpu.io/" + std::string(64, 'a')));
  EXPECT_FALSE(is_valid_label_key("a/b/c"));
}

TEST(MigEngines, FromNvidiaProfileTables) {
  using E = MigEngines;
  EXPECT_EQ(mig_engines("NVIDIA A100-SXM4-80GB", a100_1g(0)), (E{1, 0, 0, 0, 0}));
  EXPECT_EQ(mig_engines("NVIDIA A100-SXM4-80GB", mig(0, "1g.20gb", 15, 1, 19968, 14, 0, 2)), (E{1, 1, 0, 0, 0}));
  EXPECT_EQ(mig_engines("NVIDIA A100-SXM4-80GB", mig(0, "1g.10gb+me", 20, 1, 9856, 14, 0, 1)), (E{1, 1, 0, 1, 1}));
  EXPECT_EQ(mig_engines("NVIDIA A100-SXM4-80GB", a100_2g(0, 0)), (E{2, 1, 0, 0, 0}));
  EXPECT_EQ(mig_engines("NVIDIA A100-PCIE-40GB", mig(0, "4g.20gb", 5, 4, 19968, 56, 0, 4)), (E{4, 2, 0, 0, 0}));
  EXPECT_EQ(mig_engines("NVIDIA A100 80GB PCIe", mig(0, "7g.80gb", 0, 7, 80000, 98, 0, 8)), (E{7, 5, 0, 1, 1}));
  EXPECT_EQ(mig_engines("NVIDIA H100 80GB HBM3", mig(0, "1g.10gb", 19, 1, 9984, 16, 0, 1)), (E{1, 1, 0, 1, 0}));
  EXPECT_EQ(mig_engines("NVIDIA H100 80GB HBM3", mig(0, "3g.40gb", 9, 3, 40448, 60, 0, 4)), (E{3, 3, 0, 3, 0}));
  EXPECT_EQ(mig_engines("NVIDIA H100 80GB HBM3", mig(0, "7g.80gb", 0, 7, 81152, 132, 0, 8)), (E{8, 7, 0, 7, 1}));
  EXPECT_EQ(mig_engines("NVIDIA H200", mig(0, "1g.18gb", 19, 1, 16384, 16, 0, 1)), (E{1, 1, 0, 1, 0}));
  EXPECT_EQ(mig_engines("NVIDIA H200 NVL", mig(0, "2g.35gb", 14, 2, 33792, 32, 0, 2)), (E{2, 2, 0, 2, 0}));
  EXPECT_EQ(mig_engines("NVIDIA GH200 480GB", mig(0, "4g.48gb", 5, 4, 48128, 64, 0, 4)), (E{4, 4, 0, 4, 0}));

  // Without a profile id: the shape from slices, "+me" and the memory run.
  auto no_id = mig(0, "1g.20gb", 15, 1, 19968, 14, 0, 2);
  no_id.profile_id.reset();
  EXPECT_EQ(mig_engines("NVIDIA A100-SXM4-80GB", no_id), (E{1, 1, 0, 0, 0}));
  no_id.placement_size.reset();
  EXPECT_EQ(mig_engines("NVIDIA A100-SXM4-80GB", no_id), std::nullopt);

  // Not in the tables: other models (a whole-word match: RTX A1000 is no A100), A30, compute instances.
  EXPECT_EQ(mig_engines("NVIDIA RTX A1000", a100_1g(0)), std::nullopt);
  EXPECT_EQ(mig_engines("NVIDIA A30", mig(0, "1g.6gb", 19, 1, 5888, 14, 0, 1)), std::nullopt);
  auto ci = a100_3g(0, 0);
  ci.compute_slices = 1;
  ci.profile = "1c.3g.40gb";
  EXPECT_EQ(mig_engines("NVIDIA A100-SXM4-80GB", ci), std::nullopt);
  EXPECT_EQ(mig_engines("NVIDIA H100 80GB HBM3", mig(0, "?", 99, 1, 1, 1, 0, 1)), std::nullopt);
}

class TempDir : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::path(::testing::TempDir()) / "kgpu-labels-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::permissions(dir_, fs::perms::owner_all, fs::perm_options::add, ec);
    for (const auto& e : fs::recursive_directory_iterator(dir_, ec)) {
      if (e.is_directory()) fs::permissions(e.path(), fs::perms::owner_all, fs::perm_options::add, ec);
    }
    fs::remove_all(dir_, ec);
  }
  static std::string read(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  static std::vector<std::string> entries(const fs::path& d) {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(d)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }
  fs::path dir_;
};

TEST(RenderFeaturesFile, SortedKeyValueLines) {
  EXPECT_EQ(render_features_file({{"nvidia.com/gpu.product", "Tesla-T4"}, {"nvidia.com/gpu.count", "2"}, {"a", ""}}),
            "a=\nnvidia.com/gpu.count=2\nnvidia.com/gpu.product=Tesla-T4\n");
  EXPECT_EQ(render_features_file({}), "");
}

using WriteFeaturesFile = TempDir;

TEST_F(WriteFeaturesFile, CreatesTheDirectoryAndReplacesTheFileAtomically) {
  const fs::path path = dir_ / "etc/kubernetes/node-feature-discovery/features.d/gfd";
  ASSERT_TRUE(write_features_file(path.string(), {{"nvidia.com/gpu.count", "8"}, {"nvidia.com/gpu.product", "X"}}));
  EXPECT_EQ(read(path), "nvidia.com/gpu.count=8\nnvidia.com/gpu.product=X\n");
  EXPECT_EQ(fs::status(path).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read | fs::perms::others_read);

  // A reader holding the old file keeps the old contents: the file is replaced, not rewritten.
  std::ifstream old(path);
  ASSERT_TRUE(write_features_file(path.string(), {{"nvidia.com/gpu.count", "7"}}));
  EXPECT_EQ(read(path), "nvidia.com/gpu.count=7\n");
  std::string line;
  std::getline(old, line);
  EXPECT_EQ(line, "nvidia.com/gpu.count=8");
  EXPECT_EQ(entries(path.parent_path()), std::vector<std::string>{"gfd"});  // no temporary file left
}

TEST_F(WriteFeaturesFile, RelativePathInTheWorkingDirectory) {
  const auto cwd = fs::current_path();
  fs::current_path(dir_);
  const auto r = write_features_file("gfd", {{"k", "v"}});
  fs::current_path(cwd);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(read(dir_ / "gfd"), "k=v\n");
}

TEST_F(WriteFeaturesFile, DirectoryThatCannotBeCreatedNamesThePath) {
  std::ofstream(dir_ / "file") << "x";
  const std::string path = (dir_ / "file/features.d/gfd").string();
  const auto r = write_features_file(path, {{"k", "v"}});
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().message, AllOf(HasSubstr(path), HasSubstr("Not a directory")));
  EXPECT_EQ(entries(dir_), std::vector<std::string>{"file"});
}

TEST_F(WriteFeaturesFile, FailedRenameLeavesNoTemporaryFile) {
  // The target is a non-empty directory: everything up to the rename succeeds.
  fs::create_directories(dir_ / "gfd/sub");
  const std::string path = (dir_ / "gfd").string();
  const auto r = write_features_file(path, {{"k", "v"}});
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().message, AllOf(HasSubstr(path), HasSubstr("renaming")));
  EXPECT_EQ(entries(dir_), std::vector<std::string>{"gfd"});
}

TEST_F(WriteFeaturesFile, UnwritableDirectory) {
  if (::geteuid() == 0) GTEST_SKIP() << "root ignores directory permissions";
  const fs::path ro = dir_ / "ro";
  fs::create_directories(ro);
  std::ofstream(ro / "gfd") << "nvidia.com/gpu.count=1\n";
  fs::permissions(ro, fs::perms::owner_read | fs::perms::owner_exec);
  const auto r = write_features_file((ro / "gfd").string(), {{"k", "v"}});
  fs::permissions(ro, fs::perms::owner_all);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kPermissionDenied);
  EXPECT_THAT(r.error().message, AllOf(HasSubstr((ro / "gfd").string()), HasSubstr("Permission denied")));
  EXPECT_EQ(read(ro / "gfd"), "nvidia.com/gpu.count=1\n");
  EXPECT_EQ(entries(ro), std::vector<std::string>{"gfd"});
}

TEST_F(WriteFeaturesFile, EmptyPathIsRejected) {
  EXPECT_FALSE(write_features_file("", {}));
  EXPECT_FALSE(write_features_file((dir_ / "").string(), {}));
}

using ReadSysfs = TempDir;

TEST_F(ReadSysfs, MachineType) {
  std::ofstream(dir_ / "product_name") << "PowerEdge XE9680\n";
  EXPECT_EQ(read_machine_type((dir_ / "product_name").string()), "PowerEdge XE9680");
  std::ofstream(dir_ / "empty") << " \n";
  EXPECT_EQ(read_machine_type((dir_ / "empty").string()), std::nullopt);
  EXPECT_EQ(read_machine_type((dir_ / "missing").string()), std::nullopt);
}

TEST_F(ReadSysfs, PciClass) {
  fs::create_directories(dir_ / "0000:18:00.0");
  std::ofstream(dir_ / "0000:18:00.0/class") << "0x030200\n";
  fs::create_directories(dir_ / "0001:af:00.0");
  std::ofstream(dir_ / "0001:af:00.0/class") << "0x030000\n";
  EXPECT_EQ(read_pci_class("00000000:18:00.0", dir_.string()), 0x030200u);
  EXPECT_EQ(read_pci_class("00000001:AF:00.0", dir_.string()), 0x030000u);
  EXPECT_EQ(read_pci_class("00000000:19:00.0", dir_.string()), std::nullopt);
  EXPECT_EQ(read_pci_class("garbage", dir_.string()), std::nullopt);
  EXPECT_EQ(read_pci_class("xyz:18:00.0", dir_.string()), std::nullopt);
}

}  // namespace
}  // namespace kgpu::labels
