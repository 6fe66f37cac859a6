// The real Alibaba openb trace, when it is present (../shared/data/openb or $KGPU_OPENB_DIR):
// every file loads, the counts match the published description, and a short simulation lands
// where the published experiment does.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "sim/simulator.h"
#include "sim/trace.h"
#include "../integration/paths.h"

namespace kgpu::sim {
namespace {

std::string trace_dir() {
  if (const char* d = std::getenv("KGPU_OPENB_DIR"); d != nullptr && *d != '\0') return d;
  return std::string(KGPU_SOURCE_DIR) + "/../shared/data/openb";
}

#define REQUIRE_TRACE()                                                                              \
  if (!std::filesystem::exists(trace_dir() + "/openb_node_list_gpu_node.csv")) {                     \
    GTEST_SKIP() << "openb trace not found in " << trace_dir()                                       \
                 << ": get cluster-trace-gpu-v2023/csv from github.com/alibaba/clusterdata and set " \
                    "KGPU_OPENB_DIR";                                                                \
  }

TEST(OpenbTrace, EveryFileLoadsWithThePublishedCounts) {
  REQUIRE_TRACE();
  auto nodes = load_nodes(trace_dir() + "/openb_node_list_gpu_node.csv");
  ASSERT_TRUE(nodes) << nodes.error().message;
  EXPECT_EQ(nodes->size(), 1213u);
  size_t gpus = 0;
  for (const auto& n : *nodes) gpus += static_cast<size_t>(n.gpus());
  EXPECT_EQ(gpus, 6212u);
  auto all = load_nodes(trace_dir() + "/openb_node_list_all_node.csv");
  ASSERT_TRUE(all) << all.error().message;
  EXPECT_EQ(all->size(), 1523u);
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(trace_dir())) {
    const auto name = e.path().filename().string();
    if (!name.starts_with("openb_pod_list_")) continue;
    auto pods = load_pods(e.path().string());
    ASSERT_TRUE(pods) << pods.error().message;
    EXPECT_GT(pods->size(), 1000u) << name;
    ++files;
  }
  EXPECT_GE(files, 20u);
  auto def = load_pods(trace_dir() + "/openb_pod_list_default.csv");
  ASSERT_TRUE(def);
  EXPECT_EQ(def->size(), 8152u);
  EXPECT_EQ(std::count_if(def->begin(), def->end(), [](const sched::Pod& p) { return p.num_gpu == 0; }), 1088);
}

TEST(OpenbTrace, BestFitLandsNearThePublishedAllocation) {
  REQUIRE_TRACE();
  auto nodes = load_nodes(trace_dir() + "/openb_node_list_gpu_node.csv");
  auto pods = load_pods(trace_dir() + "/openb_pod_list_default.csv");
  ASSERT_TRUE(nodes && pods);
  RunOptions o;
  o.policy = "BestFit";
  o.seed = 3;
  o.tie_break = sched::TieBreak::kFirst;
  auto r = run_fgd_protocol(*nodes, *pods, o);
  ASSERT_TRUE(r) << r.error().message;
  // The authors report 93.08% (mean of 10 seeds); one seed varies by a few tenths.
  EXPECT_GT(r->final_allocated, 0.925);
  EXPECT_LT(r->final_allocated, 0.937);
  EXPECT_GT(r->final_arrived, 1.29);
}

}  // namespace
}  // namespace kgpu::sim
