// XID / ECC event delivery from the fake through gpu::EventWatcher.
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>

#include "test_env.h"

namespace kgpu::gpu {
namespace {

using kgpu::testing::FakeNodeFile;

class Collector {
 public:
  void operator()(const Event& e) {
    std::lock_guard lock(mu_);
    events_.push_back(e);
    cv_.notify_all();
  }
  // Waits until at least n events arrived (or 5 s); returns a copy.
  std::vector<Event> wait_for(size_t n) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(5), [&] { return events_.size() >= n; });
    return events_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Event> events_;
};

const char* kNode = "preset: hgx-h100-8\n";

TEST(Events, AppendedXidIsDeliveredWithGpuAndUuid) {
  FakeNodeFile f(std::string(kNode) + "faults:\n  xids: [{gpu: 0, xid: 13}]\n");  // already happened
  auto node = kgpu::testing::open_fake();
  ASSERT_TRUE(node);
  auto inv = node->inventory();
  ASSERT_TRUE(inv);
  Collector c;
  auto w = EventWatcher::start(*node, std::ref(c), std::chrono::milliseconds(100));
  ASSERT_TRUE(w) << w.error().message;
  EXPECT_TRUE((*w)->registration_errors().empty());
  f.rewrite(std::string(kNode) + "faults:\n  xids: [{gpu: 0, xid: 13}, {gpu: 3, xid: 79}, {gpu: 5, type: dbe}]\n");
  auto events = c.wait_for(2);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].kind, EventKind::kXid);
  EXPECT_EQ(events[0].gpu_index, 3u);
  EXPECT_EQ(events[0].xid, 79u);
  EXPECT_EQ(events[0].uuid, inv->gpus[3].uuid);
  EXPECT_EQ(events[1].kind, EventKind::kDoubleBitEcc);
  EXPECT_EQ(events[1].gpu_index, 5u);
  (*w)->stop();
}

TEST(Events, LosingAGpuRaisesXid79) {
  FakeNodeFile f(kNode);
  auto node = kgpu::testing::open_fake();
  ASSERT_TRUE(node);
  Collector c;
  auto w = EventWatcher::start(*node, std::ref(c), std::chrono::milliseconds(100));
  ASSERT_TRUE(w);
  f.rewrite(std::string(kNode) + "faults: {lost: [6]}\n");
  auto events = c.wait_for(1);
  ASSERT_GE(events.size(), 1u);
  EXPECT_EQ(events[0].xid, 79u);
  EXPECT_EQ(events[0].gpu_index, 6u);
}

TEST(Events, StopReturnsPromptlyWhileWaiting) {
  FakeNodeFile f(kNode);
  auto node = kgpu::testing::open_fake();
  ASSERT_TRUE(node);
  auto w = EventWatcher::start(
      *node, [](const Event&) {}, std::chrono::milliseconds(200));
  ASSERT_TRUE(w);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const auto t0 = std::chrono::steady_clock::now();
  (*w)->stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
}

TEST(Events, RegistrationSkipsALostGpu) {
  FakeNodeFile f("preset: pcie-l4-4\nfaults: {lost: [2]}\n");
  auto node = kgpu::testing::open_fake();
  ASSERT_TRUE(node);
  Collector c;
  auto w = EventWatcher::start(*node, std::ref(c), std::chrono::milliseconds(100));
  ASSERT_TRUE(w);
  ASSERT_EQ((*w)->registration_errors().size(), 1u);
  EXPECT_NE((*w)->registration_errors()[0].find("GPU 2"), std::string::npos);
  f.rewrite("preset: pcie-l4-4\nfaults: {lost: [2], xids: [{gpu: 1, xid: 48}]}\n");
  auto events = c.wait_for(1);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].gpu_index, 1u);
  EXPECT_EQ(events[0].xid, 48u);
}

}  // namespace
}  // namespace kgpu::gpu
