#include "gpu/mig.h"

#include <gtest/gtest.h>

namespace kgpu::gpu::mig {
namespace {

const Shape* by_key(const std::string& key) {
  for (const auto& s : shapes()) {
    if (key == s.key) return &s;
  }
  return nullptr;
}

using Request = std::pair<const Shape*, std::optional<unsigned>>;

std::vector<Request> requests(std::initializer_list<const char*> keys) {
  std::vector<Request> r;
  for (const char* k : keys) r.emplace_back(by_key(k), std::nullopt);
  return r;
}

TEST(MigProfileName, FollowsSlicesAndCeilGiBRule) {
  EXPECT_EQ(profile_name(1, 9984, false), "1g.10gb");   // H100 1g: 9.75 GiB
  EXPECT_EQ(profile_name(3, 40448, false), "3g.40gb");  // H100 3g: 39.5 GiB
  EXPECT_EQ(profile_name(7, 81152, false), "7g.80gb");
  EXPECT_EQ(profile_name(1, 4864, false), "1g.5gb");  // A100-40GB
  EXPECT_EQ(profile_name(1, 9856, true), "1g.10gb+me");
  EXPECT_EQ(profile_name(2, 2048, false), "2g.2gb");  // exact multiple: no rounding up
}

TEST(MigPlace, ValidLayoutsFromTheSpec) {
  for (auto layout : {requests({"4g", "3g"}), requests({"4g", "2g", "1g"}), requests({"3g", "3g"}),
                      requests({"2g", "2g", "2g", "1g"}), requests({"1g", "1g", "1g", "1g", "1g", "1g", "1g"}),
                      requests({"7g"}), requests({"1g.2x", "1g.2x", "1g.2x"})}) {
    auto placed = place(layout);
    ASSERT_TRUE(placed) << placed.error().message;
    EXPECT_EQ(placed->size(), layout.size());
  }
}

TEST(MigPlace, FirstFreeAllowedStart) {
  auto placed = place(requests({"3g", "3g"}));
  ASSERT_TRUE(placed);
  EXPECT_EQ((*placed)[0].start, 0u);
  EXPECT_EQ((*placed)[1].start, 4u);
  auto mixed = place({{by_key("2g"), 4}, {by_key("3g"), std::nullopt}});
  ASSERT_TRUE(mixed) << mixed.error().message;
  EXPECT_EQ((*mixed)[1].start, 0u);
}

TEST(MigPlace, RejectsImpossibleLayoutsWithReasons) {
  auto too_much = place(requests({"4g", "4g"}));
  ASSERT_FALSE(too_much);
  EXPECT_NE(too_much.error().message.find("compute slices"), std::string::npos) << too_much.error().message;

  auto bad_start = place({{by_key("3g"), 2}});
  ASSERT_FALSE(bad_start);
  EXPECT_NE(bad_start.error().message.find("placement 2 is not allowed (allowed: 0,4)"), std::string::npos)
      << bad_start.error().message;

  auto overlap = place({{by_key("2g"), 0}, {by_key("1g"), 1}});
  ASSERT_FALSE(overlap);
  EXPECT_NE(overlap.error().message.find("overlap"), std::string::npos);

  auto two_me = place(requests({"1g+me", "1g+me"}));
  ASSERT_FALSE(two_me);
  EXPECT_NE(two_me.error().message.find("media-engine"), std::string::npos);

  // 3g takes 4 memory slices: 3g at 4 + 2g at 4 cannot both fit although compute would.
  auto no_room = place({{by_key("3g"), 4}, {by_key("2g"), 4}});
  ASSERT_FALSE(no_room);
  auto full = place({{by_key("1g"), 1}, {by_key("4g"), std::nullopt}});
  ASSERT_FALSE(full);
  EXPECT_NE(full.error().message.find("no free run"), std::string::npos) << full.error().message;
}

TEST(MigShapes, LookupByProfileIdAndIndex) {
  ASSERT_NE(shape_by_profile_id(9), nullptr);
  EXPECT_STREQ(shape_by_profile_id(9)->key, "3g");
  EXPECT_STREQ(shape_by_profile_id(20)->key, "1g+me");
  EXPECT_EQ(shape_by_profile_id(99), nullptr);
  EXPECT_STREQ(shape_by_index(4)->key, "7g");
  EXPECT_EQ(shape_by_index(5), nullptr);  // 8-slice profile: not on these GPUs
}

}  // namespace
}  // namespace kgpu::gpu::mig
