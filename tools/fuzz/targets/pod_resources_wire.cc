// Fuzz target: the PodResources messages kgpu decodes from the kubelet, through the code generated
// from proto/podresources/v1/api.proto, flattened the way kubelet::PodResourcesClient::list_all
// does (pod, container, device id; the DRA claim devices). The first input byte picks
// ListPodResourcesResponse (even) or AllocatableResourcesResponse / GetPodResourcesResponse (odd).
// Properties: parsing never crashes; a parsed message re-serializes to bytes that parse to an
// equal message. The hand-written
// encoder of the kubelet peer (test/peers/kubelet_peer.h) is checked against it: what it writes
// for the decoded pods parses back to the same flattened devices and claim devices.
#include <string>
#include <tuple>
#include <vector>

#include "fuzz.h"
#include "kubelet_peer.h"
#include "podresources/v1/api.pb.h"

namespace {

using kgpu::fuzz::check;
using Flat = std::vector<std::tuple<std::string, std::string, std::string, std::string, std::string>>;

Flat flatten(const v1::ListPodResourcesResponse& resp) {
  Flat out;
  for (const auto& pod : resp.pod_resources())
    for (const auto& c : pod.containers())
      for (const auto& d : c.devices())
        for (const auto& id : d.device_ids()) out.emplace_back(pod.namespace_(), pod.name(), c.name(), d.resource_name(), id);
  return out;
}

// The DRA claim devices, flattened the way kubelet::PodResourcesClient::list_all does.
using FlatClaims = std::vector<std::vector<std::string>>;
FlatClaims flatten_claims(const v1::ListPodResourcesResponse& resp) {
  FlatClaims out;
  for (const auto& pod : resp.pod_resources())
    for (const auto& c : pod.containers())
      for (const auto& dr : c.dynamic_resources())
        for (const auto& r : dr.claim_resources()) {
          std::vector<std::string> row{pod.namespace_(), pod.name(),      c.name(),      dr.claim_namespace(),
                                       dr.claim_name(),  r.driver_name(), r.pool_name(), r.device_name()};
          for (const auto& cdi : r.cdi_devices()) row.push_back(cdi.name());
          out.push_back(std::move(row));
        }
  return out;
}

template <typename Message>
void round_trip(const Message& m, const char* what) {
  std::string bytes;
  check(m.SerializeToString(&bytes), what);
  Message again;
  check(again.ParseFromString(bytes), what);
  std::string bytes2;
  check(again.SerializeToString(&bytes2) && bytes2 == bytes, what);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const char* in = reinterpret_cast<const char*>(data) + 1;
  const int n = static_cast<int>(size - 1);
  if (data[0] % 2 == 1) {
    v1::AllocatableResourcesResponse a;
    if (a.ParseFromArray(in, n)) round_trip(a, "AllocatableResourcesResponse round trip");
    v1::GetPodResourcesResponse g;
    if (g.ParseFromArray(in, n)) round_trip(g, "GetPodResourcesResponse round trip");
    return 0;
  }
  v1::ListPodResourcesResponse resp;
  if (!resp.ParseFromArray(in, n)) return 0;
  round_trip(resp, "ListPodResourcesResponse round trip");
  const Flat flat = flatten(resp);
  // The peer's encoder over the same pods (it writes only the fields kgpu reads).
  std::vector<kgpu::testing::PeerPod> pods;
  for (const auto& p : resp.pod_resources()) {
    kgpu::testing::PeerPod pod{p.namespace_(), p.name(), {}};
    for (const auto& c : p.containers()) {
      for (const auto& d : c.devices())
        pod.containers.push_back({c.name(), d.resource_name(), {d.device_ids().begin(), d.device_ids().end()}});
      kgpu::testing::PeerContainer claims{c.name(), "", {}};
      for (const auto& dr : c.dynamic_resources()) {
        kgpu::testing::PeerClaim claim{dr.claim_name(), dr.claim_namespace(), {}};
        for (const auto& r : dr.claim_resources()) {
          kgpu::testing::PeerClaimDevice d{r.driver_name(), r.pool_name(), r.device_name(), {}};
          for (const auto& cdi : r.cdi_devices()) d.cdi_devices.push_back(cdi.name());
          claim.devices.push_back(std::move(d));
        }
        claims.claims.push_back(std::move(claim));
      }
      if (!claims.claims.empty()) pod.containers.push_back(std::move(claims));
    }
    pods.push_back(std::move(pod));
  }
  v1::ListPodResourcesResponse from_peer;
  check(from_peer.ParseFromString(kgpu::testing::encode_list_response(pods)), "protobuf parses the peer's encoding");
  check(flatten(from_peer) == flat, "the peer's encoding carries the same devices");
  check(flatten_claims(from_peer) == flatten_claims(resp), "the peer's encoding carries the same claim devices");
  return 0;
}
