// Fuzz target: the hand-written Device Plugin API wire decoders of the test peer
// (test/peers/device_plugin_peer.h). The first input byte picks the message, the rest is its
// encoding. Properties, from the codec rules in that header:
// - a decoder never crashes nor reads outside its input (ASan);
// - a decoded value re-encodes to bytes that decode to the same value (round trip);
// - what the peer accepts, protobuf's generated parser (kgpu's proto/) accepts too, with the same
//   value: the peer is no more lenient than a real protobuf reader.
#include <string_view>

#include "device_plugin_peer.h"
#include "deviceplugin/v1beta1/api.pb.h"
#include "fuzz.h"

namespace {

using kgpu::fuzz::check;
namespace peer = kgpu::testing;
namespace pb = v1beta1;

template <typename Message>
Message parse_pb(std::string_view bytes, const char* what) {
  Message m;
  check(m.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())), what);
  return m;
}

std::vector<std::string> strings(const google::protobuf::RepeatedPtrField<std::string>& r) { return {r.begin(), r.end()}; }

void registration(std::string_view in) {
  auto d = peer::decode_register_request(in);
  if (!d) return;
  check(peer::decode_register_request(peer::encode_register_request(*d)) == d, "RegisterRequest round trip");
  const auto m = parse_pb<pb::RegisterRequest>(in, "protobuf parses what the peer accepts: RegisterRequest");
  check(m.version() == d->version && m.endpoint() == d->endpoint && m.resource_name() == d->resource_name &&
            m.has_options() == d->has_options &&
            m.options().pre_start_required() == d->options.pre_start_required &&
            m.options().get_preferred_allocation_available() == d->options.get_preferred_allocation_available,
        "RegisterRequest: the peer and protobuf agree");
}

void list_and_watch(std::string_view in) {
  auto d = peer::decode_list_and_watch_response(in);
  if (!d) return;
  check(peer::decode_list_and_watch_response(peer::encode_list_and_watch_response(*d)) == d,
        "ListAndWatchResponse round trip");
  const auto m = parse_pb<pb::ListAndWatchResponse>(in, "protobuf parses what the peer accepts: ListAndWatchResponse");
  check(static_cast<size_t>(m.devices_size()) == d->size(), "ListAndWatchResponse: device count agrees");
  for (int i = 0; i < m.devices_size(); ++i) {
    const auto& a = m.devices(i);
    const auto& b = (*d)[static_cast<size_t>(i)];
    std::vector<int64_t> numa;
    for (const auto& n : a.topology().nodes()) numa.push_back(n.id());
    check(a.id() == b.id && a.health() == b.health && numa == b.numa_nodes, "ListAndWatchResponse: devices agree");
  }
}

void allocate_request(std::string_view in) {
  auto d = peer::decode_allocate_request(in);
  if (!d) return;
  check(peer::decode_allocate_request(peer::encode_allocate_request(*d)) == d, "AllocateRequest round trip");
  const auto m = parse_pb<pb::AllocateRequest>(in, "protobuf parses what the peer accepts: AllocateRequest");
  std::vector<std::vector<std::string>> ids;
  for (const auto& c : m.container_requests()) ids.push_back(strings(c.devices_ids()));
  check(ids == *d, "AllocateRequest: the peer and protobuf agree");
}

void allocate_response(std::string_view in) {
  auto d = peer::decode_allocate_response(in);
  if (!d) return;
  check(peer::decode_allocate_response(peer::encode_allocate_response(*d)) == d, "AllocateResponse round trip");
  const auto m = parse_pb<pb::AllocateResponse>(in, "protobuf parses what the peer accepts: AllocateResponse");
  check(static_cast<size_t>(m.container_responses_size()) == d->size(), "AllocateResponse: container count agrees");
  for (int i = 0; i < m.container_responses_size(); ++i) {
    const auto& a = m.container_responses(i);
    const auto& b = (*d)[static_cast<size_t>(i)];
    const std::map<std::string, std::string> envs(a.envs().begin(), a.envs().end());
    const std::map<std::string, std::string> annotations(a.annotations().begin(), a.annotations().end());
    check(envs == b.envs && annotations == b.annotations, "AllocateResponse: maps agree");
    check(static_cast<size_t>(a.mounts_size()) == b.mounts.size() &&
              static_cast<size_t>(a.devices_size()) == b.devices.size() &&
              static_cast<size_t>(a.cdi_devices_size()) == b.cdi_devices.size(),
          "AllocateResponse: list sizes agree");
  }
}

void preferred_request(std::string_view in) {
  auto d = peer::decode_preferred_request(in);
  if (!d) return;
  check(peer::decode_preferred_request(peer::encode_preferred_request(*d)) == d,
        "PreferredAllocationRequest round trip");
  const auto m =
      parse_pb<pb::PreferredAllocationRequest>(in, "protobuf parses what the peer accepts: PreferredAllocationRequest");
  check(static_cast<size_t>(m.container_requests_size()) == d->size(), "PreferredAllocationRequest: count agrees");
  for (int i = 0; i < m.container_requests_size(); ++i) {
    const auto& a = m.container_requests(i);
    const auto& b = (*d)[static_cast<size_t>(i)];
    check(strings(a.available_deviceids()) == b.available && strings(a.must_include_deviceids()) == b.must_include &&
              a.allocation_size() == b.size,
          "PreferredAllocationRequest: the peer and protobuf agree");
  }
}

void preferred_response(std::string_view in) {
  auto d = peer::decode_preferred_response(in);
  if (!d) return;
  check(peer::decode_preferred_response(peer::encode_preferred_response(*d)) == d,
        "PreferredAllocationResponse round trip");
  const auto m = parse_pb<pb::PreferredAllocationResponse>(
      in, "protobuf parses what the peer accepts: PreferredAllocationResponse");
  std::vector<std::vector<std::string>> ids;
  for (const auto& c : m.container_responses()) ids.push_back(strings(c.deviceids()));
  check(ids == *d, "PreferredAllocationResponse: the peer and protobuf agree");
}

void pre_start(std::string_view in) {
  auto d = peer::decode_pre_start_request(in);
  if (!d) return;
  check(peer::decode_pre_start_request(peer::encode_pre_start_request(*d)) == d, "PreStartContainerRequest round trip");
  const auto m =
      parse_pb<pb::PreStartContainerRequest>(in, "protobuf parses what the peer accepts: PreStartContainerRequest");
  check(strings(m.devices_ids()) == *d, "PreStartContainerRequest: the peer and protobuf agree");
}

void options(std::string_view in) {
  auto d = peer::decode_plugin_options(in);
  if (!d) return;
  check(peer::decode_plugin_options(peer::encode_plugin_options(*d)) == d, "DevicePluginOptions round trip");
  const auto m = parse_pb<pb::DevicePluginOptions>(in, "protobuf parses what the peer accepts: DevicePluginOptions");
  check(m.pre_start_required() == d->pre_start_required &&
            m.get_preferred_allocation_available() == d->get_preferred_allocation_available,
        "DevicePluginOptions: the peer and protobuf agree");
}

void empty(std::string_view in) {
  if (!peer::decode_empty(in)) return;
  (void)parse_pb<pb::Empty>(in, "protobuf parses what the peer accepts: Empty");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 9) {
    case 0: registration(in); break;
    case 1: list_and_watch(in); break;
    case 2: allocate_request(in); break;
    case 3: allocate_response(in); break;
    case 4: preferred_request(in); break;
    case 5: preferred_response(in); break;
    case 6: pre_start(in); break;
    case 7: options(in); break;
    default: empty(in); break;
  }
  return 0;
}
