#include "gpu/report.h"

#include <gtest/gtest.h>

namespace kgpu::gpu {
namespace {

Inventory two_gpus() {
  Inventory inv;
  inv.driver_version = "580.105.08";
  inv.cuda_driver_version = 12040;
  for (unsigned i = 0; i < 2; ++i) {
    GpuInfo g;
    g.index = i;
    g.uuid = "GPU-" + std::to_string(i);
    g.name = "NVIDIA H100 80GB HBM3";
    g.memory_total_mib = 81559;
    g.pci.device_id = 0x2330;
    g.pci.vendor_id = 0x10de;
    g.mig_capable = true;
    g.mig_enabled = i == 1;
    g.mig_pending_enabled = i == 1;
    g.nvlinks.push_back({0, "00000000:05:00.0", std::nullopt});
    inv.gpus.push_back(g);
  }
  MigDevice m;
  m.uuid = "MIG-x";
  m.profile = "3g.40gb";
  m.gpu_instance_id = 2;
  m.memory_mib = 40448;
  m.sm_count = 60;
  m.placement_start = 4;
  m.placement_size = 4;
  inv.gpus[1].mig_devices.push_back(m);
  inv.topology = {{Link::kSelf, Link::kNvLink}, {Link::kNvLink, Link::kSelf}};
  return inv;
}

TEST(Report, CudaVersion) {
  EXPECT_EQ(cuda_version_string(12040), "12.4");
  EXPECT_EQ(cuda_version_string(13000), "13.0");
  EXPECT_EQ(cuda_version_string(11080), "11.8");
}

TEST(Report, InventoryJsonFieldNames) {
  auto j = to_json(two_gpus());
  EXPECT_EQ(j["driverVersion"], "580.105.08");
  EXPECT_EQ(j["cudaDriverVersion"], "12.4");
  const auto& g = j["gpus"][1];
  EXPECT_EQ(g["pci"]["deviceId"], "0x2330");
  EXPECT_TRUE(g["numaNode"].is_null());  // not provided -> null, never 0
  EXPECT_EQ(g["mig"]["enabled"], true);
  EXPECT_EQ(g["mig"]["devices"][0]["profile"], "3g.40gb");
  EXPECT_EQ(g["mig"]["devices"][0]["placement"]["start"], 4);
  EXPECT_EQ(j["topology"][0][1], "nvlink");
  EXPECT_EQ(j["topology"][1][1], "self");
}

TEST(Report, InventoryTable) {
  const auto text = inventory_table(two_gpus());
  EXPECT_NE(text.find("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)"), std::string::npos) << text;
  EXPECT_NE(text.find("MIG 3g.40gb      Device  0: (UUID: MIG-x)  GI 2 CI 0  40448 MiB  60 SMs  slices 4-7"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("GPU0  X     NV1"), std::string::npos) << text;
}

TEST(Report, TelemetryUnsupportedIsNullNotZero) {
  Telemetry t;
  t.gpu_index = 3;
  t.gpu_temp_c = 0;  // a real zero
  auto j = to_json(t);
  EXPECT_EQ(j["gpuTempC"], 0);
  EXPECT_TRUE(j["memoryTempC"].is_null());
  const auto table = telemetry_table({t});
  EXPECT_NE(table.find("3            0     -"), std::string::npos) << table;
}

}  // namespace
}  // namespace kgpu::gpu
