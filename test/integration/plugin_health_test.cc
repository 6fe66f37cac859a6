// The device-plugin manager's health rules in-process, on the fake NVML and a FakeClock: XIDs and
// lost GPUs mark devices Unhealthy at once (real event thread), and the recovery rule's minutes
// pass by advancing the clock, so "still Unhealthy after an hour" is checked without waiting.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "agent/health.h"
#include "agent/plugin_manager.h"
#include "common/clock.h"
#include "test_env.h"

namespace kgpu::agent {
namespace {

using namespace std::chrono_literals;
using testing::eventually;
using testing::FakeNodeFile;
using testing::TempDir;

constexpr const char* kL4 = "preset: pcie-l4-4\n";


class PluginHealth : public ::testing::Test {
 protected:
  void start(std::chrono::milliseconds recovery) {
    node_ = testing::open_fake();
    ASSERT_NE(node_, nullptr);
    std::filesystem::create_directories(dir_.path() / "dp");
    DevicePluginOptions o;
    o.plugin_dir = (dir_.path() / "dp").string();
    o.cdi_root = "";
    o.labels = false;
    o.proc_root = (dir_.path() / "proc").string();
    o.pci_devices_dir = (dir_.path() / "pci").string();
    o.health_recovery = recovery;
    o.clock = &clock_;
    manager_ = std::make_unique<DevicePluginManager>(*node_, o);
    auto ok = manager_->start();
    ASSERT_TRUE(ok) << ok.error().message;
    ASSERT_EQ(healthy(), 4u);
  }
  void TearDown() override {
    if (manager_) manager_->stop();
  }

  size_t healthy() const {
    const auto s = manager_->status();
    return s.resources.empty() ? 0 : s.resources[0].healthy;
  }
  // Moves time on by `d` and waits for the health round that the move made due.
  void advance_through_health_check(std::chrono::steady_clock::duration d) {
    const uint64_t before = manager_->status().health_checks;
    clock_.advance(d);
    ASSERT_TRUE(eventually([&] { return manager_->status().health_checks > before; })) << "no health round ran";
  }

  FakeClock clock_;
  TempDir dir_;
  FakeNodeFile fake_{std::string(kL4) + "faults:\n  xids: []\n"};
  std::unique_ptr<gpu::NodeGpus> node_;
  std::unique_ptr<DevicePluginManager> manager_;
};

TEST_F(PluginHealth, XidMarksUnhealthyAndTheRecoveryRuleReturnsItAfterTheQuietPeriod) {
  start(10min);
  // An application XID (31) is ignored; a contained ECC error (94) on GPU 2 is not. Events arrive
  // in order, so once 94 is seen, 31 was seen before it and left the devices alone.
  fake_.rewrite(std::string(kL4) + "faults:\n  xids:\n  - {gpu: 2, xid: 31}\n  - {gpu: 2, xid: 94}\n");
  ASSERT_TRUE(eventually([&] { return healthy() == 3; })) << healthy();
  advance_through_health_check(9min);
  EXPECT_EQ(healthy(), 3u) << "9 of the 10 quiet minutes: still Unhealthy";
  advance_through_health_check(1min + 1s);
  EXPECT_EQ(healthy(), 4u) << "10 quiet minutes and the GPU answers: Healthy again";
  EXPECT_NE(manager_->metrics_text().find("kgpu_device_plugin_recoveries_total 1\n"), std::string::npos);
}

TEST_F(PluginHealth, AnXidThatNeedsAResetIsNotRecoveredByWaiting) {
  start(2s);
  fake_.rewrite(std::string(kL4) + "faults:\n  xids:\n  - {gpu: 1, xid: 48}\n");
  ASSERT_TRUE(eventually([&] { return healthy() == 3; })) << healthy();
  advance_through_health_check(1h);
  advance_through_health_check(1h);
  EXPECT_EQ(healthy(), 3u);
  EXPECT_NE(manager_->metrics_text().find("kgpu_device_plugin_recoveries_total 0\n"), std::string::npos);
}

TEST_F(PluginHealth, RecoveryZeroKeepsALostGpuUnhealthyAfterItAnswersAgain) {
  start(0ms);
  fake_.rewrite(std::string(kL4) + "faults:\n  lost: [3]\n");
  advance_through_health_check(5s);  // the probe finds GPU 3 gone
  ASSERT_EQ(healthy(), 3u);
  fake_.rewrite(kL4);
  advance_through_health_check(1h);
  EXPECT_EQ(healthy(), 3u) << "--health-recovery 0 is NVIDIA's rule: never Healthy again";
}

// The health book both GPU APIs use, on its own: a GPU with two MIG devices, probes written by hand.
class HealthBookTest : public ::testing::Test {
 protected:
  HealthBookTest() {
    gpu::GpuInfo g;
    g.index = 0;
    g.uuid = "GPU-0";
    gpu::MigDevice a, b;
    a.uuid = "MIG-a";
    a.gpu_instance_id = 1;
    b.uuid = "MIG-b";
    b.gpu_instance_id = 2;
    g.mig_devices = {a, b};
    inv_.gpus.push_back(g);
  }
  gpu::NodeGpus::Probe answers() const { return {"GPU-0", false, std::nullopt, false}; }
  gpu::NodeGpus::Probe lost() const { return {"", true, std::string("GPU_IS_LOST"), std::nullopt}; }
  // One health round: the probe, then the recovery rule.
  void round(HealthBook& b, const gpu::NodeGpus::Probe& p) {
    std::set<std::string> answering;
    if (b.record_probe("GPU-0", 0, p)) answering.insert("GPU-0");
    b.recover(inv_, answering);
  }

  FakeClock clock_;
  gpu::Inventory inv_;
};

TEST_F(HealthBookTest, MigDevicesFollowTheirGpuAndTheWorseFaultSpeaks) {
  HealthBook b({"", "", 10min}, clock_);
  gpu::Event e;
  e.gpu_index = 0;
  e.uuid = "GPU-0";
  e.xid = 94;
  e.gpu_instance_id = 2;
  ASSERT_TRUE(b.on_event(e, inv_));  // the MIG device of GPU instance 2 only
  EXPECT_TRUE(b.device("MIG-a", "GPU-0").healthy);
  const auto own = b.device("MIG-b", "GPU-0");
  EXPECT_FALSE(own.healthy);
  EXPECT_EQ(own.reason, "XID 94");
  EXPECT_FALSE(own.needs_reset);
  const auto first = own.since;

  clock_.advance(1min);
  e.gpu_instance_id.reset();
  e.xid = 79;  // the whole GPU, needing a reset: both MIG devices follow it
  ASSERT_TRUE(b.on_event(e, inv_));
  EXPECT_TRUE(b.device("GPU-0").needs_reset);
  const auto a = b.device("MIG-a", "GPU-0");
  EXPECT_FALSE(a.healthy);
  EXPECT_TRUE(a.needs_reset);
  EXPECT_EQ(a.reason, "XID 79");
  const auto both = b.device("MIG-b", "GPU-0");
  EXPECT_TRUE(both.needs_reset) << "the reset-class fault is the worse one";
  EXPECT_EQ(both.since, first) << "unhealthy since the earlier fault";

  e.xid = 31;  // ignored
  EXPECT_FALSE(b.on_event(e, inv_));
  EXPECT_EQ(b.unhealthy_transitions(), 2u);

  // Lost, then back: the reset happened; quiet for 10 minutes while answering: all Healthy.
  round(b, lost());
  EXPECT_TRUE(b.device("MIG-a", "GPU-0").lost);
  round(b, answers());
  EXPECT_FALSE(b.device("MIG-a", "GPU-0").lost);
  EXPECT_FALSE(b.device("MIG-a", "GPU-0").healthy);
  clock_.advance(10min + 1s);
  round(b, answers());
  EXPECT_TRUE(b.device("GPU-0").healthy);
  EXPECT_TRUE(b.device("MIG-a", "GPU-0").healthy);
  EXPECT_TRUE(b.device("MIG-b", "GPU-0").healthy);
  EXPECT_EQ(b.recoveries(), 2u);
}

TEST_F(HealthBookTest, AResetClassFaultWaitsForTheGpuToGoAndComeBack) {
  HealthBook b({"", "", 1s}, clock_);
  gpu::Event e;
  e.gpu_index = 0;
  e.uuid = "GPU-0";
  e.xid = 48;
  ASSERT_TRUE(b.on_event(e, inv_));
  clock_.advance(1h);
  round(b, answers());
  EXPECT_FALSE(b.healthy("GPU-0"));
  round(b, lost());
  round(b, answers());
  EXPECT_FALSE(b.healthy("GPU-0")) << "the probe's failure is a fault: quiet for 1 s first";
  clock_.advance(2s);
  round(b, answers());
  EXPECT_TRUE(b.healthy("GPU-0"));
}

TEST_F(HealthBookTest, DisableAndEnableLists) {
  EXPECT_FALSE(HealthBook({"XIDs", "", 1s}, clock_).xid_health());
  EXPECT_FALSE(HealthBook({"all", "", 1s}, clock_).xid_health());
  HealthBook b({"94, x, 95", "31", 1s}, clock_);
  EXPECT_TRUE(b.xid_health());
  EXPECT_TRUE(b.ignored_xids().contains(94));
  EXPECT_TRUE(b.ignored_xids().contains(95));
  EXPECT_TRUE(b.ignored_xids().contains(13));
  EXPECT_FALSE(b.ignored_xids().contains(31));
}

}  // namespace
}  // namespace kgpu::agent
