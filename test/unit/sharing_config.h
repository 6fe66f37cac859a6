#pragma once

#include <gtest/gtest.h>

#include <string>

#include "sharing/config.h"

namespace kgpu::sharing::test_support {

// The sharing config parsed from `yaml` and finalized with `o`; a test failure (and an empty config)
// where either step fails.
inline Config config(const std::string& yaml, const Overrides& o = {}) {
  auto c = parse_config(yaml, "config.yaml");
  EXPECT_TRUE(c.has_value()) << (c ? "" : c.error().message);
  if (!c) return {};
  auto ok = finalize(*c, o);
  EXPECT_TRUE(ok.has_value()) << (ok ? "" : ok.error().message);
  return *c;
}

}  // namespace kgpu::sharing::test_support
