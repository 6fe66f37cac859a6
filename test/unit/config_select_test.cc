// The per-node config choice (src/agent/config_select.h): label, default, fallbacks, names.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "agent/config_select.h"

namespace kgpu::agent {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using F = ConfigFallback;

struct Case {
  const char* what;
  std::optional<std::string> label;
  std::string default_name;
  std::vector<F> fallbacks;
  std::vector<std::string> available;
  std::string name;         // expected choice ("" with `error` set: an error)
  std::string selected_by;  // "" = an error is expected
  std::vector<std::string> error;  // substrings of the error
};

TEST(ConfigChoice, Table) {
  const std::vector<F> nvidia{F::kNamed, F::kSingle};
  const std::vector<Case> cases{
      {"label names a config", "ts4", "", nvidia, {"plain", "ts4"}, "ts4", "node-label", {}},
      {"label wins over the default", "ts4", "plain", nvidia, {"plain", "ts4"}, "ts4", "node-label", {}},
      {"label naming no config", "big", "plain", nvidia, {"plain", "ts4"}, "", "",
       {"node n1", "nvidia.com/device-plugin.config=\"big\"", "names no config in /cfg", "available: plain, ts4"}},
      {"label with a slash", "a/b", "", nvidia, {"a"}, "", "", {"\"a/b\" is not a config name", "/cfg"}},
      {"label climbing out", "../x", "", nvidia, {"x"}, "", "", {"\"../x\" is not a config name"}},
      {"label naming the volume's entries", "..data", "", nvidia, {"x"}, "", "", {"is not a config name"}},
      {"empty label is no label", "", "plain", nvidia, {"plain", "ts4"}, "plain", "default", {}},
      {"no label: the default", std::nullopt, "plain", nvidia, {"plain", "ts4"}, "plain", "default", {}},
      {"default missing", std::nullopt, "gone", nvidia, {"plain", "ts4"}, "", "",
       {"default config \"gone\"", "available: plain, ts4"}},
      {"default outside the directory", std::nullopt, "../etc/passwd", nvidia, {"plain"}, "", "", {"\"../etc/passwd\""}},
      {"named fallback", std::nullopt, "", nvidia, {"default", "ts4"}, "default", "named", {}},
      {"single fallback", std::nullopt, "", nvidia, {"only"}, "only", "single", {}},
      {"named only, no config named default", std::nullopt, "", {F::kNamed}, {"only"}, "", "",
       {"no fallback applies", "configs in /cfg: only"}},
      {"single after named", std::nullopt, "", {F::kSingle, F::kNamed}, {"default"}, "default", "single", {}},
      {"two configs, no fallback applies", std::nullopt, "", nvidia, {"a", "b"}, "", "", {"no fallback applies", "a, b"}},
      {"empty fallback", std::nullopt, "", {F::kNamed, F::kEmpty}, {"a", "b"}, "", "empty", {}},
      {"empty directory", std::nullopt, "", nvidia, {}, "", "", {"configs in /cfg: none"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    ConfigDirOptions o;
    o.dir = "/cfg";
    o.default_name = c.default_name;
    o.fallbacks = c.fallbacks;
    auto got = choose_config(o, "n1", c.label, c.available);
    if (c.selected_by.empty()) {
      ASSERT_FALSE(got) << got->name;
      for (const auto& e : c.error) EXPECT_THAT(got.error().message, HasSubstr(e));
      continue;
    }
    ASSERT_TRUE(got) << got.error().message;
    EXPECT_EQ(got->name, c.name);
    EXPECT_EQ(got->selected_by, c.selected_by);
    EXPECT_EQ(got->path, c.name.empty() ? "" : "/cfg/" + c.name);
  }
}

TEST(ConfigChoice, Names) {
  for (const char* ok : {"a", "ts-4", "mig_mixed", "v1.yaml", ".hidden"}) EXPECT_TRUE(valid_config_name(ok)) << ok;
  for (const char* bad : {"", ".", "..", "../x", "a/b", "/abs", "..data", "..2026_01_01", "sp ace", "a\\b"}) {
    EXPECT_FALSE(valid_config_name(bad)) << bad;
  }
}

TEST(ConfigChoice, Fallbacks) {
  auto f = parse_config_fallbacks("named, single,empty");
  ASSERT_TRUE(f);
  EXPECT_THAT(*f, ElementsAre(F::kNamed, F::kSingle, F::kEmpty));
  ASSERT_TRUE(parse_config_fallbacks(""));
  EXPECT_TRUE(parse_config_fallbacks("")->empty());
  auto bad = parse_config_fallbacks("named,first");
  ASSERT_FALSE(bad);
  EXPECT_THAT(bad.error().message, AllOf(HasSubstr("'first'"), HasSubstr("named, single or empty")));
}

// A ConfigMap volume: keys are symlinks into ..data, itself a symlink to a timestamped directory.
TEST(ConfigChoice, ListsAConfigMapVolume) {
  std::string tmpl = (std::filesystem::temp_directory_path() / "kgpu-cfgdir-XXXXXX").string();
  ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
  const std::filesystem::path dir = tmpl;
  std::filesystem::create_directories(dir / "..2026_01_01_00_00_00.1");
  for (const char* k : {"ts4", "plain"}) std::ofstream(dir / "..2026_01_01_00_00_00.1" / k) << "version: v1\n";
  std::filesystem::create_directory_symlink("..2026_01_01_00_00_00.1", dir / "..data");
  for (const char* k : {"ts4", "plain"}) std::filesystem::create_symlink(std::string("..data/") + k, dir / k);
  std::filesystem::create_directory(dir / "subdir");
  std::filesystem::create_symlink("..data/gone", dir / "dangling");
  EXPECT_THAT(list_configs(dir.string()), ElementsAre("plain", "ts4"));
  EXPECT_TRUE(list_configs((dir / "nope").string()).empty());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kgpu::agent
