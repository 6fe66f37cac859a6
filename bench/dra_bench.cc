// The DRA driver's NodePrepareResources / NodeUnprepareResources latency, measured from the kubelet's
// side: the driver and its plugin in this process on a fake-NVML H100 node, called over its unix socket
// by the hand-encoded kubelet peer (test/peers/kubelet_dra_peer.h), v1. The claim comes from an
// in-memory lookup (no API server): the numbers are the driver's own work — claim mapping, the CDI
// spec written and renamed, the checkpoint written and fsynced — plus gRPC. Prints p50/p99/max.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "../test/integration/test_env.h"
#include "../test/peers/kubelet_dra_peer.h"
#include "dra/plugin.h"

using namespace kgpu;
using Clock = std::chrono::steady_clock;

namespace {

double pct(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

void report(const char* what, const std::vector<double>& us) {
  std::printf("%-28s n=%zu p50=%.0f us p99=%.0f us max=%.0f us\n", what, us.size(), pct(us, 0.5), pct(us, 0.99),
              *std::max_element(us.begin(), us.end()));
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 300;
  testing::FakeNodeFile f("preset: hgx-h100-8\ndriverVersion: '580.105.08'\ncudaDriverVersion: 12090\n");
  auto node = testing::open_fake();
  auto inv = node->inventory();
  if (!inv) return 1;
  const std::vector<dra::Device> devices = dra::build_devices(*inv).devices;
  testing::TempDir dir;
  dra::DriverOptions o;
  o.node_name = "node-a";
  o.cdi_root = (dir.path() / "cdi").string();
  o.state_dir = (dir.path() / "plugins/gpu.nvidia.com").string();
  o.devices = [&] { return devices; };
  o.healthy = [](const dra::Device&) { return true; };
  o.get_claim = [](const std::string& ns, const std::string& name) -> Result<nlohmann::json> {
    const std::string uid = name;  // the benchmark names each claim by its uid
    const int gpu = std::atoi(name.substr(name.rfind('-') + 1).c_str()) % 8;
    return nlohmann::json{{"metadata", {{"name", name}, {"namespace", ns}, {"uid", uid}}},
                          {"status",
                           {{"allocation",
                             {{"devices",
                               {{"results", nlohmann::json::array({{{"request", "gpu"},
                                                                    {"driver", "gpu.nvidia.com"},
                                                                    {"pool", "node-a"},
                                                                    {"device", fmt::format("gpu-{}", gpu)}}})}}}}}}}};
  };
  dra::Driver driver(std::move(o));
  if (!driver.start()) return 1;
  dra::Plugin plugin(driver, {(dir.path() / "reg").string(), (dir.path() / "plugins").string()});
  if (!plugin.start()) return 1;
  const std::string ep = plugin.dra_socket();

  std::vector<double> prep, repeat, unprep;
  for (int i = 0; i < n; ++i) {
    const std::string uid = fmt::format("claim-{}", i);
    const std::vector<testing::DraClaim> claims = {{"default", uid, uid}};
    auto t0 = Clock::now();
    auto r = testing::dra_prepare(ep, "v1", claims);
    auto t1 = Clock::now();
    auto r2 = testing::dra_prepare(ep, "v1", claims);
    auto t2 = Clock::now();
    auto u = testing::dra_unprepare(ep, "v1", claims);
    auto t3 = Clock::now();
    if (!r || !r2 || !u || !r->at(uid).error.empty()) {
      std::fprintf(stderr, "call failed at %d\n", i);
      return 1;
    }
    prep.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    repeat.push_back(std::chrono::duration<double, std::micro>(t2 - t1).count());
    unprep.push_back(std::chrono::duration<double, std::micro>(t3 - t2).count());
  }
  report("NodePrepareResources", prep);
  report("NodePrepareResources again", repeat);
  report("NodeUnprepareResources", unprep);
  return 0;
}
