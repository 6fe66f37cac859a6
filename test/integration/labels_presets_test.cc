// Golden test of the GFD-compatible node labels: for each fake node preset and sharing config the
// NFD features file that render_features_file() produces is compared with a hand-written expected
// file test/data/labels/<case>.labels. The expected files are derived from the facts (the spec's
// GPU Feature Discovery rules, docs/labels.md, the model facts of docs/fake-nvml.md and the
// versions the fake reports), not from kgpu's output, so they catch mistakes in the labelling code.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <ostream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "labels/labels.h"
#include "test_env.h"

namespace {

namespace fs = std::filesystem;
using kgpu::labels::LabelOptions;
using kgpu::labels::LabelSharing;

constexpr uint32_t k3dController = 0x030200;  // PCI class of datacenter GPUs: gpu.mode=compute

const fs::path kLabelsDir = fs::path(KGPU_SOURCE_DIR) / "test" / "data" / "labels";
const fs::path kExamplesDir = fs::path(KGPU_SOURCE_DIR) / "examples" / "nodes";

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// dgx-a100-8 with MIG enabled on all eight GPUs, each split into seven 1g.10gb instances (MIG
// manager's all-1g.10gb layout).
std::string dgx_a100_all_1g() {
  std::string yaml = "preset: dgx-a100-8\ngpus:\n";
  for (int i = 0; i < 8; ++i) {
    yaml += "  - index: " + std::to_string(i) + "\n    mig:\n      enabled: true\n      instances: [";
    for (int j = 0; j < 7; ++j) yaml += j == 0 ? "{profile: 1g.10gb}" : ", {profile: 1g.10gb}";
    yaml += "]\n";
  }
  return yaml;
}

// A 2x T4 box on an older driver (as examples/nodes/t4-pcie.yaml), so the versions differ from the
// fake's defaults (580.105.08, CUDA 13.0).
constexpr const char* kT4Node = "preset: pcie-t4-2\ndriverVersion: \"550.127.05\"\ncudaDriverVersion: 12040\n";

LabelSharing shared(const std::string& strategy, int replicas, bool renamed = false) {
  LabelSharing s;
  s.strategy = strategy;
  s.replicas = replicas;
  s.renamed = renamed;
  return s;
}

struct Case {
  std::string name;     // test/data/labels/<name>.labels
  std::string yaml;     // fake node description, or "@<file>" for examples/nodes/<file>
  std::string machine;  // contents of /sys/class/dmi/id/product_name
  LabelSharing sharing;
  std::string mig_strategy = "none";
};

// Names the case in gtest's messages (instead of a byte dump).
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

std::vector<Case> cases() {
  const std::string h100 = "preset: hgx-h100-8\n";
  const std::string a100 = "preset: dgx-a100-8\n";
  const std::string a100_machine = "DGXA100 920-23687-2530-000";
  const std::string l4 = "preset: pcie-l4-4\n";
  const std::string l4_machine = "ProLiant DL380a Gen11";
  return {
      {"hgx-h100-8", h100, "DGX H100", {}},
      {"hgx-h200-8", "preset: hgx-h200-8\n", "DGX H200", {}},
      {"dgx-a100-8", a100, a100_machine, {}},
      {"pcie-t4-2", kT4Node, "PowerEdge R740", {}},
      {"pcie-l4-4", l4, l4_machine, {}},
      {"pcie-t4-2-time-slicing-4", kT4Node, "PowerEdge R740", shared("time-slicing", 4)},
      {"pcie-l4-4-time-slicing-4", l4, l4_machine, shared("time-slicing", 4)},
      {"pcie-t4-2-time-slicing-4-renamed", kT4Node, "PowerEdge R740", shared("time-slicing", 4, true)},
      {"hgx-h100-8-mps-2", h100, "DGX H100", shared("mps", 2)},
      {"dgx-a100-8-mig-single", dgx_a100_all_1g(), a100_machine, {}, "single"},
      {"dgx-a100-8-mig-mixed", "@dgx-a100-mig.yaml", a100_machine, {}, "mixed"},
      {"mixed-models", "@mixed.yaml", "SYS-420GP-TNR", {}},
      {"mixed-models-mig-mixed", "@mixed.yaml", "SYS-420GP-TNR", {}, "mixed"},
  };
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Lines of `expected` missing from `actual` ("- ") and lines of `actual` not expected ("+ "),
// ordered by line so that a changed value shows as a "-"/"+" pair.
std::string line_diff(const std::string& expected, const std::string& actual) {
  std::multiset<std::string> want, got;
  for (auto& l : lines_of(expected)) want.insert(std::move(l));
  for (auto& l : lines_of(actual)) got.insert(std::move(l));
  std::vector<std::string> missing, extra;
  std::set_difference(want.begin(), want.end(), got.begin(), got.end(), std::back_inserter(missing));
  std::set_difference(got.begin(), got.end(), want.begin(), want.end(), std::back_inserter(extra));
  std::string out;
  std::vector<std::pair<std::string, char>> all;
  for (const auto& l : missing) all.emplace_back(l, '-');
  for (const auto& l : extra) all.emplace_back(l, '+');
  std::sort(all.begin(), all.end());
  for (const auto& [line, marker] : all) out += std::string(1, marker) + " " + line + "\n";
  if (out.empty()) out = "(same lines, different order or line endings)\n";
  return std::to_string(missing.size()) + " missing, " + std::to_string(extra.size()) + " extra:\n" + out;
}

class LabelsPresetGoldenTest : public ::testing::TestWithParam<Case> {};

TEST_P(LabelsPresetGoldenTest, MatchesExpectedFile) {
  const Case& c = GetParam();
  const fs::path expected_path = kLabelsDir / (c.name + ".labels");
  ASSERT_TRUE(fs::exists(expected_path)) << "no expected file " << expected_path;
  const std::string expected = read_text(expected_path);

  // The expected file itself must be well formed: sorted "key=value" lines with unique keys.
  std::string previous_key;
  for (const auto& line : lines_of(expected)) {
    const auto eq = line.find('=');
    ASSERT_NE(eq, std::string::npos) << expected_path << ": not key=value: " << line;
    const std::string key = line.substr(0, eq);
    ASSERT_LT(previous_key, key) << expected_path << ": keys not sorted or repeated at " << key;
    previous_key = key;
  }

  std::string yaml = c.yaml;
  if (yaml.starts_with("@")) {
    const fs::path example = kExamplesDir / yaml.substr(1);
    yaml = read_text(example);
    ASSERT_FALSE(yaml.empty()) << "cannot read " << example;
  }
  kgpu::testing::FakeNodeFile node_file(yaml);
  auto node = kgpu::testing::open_fake();
  ASSERT_NE(node, nullptr);
  auto inv = node->inventory();
  ASSERT_TRUE(inv) << inv.error().message;

  LabelOptions opt;
  opt.mig_strategy = c.mig_strategy;
  opt.machine = c.machine;
  opt.timestamp = std::nullopt;  // noTimestamp
  for (const auto& g : inv->gpus) opt.pci_class[g.index] = k3dController;

  std::vector<std::string> warnings;
  const std::string actual =
      kgpu::labels::render_features_file(kgpu::labels::gfd_labels(*inv, c.sharing, opt, &warnings));
  if (actual != expected) {
    std::string warned;
    for (const auto& w : warnings) warned += "  " + w + "\n";
    ADD_FAILURE() << "labels of case " << c.name << " differ from " << expected_path
                  << " (- expected, missing; + produced, not expected):\n"
                  << line_diff(expected, actual) << "warnings:\n"
                  << (warned.empty() ? "  (none)\n" : warned);
  }
}

INSTANTIATE_TEST_SUITE_P(LabelsPreset, LabelsPresetGoldenTest, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& param_info) {
                           std::string name = param_info.param.name;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// Every expected file belongs to a case (a renamed or dropped case leaves no stale golden file).
TEST(LabelsPresetFiles, EveryExpectedFileHasACase) {
  std::set<std::string> names;
  for (const auto& c : cases()) names.insert(c.name);
  size_t files = 0;
  for (const auto& entry : fs::directory_iterator(kLabelsDir)) {
    if (entry.path().extension() != ".labels") continue;
    ++files;
    EXPECT_TRUE(names.contains(entry.path().stem().string())) << entry.path() << " has no test case";
  }
  EXPECT_EQ(files, names.size());
}

}  // namespace
