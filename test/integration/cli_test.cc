// The kgpu binary end to end: flags, environment, exit codes, JSON.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_env.h"

namespace kgpu {
namespace {

using kgpu::testing::FakeNodeFile;
using kgpu::testing::run_command;

std::string kgpu_bin() { return KGPU_BINARY; }

std::string with_fake(const std::string& args) {
  return kgpu_bin() + " " + args + " --nvml-library " + kgpu::testing::fake_library();
}

TEST(Cli, InventoryJsonOnShippedExample) {
  setenv("KGPU_FAKE_NVML_CONFIG", (std::string(KGPU_SOURCE_DIR) + "/examples/nodes/dgx-h100.yaml").c_str(), 1);
  auto out = run_command(with_fake("inventory --json"));
  unsetenv("KGPU_FAKE_NVML_CONFIG");
  ASSERT_EQ(out.status, 0) << out.text;
  auto j = nlohmann::json::parse(out.text);
  ASSERT_EQ(j["gpus"].size(), 8u);
  EXPECT_EQ(j["gpus"][0]["name"], "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(j["gpus"][0]["pci"]["busId"], "00000000:18:00.0");
  EXPECT_EQ(j["gpus"][7]["mig"]["enabled"], true);
  ASSERT_EQ(j["gpus"][7]["mig"]["devices"].size(), 4u);
  EXPECT_EQ(j["gpus"][7]["mig"]["devices"][0]["profile"], "3g.40gb");
  EXPECT_EQ(j["topology"][0][7], "nvlink");
  EXPECT_EQ(j["cudaDriverVersion"], "13.0");
}

TEST(Cli, LibraryFromEnvironmentVariable) {
  FakeNodeFile f("preset: pcie-t4-2\n");
  auto out = run_command("KGPU_NVML_LIBRARY=" + kgpu::testing::fake_library() + " " + kgpu_bin() + " inventory");
  ASSERT_EQ(out.status, 0) << out.text;
  EXPECT_NE(out.text.find("GPU 1: Tesla T4 (UUID: GPU-"), std::string::npos) << out.text;
  EXPECT_NE(out.text.find("PHB"), std::string::npos) << out.text;
}

TEST(Cli, NoDriverIsAClearError) {
  auto out = run_command(kgpu_bin() + " inventory --nvml-library /nonexistent/libnvidia-ml.so.1");
  EXPECT_EQ(out.status, 1);
  EXPECT_NE(out.text.find("no NVIDIA driver seems to be installed"), std::string::npos) << out.text;
}

TEST(Cli, DriverNotLoaded) {
  FakeNodeFile f("preset: pcie-t4-2\nfaults: {init: DRIVER_NOT_LOADED}\n");
  auto out = run_command(with_fake("inventory"));
  EXPECT_EQ(out.status, 1);
  EXPECT_NE(out.text.find("the NVIDIA kernel driver is not loaded"), std::string::npos) << out.text;
}

TEST(Cli, TelemetryProcessesAndEvents) {
  FakeNodeFile f(
      "preset: pcie-t4-2\ngpus: [{telemetry: {gpuTemp: 66}, processes: [{pid: 77, usedMemoryMiB: 300}]}]\n"
      "faults: {xids: [{gpu: 1, xid: 31}]}\n");
  auto t = run_command(with_fake("telemetry --json --samples 1"));
  ASSERT_EQ(t.status, 0) << t.text;
  auto j = nlohmann::json::parse(t.text);
  EXPECT_EQ(j[0]["gpuTempC"], 66);
  EXPECT_TRUE(j[0]["memoryTempC"].is_null());
  auto p = run_command(with_fake("processes --json"));
  ASSERT_EQ(p.status, 0) << p.text;
  auto pj = nlohmann::json::parse(p.text);
  ASSERT_EQ(pj.size(), 1u);
  EXPECT_EQ(pj[0]["pid"], 77);
  EXPECT_EQ(pj[0]["usedMemoryBytes"], 300 << 20);
  auto e = run_command(with_fake("events --duration 0.3"));
  EXPECT_EQ(e.status, 0) << e.text;
  EXPECT_TRUE(e.text.empty()) << "the XID in the file at start already happened: " << e.text;
}

TEST(Cli, UsageErrors) {
  EXPECT_EQ(run_command(kgpu_bin()).status, 2);
  EXPECT_EQ(run_command(kgpu_bin() + " inventory --bogus").status, 2);
  auto help = run_command(kgpu_bin() + " --help");
  EXPECT_EQ(help.status, 0);
  EXPECT_NE(help.text.find("inventory"), std::string::npos);
}

TEST(Cli, VersionWithoutSubcommand) {
  auto out = run_command(kgpu_bin() + " --version");
  EXPECT_EQ(out.status, 0) << out.text;
  EXPECT_EQ(out.text, "kgpu " KGPU_VERSION "\n");
}

// `kgpu mig` across processes: the fake keeps its MIG layout in $KGPU_FAKE_NVML_STATE as a driver
// keeps it across runs, so apply, assert and export see each other's work.
TEST(Cli, MigApplyAssertAndExportAcrossRuns) {
  kgpu::testing::TempDir dir;
  FakeNodeFile f("preset: hgx-h100-8\ngpus:\n  - {index: 5, processes: [{pid: 42, usedMemoryMiB: 10}]}\n");
  const std::string env = "KGPU_FAKE_NVML_STATE=" + (dir.path() / "mig.state").string() + " ";
  auto mig = [&](const std::string& args) { return run_command(env + with_fake("mig " + args)); };
  auto out = mig("assert -c all-balanced");
  EXPECT_EQ(out.status, 1) << out.text;
  EXPECT_NE(out.text.find("selected configuration not currently applied"), std::string::npos) << out.text;
  const std::string config = dir.write("mig.yaml",
                                       "version: v1\nmig-configs:\n  split:\n    - devices: [0, 1, 5]\n      mig-enabled: true\n"
                                       "      mig-devices: {\"3g.40gb\": 2}\n");
  out = mig("apply -f " + config + " -c split");
  EXPECT_EQ(out.status, 1) << out.text;  // GPU 5 has a process: its mode change waits for a reset
  EXPECT_NE(out.text.find("GPU 0: MIG off -> MIG on: 3g.40gb, 3g.40gb"), std::string::npos) << out.text;
  EXPECT_NE(out.text.find("GPU 5: FAILED: GPU 5: MIG mode on waits for a GPU reset, which failed"), std::string::npos)
      << out.text;
  // Another run sees the layout: assert holds for GPUs 0 and 1, applying again changes nothing there.
  out = mig("apply -f " + config + " -c split --dry-run");
  EXPECT_NE(out.text.find("GPU 0: MIG on: 3g.40gb, 3g.40gb (unchanged)"), std::string::npos) << out.text;
  EXPECT_NE(out.text.find("GPU 1: MIG on: 3g.40gb, 3g.40gb (unchanged)"), std::string::npos) << out.text;
  out = mig("export");
  ASSERT_EQ(out.status, 0) << out.text;
  EXPECT_NE(out.text.find("    - devices: [0]\n      mig-enabled: true\n      mig-devices:\n        \"3g.40gb\": 2\n"),
            std::string::npos)
      << out.text;
  out = mig("apply -f " + config + " -c nope");
  EXPECT_EQ(out.status, 2);
  EXPECT_NE(out.text.find("no config named 'nope' (known: split)"), std::string::npos) << out.text;
}

}  // namespace
}  // namespace kgpu