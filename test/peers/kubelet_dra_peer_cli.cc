// kubelet-dra-peer: the kubelet's side of a DRA driver (kubelet_dra_peer.h) as a command, for tests
// written outside C++ (test/kube/e2e_dra_test.py) that need a node to prepare what a real scheduler
// allocated.
//
//   kubelet-dra-peer register REGISTRATION_SOCKET
//       GetInfo, the kubelet's checks, NotifyRegistrationStatus; prints {"name","endpoint","versions"}.
//   kubelet-dra-peer prepare|unprepare ENDPOINT VERSION NAMESPACE UID NAME
//       NodePrepareResources / NodeUnprepareResources for one claim; prints the claim's answer:
//       {"devices":[{"requests","pool","device","cdi"}],"error"} or {"error"}.
// Exit status: 0 when the call succeeded (a per-claim error is in the JSON), 1 when it failed
// (message on stderr), 2 on usage.
#include <nlohmann/json.hpp>

#include <cstdio>
#include <iostream>
#include <string>

#include "kubelet_dra_peer.h"

using nlohmann::json;
using namespace kgpu::testing;

namespace {

int usage() {
  std::cerr << "usage: kubelet-dra-peer register REGISTRATION_SOCKET\n"
               "       kubelet-dra-peer prepare|unprepare ENDPOINT VERSION NAMESPACE UID NAME\n";
  return 2;
}

int failed(const RpcError& e) {
  std::cerr << "kubelet-dra-peer: " << e.message << " (gRPC code " << static_cast<int>(e.code) << ")\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage();
  const std::string verb = argv[1];
  if (verb == "register" && argc == 3) {
    auto info = dra_register(argv[2]);
    if (!info) return failed(info.error());
    std::cout << json{{"name", info->name}, {"endpoint", info->endpoint}, {"versions", info->supported_versions}}.dump()
              << "\n";
    return 0;
  }
  if ((verb == "prepare" || verb == "unprepare") && argc == 7) {
    const std::vector<DraClaim> claims{{argv[4], argv[5], argv[6]}};
    if (verb == "prepare") {
      auto out = dra_prepare(argv[2], argv[3], claims);
      if (!out) return failed(out.error());
      const auto it = out->find(argv[5]);
      if (it == out->end()) {
        std::cerr << "kubelet-dra-peer: the driver answered no entry for claim " << argv[5] << "\n";
        return 1;
      }
      json devices = json::array();
      for (const auto& d : it->second.devices)
        devices.push_back({{"requests", d.request_names}, {"pool", d.pool_name}, {"device", d.device_name},
                           {"cdi", d.cdi_device_ids}});
      std::cout << json{{"devices", devices}, {"error", it->second.error}}.dump() << "\n";
      return 0;
    }
    auto out = dra_unprepare(argv[2], argv[3], claims);
    if (!out) return failed(out.error());
    const auto it = out->find(argv[5]);
    std::cout << json{{"error", it == out->end() ? "no entry for the claim" : it->second}}.dump() << "\n";
    return 0;
  }
  return usage();
}
