#include "k8s/gpu_assignment.h"

#include <gtest/gtest.h>

namespace kgpu::k8s {
namespace {

TEST(GpuAssignment, RoundTripsContainersInOrder) {
  const Assignment a{{"init", {"GPU-a"}}, {"main", {"GPU-b", "GPU-c"}}, {"idle", {}}};
  const std::string text = format_assignment(a);
  EXPECT_EQ(text, "init:GPU-a;main:GPU-b,GPU-c");
  auto back = parse_assignment(text);
  ASSERT_TRUE(back) << back.error().message;
  ASSERT_EQ(back->size(), 2u);
  EXPECT_EQ((*back)[1], (ContainerGpus{"main", {"GPU-b", "GPU-c"}}));
  EXPECT_EQ(find_container(*back, "main")->uuids.size(), 2u);
  EXPECT_EQ(find_container(*back, "idle"), nullptr);
  EXPECT_TRUE(parse_assignment("")->empty());
}

TEST(GpuAssignment, RejectsMalformedAndOversizedText) {
  for (const char* bad : {"main", ":GPU-a", "main:", "main:GPU-a,", "main:GPU-a;main:GPU-b", "main:GPU-a,GPU-a",
                          "main:GPU a", "a:GPU-1;;b:GPU-2"}) {
    auto r = parse_assignment(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_NE(r.error().message.find(kAnnotationGpuAssignment), std::string::npos) << r.error().message;
  }
  std::string many;
  for (int i = 0; i < 100; ++i) many += (i ? ";c" : "c") + std::to_string(i) + ":GPU-" + std::to_string(i);
  EXPECT_FALSE(parse_assignment(many));
  std::string wide = "c:";
  for (int i = 0; i < 70; ++i) wide += (i ? ",GPU-" : "GPU-") + std::to_string(i);
  EXPECT_FALSE(parse_assignment(wide));
  EXPECT_FALSE(parse_assignment(std::string(kMaxAssignmentBytes + 1, 'x')));
}

TEST(GpuAssignment, NodeReportRoundTrips) {
  NodeGpuReport r{"2026-12-01T10:00:00.000000Z",
                  {{0, "GPU-0", "NVIDIA H100 80GB HBM3", 81559, true, "nvidia.com/gpu", 1, {1}, {{"ns", "p", "u1", "c", 1}}},
                   {1, "GPU-1", "NVIDIA H100 80GB HBM3", 81559, false, "nvidia.com/gpu.shared", 4, {0}, {}}}};
  auto back = parse_node_report(format_node_report(r));
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(*back, r);
}

TEST(GpuAssignment, NodeReportErrorsNameTheField) {
  struct Case {
    const char* text;
    const char* field;
  } cases[] = {
      {R"({"gpus":[{"index":0}]})", "gpus[0].uuid"},
      {R"({"gpus":[{"index":0,"uuid":"a"},{"index":0,"uuid":"b"}]})", "gpus[1].index"},
      {R"({"gpus":[{"index":0,"uuid":"a","replicas":0}]})", "gpus[0].replicas"},
      {R"({"gpus":[{"index":0,"uuid":"a","replicas":2,"used":[{"namespace":"n","pod":"p","uid":"u","replicas":3}]}]})",
       "gpus[0].used[0].replicas"},
      {R"({"gpus":[{"index":0,"uuid":"a","used":[{"pod":"p","uid":"u"}]}]})", "gpus[0].used[0].namespace"},
      {R"({"gpus":"x"})", "gpus"},
      {R"([1])", "not a JSON object"},
  };
  for (const auto& c : cases) {
    auto r = parse_node_report(c.text);
    ASSERT_FALSE(r) << c.text;
    EXPECT_NE(r.error().message.find(c.field), std::string::npos) << r.error().message;
  }
  EXPECT_FALSE(parse_node_report(std::string(2000, '[') + std::string(2000, ']')));
  EXPECT_FALSE(parse_node_report(std::string(kMaxNodeReportBytes + 1, ' ')));
}

}  // namespace
}  // namespace kgpu::k8s
