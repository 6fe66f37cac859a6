// DCGM declarations and pure helpers: status names, field ids, -r parsing, the start-up line, and
// the fake DCGM's settings parser.
#include <gtest/gtest.h>

#include "config.h"
#include "gpu/dcgm/abi.h"
#include "gpu/dcgm/library.h"
#include "gpu/dcgm/profiler.h"
#include "metrics/dcgm_source.h"

namespace kgpu::dcgm {
namespace {

TEST(DcgmAbi, StatusNamesRoundTrip) {
  EXPECT_STREQ(return_name(kConnectionNotValid), "CONNECTION_NOT_VALID");
  EXPECT_STREQ(return_name(kProfilingNotSupported), "PROFILING_NOT_SUPPORTED");
  EXPECT_STREQ(return_name(-9999), "STATUS_-9999");
  EXPECT_EQ(return_from_name("DCGM_ST_GPU_IS_LOST"), kGpuIsLost);
  EXPECT_EQ(return_from_name("GPU_IS_LOST"), -18);
  EXPECT_EQ(return_from_name("NOPE"), std::nullopt);
}

TEST(DcgmAbi, ProfilingFieldIdsAreDcgmsOnes) {
  EXPECT_EQ(profiling_field_id("DCGM_FI_PROF_GR_ENGINE_ACTIVE"), 1001);
  EXPECT_EQ(profiling_field_id("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"), 1004);
  EXPECT_EQ(profiling_field_id("DCGM_FI_PROF_DRAM_ACTIVE"), 1005);
  EXPECT_EQ(profiling_field_id("DCGM_FI_PROF_PCIE_TX_BYTES"), 1009);
  EXPECT_EQ(profiling_field_id("DCGM_FI_PROF_NVLINK_RX_BYTES"), 1012);
  EXPECT_EQ(profiling_field_id("DCGM_FI_DEV_GPU_UTIL"), 0);
  EXPECT_STREQ(profiling_field_name(1002), "DCGM_FI_PROF_SM_ACTIVE");
  EXPECT_EQ(profiling_field_name(54), nullptr);
  EXPECT_TRUE(is_blank(kDoubleBlank + 2.0));
  EXPECT_FALSE(is_blank(0.99));
  EXPECT_TRUE(is_blank(static_cast<int64_t>(kInt64Blank + 3)));
  EXPECT_FALSE(is_blank(static_cast<int64_t>(1) << 40));
}

TEST(DcgmEndpoint, ParsesDcgmExporterForms) {
  auto e = parse_endpoint("");
  ASSERT_TRUE(e);
  EXPECT_TRUE(e->embedded);
  e = parse_endpoint("localhost:5555");
  ASSERT_TRUE(e);
  EXPECT_FALSE(e->embedded);
  EXPECT_EQ(e->address, "localhost:5555");
  EXPECT_EQ(e->describe(), "the DCGM host engine at localhost:5555");
  e = parse_endpoint("10.0.0.7");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->address, "10.0.0.7:5555");
  e = parse_endpoint("[::1]:6000");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->address, "[::1]:6000");
  e = parse_endpoint("unix:///run/nvidia/dcgm.sock");
  ASSERT_TRUE(e);
  EXPECT_TRUE(e->unix_socket);
  EXPECT_EQ(e->address, "/run/nvidia/dcgm.sock");
  e = parse_endpoint("tcp://nvidia-dcgm:5555");
  ASSERT_TRUE(e);
  EXPECT_FALSE(e->unix_socket);
  EXPECT_EQ(e->address, "nvidia-dcgm:5555");
  e = parse_endpoint("/var/run/dcgm.sock");
  ASSERT_TRUE(e);
  EXPECT_TRUE(e->unix_socket);
}

TEST(DcgmEndpoint, RejectsMalformedAddressesByName) {
  for (const auto& [in, why] : std::vector<std::pair<std::string, std::string>>{
           {"host:", "empty port"},
           {"host:99999", "port '99999' is not 1..65535"},
           {"host:5x", "port '5x' is not 1..65535"},
           {"::1:5555", "write an IPv6 address as [<address>]:<port>"},
           {"[::1", "unclosed '['"},
           {":5555", "no host"},
           {"unix://relative.sock", "a unix socket needs an absolute path"},
           {"a b:1", "not an address"},
           {"vsock://3:5555", "unsupported scheme 'vsock'"},
           {"tcp://", "no host"},
       }) {
    auto e = parse_endpoint(in);
    ASSERT_FALSE(e) << in;
    EXPECT_NE(e.error().message.find(why), std::string::npos) << in << ": " << e.error().message;
  }
}

gpu::GpuInfo gpu_info(unsigned index, const std::string& name, const std::string& arch, bool gpm) {
  gpu::GpuInfo g;
  g.index = index;
  g.uuid = "GPU-" + std::to_string(index);
  g.name = name;
  g.architecture_name = arch;
  g.gpm_supported = gpm;
  return g;
}

TEST(DcgmStartUp, NamesMissingFieldsPerGpuAndTheReason) {
  gpu::Inventory inv;
  inv.gpus = {gpu_info(0, "NVIDIA H100 80GB HBM3", "Hopper", true), gpu_info(1, "NVIDIA L4", "Ada Lovelace", false),
              gpu_info(2, "NVIDIA L4", "Ada Lovelace", false)};
  const std::vector<unsigned short> wanted = {kFieldProfGrEngineActive, kFieldProfSmActive};
  const std::string m = missing_fields_message(inv, wanted, "no libdcgm");
  EXPECT_NE(m.find("DCGM_FI_PROF_SM_ACTIVE not exported for GPU 0 (NVIDIA H100 80GB HBM3, Hopper)"), std::string::npos)
      << m;
  EXPECT_NE(m.find("DCGM_FI_PROF_GR_ENGINE_ACTIVE, DCGM_FI_PROF_SM_ACTIVE not exported for GPU 1 (NVIDIA L4, Ada "
                   "Lovelace), GPU 2 (NVIDIA L4, Ada Lovelace)"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("but is not available (no libdcgm)"), std::string::npos) << m;
  // GPM covers the five default profiling fields on Hopper: nothing to say.
  inv.gpus.resize(1);
  EXPECT_EQ(missing_fields_message(inv, {kFieldProfGrEngineActive, kFieldProfPcieRxBytes}, "x"), "");
  EXPECT_EQ(missing_fields_message(inv, {}, "x"), "");
}

TEST(DcgmStartUp, CountersNameTheWantedFields) {
  const auto ids = metrics::profiling_fields(metrics::default_counters());
  EXPECT_EQ(ids, (std::vector<unsigned short>{1001, 1004, 1005, 1009, 1010}));
}

TEST(FakeDcgmSettings, ParsesAnswersAndFaults) {
  auto s = fake_dcgm::parse_settings(
      "faults: {init: INIT_ERROR, read: DCGM_ST_TIMEOUT}\n"
      "gpus:\n"
      "  - index: 1\n"
      "    profiling: false\n"
      "    frozen: true\n"
      "    fields: {DCGM_FI_PROF_SM_ACTIVE: blank, DCGM_FI_PROF_DRAM_ACTIVE: 0.5,\n"
      "             DCGM_FI_PROF_PIPE_FP64_ACTIVE: {status: NO_DATA}}\n",
      "dcgm.yaml");
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->init_error, kInitError);
  EXPECT_EQ(s->read_error, kTimeout);
  const auto& g = s->gpus.at(1);
  EXPECT_FALSE(g.profiling);
  EXPECT_TRUE(g.frozen);
  EXPECT_EQ(g.answers.at(kFieldProfSmActive).kind, fake_dcgm::Answer::kBlank);
  EXPECT_DOUBLE_EQ(g.answers.at(kFieldProfDramActive).number, 0.5);
  EXPECT_EQ(g.answers.at(kFieldProfPipeFp64Active).status, kNoData);
}

TEST(FakeDcgmSettings, ParsesMigGpuInstances) {
  auto s = fake_dcgm::parse_settings(
      "faults: {hierarchy: NOT_SUPPORTED}\n"
      "gpus:\n"
      "  - index: 0\n"
      "    status: GPU_IS_LOST\n"
      "    instances:\n"
      "      - {gpuInstanceId: 3, status: NVML_ERROR}\n"
      "      - {gpuInstanceId: 9, profiling: false, frozen: true, fields: {DCGM_FI_PROF_SM_ACTIVE: 0.5}}\n",
      "dcgm.yaml");
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->hierarchy_error, kNotSupported);
  const auto& g = s->gpus.at(0);
  EXPECT_EQ(g.status, kGpuIsLost);
  ASSERT_EQ(g.instances.size(), 2u);
  EXPECT_EQ(g.instances.at(3).status, kNvmlError);
  EXPECT_TRUE(g.instances.at(3).profiling);
  EXPECT_FALSE(g.instances.at(9).profiling);
  EXPECT_TRUE(g.instances.at(9).frozen);
  EXPECT_DOUBLE_EQ(g.instances.at(9).answers.at(kFieldProfSmActive).number, 0.5);
}

TEST(FakeDcgmSettings, ErrorsNameFileLineAndField) {
  for (const auto& [text, why] : std::vector<std::pair<std::string, std::string>>{
           {"fautls: {}\n", "dcgm.yaml:1: fautls: unknown field"},
           {"faults: {init: OK}\n", "dcgm.yaml:1: faults.init: 'OK' is not a DCGM error status"},
           {"gpus:\n  - index: 0\n    fields: {DCGM_FI_DEV_GPU_UTIL: 1}\n",
            "dcgm.yaml:3: gpus[0].fields.DCGM_FI_DEV_GPU_UTIL: not a DCGM profiling field"},
           {"gpus:\n  - index: 0\n    fields: {DCGM_FI_PROF_SM_ACTIVE: lots}\n",
            "gpus[0].fields.DCGM_FI_PROF_SM_ACTIVE: 'lots' is not a number"},
           {"gpus:\n  - index: 40\n", "gpus[0].index: must be below 32"},
           {"gpus:\n  - profiling: false\n", "gpus[0].index: required"},
           {"gpus:\n  - index: 0\n    instances:\n      - {frozen: true}\n",
            "dcgm.yaml:4: gpus[0].instances[0].gpuInstanceId: required"},
           {"gpus:\n  - index: 0\n    instances:\n      - {gpuInstanceId: 15}\n",
            "gpus[0].instances[0].gpuInstanceId: must be at most 14"},
           {"gpus:\n  - index: 0\n    instances: {gpuInstanceId: 1}\n", "gpus[0].instances: expected a list"},
           {"gpus:\n  - index: 0\n    instances:\n      - {gpuInstanceId: 1, index: 2}\n",
            "gpus[0].instances[0].index: unknown field"},
           {"gpus:\n  - index: 0\n    instances:\n      - {gpuInstanceId: 1, status: OK}\n",
            "gpus[0].instances[0].status: 'OK' is not a DCGM error status"},
       }) {
    auto s = fake_dcgm::parse_settings(text, "dcgm.yaml");
    ASSERT_FALSE(s) << text;
    EXPECT_NE(s.error().message.find(why), std::string::npos) << s.error().message;
  }
  EXPECT_FALSE(fake_dcgm::parse_settings(std::string(2 << 20, 'a'), "big.yaml"));
}

}  // namespace
}  // namespace kgpu::dcgm
