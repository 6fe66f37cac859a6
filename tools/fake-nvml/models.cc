#include "models.h"

#include "gpu/nvml/abi.h"

namespace kgpu::fake {

const std::vector<ModelSpec>& models() {
  using namespace kgpu::nvml;
  static const std::vector<ModelSpec> kModels = {
      {"H100-SXM-80GB",
       "NVIDIA H100 80GB HBM3",
       81559,
       512,
       0x2330,
       0x16C110DE,
       132,
       9,
       0,
       kArchHopper,
       1980,
       2619,
       700,
       72,
       18,
       true,
       true,
       true,
       {{"1g", 9984, 16, 1, 1, 0, 1, 0},
        {"1g+me", 9984, 16, 1, 1, 0, 1, 1},
        {"1g.2x", 20096, 26, 1, 1, 0, 1, 0},
        {"2g", 20096, 32, 2, 2, 0, 2, 0},
        {"3g", 40448, 60, 3, 3, 0, 3, 0},
        {"4g", 40448, 64, 4, 4, 0, 4, 0},
        {"7g", 81152, 132, 8, 7, 0, 7, 1}}},
      {"H200-141GB",
       "NVIDIA H200",
       143771,
       640,
       0x2335,
       0x18BE10DE,
       132,
       9,
       0,
       kArchHopper,
       1980,
       3201,
       700,
       76,
       18,
       true,
       true,
       true,
       {{"1g", 18176, 16, 1, 1, 0, 1, 0},
        {"1g+me", 18176, 16, 1, 1, 0, 1, 1},
        {"1g.2x", 35584, 26, 1, 1, 0, 1, 0},
        {"2g", 35584, 32, 2, 2, 0, 2, 0},
        {"3g", 72448, 60, 3, 3, 0, 3, 0},
        {"4g", 72448, 64, 4, 4, 0, 4, 0},
        {"7g", 143616, 132, 8, 7, 0, 7, 1}}},
      {"A100-SXM4-40GB",
       "NVIDIA A100-SXM4-40GB",
       40960,
       384,
       0x20B0,
       0x134F10DE,
       108,
       8,
       0,
       kArchAmpere,
       1410,
       1215,
       400,
       55,
       12,
       true,
       true,
       false,
       {{"1g", 4864, 14, 1, 0, 0, 0, 0},
        {"1g+me", 4864, 14, 1, 1, 0, 1, 1},
        {"1g.2x", 9984, 14, 1, 1, 0, 0, 0},
        {"2g", 9984, 28, 2, 1, 0, 0, 0},
        {"3g", 20096, 42, 3, 2, 0, 0, 0},
        {"4g", 20096, 56, 4, 2, 0, 0, 0},
        {"7g", 40448, 98, 7, 5, 0, 1, 1}}},
      {"A100-SXM4-80GB",
       "NVIDIA A100-SXM4-80GB",
       81920,
       512,
       0x20B2,
       0x147F10DE,
       108,
       8,
       0,
       kArchAmpere,
       1410,
       1593,
       400,
       62,
       12,
       true,
       true,
       false,
       {{"1g", 9856, 14, 1, 0, 0, 0, 0},
        {"1g+me", 9856, 14, 1, 1, 0, 1, 1},
        {"1g.2x", 19968, 14, 1, 1, 0, 0, 0},
        {"2g", 19968, 28, 2, 1, 0, 0, 0},
        {"3g", 40192, 42, 3, 2, 0, 0, 0},
        {"4g", 40192, 56, 4, 2, 0, 0, 0},
        {"7g", 81152, 98, 7, 5, 0, 1, 1}}},
      {"L4",
       "NVIDIA L4",
       23034,
       256,
       0x27B8,
       0x16CA10DE,
       58,
       8,
       9,
       kArchAda,
       2040,
       6251,
       72,
       16,
       0,
       false,
       false,
       false,
       {}},
      {"T4",
       "Tesla T4",
       15360,
       256,
       0x1EB8,
       0x12A210DE,
       40,
       7,
       5,
       kArchTuring,
       1590,
       5001,
       70,
       10,
       0,
       false,
       false,
       false,
       {}},
  };
  return kModels;
}

const ModelSpec* find_model(const std::string& key) {
  for (const auto& m : models()) {
    if (key == m.key) return &m;
  }
  return nullptr;
}

namespace {

// An HGX/DGX baseboard: 8 GPUs on NVSwitch, 0-3 on NUMA node 0 and 4-7 on 1, pairs sharing a
// PCIe switch and host bridge.
NodePreset hgx(const char* key, const char* description, const char* model, std::vector<unsigned> bus) {
  const std::vector<std::vector<unsigned>> pairs = {{0, 1}, {2, 3}, {4, 5}, {6, 7}};
  return {key, description, model, 8, "nvswitch", std::move(bus), {0, 0, 0, 0, 1, 1, 1, 1}, pairs, pairs};
}

}  // namespace

const std::vector<NodePreset>& node_presets() {
  static const std::vector<NodePreset> kPresets = {
      hgx("hgx-h100-8", "8x H100 SXM 80GB, NVSwitch, two NUMA nodes", "H100-SXM-80GB",
          {0x18, 0x2a, 0x3a, 0x5d, 0x9a, 0xab, 0xba, 0xdb}),
      hgx("hgx-h200-8", "8x H200 141GB, NVSwitch, two NUMA nodes", "H200-141GB",
          {0x18, 0x2a, 0x3a, 0x5d, 0x9a, 0xab, 0xba, 0xdb}),
      hgx("dgx-a100-8", "8x A100 SXM4 80GB, NVSwitch, two NUMA nodes", "A100-SXM4-80GB",
          {0x07, 0x0f, 0x47, 0x4e, 0x87, 0x90, 0xb7, 0xbd}),
      {"pcie-t4-2", "2x T4 PCIe on one host bridge", "T4", 2, "none", {0x3b, 0x5e}, {0, 0}, {}, {{0, 1}}},
      {"pcie-l4-4",
       "4x L4 PCIe, two per socket",
       "L4",
       4,
       "none",
       {0x38, 0x3a, 0xb8, 0xba},
       {0, 0, 1, 1},
       {{0, 1}, {2, 3}},
       {{0, 1}, {2, 3}}},
  };
  return kPresets;
}

const NodePreset* find_node_preset(const std::string& key) {
  for (const auto& p : node_presets()) {
    if (key == p.key) return &p;
  }
  return nullptr;
}

}  // namespace kgpu::fake
