// The Device Plugin API v1beta1 test peer: its hand-written codec against bytes worked out by hand from the
// wire contract's field numbers, malformed and random input, and its gRPC sides (KubeletRegistry,
// PluginClient) against a small device plugin served here through gRPC's generic callback service.
#include <fcntl.h>
#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <limits>
#include <mutex>
#include <random>
#include <set>

#include "../peers/device_plugin_peer.h"

namespace kgpu::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr auto kWait = 5s;

// Bytes from hex pairs; spaces are ignored.
std::string H(std::string_view hex) {
  std::string out;
  int nibble = -1;
  for (char c : hex) {
    if (c == ' ') continue;
    const int v = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
    EXPECT_GE(v, 0) << "bad hex digit " << c;
    if (nibble < 0) {
      nibble = v;
    } else {
      out += static_cast<char>(nibble * 16 + v);
      nibble = -1;
    }
  }
  EXPECT_LT(nibble, 0) << "odd number of hex digits";
  return out;
}

// `payload` preceded by its length as a varint (a length-delimited field's value).
std::string L(const std::string& payload) {
  std::string out;
  for (uint64_t n = payload.size();; n >>= 7) {
    if (n < 0x80) {
      out += static_cast<char>(n);
      break;
    }
    out += static_cast<char>((n & 0x7f) | 0x80);
  }
  return out + payload;
}

template <typename T>
std::string error_of(const Decoded<T>& d) {
  return d ? std::string("(decoded)") : d.error();
}

// ---- Codec against hand-worked bytes ----

TEST(DevicePluginWire, RegisterRequestMatchesHandEncodedBytes) {
  // version(1) "v1beta1", endpoint(2) "nvidia-gpu.sock" (15), resource_name(3) "nvidia.com/gpu" (14),
  // options(4) { get_preferred_allocation_available(2) = true }.
  const std::string bytes =
      H("0a 07") + "v1beta1" + H("12 0f") + "nvidia-gpu.sock" + H("1a 0e") + "nvidia.com/gpu" + H("22 02 10 01");
  const Registration reg{"v1beta1", "nvidia-gpu.sock", "nvidia.com/gpu", {false, true}, true};
  EXPECT_EQ(encode_register_request(reg), bytes);
  auto decoded = decode_register_request(bytes);
  ASSERT_TRUE(decoded) << decoded.error();
  EXPECT_EQ(*decoded, reg);
}

TEST(DevicePluginWire, RegisterRequestOptionsPresence) {
  Registration reg{"v1beta1", "a.sock", "example.com/gpu", {}, false};
  const std::string without = encode_register_request(reg);
  EXPECT_EQ(without, H("0a 07") + "v1beta1" + H("12 06") + "a.sock" + H("1a 0f") + "example.com/gpu");
  reg.has_options = true;  // present but all-default: an empty submessage
  EXPECT_EQ(encode_register_request(reg), without + H("22 00"));
  auto decoded = decode_register_request(without + H("22 00"));
  ASSERT_TRUE(decoded) << decoded.error();
  EXPECT_TRUE(decoded->has_options);
  EXPECT_EQ(decoded->options, PluginOptions{});
  // Two occurrences of the options submessage merge.
  decoded = decode_register_request(H("22 02 08 01 22 02 10 01"));
  ASSERT_TRUE(decoded) << decoded.error();
  EXPECT_EQ(decoded->options, (PluginOptions{true, true}));
  EXPECT_EQ(*decode_register_request(""), Registration{});
}

TEST(DevicePluginWire, PluginOptionsBytes) {
  EXPECT_EQ(encode_plugin_options({true, true}), H("08 01 10 01"));
  EXPECT_EQ(encode_plugin_options({false, true}), H("10 01"));
  EXPECT_EQ(encode_plugin_options({}), "");
  EXPECT_EQ(*decode_plugin_options(H("10 02")), (PluginOptions{false, true}));         // any non-zero varint is true
  EXPECT_EQ(*decode_plugin_options(H("08 01 08 00")), (PluginOptions{false, false}));  // last occurrence wins
  EXPECT_EQ(*decode_plugin_options(H("10 81 80 80 80 80 80 80 80 80 01")), (PluginOptions{false, true}));
}

TEST(DevicePluginWire, ListAndWatchResponseHandBytes) {
  // Device { ID "GPU-0", health "Healthy", topology { nodes { ID 0 } } }: NUMA node 0 is an empty NUMANode.
  const std::string dev0 = H("0a 05") + "GPU-0" + H("12 07") + "Healthy" + H("1a 02 0a 00");
  // Device { ID "GPU-1", health "Unhealthy", topology { nodes { ID 1 } } }.
  const std::string dev1 = H("0a 05") + "GPU-1" + H("12 09") + "Unhealthy" + H("1a 04 0a 02 08 01");
  // Device { ID "MIG-2" }: no health, no topology.
  const std::string dev2 = H("0a 05") + "MIG-2";
  const std::string bytes = H("0a 14") + dev0 + H("0a 18") + dev1 + H("0a 07") + dev2;
  const std::vector<DeviceEntry> devices{{"GPU-0", "Healthy", {0}}, {"GPU-1", "Unhealthy", {1}}, {"MIG-2", "", {}}};
  EXPECT_EQ(encode_list_and_watch_response(devices), bytes);
  auto decoded = decode_list_and_watch_response(bytes);
  ASSERT_TRUE(decoded) << decoded.error();
  EXPECT_EQ(*decoded, devices);
  // An empty list is an empty message; a device's topology given twice merges its nodes.
  EXPECT_EQ(encode_list_and_watch_response({}), "");
  EXPECT_EQ(*decode_list_and_watch_response(""), std::vector<DeviceEntry>{});
  decoded = decode_list_and_watch_response(H("0a 0c 1a 04 0a 02 08 01 1a 04 0a 02 08 03"));
  ASSERT_TRUE(decoded) << decoded.error();
  EXPECT_EQ(decoded->at(0).numa_nodes, (std::vector<int64_t>{1, 3}));
}

TEST(DevicePluginWire, AllocateRequestHandBytes) {
  // container_requests { devices_ids "GPU-0" devices_ids "GPU-1" } container_requests { }
  const std::string bytes = H("0a 0e 0a 05") + "GPU-0" + H("0a 05") + "GPU-1" + H("0a 00");
  const std::vector<std::vector<std::string>> ids{{"GPU-0", "GPU-1"}, {}};
  EXPECT_EQ(encode_allocate_request(ids), bytes);
  auto decoded = decode_allocate_request(bytes);
  ASSERT_TRUE(decoded) << decoded.error();
  EXPECT_EQ(*decoded, ids);
}

TEST(DevicePluginWire, AllocateResponseHandBytes) {
  const std::string env = H("0a 06 0a 01") + "A" + H("12 01") + "1";                   // envs {A: 1}
  const std::string mount = H("12 0a 0a 02") + "/c" + H("12 02") + "/h" + H("18 01");  // read-only mount
  const std::string spec = H("1a 20 0a 0c") + "/dev/nvidia0" + H("12 0c") + "/dev/nvidia0" + H("1a 02") + "rw";
  const std::string annotation = H("22 06 0a 01") + "k" + H("12 01") + "v";
  const std::string cdi = H("2a 12 0a 10") + "nvidia.com/gpu=0";
  const std::string container = env + mount + spec + annotation + cdi;
  ASSERT_EQ(container.size(), 8u + 12 + 34 + 8 + 20);
  const std::string bytes = H("0a 52") + container;  // 82 bytes

  ContainerAllocation alloc;
  alloc.envs = {{"A", "1"}};
  alloc.mounts = {{"/c", "/h", true}};
  alloc.devices = {{"/dev/nvidia0", "/dev/nvidia0", "rw"}};
  alloc.annotations = {{"k", "v"}};
  alloc.cdi_devices = {"nvidia.com/gpu=0"};
  EXPECT_EQ(encode_allocate_response({alloc}), bytes);
  auto decoded = decode_allocate_response(bytes);
  ASSERT_TRUE(decoded) << decoded.error();
  ASSERT_EQ(decoded->size(), 1u);
  EXPECT_EQ(decoded->front(), alloc);
  // The same fields in another order (cdi, annotation, spec, mount, env) decode the same.
  decoded = decode_allocate_response(H("0a 52") + cdi + annotation + spec + mount + env);
  ASSERT_TRUE(decoded) << decoded.error();
  EXPECT_EQ(decoded->front(), alloc);
}

TEST(DevicePluginWire, PreferredAllocationHandBytes) {
  // container_requests { available "a", "b"; must_include "a"; allocation_size 1 }
  const std::string bytes = H("0a 0b 0a 01") + "a" + H("0a 01") + "b" + H("12 01") + "a" + H("18 01");
  const std::vector<PreferredRequest> req{{{"a", "b"}, {"a"}, 1}};
  EXPECT_EQ(encode_preferred_request(req), bytes);
  auto decoded = decode_preferred_request(bytes);
  ASSERT_TRUE(decoded) << decoded.error();
  EXPECT_EQ(*decoded, req);
  // int32 -1 is sign-extended to ten bytes.
  const std::string negative = H("0a 0b 18 ff ff ff ff ff ff ff ff ff 01");
  EXPECT_EQ(encode_preferred_request({{{}, {}, -1}}), negative);
  EXPECT_EQ(decode_preferred_request(negative)->at(0).size, -1);

  // container_responses { deviceIDs "b" } container_responses { }
  const std::string response = H("0a 03 0a 01") + "b" + H("0a 00");
  EXPECT_EQ(encode_preferred_response({{"b"}, {}}), response);
  EXPECT_EQ(*decode_preferred_response(response), (std::vector<std::vector<std::string>>{{"b"}, {}}));
}

TEST(DevicePluginWire, PreStartRequestHandBytes) {
  const std::string bytes = H("0a 05") + "GPU-0" + H("0a 00");
  EXPECT_EQ(encode_pre_start_request({"GPU-0", ""}), bytes);  // repeated: empty strings are kept
  EXPECT_EQ(*decode_pre_start_request(bytes), (std::vector<std::string>{"GPU-0", ""}));
  EXPECT_TRUE(decode_empty(""));
  EXPECT_TRUE(decode_empty(H("08 01 12 00")));  // unknown fields of an Empty are skipped
}

TEST(DevicePluginWire, MapEntries) {
  auto envs = [](const std::string& entries) {
    auto d = decode_allocate_response(H("0a") + std::string(1, static_cast<char>(entries.size())) + entries);
    EXPECT_TRUE(d) << d.error();
    return d ? d->at(0).envs : std::map<std::string, std::string>{};
  };
  // value before key
  EXPECT_EQ(envs(H("0a 06 12 01") + "1" + H("0a 01") + "A"), (std::map<std::string, std::string>{{"A", "1"}}));
  // missing value, missing key, empty entry
  EXPECT_EQ(envs(H("0a 03 0a 01") + "A"), (std::map<std::string, std::string>{{"A", ""}}));
  EXPECT_EQ(envs(H("0a 03 12 01") + "1"), (std::map<std::string, std::string>{{"", "1"}}));
  EXPECT_EQ(envs(H("0a 00")), (std::map<std::string, std::string>{{"", ""}}));
  // duplicate key: the last one wins; an unknown field inside an entry is skipped
  EXPECT_EQ(envs(H("0a 06 0a 01") + "A" + H("12 01") + "1" + H("0a 08 0a 01") + "A" + H("18 07 12 01") + "2"),
            (std::map<std::string, std::string>{{"A", "2"}}));
  EXPECT_EQ(encode_allocate_response({ContainerAllocation{{{"", ""}}, {}, {}, {}, {}}}), H("0a 06 0a 04 0a 00 12 00"));
}

TEST(DevicePluginWire, SkipsUnknownFieldsOfEveryWireType) {
  // field 9 varint 150; field 10 fixed64; field 11 bytes "xyz"; field 12 group holding field 1 varint and a
  // nested group 2; field 13 fixed32; field 1000 varint 1.
  const std::string unknown = H("48 96 01") + H("51 01 02 03 04 05 06 07 08") + H("5a 03") + "xyz" +
                              H("63 08 01 13 14 64") + H("6d 01 02 03 04") + H("c0 3e 01");
  // Unknown fields at every level: ListAndWatchResponse, Device, TopologyInfo and NUMANode.
  const std::string node = unknown + H("08 02") + unknown;
  const std::string topology = unknown + H("0a") + L(node) + unknown;
  const std::string device = H("0a 05") + "GPU-0" + unknown + H("12 07") + "Healthy" + H("1a") + L(topology) + unknown;
  const std::string bytes = unknown + H("0a") + L(device) + unknown;
  auto decoded = decode_list_and_watch_response(bytes);
  ASSERT_TRUE(decoded) << decoded.error();
  EXPECT_EQ(*decoded, (std::vector<DeviceEntry>{{"GPU-0", "Healthy", {2}}}));

  auto reg = decode_register_request(unknown + H("0a 07") + "v1beta1" + H("22 05 10 01 48 96 01") + unknown);
  ASSERT_TRUE(reg) << reg.error();
  EXPECT_EQ(reg->version, "v1beta1");
  EXPECT_EQ(reg->options, (PluginOptions{false, true}));
  EXPECT_TRUE(decode_plugin_options(unknown));
  EXPECT_TRUE(decode_allocate_response(unknown + H("0a 00") + unknown));
  EXPECT_TRUE(decode_preferred_request(H("0a 04 20 05 18 02") + unknown));
}

TEST(DevicePluginWire, RejectsMalformedInput) {
  struct Case {
    std::string bytes;
    std::string want;  // a substring of the error
  };
  const std::vector<Case> register_cases{
      {H("0a"), "truncated varint"},
      {H("08 80"), "truncated varint"},
      {H("0a 05") + "a", "length 5 past end"},
      {H("0a ff ff ff ff 0f") + "a", "past end"},
      {H("08 01"), "RegisterRequest.version: wire type varint, want length-delimited"},
      {H("00 01"), "field number 0"},
      {H("48 ff ff ff ff ff ff ff ff ff 7f"), "longer than 64 bits"},
      {H("48 ff ff ff ff ff ff ff ff ff ff 01"), "longer than 64 bits"},
      {H("0a 02 c3 28"), "RegisterRequest.version: invalid UTF-8"},
      {H("12 03 ed a0 80"), "RegisterRequest.endpoint: invalid UTF-8"},    // a surrogate
      {H("1a 02 c0 80"), "RegisterRequest.resource_name: invalid UTF-8"},  // overlong NUL
      {H("63 08 01"), "unterminated group"},
      {H("63 6c"), "mismatched group end"},
      {H("64"), "group end without a start"},
      {H("51 00 00"), "truncated fixed64"},
      {H("6d 00"), "truncated fixed32"},
      {H("0f"), "invalid wire type 7"},
      {H("0e"), "invalid wire type 6"},
      {H("22 02 0a 00"),
       "RegisterRequest.options: DevicePluginOptions.pre_start_required: wire type length-delimited, want varint"},
      {H("22 01 08"), "RegisterRequest.options: truncated varint"},
      {H("22 05") + "v1bet", "RegisterRequest.options: "},
      {H("f8 ff ff ff ff 01 00"), "field number out of range"},
  };
  for (const auto& c : register_cases) {
    auto d = decode_register_request(c.bytes);
    ASSERT_FALSE(d) << "accepted: " << ::testing::PrintToString(c.bytes);
    EXPECT_NE(d.error().find(c.want), std::string::npos) << d.error() << " (want " << c.want << ")";
  }

  EXPECT_NE(error_of(decode_list_and_watch_response(H("0a 03 1a 01 08")))
                .find("ListAndWatchResponse.devices[0]: Device.topology: truncated varint"),
            std::string::npos);
  EXPECT_NE(error_of(decode_list_and_watch_response(H("0a 06 1a 04 0a 02 0a 00")))
                .find("TopologyInfo.nodes[0]: NUMANode.ID: wire type length-delimited"),
            std::string::npos);
  EXPECT_NE(error_of(decode_list_and_watch_response(H("0a 02 08 01"))).find("Device.ID: wire type varint"),
            std::string::npos);
  EXPECT_NE(
      error_of(decode_list_and_watch_response(H("08 01"))).find("ListAndWatchResponse.devices[0]: wire type varint"),
      std::string::npos);
  EXPECT_NE(error_of(decode_preferred_request(H("0a 02 1a 00"))).find("allocation_size: wire type length-delimited"),
            std::string::npos);
  EXPECT_NE(error_of(decode_allocate_response(H("0a 04 12 02 1a 00"))).find("Mount.read_only: wire type"),
            std::string::npos);
  EXPECT_NE(error_of(decode_allocate_response(H("0a 04 0a 02 08 01"))).find("EnvsEntry.key: wire type varint"),
            std::string::npos);
  EXPECT_NE(error_of(decode_allocate_response(H("0a 05 22 03 12 01 ff"))).find("AnnotationsEntry.value: invalid UTF-8"),
            std::string::npos);
  EXPECT_NE(error_of(decode_allocate_response(H("0a 04 2a 02 0a 05"))).find("cdi_devices"), std::string::npos);
  EXPECT_NE(error_of(decode_allocate_request(H("0a 02 0a 05"))).find("past end"), std::string::npos);
  EXPECT_NE(error_of(decode_pre_start_request(H("08 01"))).find("PreStartContainerRequest.devices_ids"),
            std::string::npos);
  EXPECT_NE(
      error_of(decode_preferred_response(H("0a 02 08 01"))).find("ContainerPreferredAllocationResponse.deviceIDs"),
      std::string::npos);
  EXPECT_FALSE(decode_empty(H("ff")));
  EXPECT_FALSE(decode_plugin_options(H("08")));
}

TEST(DevicePluginWire, EveryProperPrefixOfOneContainerFails) {
  ContainerAllocation alloc;
  alloc.envs = {{"NVIDIA_VISIBLE_DEVICES", "GPU-0,GPU-1"}, {"X", ""}};
  alloc.mounts = {{"/usr/bin/nvidia-smi", "/usr/bin/nvidia-smi", true}};
  alloc.devices = {{"/dev/nvidia0", "/dev/nvidia0", "rw"}};
  alloc.annotations = {{"cdi.k8s.io/nvidia", "nvidia.com/gpu=GPU-0"}};
  alloc.cdi_devices = {"nvidia.com/gpu=GPU-0", "nvidia.com/gpu=GPU-1"};
  const std::string bytes = encode_allocate_response({alloc});
  ASSERT_TRUE(decode_allocate_response(bytes));
  for (size_t n = 1; n < bytes.size(); ++n) {
    EXPECT_FALSE(decode_allocate_response(std::string_view(bytes).substr(0, n))) << "prefix " << n;
  }
}

TEST(DevicePluginWire, RoundTrips) {
  const std::string long_id(300, 'x');  // a two-byte length
  const std::vector<DeviceEntry> devices{
      {"GPU-8c5b0d5e-1b3e-4c8e-9f00-000000000000", "Healthy", {0, 1}},
      {long_id, "Unhealthy", {std::numeric_limits<int64_t>::min(), -1, std::numeric_limits<int64_t>::max()}},
      {"Ünïcödé-✓-𝔾", "", {}}};
  EXPECT_EQ(*decode_list_and_watch_response(encode_list_and_watch_response(devices)), devices);

  const Registration reg{"v1beta1", "kgpu-nvidia.com-gpu.sock", "nvidia.com/gpu", {true, false}, true};
  EXPECT_EQ(*decode_register_request(encode_register_request(reg)), reg);

  ContainerAllocation a, b;
  a.envs = {{"NVIDIA_VISIBLE_DEVICES", long_id}, {"E", "é"}};
  a.mounts = {{"/a", "/b", false}, {"/c", "/d", true}};
  a.devices = {{"/dev/nvidiactl", "/dev/nvidiactl", "rwm"}};
  a.annotations = {{"x", ""}};
  a.cdi_devices = {"nvidia.com/gpu=all", ""};
  const std::vector<ContainerAllocation> allocs{a, b, a};
  EXPECT_EQ(*decode_allocate_response(encode_allocate_response(allocs)), allocs);

  const std::vector<std::vector<std::string>> ids{{"GPU-0::1", "GPU-0::2"}, {}, {long_id}};
  EXPECT_EQ(*decode_allocate_request(encode_allocate_request(ids)), ids);
  EXPECT_EQ(*decode_preferred_response(encode_preferred_response(ids)), ids);
  EXPECT_EQ(*decode_pre_start_request(encode_pre_start_request(ids[0])), ids[0]);

  const std::vector<PreferredRequest> pref{{{"a", "b", "c"}, {}, 2},
                                           {{}, {"z"}, std::numeric_limits<int32_t>::min()},
                                           {{long_id}, {long_id}, std::numeric_limits<int32_t>::max()}};
  EXPECT_EQ(*decode_preferred_request(encode_preferred_request(pref)), pref);
  for (bool p : {false, true}) {
    for (bool q : {false, true}) {
      EXPECT_EQ(*decode_plugin_options(encode_plugin_options({p, q})), (PluginOptions{p, q}));
    }
  }
}

TEST(DevicePluginWire, RandomAndMutatedInputNeverCrashes) {
  ContainerAllocation alloc;
  alloc.envs = {{"A", "1"}};
  alloc.mounts = {{"/c", "/h", true}};
  alloc.cdi_devices = {"v/c=d"};
  const std::vector<std::string> seeds{
      encode_allocate_response({alloc, alloc}),
      encode_list_and_watch_response({{"GPU-0", "Healthy", {0, -5}}, {"GPU-1", "Unhealthy", {}}}),
      encode_register_request({"v1beta1", "e.sock", "r/x", {true, true}, true}),
      encode_preferred_request({{{"a"}, {"b"}, 3}}),
  };
  std::mt19937 rng(12345);
  size_t decoded = 0;
  auto all = [&](std::string_view b) {
    decoded += decode_register_request(b).has_value() + decode_list_and_watch_response(b).has_value() +
               decode_allocate_request(b).has_value() + decode_allocate_response(b).has_value() +
               decode_preferred_request(b).has_value() + decode_preferred_response(b).has_value() +
               decode_pre_start_request(b).has_value() + decode_plugin_options(b).has_value() +
               decode_empty(b).has_value();
  };
  for (int i = 0; i < 20000; ++i) {
    std::string b(rng() % 48, '\0');
    for (auto& c : b) c = static_cast<char>(rng());
    all(b);
    std::string m = seeds[i % seeds.size()];
    for (int k = 0; k < 1 + static_cast<int>(rng() % 3); ++k) m[rng() % m.size()] = static_cast<char>(rng());
    all(m);
    all(std::string_view(m).substr(0, rng() % (m.size() + 1)));
  }
  EXPECT_GT(decoded, 0u);  // some survive; the point is that none crashed or read out of bounds
}

// ---- gRPC sides ----

// A temporary device-plugin directory (short: unix socket paths are limited to 107 bytes).
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/kdp-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

std::string to_bytes(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  std::string out;
  if (!buffer.Valid() || !buffer.Dump(&slices).ok()) return out;
  for (const auto& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

grpc::ByteBuffer to_buffer(const std::string& bytes) {
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

// A device plugin serving DevicePlugin v1beta1 on a unix socket through the generic callback service, with
// the peer's encoders: what the kgpu plugin will be, reduced to what the peer's tests need.
// Threads: the setters and accessors are safe from any thread; calls are served on gRPC threads.
class FakePlugin {
 public:
  explicit FakePlugin(std::string socket) : socket_(std::move(socket)) {}
  ~FakePlugin() { stop(); }

  void start() {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix://" + socket_, grpc::InsecureServerCredentials());
    service_ = std::make_unique<Service>(this);
    builder.RegisterCallbackGenericService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr) << "cannot serve " << socket_;
  }

  // Open streams are cancelled after 200 ms.
  void stop() {
    if (!server_) return;
    server_->Shutdown(std::chrono::system_clock::now() + 200ms);
    server_.reset();
    service_.reset();
  }

  void set_options(PluginOptions o) {
    std::lock_guard lock(mu_);
    options_ = o;
  }
  void set_allocation(std::vector<ContainerAllocation> a) {
    std::lock_guard lock(mu_);
    allocation_ = std::move(a);
  }
  void set_allocate_error(grpc::Status s) {
    std::lock_guard lock(mu_);
    allocate_error_ = std::move(s);
  }
  void set_preferred(std::vector<std::vector<std::string>> p) {
    std::lock_guard lock(mu_);
    preferred_ = std::move(p);
  }
  // Answer `method` with these bytes, whatever the request.
  void set_raw(const std::string& method, std::string bytes) {
    std::lock_guard lock(mu_);
    raw_[method] = std::move(bytes);
  }

  // Sets the device list: sent at once on every open ListAndWatch, and first on every new one.
  void set_devices(const std::vector<DeviceEntry>& devices) { send_all(encode_list_and_watch_response(devices), true); }
  // Sends bytes on every open ListAndWatch (the list for new streams is unchanged).
  void send_raw(const std::string& bytes) { send_all(bytes, false); }
  // Finishes every open ListAndWatch with OK.
  void end_streams() {
    std::lock_guard lock(mu_);
    for (auto* s : streams_) s->send(std::nullopt);
  }

  bool wait_for_streams(size_t n, std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return streams_.size() == n; });
  }
  int cancelled() const { return cancelled_.load(); }
  std::vector<std::vector<std::vector<std::string>>> allocate_requests() {
    std::lock_guard lock(mu_);
    return allocate_requests_;
  }
  std::vector<std::vector<PreferredRequest>> preferred_requests() {
    std::lock_guard lock(mu_);
    return preferred_requests_;
  }
  std::vector<std::vector<std::string>> pre_start_requests() {
    std::lock_guard lock(mu_);
    return pre_start_requests_;
  }

 private:
  // One ListAndWatch: reads the Empty request, then writes queued messages one at a time.
  class Stream : public grpc::ServerGenericBidiReactor {
   public:
    explicit Stream(FakePlugin* p) : plugin_(p) { StartRead(&request_); }

    // Queues a message, or the end of the stream (nullopt).
    void send(std::optional<std::string> bytes) {
      std::unique_lock lock(mu_);
      if (finished_) return;
      queue_.push_back(std::move(bytes));
      if (!writing_) next(lock);
    }

    void OnReadDone(bool ok) override {
      std::unique_lock lock(mu_);
      reading_ = false;
      if (cancelled_) {
        finish(lock, grpc::Status::CANCELLED);
        return;
      }
      if (!ok || !decode_empty(to_bytes(request_))) {
        finish(lock, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "want one Empty"));
        return;
      }
      lock.unlock();
      plugin_->add(this);
    }
    // A write can complete successfully after the call was cancelled (OnCancel saw it in flight):
    // its reaction must then finish the call, or Finish is never called and the server's
    // Shutdown waits for this reactor forever.
    void OnWriteDone(bool ok) override {
      std::unique_lock lock(mu_);
      writing_ = false;
      if (!ok || cancelled_) {
        finish(lock, grpc::Status(grpc::StatusCode::CANCELLED, ok ? "cancelled" : "write failed"));
        return;
      }
      next(lock);
    }
    void OnCancel() override {
      ++plugin_->cancelled_;
      std::unique_lock lock(mu_);
      cancelled_ = true;
      if (!writing_ && !reading_) finish(lock, grpc::Status::CANCELLED);  // else their reaction finishes
    }
    void OnDone() override {
      plugin_->remove(this);
      delete this;
    }

   private:
    void next(std::unique_lock<std::mutex>& lock) {
      if (queue_.empty() || finished_) return;
      auto item = std::move(queue_.front());
      queue_.pop_front();
      if (!item) {
        finish(lock, grpc::Status::OK);
        return;
      }
      writing_ = true;
      buffer_ = to_buffer(*item);
      lock.unlock();
      StartWrite(&buffer_);
    }
    void finish(std::unique_lock<std::mutex>& lock, grpc::Status status) {
      if (finished_) return;
      finished_ = true;
      lock.unlock();
      Finish(std::move(status));
    }

    FakePlugin* plugin_;
    std::mutex mu_;
    std::deque<std::optional<std::string>> queue_;  // guarded by mu_, as are the flags
    bool reading_ = true, writing_ = false, finished_ = false, cancelled_ = false;
    grpc::ByteBuffer request_, buffer_;  // buffer_: the write in flight
  };

  class Unary : public grpc::ServerGenericBidiReactor {
   public:
    Unary(grpc::GenericCallbackServerContext* ctx, FakePlugin* p) : ctx_(ctx), plugin_(p) { StartRead(&request_); }
    void OnReadDone(bool ok) override {
      if (!ok) {
        Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "no request"));
        return;
      }
      std::string out;
      grpc::Status status = plugin_->handle(ctx_->method(), to_bytes(request_), out);
      if (!status.ok()) {
        Finish(status);
        return;
      }
      response_ = to_buffer(out);
      StartWriteAndFinish(&response_, grpc::WriteOptions(), grpc::Status::OK);
    }
    void OnDone() override { delete this; }

   private:
    grpc::GenericCallbackServerContext* ctx_;
    FakePlugin* plugin_;
    grpc::ByteBuffer request_, response_;
  };

  struct Service : grpc::CallbackGenericService {
    explicit Service(FakePlugin* p) : plugin(p) {}
    grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext* ctx) override {
      if (ctx->method() == "/v1beta1.DevicePlugin/ListAndWatch") return new Stream(plugin);
      return new Unary(ctx, plugin);
    }
    FakePlugin* plugin;
  };

  grpc::Status handle(const std::string& method, const std::string& request, std::string& out) {
    std::lock_guard lock(mu_);
    if (auto it = raw_.find(method); it != raw_.end()) {
      out = it->second;
      return grpc::Status::OK;
    }
    const auto bad = [](const std::string& e) { return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, e); };
    if (method == "/v1beta1.DevicePlugin/GetDevicePluginOptions") {
      if (auto d = decode_empty(request); !d) return bad(d.error());
      out = encode_plugin_options(options_);
      return grpc::Status::OK;
    }
    if (method == "/v1beta1.DevicePlugin/Allocate") {
      auto d = decode_allocate_request(request);
      if (!d) return bad(d.error());
      allocate_requests_.push_back(*d);
      if (!allocate_error_.ok()) return allocate_error_;
      out = encode_allocate_response(allocation_);
      return grpc::Status::OK;
    }
    if (method == "/v1beta1.DevicePlugin/GetPreferredAllocation") {
      auto d = decode_preferred_request(request);
      if (!d) return bad(d.error());
      preferred_requests_.push_back(*d);
      out = encode_preferred_response(preferred_);
      return grpc::Status::OK;
    }
    if (method == "/v1beta1.DevicePlugin/PreStartContainer") {
      auto d = decode_pre_start_request(request);
      if (!d) return bad(d.error());
      pre_start_requests_.push_back(*d);
      return grpc::Status::OK;
    }
    return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, method);
  }

  void add(Stream* s) {
    std::lock_guard lock(mu_);
    streams_.insert(s);
    s->send(devices_);
    cv_.notify_all();
  }
  void remove(Stream* s) {
    std::lock_guard lock(mu_);
    streams_.erase(s);
    cv_.notify_all();
  }
  void send_all(const std::string& bytes, bool remember) {
    std::lock_guard lock(mu_);
    if (remember) devices_ = bytes;
    for (auto* s : streams_) s->send(bytes);
  }

  std::string socket_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::set<Stream*> streams_;  // guarded by mu_, as is everything below
  std::string devices_;        // the current ListAndWatchResponse
  PluginOptions options_;
  std::vector<ContainerAllocation> allocation_;
  grpc::Status allocate_error_;
  std::vector<std::vector<std::string>> preferred_;
  std::map<std::string, std::string> raw_;
  std::vector<std::vector<std::vector<std::string>>> allocate_requests_;
  std::vector<std::vector<PreferredRequest>> preferred_requests_;
  std::vector<std::vector<std::string>> pre_start_requests_;
  std::atomic<int> cancelled_{0};
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
};

constexpr const char* kRegisterMethod = "/v1beta1.Registration/Register";

RpcResult<std::string> register_plugin(const KubeletRegistry& kubelet, const Registration& r) {
  return call_unary(kubelet.socket_path(), kRegisterMethod, encode_register_request(r));
}

bool is_socket(const std::string& path) {
  struct stat st = {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode);
}

// Leaves a unix socket file at `path` with no one listening (as a dead process's socket would be).
void make_stale_socket(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  ASSERT_LT(path.size(), sizeof(addr.sun_path));
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << std::strerror(errno);
  ::close(fd);
}

TEST(KubeletRegistry, RecordsAHandEncodedRegisterAndAnswersOk) {
  TempDir dir;
  KubeletRegistry kubelet(dir.path());
  kubelet.start();
  EXPECT_TRUE(is_socket(dir / "kubelet.sock"));
  EXPECT_EQ(kubelet.socket_path(), dir / "kubelet.sock");
  const std::string bytes =
      H("0a 07") + "v1beta1" + H("12 08") + "gpu.sock" + H("1a 0e") + "nvidia.com/gpu" + H("22 02 10 01");
  auto r = call_unary(kubelet.socket_path(), kRegisterMethod, bytes);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(*r, "");  // Empty
  ASSERT_TRUE(kubelet.wait_for_registrations(1, kWait));
  const Registration want{"v1beta1", "gpu.sock", "nvidia.com/gpu", {false, true}, true};
  EXPECT_EQ(kubelet.registrations(), std::vector<Registration>{want});
  EXPECT_EQ(kubelet.accepted(), std::vector<Registration>{want});
  EXPECT_EQ(kubelet.plugin_socket(want), dir / "gpu.sock");
  EXPECT_TRUE(kubelet.decode_errors().empty());
}

TEST(KubeletRegistry, RejectsAnUnsupportedVersion) {
  TempDir dir;
  KubeletRegistry kubelet(dir.path());
  kubelet.start();
  auto r = register_plugin(kubelet, {"v1alpha", "gpu.sock", "nvidia.com/gpu", {}, false});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(r.error().message.find("\"v1alpha\""), std::string::npos) << r.error().message;
  EXPECT_EQ(kubelet.registrations().size(), 1u);
  EXPECT_TRUE(kubelet.accepted().empty());
}

TEST(KubeletRegistry, SetRejectFailsThatResourceOnly) {
  TempDir dir;
  KubeletRegistry kubelet(dir.path());
  kubelet.start();
  kubelet.set_reject("nvidia.com/gpu", "resource name nvidia.com/gpu is taken");
  auto r = register_plugin(kubelet, {"v1beta1", "gpu.sock", "nvidia.com/gpu", {}, false});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(r.error().message, "resource name nvidia.com/gpu is taken");
  EXPECT_TRUE(register_plugin(kubelet, {"v1beta1", "mig.sock", "nvidia.com/mig-1g.10gb", {}, false}));
  kubelet.set_reject("nvidia.com/gpu", "");
  EXPECT_TRUE(register_plugin(kubelet, {"v1beta1", "gpu.sock", "nvidia.com/gpu", {}, false}));
  EXPECT_EQ(kubelet.registrations().size(), 3u);
  ASSERT_EQ(kubelet.accepted().size(), 2u);
  EXPECT_EQ(kubelet.accepted()[0].resource_name, "nvidia.com/mig-1g.10gb");
}

TEST(KubeletRegistry, MalformedRequestAndOtherMethods) {
  TempDir dir;
  KubeletRegistry kubelet(dir.path());
  kubelet.start();
  auto r = call_unary(kubelet.socket_path(), kRegisterMethod, H("0a 05") + "v1");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(r.error().message.find("past end"), std::string::npos) << r.error().message;
  EXPECT_EQ(kubelet.decode_errors().size(), 1u);
  EXPECT_TRUE(kubelet.registrations().empty());
  r = call_unary(kubelet.socket_path(), "/v1beta1.Registration/Other", "");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, grpc::StatusCode::UNIMPLEMENTED);
}

TEST(KubeletRegistry, RestartDeletesEverySocketAndServesANewOne) {
  TempDir dir;
  KubeletRegistry kubelet(dir.path());
  kubelet.start();
  FakePlugin plugin(dir / "fake.sock");
  plugin.start();
  make_stale_socket(dir / "other.sock");
  std::ofstream(dir / "kubelet_internal_checkpoint") << "{}";
  fs::create_directory(dir / "sub");
  ASSERT_TRUE(register_plugin(kubelet, {"v1beta1", "fake.sock", "example.com/dev", {}, false}));

  // Holding the old socket's inode open keeps its number from being reused by the new one.
  const int old_fd = ::open((dir / "kubelet.sock").c_str(), O_PATH);
  ASSERT_GE(old_fd, 0) << std::strerror(errno);
  kubelet.restart();
  struct stat old_st = {};
  struct stat new_st = {};
  ASSERT_EQ(::fstat(old_fd, &old_st), 0);
  ::close(old_fd);
  EXPECT_EQ(old_st.st_nlink, 0u);  // the old kubelet.sock was deleted
  ASSERT_EQ(::lstat((dir / "kubelet.sock").c_str(), &new_st), 0);
  EXPECT_TRUE(S_ISSOCK(new_st.st_mode));
  EXPECT_NE(new_st.st_ino, old_st.st_ino);
  EXPECT_FALSE(fs::exists(fs::symlink_status(dir / "other.sock")));
  EXPECT_FALSE(fs::exists(fs::symlink_status(dir / "fake.sock")));  // the plugin's socket too
  EXPECT_TRUE(fs::is_regular_file(dir / "kubelet_internal_checkpoint"));
  EXPECT_TRUE(fs::is_directory(dir / "sub"));

  ASSERT_TRUE(register_plugin(kubelet, {"v1beta1", "fake2.sock", "example.com/dev", {}, false}));
  EXPECT_EQ(kubelet.registrations().size(), 2u);
  kubelet.stop();
  EXPECT_FALSE(fs::exists(fs::symlink_status(dir / "kubelet.sock")));
  auto r = register_plugin(kubelet, {"v1beta1", "fake.sock", "example.com/dev", {}, false});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, grpc::StatusCode::UNAVAILABLE);
}

TEST(DevicePluginFlow, RegisterThenOptionsAndListAndWatch) {
  TempDir dir;
  KubeletRegistry kubelet(dir.path());
  kubelet.start();
  FakePlugin plugin(dir / "fake.sock");
  plugin.set_options({false, true});
  const std::vector<DeviceEntry> first{{"GPU-0", "Healthy", {0}}, {"GPU-1", "Healthy", {1}}};
  const std::vector<DeviceEntry> second{{"GPU-0", "Healthy", {0}}, {"GPU-1", "Unhealthy", {1}}};
  plugin.set_devices(first);
  plugin.start();  // serve before registering
  ASSERT_TRUE(register_plugin(kubelet, {"v1beta1", "fake.sock", "example.com/gpu", {false, true}, true}));
  ASSERT_TRUE(kubelet.wait_for_registrations(1, kWait));

  PluginClient client(kubelet.plugin_socket(kubelet.registrations().at(0)));
  auto options = client.options();
  ASSERT_TRUE(options) << options.error().message;
  EXPECT_EQ(*options, (PluginOptions{false, true}));

  EXPECT_FALSE(client.stream_ended());
  client.watch();
  auto got = client.wait_for_list([](const auto& l) { return !l.empty(); }, kWait);
  ASSERT_TRUE(got);
  EXPECT_EQ(*got, first);
  ASSERT_TRUE(plugin.wait_for_streams(1, kWait));
  plugin.set_devices(second);
  got = client.wait_for_list([](const auto& l) { return l.size() == 2 && l[1].health == "Unhealthy"; }, kWait);
  ASSERT_TRUE(got);
  EXPECT_EQ(*got, second);
  EXPECT_EQ(client.lists(), (std::vector<std::vector<DeviceEntry>>{first, second}));
  EXPECT_TRUE(client.watch_errors().empty());
  EXPECT_FALSE(client.stream_ended());
  EXPECT_FALSE(client.stream_status());

  // The plugin ends the stream: seen, with OK; waiting for a list that cannot come returns at once.
  plugin.end_streams();
  ASSERT_TRUE(client.wait_for_stream_end(kWait));
  ASSERT_TRUE(client.stream_status());
  EXPECT_EQ(client.stream_status()->code, grpc::StatusCode::OK);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(client.wait_for_list([](const auto& l) { return l.empty(); }, kWait));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, kWait / 2);  // not the full timeout

  // A new watch gets the current list again; lists keep accumulating.
  client.watch();
  EXPECT_FALSE(client.stream_ended());
  got = client.wait_for_list([](const auto& l) { return !l.empty(); }, kWait);
  ASSERT_TRUE(got);
  EXPECT_EQ(*got, second);
  EXPECT_EQ(client.lists().size(), 3u);
}

TEST(DevicePluginFlow, AllocateReturnsTheContainerResponses) {
  TempDir dir;
  FakePlugin plugin(dir / "fake.sock");
  ContainerAllocation a;
  a.envs = {{"NVIDIA_VISIBLE_DEVICES", "GPU-0"}};
  a.mounts = {{"/usr/bin/nvidia-smi", "/usr/bin/nvidia-smi", true}};
  a.devices = {{"/dev/nvidia0", "/dev/nvidia0", "rw"}};
  a.annotations = {{"cdi.k8s.io/kgpu", "nvidia.com/gpu=GPU-0"}};
  a.cdi_devices = {"nvidia.com/gpu=GPU-0"};
  ContainerAllocation b;
  b.envs = {{"NVIDIA_VISIBLE_DEVICES", "GPU-1,GPU-2"}};
  b.cdi_devices = {"nvidia.com/gpu=GPU-1", "nvidia.com/gpu=GPU-2"};
  plugin.set_allocation({a, b});
  plugin.start();

  PluginClient client(dir / "fake.sock");
  auto r = client.allocate({{"GPU-0"}, {"GPU-1", "GPU-2"}});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(*r, (std::vector<ContainerAllocation>{a, b}));
  EXPECT_EQ(plugin.allocate_requests(),
            (std::vector<std::vector<std::vector<std::string>>>{{{"GPU-0"}, {"GPU-1", "GPU-2"}}}));
}

TEST(DevicePluginFlow, AllocateErrorCarriesCodeAndMessage) {
  TempDir dir;
  FakePlugin plugin(dir / "fake.sock");
  plugin.set_allocate_error(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                         "invalid request: maximum request size for shared resources is 1"));
  plugin.start();
  PluginClient client(dir / "fake.sock");
  auto r = client.allocate({{"GPU-0::1", "GPU-0::2"}});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(r.error().message, "invalid request: maximum request size for shared resources is 1");
  EXPECT_FALSE(r.error().decode_error);
}

TEST(DevicePluginFlow, PreferredAndPreStart) {
  TempDir dir;
  FakePlugin plugin(dir / "fake.sock");
  plugin.set_preferred({{"GPU-2", "GPU-3"}});
  plugin.start();
  PluginClient client(dir / "fake.sock");
  const std::vector<PreferredRequest> req{{{"GPU-0", "GPU-1", "GPU-2", "GPU-3"}, {"GPU-2"}, 2}};
  auto p = client.preferred(req);
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(*p, (std::vector<std::vector<std::string>>{{"GPU-2", "GPU-3"}}));
  EXPECT_EQ(plugin.preferred_requests(), std::vector<std::vector<PreferredRequest>>{req});
  auto s = client.pre_start({"GPU-2", "GPU-3"});
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(plugin.pre_start_requests(), (std::vector<std::vector<std::string>>{{"GPU-2", "GPU-3"}}));
}

TEST(DevicePluginFlow, MalformedResponsesAreDecodeErrors) {
  TempDir dir;
  FakePlugin plugin(dir / "fake.sock");
  plugin.set_raw("/v1beta1.DevicePlugin/Allocate", H("0a 05") + "a");
  plugin.set_raw("/v1beta1.DevicePlugin/GetDevicePluginOptions", H("0a 00"));
  plugin.set_devices({{"GPU-0", "Healthy", {}}});
  plugin.start();
  PluginClient client(dir / "fake.sock");
  auto r = client.allocate({{"GPU-0"}});
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().decode_error);
  EXPECT_EQ(r.error().code, grpc::StatusCode::INTERNAL);
  EXPECT_NE(r.error().message.find("past end"), std::string::npos) << r.error().message;
  auto o = client.options();
  ASSERT_FALSE(o);
  EXPECT_NE(o.error().message.find("DevicePluginOptions.pre_start_required: wire type"), std::string::npos);

  // A malformed stream message is kept as an error; the stream goes on.
  client.watch();
  ASSERT_TRUE(client.wait_for_list([](const auto& l) { return l.size() == 1; }, kWait));
  ASSERT_TRUE(plugin.wait_for_streams(1, kWait));
  plugin.send_raw(H("0a 02 08 01"));
  plugin.set_devices({});
  ASSERT_TRUE(client.wait_for_list([](const auto& l) { return l.empty(); }, kWait));
  ASSERT_EQ(client.watch_errors().size(), 1u);
  EXPECT_NE(client.watch_errors()[0].find("Device.ID: wire type varint"), std::string::npos);
  EXPECT_EQ(client.lists().size(), 2u);
}

TEST(DevicePluginFlow, MissingSocketFailsFast) {
  TempDir dir;
  PluginClient client(dir / "none.sock");
  EXPECT_FALSE(client.wait_for_list([](const auto&) { return true; }, kWait));  // never watched: at once
  const auto t0 = std::chrono::steady_clock::now();
  auto o = client.options();
  ASSERT_FALSE(o);
  EXPECT_EQ(o.error().code, grpc::StatusCode::UNAVAILABLE);
  client.watch();
  EXPECT_FALSE(client.wait_for_list([](const auto&) { return true; }, kWait));
  EXPECT_TRUE(client.stream_ended());
  EXPECT_EQ(client.stream_status()->code, grpc::StatusCode::UNAVAILABLE);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, kWait - 1s);  // neither waited for its deadline
}

TEST(DevicePluginFlow, DestroyingTheClientCancelsTheWatch) {
  TempDir dir;
  FakePlugin plugin(dir / "fake.sock");
  plugin.set_devices({{"GPU-0", "Healthy", {}}});
  plugin.start();
  auto client = std::make_unique<PluginClient>(dir / "fake.sock");
  client->watch();
  ASSERT_TRUE(client->wait_for_list([](const auto& l) { return !l.empty(); }, kWait));
  ASSERT_TRUE(plugin.wait_for_streams(1, kWait));
  client.reset();
  EXPECT_TRUE(plugin.wait_for_streams(0, kWait));
  EXPECT_EQ(plugin.cancelled(), 1);
}

TEST(DevicePluginFlow, StoppingThePluginEndsTheWatch) {
  TempDir dir;
  FakePlugin plugin(dir / "fake.sock");
  plugin.set_devices({{"GPU-0", "Healthy", {}}});
  plugin.start();
  PluginClient client(dir / "fake.sock");
  client.watch();
  ASSERT_TRUE(client.wait_for_list([](const auto& l) { return !l.empty(); }, kWait));
  plugin.stop();
  ASSERT_TRUE(client.wait_for_stream_end(kWait));
  EXPECT_NE(client.stream_status()->code, grpc::StatusCode::OK);
  client.cancel_watch();  // no-op once ended
  EXPECT_TRUE(client.stream_ended());
}

}  // namespace
}  // namespace kgpu::testing
