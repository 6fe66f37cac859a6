#include "kubelet_peer.h"

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <thread>

namespace kgpu::testing {

namespace {

void varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}

// Field with wire type 2 (length-delimited): strings and embedded messages.
void field(std::string& out, int number, const std::string& bytes) {
  varint(out, (static_cast<uint64_t>(number) << 3) | 2);
  varint(out, bytes.size());
  out += bytes;
}

}  // namespace

std::string encode_list_response(const std::vector<PeerPod>& pods) {
  std::string resp;
  for (const auto& p : pods) {
    std::string pod;
    field(pod, 1, p.name);
    field(pod, 2, p.ns);
    for (const auto& c : p.containers) {
      std::string container;
      field(container, 1, c.name);
      if (!c.resource.empty() || !c.device_ids.empty()) {
        std::string devices;
        field(devices, 1, c.resource);
        for (const auto& id : c.device_ids) field(devices, 2, id);
        field(container, 2, devices);
      }
      for (const auto& claim : c.claims) {
        std::string dynamic;
        field(dynamic, 2, claim.name);
        field(dynamic, 3, claim.ns);
        for (const auto& d : claim.devices) {
          std::string resource;
          for (const auto& cdi : d.cdi_devices) {
            std::string cdi_device;
            field(cdi_device, 1, cdi);
            field(resource, 1, cdi_device);
          }
          field(resource, 2, d.driver);
          field(resource, 3, d.pool);
          field(resource, 4, d.device);
          field(dynamic, 4, resource);
        }
        field(container, 5, dynamic);
      }
      field(pod, 3, container);
    }
    field(resp, 1, pod);
  }
  return resp;
}

struct KubeletPeer::Impl {
  KubeletPeer* peer = nullptr;
  std::mutex mu;
  std::string response;  // guarded by mu
  struct Service;
  std::unique_ptr<Service> service;  // one per server: gRPC binds a generic service to one server
  std::unique_ptr<grpc::Server> server;

  class Reactor : public grpc::ServerGenericBidiReactor {
   public:
    Reactor(grpc::GenericCallbackServerContext* ctx, Impl* impl) : ctx_(ctx), impl_(impl) { StartRead(&request_); }
    void OnReadDone(bool ok) override {
      if (!ok) {
        Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "no request"));
        return;
      }
      if (ctx_->method() != "/v1.PodResourcesLister/List") {
        Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "only List is served: " + ctx_->method()));
        return;
      }
      ++impl_->peer->calls_;
      if (int d = impl_->peer->delay_ms_.load(); d > 0) std::this_thread::sleep_for(std::chrono::milliseconds(d));
      std::string body;
      {
        std::lock_guard lock(impl_->mu);
        body = impl_->response;
      }
      grpc::Slice slice(body);
      response_ = grpc::ByteBuffer(&slice, 1);
      StartWriteAndFinish(&response_, grpc::WriteOptions(), grpc::Status::OK);
    }
    void OnDone() override { delete this; }

   private:
    grpc::GenericCallbackServerContext* ctx_;
    Impl* impl_;
    grpc::ByteBuffer request_, response_;
  };
};

struct KubeletPeer::Impl::Service : grpc::CallbackGenericService {
  explicit Service(Impl* i) : impl(i) {}
  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext* ctx) override {
    return new Reactor(ctx, impl);
  }
  Impl* impl;
};

KubeletPeer::KubeletPeer(std::string socket_path) : socket_(std::move(socket_path)), impl_(std::make_unique<Impl>()) {
  impl_->peer = this;
}

KubeletPeer::~KubeletPeer() { stop(); }

void KubeletPeer::start() {
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix://" + socket_, grpc::InsecureServerCredentials());
  impl_->service = std::make_unique<Impl::Service>(impl_.get());
  builder.RegisterCallbackGenericService(impl_->service.get());
  impl_->server = builder.BuildAndStart();
}

void KubeletPeer::stop() {
  if (impl_->server) {
    impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
    impl_->server.reset();
    impl_->service.reset();
  }
  ::unlink(socket_.c_str());
}

void KubeletPeer::set_pods(std::vector<PeerPod> pods) {
  std::lock_guard lock(impl_->mu);
  impl_->response = encode_list_response(pods);
}

}  // namespace kgpu::testing
