// The fake NVML's node descriptions: presets, validation, and errors that name file:line and field.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "gpu/nvml/abi.h"
#include "state.h"
#include "../integration/paths.h"

namespace kgpu::fake {
namespace {

Node parse_ok(const std::string& yaml) {
  auto n = parse_node(yaml, "node.yaml");
  EXPECT_TRUE(n) << (n ? "" : n.error().message);
  return n ? std::move(*n) : Node{};
}

std::string parse_error(const std::string& yaml) {
  auto n = parse_node(yaml, "node.yaml");
  EXPECT_FALSE(n) << "expected an error for:\n" << yaml;
  return n ? std::string() : n.error().message;
}

TEST(FakeNode, PresetHgxH100) {
  Node n = parse_ok("preset: hgx-h100-8\n");
  ASSERT_EQ(n.gpus.size(), 8u);
  EXPECT_STREQ(n.gpus[0].model->name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(n.gpus[0].model->memory_mib, 81559u);
  EXPECT_EQ(n.gpus[0].model->pci_device_id, 0x2330u);
  EXPECT_EQ(n.gpus[0].bus_id(), "00000000:18:00.0");
  EXPECT_EQ(n.gpus[3].numa, 0u);
  EXPECT_EQ(n.gpus[4].numa, 1u);
  EXPECT_EQ(n.gpus[0].nvlink_remote.size(), 18u);
  EXPECT_EQ(n.topology_level(0, 1), nvml::kTopologySingle);
  EXPECT_EQ(n.topology_level(0, 2), nvml::kTopologyNode);
  EXPECT_EQ(n.topology_level(0, 7), nvml::kTopologySystem);
  std::set<std::string> uuids;
  for (const auto& g : n.gpus) uuids.insert(g.uuid);
  EXPECT_EQ(uuids.size(), 8u);
}

TEST(FakeNode, EveryShippedExampleParses) {
  for (const char* f :
       {"dgx-h100.yaml", "hgx-h200.yaml", "dgx-a100-mig.yaml", "t4-pcie.yaml", "mixed.yaml", "faults.yaml"}) {
    const std::string path = std::string(KGPU_SOURCE_DIR) + "/examples/nodes/" + f;
    std::ifstream in(path);
    ASSERT_TRUE(in) << path;
    std::stringstream text;
    text << in.rdbuf();
    auto n = parse_node(text.str(), path);
    EXPECT_TRUE(n) << (n ? "" : n.error().message);
  }
}

TEST(FakeNode, ModelsWithoutMigOrNvlink) {
  Node n = parse_ok("gpus:\n  - model: T4\n    count: 2\n");
  ASSERT_EQ(n.gpus.size(), 2u);
  EXPECT_STREQ(n.gpus[0].model->name, "Tesla T4");
  EXPECT_TRUE(n.gpus[0].model->mig.empty());
  EXPECT_FALSE(n.gpus[0].model->gpm);
  EXPECT_TRUE(n.gpus[0].nvlink_remote.empty());
  EXPECT_NE(n.gpus[0].uuid, n.gpus[1].uuid);
}

TEST(FakeNode, MigLayoutPlacedAndNamed) {
  Node n = parse_ok(
      "gpus:\n"
      "  - model: H100-SXM-80GB\n"
      "    mig:\n"
      "      instances: [{profile: 4g.40gb}, {profile: 2g.20gb}, {profile: 1g.10gb}]\n");
  const auto& g = n.gpus[0];
  EXPECT_TRUE(g.mig_enabled);
  ASSERT_EQ(g.mig.size(), 3u);
  EXPECT_EQ(g.mig[0].start, 0u);
  EXPECT_EQ(g.mig[1].start, 4u);
  EXPECT_EQ(g.mig[2].start, 6u);
  EXPECT_EQ(g.mig[0].gpu_instance_id, 1u);
  EXPECT_EQ(g.mig[2].gpu_instance_id, 3u);
  EXPECT_TRUE(g.mig[0].uuid.starts_with("MIG-"));
}

TEST(FakeNode, VaryingValues) {
  Node n =
      parse_ok("gpus:\n  - model: L4\n    telemetry: {gpuUtil: {min: 10, max: 90, periodSeconds: 40}, powerW: 50}\n");
  const auto& t = n.gpus[0].telemetry;
  EXPECT_DOUBLE_EQ(t.at("gpuUtil", 0), 10);
  EXPECT_DOUBLE_EQ(t.at("gpuUtil", 20), 90);
  EXPECT_DOUBLE_EQ(t.at("powerW", 123), 50);
  EXPECT_DOUBLE_EQ(t.at("gpuTemp", 0, 33), 33);
}

TEST(FakeNode, FabricAndVirtualizationMode) {
  Node n = parse_ok("gpus:\n  - model: H100-SXM-80GB\n    virtualizationMode: vgpu\n"
                    "    fabric: {clusterUuid: c8d4e9a2-1f3b-4c5d-8e6f-0a1b2c3d4e5f, cliqueId: 7, state: in-progress, "
                    "status: IN_USE}\n");
  const auto& g = n.gpus[0];
  EXPECT_EQ(g.virtualization_mode, 2);
  ASSERT_TRUE(g.fabric);
  EXPECT_EQ(g.fabric->cluster_uuid[0], 0xc8);
  EXPECT_EQ(g.fabric->cluster_uuid[15], 0x5f);
  EXPECT_EQ(g.fabric->clique_id, 7u);
  EXPECT_EQ(g.fabric->state, 2);
  EXPECT_EQ(g.fabric->status, 19);
  EXPECT_FALSE(parse_ok("gpus:\n  - model: L4\n").gpus[0].fabric);
  EXPECT_NE(parse_error("gpus:\n  - model: L4\n    fabric: {clusterUuid: nope}\n")
                .find("node.yaml:3: gpus[0].fabric.clusterUuid: 'nope' is not a UUID"),
            std::string::npos);
  EXPECT_NE(parse_error("gpus:\n  - model: L4\n    virtualizationMode: vm\n").find("gpus[0].virtualizationMode"),
            std::string::npos);
}

TEST(FakeNode, ErrorsNameLineAndField) {
  EXPECT_EQ(parse_error("gpus:\n  - model: H100-SXM-80GB\n    colour: red\n"),
            "node.yaml:3: gpus[0]: unknown field 'colour' (known: model, count, index, uuid, serial, busId, "
            "numaNode, minorNumber, usedMiB, mig, telemetry, processes, fabric, virtualizationMode, persistenceMode)");
  EXPECT_NE(parse_error("gpus:\n  - model: V100\n").find("node.yaml:2: gpus[0].model: unknown GPU model 'V100'"),
            std::string::npos);
  EXPECT_NE(parse_error("preset: dgx-9000\n").find("node.yaml:1: preset: unknown node preset 'dgx-9000'"),
            std::string::npos);
  // A profile of another model.
  EXPECT_NE(parse_error("gpus:\n  - model: A100-SXM4-40GB\n    mig:\n      instances: [{profile: 3g.40gb}]\n")
                .find("no MIG profile '3g.40gb' on NVIDIA A100-SXM4-40GB (profiles: 1g.5gb, 1g.5gb+me, 1g.10gb, "
                      "2g.10gb, 3g.20gb, 4g.20gb, 7g.40gb)"),
            std::string::npos);
  // An impossible layout.
  const auto layout = parse_error(
      "gpus:\n  - model: H100-SXM-80GB\n    mig:\n      instances:\n        - {profile: 4g.40gb}\n"
      "        - {profile: 4g.40gb}\n");
  EXPECT_NE(layout.find("node.yaml:5: gpus[0].mig.instances: impossible MIG layout: instance 1 (4g)"),
            std::string::npos)
      << layout;
  EXPECT_NE(parse_error("gpus:\n  - model: T4\n    mig: {enabled: true}\n").find("Tesla T4 is not MIG capable"),
            std::string::npos);
  EXPECT_NE(
      parse_error("gpus:\n  - model: T4\n    busId: nowhere\n").find("gpus[0].busId: 'nowhere' is not a PCI bus id"),
      std::string::npos);
  EXPECT_NE(parse_error("gpus:\n  - model: L4\n    telemetry: {gpuUtil: lots}\n")
                .find("node.yaml:3: gpus[0].telemetry.gpuUtil: cannot read 'lots' as a number"),
            std::string::npos);
  EXPECT_NE(parse_error("preset: pcie-t4-2\nfaults:\n  lost: [5]\n").find("faults.lost[0]: no GPU 5 (the node has 2)"),
            std::string::npos);
  EXPECT_NE(parse_error("preset: pcie-t4-2\nfaults:\n  init: BROKEN\n").find("unknown NVML error 'BROKEN'"),
            std::string::npos);
  EXPECT_NE(parse_error("gpus:\n  - model: H100-SXM-80GB\n    mig:\n      instances: [{profile: 7g.80gb}]\n"
                        "    processes: [{pid: 1}]\n")
                .find("needs gpuInstanceId"),
            std::string::npos);
  EXPECT_NE(parse_error("gpus:\n  - model: H100-SXM-80GB\n    mig:\n      instances: [{profile: 7g.80gb, telemetry: "
                        "{gpuTemp: 40}}]\n")
                .find("gpus[0].mig.instances[0].telemetry: unknown instance reading 'gpuTemp'"),
            std::string::npos);
  EXPECT_NE(parse_error("gpus: [ {model: L4}\n").find("node.yaml:"), std::string::npos);  // YAML syntax error
  EXPECT_NE(parse_error("{}\n").find("describe the GPUs"), std::string::npos);
  EXPECT_NE(parse_error("gpus:\n  - model: T4\ntopology:\n  nvlink: [[0]]\n").find("has no NVLink"), std::string::npos);
}

}  // namespace
}  // namespace kgpu::fake
