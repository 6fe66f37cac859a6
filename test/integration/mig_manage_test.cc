// MIG management through NVML (gpu/mig_manage.h) against the fake NVML, which enforces the real
// geometry: profiles offered per model, the mode change and its reset, placements, creating and
// destroying instances, failures midway with the rollback, processes holding an instance.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gpu/mig_manage.h"
#include "test_env.h"

namespace kgpu::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
namespace mig = gpu::mig;

constexpr const char* kH100 = "preset: hgx-h100-8\ngpus:\n  - {index: 0, persistenceMode: false}\n";

std::vector<std::string> names(const std::vector<mig::Offer>& offers) {
  std::vector<std::string> out;
  for (const auto& o : offers) out.push_back(o.name);
  return out;
}

std::vector<std::string> profiles(const std::vector<std::pair<const mig::Offer*, unsigned>>& want) {
  std::vector<std::string> out;
  for (const auto& [o, start] : want) out.push_back(o->name + "@" + std::to_string(start));
  return out;
}

TEST(MigManage, OffersFollowTheModel) {
  FakeNodeFile file(kH100);
  auto node = open_fake();
  auto offers = mig::offers(*node, 0);
  ASSERT_TRUE(offers) << offers.error().message;
  EXPECT_THAT(names(*offers), ElementsAre("1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb", "1g.10gb+me", "1g.20gb"));
}

TEST(MigManage, ANonMigGpuOffersNothingAndRefusesTheMode) {
  FakeNodeFile l4("preset: pcie-l4-4\n");
  auto l4node = open_fake();
  auto none = mig::offers(*l4node, 0);
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->empty());
  auto mode = mig::set_mode(*l4node, 0, true);
  ASSERT_FALSE(mode);
  EXPECT_EQ(mode.error().code, ErrorCode::kNotSupported);
}

TEST(MigManage, PlansTryEveryOrderAndSayWhyNothingFits) {
  FakeNodeFile file(kH100);
  auto node = open_fake();
  auto offers = *mig::offers(*node, 0);
  auto balanced = mig::plan(offers, {"1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb"});
  ASSERT_TRUE(balanced) << balanced.error().message;
  // Largest first does not fit (a 1g instance cannot start at memory slice 7); another order does.
  EXPECT_THAT(profiles(*balanced), ElementsAre("1g.10gb@0", "1g.10gb@1", "2g.20gb@2", "3g.40gb@4"));
  auto too_many = mig::plan(offers, {"3g.40gb", "3g.40gb", "1g.10gb", "1g.10gb"});
  ASSERT_FALSE(too_many);
  EXPECT_THAT(too_many.error().message, HasSubstr("do not fit one GPU in any order"));
  auto two_me = mig::plan(offers, {"1g.10gb+me", "1g.10gb+me"});
  ASSERT_FALSE(two_me);
  EXPECT_THAT(two_me.error().message, HasSubstr("only one media-engine instance"));
  auto unknown = mig::plan(offers, {"1g.5gb"});
  ASSERT_FALSE(unknown);
  EXPECT_THAT(unknown.error().message, HasSubstr("profile 1g.5gb is not offered by this GPU (offered: 1g.10gb, 2g.20gb"));
  auto ci = mig::plan(offers, {"1c.2g.20gb"});
  ASSERT_FALSE(ci);
  EXPECT_THAT(ci.error().message, HasSubstr("compute-instance profiles are not supported"));
}

TEST(MigManage, ModeInstancesAndTheInventoryFollowTheChanges) {
  FakeNodeFile file(kH100);
  auto node = open_fake();
  auto before = mig::read_layout(*node, 0);
  ASSERT_TRUE(before);
  EXPECT_FALSE(before->enabled);
  auto pending = mig::set_mode(*node, 0, true);
  ASSERT_TRUE(pending) << pending.error().message;
  EXPECT_FALSE(*pending);  // no process: on at once
  auto offers = *mig::offers(*node, 0);
  auto want = *mig::plan(offers, {"1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb"});
  ASSERT_TRUE(mig::replace_instances(*node, 0, want));
  auto layout = mig::read_layout(*node, 0);
  ASSERT_TRUE(layout);
  EXPECT_TRUE(layout->enabled);
  EXPECT_THAT(layout->profiles(), ElementsAre("1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb"));
  for (const auto& i : layout->instances) EXPECT_TRUE(i.compute_instance) << i.profile;
  auto inv = node->inventory();
  ASSERT_TRUE(inv);
  EXPECT_TRUE(inv->gpus[0].mig_enabled);
  EXPECT_EQ(inv->gpus[0].mig_devices.size(), 4u);

  // Another layout replaces it whole; the node file's reload keeps what NVML changed.
  ASSERT_TRUE(mig::replace_instances(*node, 0, *mig::plan(offers, std::vector<std::string>(7, "1g.10gb"))));
  file.rewrite(std::string(kH100) + "driverVersion: 580.105.09\n");
  layout = mig::read_layout(*node, 0);
  ASSERT_TRUE(layout);
  EXPECT_EQ(layout->profiles(), std::vector<std::string>(7, "1g.10gb"));
  EXPECT_EQ(node->inventory()->gpus[0].mig_devices.size(), 7u);

  // MIG off needs the instances gone first.
  auto off = mig::set_mode(*node, 0, false);
  ASSERT_FALSE(off);
  EXPECT_THAT(off.error().message, HasSubstr("destroy its MIG instances first"));
  ASSERT_TRUE(mig::replace_instances(*node, 0, {}));
  ASSERT_TRUE(mig::set_mode(*node, 0, false));
  EXPECT_FALSE(mig::read_layout(*node, 0)->enabled);
}

TEST(MigManage, AModeChangeWaitsForAResetWhileProcessesRun) {
  FakeNodeFile file("preset: hgx-h100-8\ngpus:\n  - {index: 1, persistenceMode: false, processes: [{pid: 7, usedMemoryMiB: 100}]}\n");
  auto node = open_fake();
  auto pending = mig::set_mode(*node, 1, true);
  ASSERT_TRUE(pending);
  EXPECT_TRUE(*pending);
  auto l = mig::read_layout(*node, 1);
  EXPECT_FALSE(l->enabled);
  EXPECT_TRUE(l->pending);
  // The process ends; the reset makes the pending mode current.
  file.rewrite("preset: hgx-h100-8\ngpus:\n  - {index: 1, persistenceMode: false}\n");
  auto uuid = node->probe(1).uuid;
  ASSERT_TRUE(node->reset(1, uuid));
  EXPECT_TRUE(mig::read_layout(*node, 1)->enabled);
}

TEST(MigManage, AFailureMidwayRollsBackToThePreviousLayout) {
  FakeNodeFile file(kH100);
  auto node = open_fake();
  ASSERT_TRUE(mig::set_mode(*node, 0, true));
  auto offers = *mig::offers(*node, 0);
  ASSERT_TRUE(mig::replace_instances(*node, 0, *mig::plan(offers, {"3g.40gb", "3g.40gb"})));
  // The third instance of the next layout fails, once.
  file.rewrite(std::string(kH100) +
               "faults:\n  calls: [{call: nvmlDeviceCreateGpuInstanceWithPlacement, gpu: 0, error: "
               "INSUFFICIENT_RESOURCES, after: 2, times: 1}]\n");
  auto r = mig::replace_instances(*node, 0, *mig::plan(offers, std::vector<std::string>(7, "1g.10gb")));
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().message, HasSubstr("GPU 0: creating instance 2 (1g.10gb at memory slice 2)"));
  EXPECT_THAT(r.error().message, HasSubstr("the previous layout (3g.40gb, 3g.40gb) was restored"));
  EXPECT_THAT(mig::read_layout(*node, 0)->profiles(), ElementsAre("3g.40gb", "3g.40gb"));
  // Failing every time: the rollback fails too, and says so.
  file.rewrite(std::string(kH100) +
               "faults:\n  calls: [{call: nvmlDeviceCreateGpuInstanceWithPlacement, gpu: 0, error: "
               "INSUFFICIENT_RESOURCES, after: 1}]\n");
  r = mig::replace_instances(*node, 0, *mig::plan(offers, {"4g.40gb", "3g.40gb"}));
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().message, HasSubstr("restoring the previous layout failed too"));
}

TEST(MigManage, AProcessOnAnInstanceKeepsItAndTheLayout) {
  FakeNodeFile file(
      "preset: hgx-h100-8\ngpus:\n  - index: 2\n    persistenceMode: false\n    mig:\n      instances:\n"
      "        - {profile: 3g.40gb, start: 0, gpuInstanceId: 1}\n        - {profile: 3g.40gb, start: 4, gpuInstanceId: 2}\n"
      "    processes: [{pid: 9, usedMemoryMiB: 100, gpuInstanceId: 2}]\n");
  auto node = open_fake();
  auto offers = *mig::offers(*node, 2);
  auto r = mig::replace_instances(*node, 2, *mig::plan(offers, {"7g.80gb"}));
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().message, HasSubstr("GPU 2: 1 process(es) are still on it (pids 9): nothing changed"));
  EXPECT_THAT(mig::read_layout(*node, 2)->profiles(), ElementsAre("3g.40gb", "3g.40gb"));
}

}  // namespace
}  // namespace kgpu::testing
