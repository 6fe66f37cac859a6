// Shared by the DRA publisher tests: rendered devices as dra::Device renders them, and the
// API-server stand-in with a client and its request log.
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>

#include <cstdio>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "dra/slices.h"
#include "standin.h"
#include "test_env.h"

namespace kgpu::dra {

using nlohmann::json;
namespace res = kube::resources;

// A rendered device as dra::Device renders it (names and attributes of NVIDIA's driver).
inline json gpu_device(int minor, const std::string& memory = "80Gi") {
  return json{{"name", "gpu-" + std::to_string(minor)},
              {"attributes",
               {{"type", {{"string", "gpu"}}},
                {"uuid", {{"string", "GPU-0000000" + std::to_string(minor)}}},
                {"productName", {{"string", "NVIDIA H100 80GB HBM3"}}},
                {"driverVersion", {{"version", "570.86.15"}}},
                {"resource.kubernetes.io/pciBusID", {{"string", "0000:1" + std::to_string(minor) + ":00.0"}}}}},
              {"capacity", {{"memory", {{"value", memory}}}}}};
}

inline json mig_device(int minor, int placement) {
  return json{{"name", "gpu-" + std::to_string(minor) + "-mig-1g10gb-19-" + std::to_string(placement)},
              {"attributes",
               {{"type", {{"string", "mig"}}},
                {"profile", {{"string", "1g.10gb"}}},
                {"parentUUID", {{"string", "GPU-0000000" + std::to_string(minor)}}}}},
              {"capacity", {{"memory", {{"value", "9856Mi"}}}, {"multiprocessors", {{"value", "16"}}}}}};
}

inline std::vector<PublishedDevice> gpus(int n) {
  std::vector<PublishedDevice> out;
  for (int i = 0; i < n; ++i) out.push_back({gpu_device(i), {}});
  return out;
}

// MIG devices of `gpus` GPUs, 7 each; more than 128 with 19 GPUs.
inline std::vector<PublishedDevice> migs(int gpus_n) {
  std::vector<PublishedDevice> out;
  for (int g = 0; g < gpus_n; ++g)
    for (int p = 0; p < 7; ++p) out.push_back({mig_device(g, p), {}});
  return out;
}

struct Cluster {
  kgpu::testing::StandIn s;
  std::unique_ptr<kube::Client> c = kgpu::testing::client_for(kgpu::testing::token_config(s));

  void node(const std::string& name) {
    auto r = c->create(res::kNodes, "", json{{"metadata", {{"name", name}}}});
    ASSERT_TRUE(r) << r.error().text();
  }
  std::vector<json> slices(const std::string& selector = {}) {
    kube::ListOptions o;
    o.field_selector = selector;
    auto r = c->list_all(res::kResourceSlices, "", o);
    EXPECT_TRUE(r) << r.error().text();
    return r ? *r : std::vector<json>{};
  }
  // Requests the stand-in saw since the last clear: "METHOD path".
  // On a failed test, what the stand-in was asked (method, path, query, answer).
  ~Cluster() {
    if (!::testing::Test::HasFailure()) return;
    httplib::SSLClient h("127.0.0.1", s.port());
    h.enable_server_certificate_verification(false);
    if (auto r = h.Get("/standin/v1/requests")) {
      for (const auto& e : json::parse(r->body)) std::fprintf(stderr, "stand-in: %s\n", e.dump().c_str());
    }
  }
  std::vector<std::string> requests(bool clear = false) {
    httplib::SSLClient h("127.0.0.1", s.port());
    h.enable_server_certificate_verification(false);
    std::vector<std::string> out;
    if (auto r = h.Get("/standin/v1/requests")) {
      for (const auto& e : json::parse(r->body)) {
        out.push_back(e["method"].get<std::string>() + " " + e["path"].get<std::string>());
      }
    }
    if (clear) h.Delete("/standin/v1/requests");
    return out;
  }
  size_t writes() {
    size_t n = 0;
    for (const auto& r : requests()) n += !r.starts_with("GET ") && r.find(" /standin/") == std::string::npos;
    return n;
  }
};

inline PublisherOptions options(const std::string& node = "node-a") {
  PublisherOptions o;
  o.node_name = node;
  o.initial_backoff = std::chrono::milliseconds(20);
  o.max_backoff = std::chrono::milliseconds(200);
  return o;
}

inline std::set<std::string> device_names(const std::vector<json>& slices) {
  std::set<std::string> out;
  for (const auto& s : slices)
    for (const auto& d : s["spec"]["devices"]) out.insert(d["name"].get<std::string>());
  return out;
}

inline const json* device(const std::vector<json>& slices, const std::string& name) {
  for (const auto& s : slices)
    for (const auto& d : s["spec"]["devices"])
      if (d["name"] == name) return &d;
  return nullptr;
}

}  // namespace kgpu::dra
