// The openb trace CSV loader on hostile input: long lines, many columns and huge cells fail fast
// with file:line and short messages.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "sim/trace.h"

namespace kgpu::sim {
namespace {

using ::testing::HasSubstr;

const std::string kHeader = "name,cpu_milli,memory_mib,num_gpu,gpu_milli";

TEST(TraceLimits, TooManyColumnsIsAnError) {
  std::string header = kHeader;
  for (int i = 0; i < 300; ++i) header += ",x" + std::to_string(i);
  std::string row = "p,1000,1024,1,1000" + std::string(300, ',');
  auto r = parse_pods(header + "\n" + row + "\n", "wide.csv");
  ASSERT_FALSE(r.has_value());
  EXPECT_THAT(r.error().message, HasSubstr("wide.csv:1: header of 305 columns, over the limit of 256"));
}

TEST(TraceLimits, OverlongLineIsAnError) {
  const std::string row = "p,1000,1024,1,1000" + std::string((1 << 20) + 1, ' ');
  auto r = parse_pods(kHeader + "\n" + row + "\n", "long.csv");
  ASSERT_FALSE(r.has_value());
  EXPECT_THAT(r.error().message, HasSubstr("long.csv:2: line of 1048595 bytes, over the limit of 1048576"));
}

TEST(TraceLimits, HugeCellsAreQuotedShort) {
  const std::string row = "p," + std::string(100000, '9') + "x,1024,1,1000";
  auto r = parse_pods(kHeader + "\n" + row + "\n", "cell.csv");
  ASSERT_FALSE(r.has_value());
  EXPECT_THAT(r.error().message, HasSubstr("cell.csv:2: cpu_milli '"));
  EXPECT_THAT(r.error().message, HasSubstr("(100001 characters)"));
  EXPECT_LT(r.error().message.size(), 200u);
}

TEST(TraceLimits, RowsStillLoad) {
  auto r = parse_pods(kHeader + "\r\np,1000,1024,1,1000\r\nq,500,512,0,0\n", "ok.csv");
  ASSERT_TRUE(r.has_value()) << r.error().message;
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[1].name, "q");
  auto bad = parse_pods(kHeader + "\np,1000,1024\n", "short.csv");
  ASSERT_FALSE(bad.has_value());
  EXPECT_THAT(bad.error().message, HasSubstr("short.csv:2: 3 columns, the header has 5"));
}

}  // namespace
}  // namespace kgpu::sim
