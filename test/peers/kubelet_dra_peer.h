// A kubelet peer for tests of a DRA driver (docs: /work/shared/specs/kubelet-apis.md §3-4): the
// plugin-registration calls (GetInfo, NotifyRegistrationStatus) on the driver's registration socket
// and NodePrepareResources / NodeUnprepareResources on its endpoint, v1 and v1beta1.
//
// It does not use kgpu's .proto: messages are encoded and decoded by hand from the field numbers
// (wire.h, same rules as device_plugin_peer.h) and calls go through gRPC's generic stub under the
// method paths /pluginregistration.Registration/* and /k8s.io.kubelet.pkg.apis.dra.<v>.DRAPlugin/*.
//
// Threads: every function may be called from any thread.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "device_plugin_peer.h"

namespace kgpu::testing {

struct DraPluginInfo {  // PluginInfo
  std::string type, name, endpoint;
  std::vector<std::string> supported_versions;
  bool operator==(const DraPluginInfo&) const = default;
};

struct DraClaim {  // Claim
  std::string ns, uid, name;
};

struct DraDevice {  // Device
  std::vector<std::string> request_names;
  std::string pool_name, device_name;
  std::vector<std::string> cdi_device_ids;
  bool operator==(const DraDevice&) const = default;
};

struct DraPrepared {  // NodePrepareResourceResponse
  std::vector<DraDevice> devices;
  std::string error;
  bool operator==(const DraPrepared&) const = default;
};

// ---- Codec ----
Decoded<DraPluginInfo> decode_plugin_info(std::string_view bytes);
std::string encode_registration_status(bool registered, const std::string& error);
std::string encode_claims(const std::vector<DraClaim>& claims);  // Node(Un)PrepareResourcesRequest
Decoded<std::map<std::string, DraPrepared>> decode_prepare_response(std::string_view bytes);
Decoded<std::map<std::string, std::string>> decode_unprepare_response(std::string_view bytes);  // uid -> error

// ---- Calls ----
RpcResult<DraPluginInfo> dra_get_info(const std::string& registration_socket);
RpcResult<Empty> dra_notify(const std::string& registration_socket, bool registered, const std::string& error);
// What the kubelet does with a socket found in plugins_registry: GetInfo, check type "DRAPlugin" and
// that a version it speaks (v1.DRAPlugin or v1beta1.DRAPlugin) is offered, then
// NotifyRegistrationStatus with the outcome. The info, or the reason it was refused.
RpcResult<DraPluginInfo> dra_register(const std::string& registration_socket);
// `version`: "v1" or "v1beta1".
RpcResult<std::map<std::string, DraPrepared>> dra_prepare(
    const std::string& endpoint, const std::string& version, const std::vector<DraClaim>& claims,
    std::chrono::milliseconds deadline = std::chrono::seconds(45));
RpcResult<std::map<std::string, std::string>> dra_unprepare(
    const std::string& endpoint, const std::string& version, const std::vector<DraClaim>& claims,
    std::chrono::milliseconds deadline = std::chrono::seconds(45));

}  // namespace kgpu::testing
