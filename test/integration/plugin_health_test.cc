// The device-plugin manager's health rules in-process, on the fake NVML and a FakeClock: XIDs and
// lost GPUs mark devices Unhealthy at once (real event thread), and the recovery rule's minutes
// pass by advancing the clock, so "still Unhealthy after an hour" is checked without waiting.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <thread>

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

}  // namespace
}  // namespace kgpu::agent
