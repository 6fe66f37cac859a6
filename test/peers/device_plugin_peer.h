// A kubelet peer for tests of the Device Plugin API v1beta1 (docs: /work/shared/specs/kubelet-apis.md §1).
//
// It does not use kgpu's .proto: every message is encoded and decoded by hand from the wire contract's
// field numbers, and calls go through gRPC's generic (byte-level) service and stub under the method
// paths /v1beta1.Registration/Register and /v1beta1.DevicePlugin/*. So a mistake in our .proto cannot
// hide behind a peer that shares it.
//
// Codec rules (protobuf wire format, proto3):
// - Encoders omit scalar fields holding their default (false, 0, ""), as protobuf does; repeated
//   fields, map entries and present submessages are always written. Map entries are written with
//   both key (1) and value (2).
// - Decoders accept fields in any order and repeated occurrences (last wins for scalars, submessages
//   merge, repeated fields append, map keys: last wins), skip unknown fields of every wire type
//   (varint, fixed64, length-delimited, groups, fixed32), and return an error string instead of a
//   value for: a truncated or over-long varint, a length or fixed field past the end, field number 0,
//   an unmatched group end, a known field with the wrong wire type, or invalid UTF-8 in a string
//   field (a Go kubelet rejects those too). They never read outside the input.
// - There are no repeated scalar fields in this API, so packed encoding never applies; a scalar field
//   sent length-delimited is a wrong wire type.
#pragma once

#include <grpcpp/support/status_code_enum.h>

#include <chrono>
#include <cstdint>
#include <expected>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kgpu::testing {

// ---- Messages (plain values) ----

struct PluginOptions {  // DevicePluginOptions
  bool pre_start_required = false;
  bool get_preferred_allocation_available = false;
  bool operator==(const PluginOptions&) const = default;
};

struct Registration {  // RegisterRequest
  std::string version, endpoint, resource_name;
  PluginOptions options;
  bool has_options = false;  // the options submessage was present on the wire
  bool operator==(const Registration&) const = default;
};

struct DeviceEntry {  // Device (topology.nodes[].ID flattened into numa_nodes; absent topology: empty)
  std::string id, health;
  std::vector<int64_t> numa_nodes;
  bool operator==(const DeviceEntry&) const = default;
};

struct MountEntry {  // Mount
  std::string container_path, host_path;
  bool read_only = false;
  bool operator==(const MountEntry&) const = default;
};

struct DeviceSpecEntry {  // DeviceSpec
  std::string container_path, host_path, permissions;
  bool operator==(const DeviceSpecEntry&) const = default;
};

struct ContainerAllocation {  // ContainerAllocateResponse (cdi_devices: CDIDevice.name of each)
  std::map<std::string, std::string> envs;
  std::vector<MountEntry> mounts;
  std::vector<DeviceSpecEntry> devices;
  std::map<std::string, std::string> annotations;
  std::vector<std::string> cdi_devices;
  bool operator==(const ContainerAllocation&) const = default;
};

struct PreferredRequest {  // ContainerPreferredAllocationRequest
  std::vector<std::string> available, must_include;
  int32_t size = 0;
  bool operator==(const PreferredRequest&) const = default;
};

struct Empty {  // Empty, PreStartContainerResponse
  bool operator==(const Empty&) const = default;
};

// A decoded message, or why the bytes are not one ("<Message>.<field>: <problem>").
template <typename T>
using Decoded = std::expected<T, std::string>;

// ---- Codec. Encoders cannot fail; decoders are total over any input. ----

std::string encode_plugin_options(const PluginOptions& options);
Decoded<PluginOptions> decode_plugin_options(std::string_view bytes);

std::string encode_register_request(const Registration& request);  // options written iff has_options
Decoded<Registration> decode_register_request(std::string_view bytes);

std::string encode_list_and_watch_response(const std::vector<DeviceEntry>& devices);  // topology iff numa_nodes
Decoded<std::vector<DeviceEntry>> decode_list_and_watch_response(std::string_view bytes);

// AllocateRequest: one ContainerAllocateRequest (its devices_ids) per container.
std::string encode_allocate_request(const std::vector<std::vector<std::string>>& per_container_ids);
Decoded<std::vector<std::vector<std::string>>> decode_allocate_request(std::string_view bytes);

std::string encode_allocate_response(const std::vector<ContainerAllocation>& containers);
Decoded<std::vector<ContainerAllocation>> decode_allocate_response(std::string_view bytes);

std::string encode_preferred_request(const std::vector<PreferredRequest>& containers);
Decoded<std::vector<PreferredRequest>> decode_preferred_request(std::string_view bytes);

// PreferredAllocationResponse: the deviceIDs of each ContainerPreferredAllocationResponse.
std::string encode_preferred_response(const std::vector<std::vector<std::string>>& per_container_ids);
Decoded<std::vector<std::vector<std::string>>> decode_preferred_response(std::string_view bytes);

std::string encode_pre_start_request(const std::vector<std::string>& device_ids);
Decoded<std::vector<std::string>> decode_pre_start_request(std::string_view bytes);

// Empty and PreStartContainerResponse: no fields; unknown ones are checked for well-formedness and skipped.
Decoded<Empty> decode_empty(std::string_view bytes);

// ---- gRPC ----

// A non-OK call outcome. decode_error: the call succeeded but its response bytes did not decode
// (code is then INTERNAL and message says why); otherwise code and message are the server's status.
struct RpcError {
  grpc::StatusCode code = grpc::StatusCode::UNKNOWN;
  std::string message;
  bool decode_error = false;
};

template <typename T>
using RpcResult = std::expected<T, RpcError>;

// One unary call through the generic stub on unix socket `socket_path` (absolute or relative to the
// working directory): sends `request` bytes to `method` (e.g. "/v1beta1.Registration/Register") and
// returns the response bytes. Blocks at most about `deadline`; fails fast (UNAVAILABLE) when no one listens.
RpcResult<std::string> call_unary(const std::string& socket_path, const std::string& method, const std::string& request,
                                  std::chrono::milliseconds deadline = std::chrono::seconds(5));

// The kubelet side of Registration: serves /v1beta1.Registration/Register on <dir>/kubelet.sock.
// Register answers OK, except: a malformed request -> INVALID_ARGUMENT (not recorded as a registration,
// kept in decode_errors()); version != "v1beta1" -> INVALID_ARGUMENT with a message naming the version;
// a resource_name given to set_reject -> INVALID_ARGUMENT with that message. Any other method ->
// UNIMPLEMENTED. (A real kubelet answers its rejections with UNKNOWN: depend on "not OK", not on a code.)
// It does not call the plugin back; use PluginClient on plugin_socket(registration) for that.
// Threads: all methods are safe to call from any thread; requests are handled on gRPC's threads.
class KubeletRegistry {
 public:
  explicit KubeletRegistry(std::string device_plugin_dir);  // relative paths are made absolute
  ~KubeletRegistry();                                       // stop()
  KubeletRegistry(const KubeletRegistry&) = delete;
  KubeletRegistry& operator=(const KubeletRegistry&) = delete;

  // Serves kubelet.sock (creates the socket; replaces a stale file). No-op when serving.
  // Throws std::runtime_error when the socket cannot be served.
  void start();
  // Stops serving (in-flight calls get up to 200 ms) and removes kubelet.sock.
  void stop();
  // A kubelet restart, as the spec has it: stop(), delete every unix socket in the directory (kubelet.sock,
  // the plugins' sockets, any other; regular files and directories stay), then start() on a new inode.
  // Existing connections to plugins (PluginClient streams) are not touched: cancel them to simulate the
  // old kubelet's death.
  void restart();

  // Calls to Register for `resource_name` fail with INVALID_ARGUMENT and `message` (the request is still
  // recorded). An empty message clears the rejection.
  void set_reject(const std::string& resource_name, const std::string& message);

  // Every well-formed RegisterRequest received, accepted or rejected, in arrival order.
  std::vector<Registration> registrations() const;
  // Only the ones answered OK, in arrival order.
  std::vector<Registration> accepted() const;
  // Why malformed RegisterRequests did not decode.
  std::vector<std::string> decode_errors() const;
  // Waits until registrations().size() >= n; false on timeout.
  bool wait_for_registrations(size_t n, std::chrono::milliseconds timeout) const;

  const std::string& dir() const { return dir_; }
  const std::string& socket_path() const { return socket_; }  // <dir>/kubelet.sock
  std::string plugin_socket(const Registration& r) const { return dir_ + "/" + r.endpoint; }

 private:
  struct Impl;
  std::string dir_, socket_;
  std::unique_ptr<Impl> impl_;
};

// The kubelet side of DevicePlugin for one plugin socket. Unary calls block the caller for at most the
// deadline given to the constructor; a connection is made on first use (a missing socket fails fast
// with UNAVAILABLE). ListAndWatch runs on gRPC's threads after watch(); its lists are kept in order.
// Threads: all methods are safe to call from any thread.
class PluginClient {
 public:
  explicit PluginClient(std::string socket_path, std::chrono::milliseconds deadline = std::chrono::seconds(5));
  ~PluginClient();  // cancels the watch and waits (bounded) for it to end
  PluginClient(const PluginClient&) = delete;
  PluginClient& operator=(const PluginClient&) = delete;

  RpcResult<PluginOptions> options();  // GetDevicePluginOptions
  RpcResult<std::vector<ContainerAllocation>> allocate(const std::vector<std::vector<std::string>>& per_container_ids);
  RpcResult<std::vector<std::vector<std::string>>> preferred(const std::vector<PreferredRequest>& requests);
  RpcResult<Empty> pre_start(const std::vector<std::string>& device_ids);  // PreStartContainer

  // Opens ListAndWatch (no deadline: it lives until the server ends it or it is cancelled). No-op while a
  // watch is open; after the previous one ended, opens a new one (lists keep accumulating).
  void watch();
  // Cancels the open watch, if any, and waits (bounded by the deadline) until it has ended. A watch that
  // has not ended by then is abandoned (leaked, never freed under gRPC).
  void cancel_watch();

  // Every device list received, over all watches, in arrival order.
  std::vector<std::vector<DeviceEntry>> lists() const;
  // Returns the latest list received on the current watch as soon as it satisfies `pred` (immediately
  // if it already does). Returns nullopt on timeout, or as soon as the watch has ended with its latest
  // list (or none) not satisfying pred, or at once if watch() was never called. `pred` runs under the
  // client's lock: it must not call the client.
  std::optional<std::vector<DeviceEntry>> wait_for_list(
      const std::function<bool(const std::vector<DeviceEntry>&)>& pred, std::chrono::milliseconds timeout) const;
  // The current watch has ended: the server finished it (e.g. the plugin stopped or restarted), it
  // failed, or it was cancelled. False before watch().
  bool stream_ended() const;
  bool wait_for_stream_end(std::chrono::milliseconds timeout) const;
  // How the current watch ended (code OK: the server finished it cleanly); nullopt while open or unopened.
  std::optional<RpcError> stream_status() const;
  // Stream messages that did not decode as ListAndWatchResponse (the stream keeps being read).
  std::vector<std::string> watch_errors() const;

  const std::string& socket_path() const { return socket_; }

 private:
  struct Impl;
  struct State;
  struct Watch;
  std::string socket_;
  std::chrono::milliseconds deadline_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kgpu::testing
