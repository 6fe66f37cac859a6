// The GPU layer over the fake libnvidia-ml.so.1, loaded through the production dlopen path.
#include <gtest/gtest.h>

#include <filesystem>

#include <thread>

#include "gpu/report.h"
#include "test_env.h"

namespace kgpu::gpu {
namespace {

using kgpu::testing::FakeNodeFile;
using kgpu::testing::open_fake;

const GpuInfo& gpu(const Inventory& inv, unsigned i) { return inv.gpus.at(i); }

const Telemetry* find(const std::vector<Telemetry>& ts, unsigned gpu_index, std::optional<unsigned> gi = std::nullopt) {
  for (const auto& t : ts) {
    if (t.gpu_index == gpu_index && t.gpu_instance_id == gi) return &t;
  }
  return nullptr;
}

TEST(FakeInventory, HgxH100Node) {
  FakeNodeFile f("preset: hgx-h100-8\ndriverVersion: '580.105.08'\ncudaDriverVersion: 12090\n");
  auto node = open_fake();
  ASSERT_TRUE(node);
  auto inv = node->inventory();
  ASSERT_TRUE(inv) << inv.error().message;
  EXPECT_EQ(inv->driver_version, "580.105.08");
  EXPECT_EQ(inv->cuda_driver_version, 12090);
  ASSERT_EQ(inv->gpus.size(), 8u);
  const auto& g = gpu(*inv, 5);
  EXPECT_EQ(g.index, 5u);
  EXPECT_EQ(g.minor_number, 5u);
  EXPECT_EQ(g.name, "NVIDIA H100 80GB HBM3");
  EXPECT_TRUE(g.uuid.starts_with("GPU-"));
  EXPECT_EQ(g.pci.bus_id, "00000000:AB:00.0");
  EXPECT_EQ(g.pci.device_id, 0x2330u);
  EXPECT_EQ(g.pci.vendor_id, 0x10deu);
  EXPECT_EQ(g.memory_total_mib, 81559u);
  EXPECT_EQ(g.architecture_name, "Hopper");
  EXPECT_EQ(g.family, "hopper");
  EXPECT_EQ(g.cc_major, 9);
  EXPECT_EQ(g.cc_minor, 0);
  EXPECT_EQ(g.numa_node, 1u);
  EXPECT_EQ(g.sm_count, 132u);
  EXPECT_TRUE(g.serial.has_value());
  EXPECT_TRUE(g.mig_capable);
  EXPECT_EQ(g.mig_enabled, false);
  EXPECT_TRUE(g.gpm_supported);
  EXPECT_EQ(g.nvlinks.size(), 18u);
  EXPECT_FALSE(g.error.has_value());
  for (size_t a = 0; a < 8; ++a) {
    for (size_t b = 0; b < 8; ++b) EXPECT_EQ(inv->topology[a][b], a == b ? Link::kSelf : Link::kNvLink);
  }
  EXPECT_TRUE(inv->errors.empty());
}

TEST(FakeInventory, PcieTopologyLevels) {
  FakeNodeFile f(
      "gpus:\n  - model: L4\n    count: 4\n  - model: T4\n    numaNode: 1\n"
      "topology:\n  pcieSwitches: [[0, 1]]\n  hostBridges: [[0, 1, 2]]\n");
  auto node = open_fake();
  ASSERT_TRUE(node);
  auto inv = node->inventory();
  ASSERT_TRUE(inv);
  EXPECT_EQ(inv->topology[0][1], Link::kPcieSwitch);
  EXPECT_EQ(inv->topology[0][2], Link::kHostBridge);
  EXPECT_EQ(inv->topology[0][3], Link::kNumaNode);
  EXPECT_EQ(inv->topology[0][4], Link::kSystem);
  EXPECT_EQ(inv->topology[4][0], Link::kSystem);
  const auto& t4 = gpu(*inv, 4);
  EXPECT_EQ(t4.name, "Tesla T4");
  EXPECT_FALSE(t4.mig_capable);
  EXPECT_FALSE(t4.mig_enabled.has_value());
  EXPECT_FALSE(t4.gpm_supported);
  EXPECT_TRUE(t4.nvlinks.empty());
  EXPECT_FALSE(t4.sm_count.has_value());  // no NVML source for a non-MIG GPU's SM count
  EXPECT_EQ(t4.family, "turing");
  EXPECT_EQ(gpu(*inv, 0).family, "ada-lovelace");
}

TEST(FakeInventory, DirectNvlinkGroups) {
  FakeNodeFile f("gpus:\n  - model: A100-SXM4-40GB\n    count: 4\ntopology:\n  nvlink: [[0, 1], [2, 3]]\n");
  auto node = open_fake();
  ASSERT_TRUE(node);
  auto inv = node->inventory();
  ASSERT_TRUE(inv);
  EXPECT_EQ(inv->topology[0][1], Link::kNvLink);
  EXPECT_EQ(inv->topology[2][3], Link::kNvLink);
  EXPECT_NE(inv->topology[1][2], Link::kNvLink);
  ASSERT_EQ(gpu(*inv, 0).nvlinks.size(), 12u);
  EXPECT_EQ(gpu(*inv, 0).nvlinks[0].remote_gpu, 1u);
  EXPECT_EQ(gpu(*inv, 0).nvlinks[0].remote_bus_id, "00000000:28:00.0");
}

TEST(FakeInventory, MigDevices) {
  FakeNodeFile f(
      "gpus:\n"
      "  - model: H100-SXM-80GB\n"
      "    mig:\n"
      "      instances:\n"
      "        - {profile: 3g.40gb, start: 4}\n"
      "        - {profile: 2g.20gb}\n"
      "        - {profile: 1g.10gb+me}\n"
      "        - {profile: 1g.10gb}\n"
      "  - model: H100-SXM-80GB\n"
      "    mig: {enabled: false, pendingEnabled: true}\n");
  auto node = open_fake();
  ASSERT_TRUE(node);
  auto inv = node->inventory();
  ASSERT_TRUE(inv);
  const auto& g = gpu(*inv, 0);
  EXPECT_EQ(g.mig_enabled, true);
  ASSERT_EQ(g.mig_devices.size(), 4u);
  const auto& m0 = g.mig_devices[0];
  EXPECT_EQ(m0.profile, "3g.40gb");
  EXPECT_EQ(m0.profile_id, 9u);
  EXPECT_EQ(m0.memory_mib, 40448u);
  EXPECT_EQ(m0.sm_count, 60u);
  EXPECT_EQ(m0.gpu_slices, 3u);
  EXPECT_EQ(m0.placement_start, 4u);
  EXPECT_EQ(m0.placement_size, 4u);
  EXPECT_EQ(m0.gpu_instance_id, 1u);
  EXPECT_EQ(m0.compute_instance_id, 0u);
  EXPECT_TRUE(m0.uuid.starts_with("MIG-"));
  EXPECT_EQ(g.mig_devices[1].profile, "2g.20gb");
  EXPECT_EQ(g.mig_devices[1].placement_start, 0u);
  EXPECT_EQ(g.mig_devices[2].profile, "1g.10gb+me");
  EXPECT_EQ(g.mig_devices[2].placement_start, 2u);
  EXPECT_EQ(g.mig_devices[3].profile, "1g.10gb");
  EXPECT_EQ(g.mig_devices[3].placement_start, 3u);
  const auto& pending = gpu(*inv, 1);
  EXPECT_EQ(pending.mig_enabled, false);
  EXPECT_EQ(pending.mig_pending_enabled, true);
  EXPECT_TRUE(pending.mig_devices.empty());
  // The table shows the layout.
  const auto table = inventory_table(*inv);
  EXPECT_NE(table.find("MIG 3g.40gb      Device  0: (UUID: " + m0.uuid + ")  GI 1 CI 0  40448 MiB  60 SMs  slices 4-7"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("MIG disabled (pending: enabled)"), std::string::npos) << table;
}

TEST(FakeInventory, H200AndA100ProfileNames) {
  FakeNodeFile f(
      "gpus:\n"
      "  - model: H200-141GB\n    mig: {instances: [{profile: 4g.71gb}, {profile: 1g.35gb}, {profile: 1g.18gb}]}\n"
      "  - model: A100-SXM4-40GB\n    mig: {instances: [{profile: 7g.40gb}]}\n"
      "  - model: A100-SXM4-80GB\n    mig: {instances: [{profile: 3g.40gb}, {profile: 2g.20gb}, {profile: "
      "1g.10gb}]}\n");
  auto node = open_fake();
  ASSERT_TRUE(node);
  auto inv = node->inventory();
  ASSERT_TRUE(inv);
  std::vector<std::string> names;
  for (const auto& g : inv->gpus) {
    for (const auto& m : g.mig_devices) names.push_back(m.profile);
  }
  EXPECT_EQ(names,
            (std::vector<std::string>{"4g.71gb", "1g.35gb", "1g.18gb", "7g.40gb", "3g.40gb", "2g.20gb", "1g.10gb"}));
  EXPECT_EQ(gpu(*inv, 1).mig_devices[0].gpu_instance_id, 0u);  // a full-GPU instance is GI 0
  EXPECT_EQ(gpu(*inv, 1).mig_devices[0].sm_count, 98u);
}

TEST(FakeTelemetry, ValuesAndUnsupportedAreDistinct) {
  FakeNodeFile f(
      "gpus:\n"
      "  - model: H100-SXM-80GB\n"
      "    telemetry: {gpuUtil: 73, memCopyUtil: 21, gpuTemp: 61, memoryTemp: 66, powerW: 412.5, smClock: 1755,\n"
      "                memClock: 2619, pcieReplay: 3, remappedCorrectable: 2, remappedUncorrectable: 1,\n"
      "                remapPending: 1, grEngineActive: 64, tensorActive: 37, dramActive: 48, pcieTxMiBps: 100,\n"
      "                pcieRxMiBps: 200, nvlinkTxKiBps: 1000, eccSbeVolatile: 5, clockEventReasons: 4, encUtil: 0}\n"
      "    processes: [{pid: 100, usedMemoryMiB: 2048}]\n"
      "  - model: T4\n");
  auto node = open_fake();
  ASSERT_TRUE(node);
  auto first = node->telemetry();
  const auto* h = find(first, 0);
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->gpu_util_pct, 73u);
  EXPECT_EQ(h->mem_copy_util_pct, 21u);
  EXPECT_EQ(h->enc_util_pct, 0u);  // a real zero
  EXPECT_EQ(h->gpu_temp_c, 61u);
  EXPECT_EQ(h->memory_temp_c, 66u);
  EXPECT_DOUBLE_EQ(*h->power_w, 412.5);
  EXPECT_EQ(h->power_limit_mw, 700000u);
  EXPECT_EQ(h->sm_clock_mhz, 1755u);
  EXPECT_EQ(h->mem_clock_mhz, 2619u);
  EXPECT_EQ(h->pcie_replay, 3u);
  EXPECT_EQ(h->remapped_rows_correctable, 2u);
  EXPECT_EQ(h->remapped_rows_uncorrectable, 1u);
  EXPECT_EQ(h->remap_pending, true);
  EXPECT_EQ(h->remap_failure, false);
  EXPECT_EQ(h->ecc_sbe_volatile, 5u);
  EXPECT_EQ(h->clock_event_reasons, 4u);
  EXPECT_EQ(h->fb_total_mib, 81559u);
  EXPECT_EQ(h->fb_used_mib, 2048u);
  EXPECT_EQ(h->fb_reserved_mib, 512u);
  EXPECT_EQ(*h->fb_free_mib + *h->fb_used_mib + *h->fb_reserved_mib, 81559u);
  ASSERT_TRUE(h->energy_mj.has_value());
  ASSERT_TRUE(h->nvlink_tx_kib.has_value());
  EXPECT_FALSE(h->gr_engine_active.has_value());  // GPM needs a second sample
  EXPECT_TRUE(h->errors.empty());

  const auto* t4 = find(first, 1);
  ASSERT_NE(t4, nullptr);
  EXPECT_FALSE(t4->memory_temp_c.has_value());              // GDDR6: no memory sensor
  EXPECT_FALSE(t4->remapped_rows_correctable.has_value());  // Turing: no row remapping
  EXPECT_FALSE(t4->nvlink_tx_kib.has_value());
  EXPECT_TRUE(t4->gpu_temp_c.has_value());
  EXPECT_TRUE(t4->errors.empty()) << "NOT_SUPPORTED is not an error";

  std::this_thread::sleep_for(std::chrono::milliseconds(120));
  auto second = node->telemetry();
  h = find(second, 0);
  ASSERT_TRUE(h->gr_engine_active.has_value());
  EXPECT_DOUBLE_EQ(*h->gr_engine_active, 0.64);
  EXPECT_DOUBLE_EQ(*h->tensor_active, 0.37);
  EXPECT_DOUBLE_EQ(*h->dram_active, 0.48);
  EXPECT_DOUBLE_EQ(*h->pcie_tx_bytes_per_s, 100.0 * 1048576);
  EXPECT_DOUBLE_EQ(*h->pcie_rx_bytes_per_s, 200.0 * 1048576);
  EXPECT_GE(*h->energy_mj, *find(first, 0)->energy_mj);
  EXPECT_FALSE(find(second, 1)->gr_engine_active.has_value());  // no GPM before Hopper
}

TEST(FakeTelemetry, ValuesChangeOverTime) {
  FakeNodeFile f("gpus:\n  - model: L4\n    telemetry: {gpuUtil: {min: 0, max: 100, periodSeconds: 0.4}}\n");
  auto node = open_fake();
  ASSERT_TRUE(node);
  std::set<unsigned> seen;
  for (int i = 0; i < 12; ++i) {
    seen.insert(*find(node->telemetry(), 0)->gpu_util_pct);
    std::this_thread::sleep_for(std::chrono::milliseconds(35));
  }
  EXPECT_GE(seen.size(), 4u);
}

TEST(FakeTelemetry, CountersNeverGoBackwards) {
  FakeNodeFile f(
      "gpus:\n  - model: H100-SXM-80GB\n    telemetry: {powerW: {min: 100, max: 700, periodSeconds: 0.3},\n"
      "                nvlinkTxKiBps: {min: 0, max: 1000000, periodSeconds: 0.2}, nvlinkRxKiBps: 5}\n");
  auto node = open_fake();
  ASSERT_TRUE(node);
  uint64_t energy = 0, tx = 0;
  for (int i = 0; i < 30; ++i) {
    const auto ts = node->telemetry();
    const auto* t = find(ts, 0);
    ASSERT_TRUE(t->energy_mj && t->nvlink_tx_kib);
    EXPECT_GE(*t->energy_mj, energy);
    EXPECT_GE(*t->nvlink_tx_kib, tx);
    energy = *t->energy_mj;
    tx = *t->nvlink_tx_kib;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

TEST(FakeTelemetry, MigGpuAndInstances) {
  FakeNodeFile f(
      "gpus:\n  - model: A100-SXM4-80GB\n    mig: {instances: [{profile: 3g.40gb}, {profile: 3g.40gb}]}\n"
      "    processes: [{pid: 11, usedMemoryMiB: 5000, gpuInstanceId: 2}]\n");
  auto node = open_fake();
  ASSERT_TRUE(node);
  auto ts = node->telemetry();
  const auto* parent = find(ts, 0);
  ASSERT_NE(parent, nullptr);
  EXPECT_FALSE(parent->gpu_util_pct.has_value());  // not supported on MIG-enabled GPUs
  EXPECT_FALSE(parent->remapped_rows_correctable.has_value());
  EXPECT_TRUE(parent->gpu_temp_c.has_value());
  const auto* gi2 = find(ts, 0, 2u);
  ASSERT_NE(gi2, nullptr);
  EXPECT_EQ(gi2->fb_total_mib, 40192u);
  EXPECT_EQ(gi2->fb_used_mib, 5000u);
  EXPECT_EQ(find(ts, 0, 1u)->fb_used_mib, 0u);
}

TEST(FakeProcesses, PidsMemoryAndUtilization) {
  FakeNodeFile f(
      "gpus:\n"
      "  - model: L4\n    processes: [{pid: 4242, usedMemoryMiB: 1024, smUtil: 55, memUtil: 12}, {pid: 4243}]\n"
      "  - model: H100-SXM-80GB\n    mig: {instances: [{profile: 7g.80gb}]}\n"
      "    processes: [{pid: 900, usedMemoryMiB: 10, gpuInstanceId: 0}]\n");
  auto node = open_fake();
  ASSERT_TRUE(node);
  auto ps = node->processes(0);
  ASSERT_TRUE(ps) << ps.error().message;
  ASSERT_EQ(ps->size(), 2u);
  EXPECT_EQ((*ps)[0].pid, 4242u);
  EXPECT_EQ((*ps)[0].used_memory_bytes, 1024ull << 20);
  EXPECT_FALSE((*ps)[0].gpu_instance_id.has_value());
  auto mig = node->processes(1);
  ASSERT_TRUE(mig);
  ASSERT_EQ(mig->size(), 1u);
  EXPECT_EQ((*mig)[0].gpu_instance_id, 0u);
  EXPECT_EQ((*mig)[0].compute_instance_id, 0u);

  auto util = node->process_utilization(0, 0);
  ASSERT_TRUE(util) << util.error().message;
  ASSERT_EQ(util->size(), 2u);
  EXPECT_EQ((*util)[0].pid, 4242u);
  EXPECT_EQ((*util)[0].sm_util, 55u);
  EXPECT_EQ((*util)[0].mem_util, 12u);
  // Nothing newer than the last sample seen.
  auto none = node->process_utilization(0, (*util)[0].timestamp_us);
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->empty());
  auto on_mig = node->process_utilization(1, 0);
  ASSERT_FALSE(on_mig);
  EXPECT_EQ(on_mig.error().code, ErrorCode::kNotSupported);
  EXPECT_FALSE(node->processes(7));  // no such GPU
}

TEST(FakeFaults, LostGpuDoesNotStopTheOthers) {
  FakeNodeFile f("preset: pcie-l4-4\nfaults:\n  lost: [1]\n");
  auto node = open_fake();
  ASSERT_TRUE(node);
  auto inv = node->inventory();
  ASSERT_TRUE(inv);
  ASSERT_EQ(inv->gpus.size(), 4u);
  EXPECT_TRUE(gpu(*inv, 1).lost);
  EXPECT_NE(gpu(*inv, 1).error->find("GPU_IS_LOST"), std::string::npos);
  ASSERT_EQ(inv->errors.size(), 1u);
  EXPECT_TRUE(inv->errors[0].starts_with("GPU 1: ")) << inv->errors[0];
  for (unsigned i : {0u, 2u, 3u}) {
    EXPECT_FALSE(gpu(*inv, i).lost);
    EXPECT_EQ(gpu(*inv, i).name, "NVIDIA L4");
  }
  EXPECT_EQ(inv->topology[0][1], Link::kUnknown);
  EXPECT_EQ(inv->topology[0][2], Link::kSystem);

  auto ts = node->telemetry();
  EXPECT_TRUE(find(ts, 1)->lost);
  ASSERT_FALSE(find(ts, 1)->errors.empty());
  EXPECT_EQ(find(ts, 1)->errors[0].code, nvml::kErrorGpuIsLost);
  EXPECT_FALSE(find(ts, 1)->gpu_temp_c.has_value());
  for (unsigned i : {0u, 2u, 3u}) {
    EXPECT_FALSE(find(ts, i)->lost);
    EXPECT_TRUE(find(ts, i)->gpu_temp_c.has_value());
  }
  auto ps = node->processes(1);
  ASSERT_FALSE(ps);
  EXPECT_EQ(ps.error().code, ErrorCode::kGpuLost);
  EXPECT_NE(inventory_table(*inv).find("GPU 1: UNAVAILABLE"), std::string::npos);
}

TEST(FakeFaults, GpuLostWhileRunningAndRecovered) {
  FakeNodeFile f("preset: pcie-t4-2\n");
  auto node = open_fake();
  ASSERT_TRUE(node);
  EXPECT_FALSE(find(node->telemetry(), 0)->lost);
  f.rewrite("preset: pcie-t4-2\nfaults: {lost: [0]}\n");
  auto ts = node->telemetry();
  EXPECT_TRUE(find(ts, 0)->lost);
  EXPECT_FALSE(find(ts, 1)->lost);
  f.rewrite("preset: pcie-t4-2\n");
  EXPECT_FALSE(find(node->telemetry(), 0)->lost);
}

TEST(FakeFaults, OneFailingCallIsRecordedAndTheRestIsRead) {
  FakeNodeFile f(
      "preset: pcie-t4-2\nfaults:\n  calls:\n    - {call: nvmlDeviceGetPowerUsage, gpu: 0, error: UNKNOWN}\n"
      "    - {call: nvmlDeviceGetSerial, error: NO_PERMISSION}\n");
  auto node = open_fake();
  ASSERT_TRUE(node);
  auto ts = node->telemetry();
  const auto* g0 = find(ts, 0);
  EXPECT_FALSE(g0->power_w.has_value());
  ASSERT_EQ(g0->errors.size(), 1u);
  EXPECT_EQ(g0->errors[0].call, "nvmlDeviceGetPowerUsage");
  EXPECT_EQ(g0->errors[0].code, nvml::kErrorUnknown);
  EXPECT_TRUE(g0->gpu_temp_c.has_value());
  EXPECT_TRUE(find(ts, 1)->power_w.has_value());
  auto inv = node->inventory();
  ASSERT_TRUE(inv);
  EXPECT_FALSE(gpu(*inv, 0).serial.has_value());
  EXPECT_EQ(gpu(*inv, 0).name, "Tesla T4");
}

TEST(FakeFaults, HandleFailureForOneGpu) {
  FakeNodeFile f(
      "preset: pcie-l4-4\nfaults:\n  calls: [{call: nvmlDeviceGetHandleByIndex_v2, gpu: 2, error: GPU_IS_LOST}]\n");
  auto node = open_fake();
  ASSERT_TRUE(node);
  auto inv = node->inventory();
  ASSERT_TRUE(inv);
  EXPECT_TRUE(gpu(*inv, 2).lost);
  EXPECT_EQ(gpu(*inv, 3).name, "NVIDIA L4");
  EXPECT_TRUE(find(node->telemetry(), 2)->lost);
}

struct InitCase {
  const char* code;
  ErrorCode expected;
  const char* words;
};

class FakeInitFailure : public ::testing::TestWithParam<InitCase> {};

TEST_P(FakeInitFailure, ReportedInWordsAUserCanActOn) {
  FakeNodeFile f(std::string("preset: pcie-t4-2\nfaults: {init: ") + GetParam().code + "}\n");
  auto node = NodeGpus::open(kgpu::testing::fake_library());
  ASSERT_FALSE(node);
  EXPECT_EQ(node.error().code, GetParam().expected);
  EXPECT_NE(node.error().message.find(GetParam().words), std::string::npos) << node.error().message;
  EXPECT_NE(node.error().message.find(GetParam().code), std::string::npos) << node.error().message;
}

INSTANTIATE_TEST_SUITE_P(
    Codes, FakeInitFailure,
    ::testing::Values(InitCase{"DRIVER_NOT_LOADED", ErrorCode::kUnavailable, "kernel driver is not loaded"},
                      InitCase{"LIB_RM_VERSION_MISMATCH", ErrorCode::kUnavailable, "Driver/library version mismatch"},
                      InitCase{"NO_PERMISSION", ErrorCode::kPermissionDenied, "/dev/nvidia"},
                      InitCase{"UNKNOWN", ErrorCode::kInternal, "failed to initialize NVML"}),
    [](const ::testing::TestParamInfo<InitCase>& p) { return std::string(p.param.code); });

TEST(FakeConfig, BadNodeFileIsReportedThroughNvmlErrorString) {
  FakeNodeFile f("gpus:\n  - model: V100\n");
  auto node = NodeGpus::open(kgpu::testing::fake_library());
  ASSERT_FALSE(node);
  EXPECT_NE(node.error().message.find("unknown GPU model 'V100'"), std::string::npos) << node.error().message;
  EXPECT_NE(node.error().message.find(f.path() + ":2"), std::string::npos) << node.error().message;
}

TEST(FakeConfig, EmptyUnreadableOrBinaryNodeFilesAreErrorsNotTheDefaultNode) {
  struct Case {
    std::string content;
    std::string words;
  };
  for (const auto& c : {Case{"", "the node description is empty"}, Case{"# nothing yet\n", "is empty"},
                        Case{std::string("preset: pcie-t4-2\ngpus: [{model: T4\0}]\n", 36), "NUL byte (\\0) at line 2, column 18"}}) {
    FakeNodeFile f(c.content);
    auto node = NodeGpus::open(kgpu::testing::fake_library());
    ASSERT_FALSE(node) << "content: " << c.content;
    EXPECT_NE(node.error().message.find(c.words), std::string::npos) << node.error().message;
    EXPECT_NE(node.error().message.find(f.path()), std::string::npos) << node.error().message;
  }
  // A directory where the file should be.
  FakeNodeFile f("preset: pcie-t4-2\n");
  std::filesystem::remove(f.path());
  std::filesystem::create_directory(f.path());
  auto node = NodeGpus::open(kgpu::testing::fake_library());
  std::filesystem::remove(f.path());
  ASSERT_FALSE(node);
  EXPECT_NE(node.error().message.find("is a directory"), std::string::npos) << node.error().message;
}

TEST(FakeConfig, BadRewriteKeepsTheLastGoodNode) {
  FakeNodeFile f("preset: pcie-t4-2\ngpus: [{telemetry: {gpuTemp: 50}}]\n");
  auto node = open_fake();
  ASSERT_TRUE(node);
  EXPECT_EQ(find(node->telemetry(), 0)->gpu_temp_c, 50u);
  f.rewrite("preset: pcie-t4-2\ngpus: [{telemetry: {gpuTemp: [broken}}]\n");
  EXPECT_EQ(find(node->telemetry(), 0)->gpu_temp_c, 50u);
  f.rewrite("preset: pcie-t4-2\ngpus: [{telemetry: {gpuTemp: 70}}]\n");
  EXPECT_EQ(find(node->telemetry(), 0)->gpu_temp_c, 70u);
}

TEST(FakeConfig, MigLayoutChangeAtRunTime) {
  FakeNodeFile f("gpus:\n  - model: H100-SXM-80GB\n    mig: {instances: [{profile: 7g.80gb}]}\n");
  auto node = open_fake();
  ASSERT_TRUE(node);
  auto before = node->inventory();
  ASSERT_TRUE(before);
  ASSERT_EQ(gpu(*before, 0).mig_devices.size(), 1u);
  f.rewrite("gpus:\n  - model: H100-SXM-80GB\n    mig: {instances: [{profile: 3g.40gb}, {profile: 3g.40gb}]}\n");
  auto after = node->inventory();
  ASSERT_TRUE(after);
  ASSERT_EQ(gpu(*after, 0).mig_devices.size(), 2u);
  EXPECT_EQ(gpu(*after, 0).mig_devices[1].placement_start, 4u);
  EXPECT_EQ(gpu(*after, 0).uuid, gpu(*before, 0).uuid);
}

TEST(FakeConfig, EmbeddedDefaultWithoutConfig) {
  unsetenv("KGPU_FAKE_NVML_CONFIG");
  auto node = open_fake();
  ASSERT_TRUE(node);
  auto inv = node->inventory();
  ASSERT_TRUE(inv);
  EXPECT_EQ(inv->gpus.size(), 8u);
  EXPECT_EQ(gpu(*inv, 0).name, "NVIDIA H100 80GB HBM3");
}

TEST(MissingSymbols, ReadAsNotSupportedNeverACrash) {
  auto lib = nvml::Library::open(KGPU_MINIMAL_NVML);
  ASSERT_TRUE(lib) << lib.error().message;
  EXPECT_GT((*lib)->missing_symbols(), 50);
  auto node = NodeGpus::open(KGPU_MINIMAL_NVML);
  ASSERT_TRUE(node) << node.error().message;
  auto inv = (*node)->inventory();
  ASSERT_TRUE(inv) << inv.error().message;
  ASSERT_EQ(inv->gpus.size(), 1u);
  const auto& g = gpu(*inv, 0);
  EXPECT_EQ(g.name, "Minimal GPU");
  EXPECT_FALSE(g.memory_total_mib.has_value());
  EXPECT_FALSE(g.mig_capable);
  EXPECT_FALSE(g.error.has_value()) << *g.error;
  auto ts = (*node)->telemetry();
  ASSERT_EQ(ts.size(), 1u);
  EXPECT_FALSE(ts[0].gpu_temp_c.has_value());
  EXPECT_TRUE(ts[0].errors.empty());
  auto ps = (*node)->processes(0);
  ASSERT_FALSE(ps);
  EXPECT_EQ(ps.error().code, ErrorCode::kNotSupported);
  auto watcher = EventWatcher::start(**node, [](const Event&) {});
  ASSERT_FALSE(watcher);
  EXPECT_EQ(watcher.error().code, ErrorCode::kNotSupported);
}

TEST(ThreadSafety, ConcurrentInventoryTelemetryAndRewrites) {
  FakeNodeFile f("preset: hgx-h100-8\n");
  auto node = open_fake();
  ASSERT_TRUE(node);
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int k = 0; k < 3; ++k) {
    threads.emplace_back([&] {
      while (!stop) {
        auto inv = node->inventory();
        if (!inv || inv->gpus.size() != 8) ++failures;
        if (node->telemetry().size() < 8) ++failures;
      }
    });
  }
  for (int i = 0; i < 20; ++i) {
    f.rewrite(i % 2 == 0 ? "preset: hgx-h100-8\ngpus: [{index: 7, mig: {instances: [{profile: 7g.80gb}]}}]\n"
                         : "preset: hgx-h100-8\n");
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  stop = true;
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
}

}  // namespace
}  // namespace kgpu::gpu
