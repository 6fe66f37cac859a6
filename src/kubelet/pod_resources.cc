#include "kubelet/pod_resources.h"

#include <grpcpp/grpcpp.h>
#include <sys/stat.h>

#include "common/clock.h"
#include "podresources/v1/api.grpc.pb.h"

namespace kgpu::kubelet {

struct PodResourcesClient::Impl {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::PodResourcesLister::Stub> stub;
};

PodResourcesClient::PodResourcesClient(std::string socket_path)
    : socket_(std::move(socket_path)), impl_(std::make_unique<Impl>()) {}

PodResourcesClient::~PodResourcesClient() = default;

Result<std::vector<ContainerDevice>> PodResourcesClient::list(std::chrono::milliseconds timeout) {
  auto all = list_all(timeout);
  if (!all) return std::unexpected(all.error());
  return std::move(all->devices);
}

Result<PodResourcesListing> PodResourcesClient::list_all(std::chrono::milliseconds timeout) {
  struct stat st {};
  if (::stat(socket_.c_str(), &st) != 0) {
    impl_->stub.reset();  // the kubelet may come back with a new socket: reconnect then
    impl_->channel.reset();
    return fail(ErrorCode::kUnavailable, "kubelet PodResources socket {} does not exist (is the kubelet running?)",
                socket_);
  }
  if (!impl_->stub) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, 16 << 20);
    // Reconnect quickly after a kubelet restart (gRPC's default backoff grows to 120 s).
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 500);
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 500);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
    impl_->channel = grpc::CreateCustomChannel("unix://" + socket_, grpc::InsecureChannelCredentials(), args);
    impl_->stub = v1::PodResourcesLister::NewStub(impl_->channel);
  }
  grpc::ClientContext ctx;
  ctx.set_deadline(Clock::real().system_now() + timeout);  // gRPC deadlines are real time
  v1::ListPodResourcesRequest req;
  v1::ListPodResourcesResponse resp;
  const grpc::Status status = impl_->stub->List(&ctx, req, &resp);
  if (!status.ok()) {
    if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
      impl_->stub.reset();  // a fresh channel next time, not one stuck in backoff
      impl_->channel.reset();
    }
    return fail(ErrorCode::kUnavailable, "kubelet PodResources List on {}: {} ({})", socket_, status.error_message(),
                static_cast<int>(status.error_code()));
  }
  PodResourcesListing out;
  for (const auto& pod : resp.pod_resources()) {
    for (const auto& c : pod.containers()) {
      for (const auto& d : c.devices()) {
        for (const auto& id : d.device_ids())
          out.devices.push_back({pod.namespace_(), pod.name(), c.name(), d.resource_name(), id});
      }
      for (const auto& dr : c.dynamic_resources()) {
        for (const auto& r : dr.claim_resources()) {
          ContainerClaimDevice cd{pod.namespace_(),     pod.name(),      c.name(),
                                  dr.claim_namespace(), dr.claim_name(), r.driver_name(),
                                  r.pool_name(),        r.device_name(), {}};
          for (const auto& cdi : r.cdi_devices()) cd.cdi_devices.push_back(cdi.name());
          out.claims.push_back(std::move(cd));
        }
      }
    }
  }
  return out;
}

}  // namespace kgpu::kubelet
