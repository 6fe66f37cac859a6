#include "dra/plugin.h"

#include <grpcpp/grpcpp.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "common/clock.h"
#include "common/log.h"
#include "dra/v1/api.grpc.pb.h"
#include "dra/v1beta1/api.grpc.pb.h"
#include "pluginregistration/v1/api.grpc.pb.h"

namespace kgpu::dra {

namespace {

unsigned long inode_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode)) return 0;
  return static_cast<unsigned long>(st.st_ino);
}

template <typename Request>
std::vector<ClaimRef> claims_of(const Request& req) {
  std::vector<ClaimRef> out;
  for (const auto& c : req.claims()) out.push_back({c.namespace_(), c.uid(), c.name()});
  return out;
}

// NodePrepareResources / NodeUnprepareResources for one API version's generated types.
template <typename Api>
grpc::Status do_prepare(Driver& driver, const typename Api::NodePrepareResourcesRequest& req,
                        typename Api::NodePrepareResourcesResponse* out) {
  try {
    for (auto& [uid, r] : driver.prepare(claims_of(req))) {
      auto& entry = (*out->mutable_claims())[uid];
      entry.set_error(r.error);
      for (const auto& d : r.devices) {
        auto* dev = entry.add_devices();
        for (const auto& n : d.request_names) dev->add_request_names(n);
        dev->set_pool_name(d.pool_name);
        dev->set_device_name(d.device_name);
        for (const auto& id : d.cdi_device_ids) dev->add_cdi_device_ids(id);
      }
    }
  } catch (const std::exception& e) {
    return grpc::Status(grpc::StatusCode::INTERNAL, e.what());
  }
  return grpc::Status::OK;
}

template <typename Api>
grpc::Status do_unprepare(Driver& driver, const typename Api::NodeUnprepareResourcesRequest& req,
                          typename Api::NodeUnprepareResourcesResponse* out) {
  try {
    for (auto& [uid, err] : driver.unprepare(claims_of(req))) (*out->mutable_claims())[uid].set_error(err);
  } catch (const std::exception& e) {
    return grpc::Status(grpc::StatusCode::INTERNAL, e.what());
  }
  return grpc::Status::OK;
}

namespace v1 = ::k8s::io::kubelet::pkg::apis::dra::v1;
namespace v1beta1 = ::k8s::io::kubelet::pkg::apis::dra::v1beta1;

struct V1Types {
  using NodePrepareResourcesRequest = v1::NodePrepareResourcesRequest;
  using NodePrepareResourcesResponse = v1::NodePrepareResourcesResponse;
  using NodeUnprepareResourcesRequest = v1::NodeUnprepareResourcesRequest;
  using NodeUnprepareResourcesResponse = v1::NodeUnprepareResourcesResponse;
};
struct V1beta1Types {
  using NodePrepareResourcesRequest = v1beta1::NodePrepareResourcesRequest;
  using NodePrepareResourcesResponse = v1beta1::NodePrepareResourcesResponse;
  using NodeUnprepareResourcesRequest = v1beta1::NodeUnprepareResourcesRequest;
  using NodeUnprepareResourcesResponse = v1beta1::NodeUnprepareResourcesResponse;
};

}  // namespace

class Plugin::RegistrationService final : public ::pluginregistration::Registration::Service {
 public:
  explicit RegistrationService(Plugin& owner) : owner_(owner) {}
  grpc::Status GetInfo(grpc::ServerContext*, const ::pluginregistration::InfoRequest*,
                       ::pluginregistration::PluginInfo* out) override {
    out->set_type("DRAPlugin");
    out->set_name(owner_.driver_.options().driver_name);
    out->set_endpoint(owner_.dra_socket());
    out->add_supported_versions("v1.DRAPlugin");
    out->add_supported_versions("v1beta1.DRAPlugin");
    return grpc::Status::OK;
  }
  grpc::Status NotifyRegistrationStatus(grpc::ServerContext*, const ::pluginregistration::RegistrationStatus* s,
                                        ::pluginregistration::RegistrationStatusResponse*) override {
    {
      std::lock_guard lock(owner_.mu_);
      owner_.registered_ = s->plugin_registered();
      owner_.reg_error_ = s->error();
      ++owner_.notices_;
    }
    const std::string& driver = owner_.driver_.options().driver_name;
    if (s->plugin_registered()) {
      log::info("DRA driver registered with the kubelet", {log::kv("driver", driver)});
    } else {
      log::error("the kubelet refused the DRA driver's registration: " +
                     (s->error().empty() ? std::string("(no reason given)") : s->error()),
                 {log::kv("driver", driver)});
    }
    return grpc::Status::OK;
  }

 private:
  Plugin& owner_;
};

class Plugin::V1Service final : public v1::DRAPlugin::Service {
 public:
  explicit V1Service(Driver& d) : driver_(d) {}
  grpc::Status NodePrepareResources(grpc::ServerContext*, const v1::NodePrepareResourcesRequest* req,
                                    v1::NodePrepareResourcesResponse* out) override {
    return do_prepare<V1Types>(driver_, *req, out);
  }
  grpc::Status NodeUnprepareResources(grpc::ServerContext*, const v1::NodeUnprepareResourcesRequest* req,
                                      v1::NodeUnprepareResourcesResponse* out) override {
    return do_unprepare<V1Types>(driver_, *req, out);
  }

 private:
  Driver& driver_;
};

class Plugin::V1beta1Service final : public v1beta1::DRAPlugin::Service {
 public:
  explicit V1beta1Service(Driver& d) : driver_(d) {}
  grpc::Status NodePrepareResources(grpc::ServerContext*, const v1beta1::NodePrepareResourcesRequest* req,
                                    v1beta1::NodePrepareResourcesResponse* out) override {
    return do_prepare<V1beta1Types>(driver_, *req, out);
  }
  grpc::Status NodeUnprepareResources(grpc::ServerContext*, const v1beta1::NodeUnprepareResourcesRequest* req,
                                      v1beta1::NodeUnprepareResourcesResponse* out) override {
    return do_unprepare<V1beta1Types>(driver_, *req, out);
  }

 private:
  Driver& driver_;
};

struct Plugin::Endpoint {
  std::string path;
  std::vector<grpc::Service*> services;
  std::unique_ptr<grpc::Server> server;
  unsigned long inode = 0;
};

Plugin::Plugin(Driver& driver, PluginOptions options)
    : driver_(driver),
      opt_(std::move(options)),
      reg_(std::make_unique<Endpoint>()),
      dra_(std::make_unique<Endpoint>()),
      reg_service_(std::make_unique<RegistrationService>(*this)),
      v1_service_(std::make_unique<V1Service>(driver)),
      v1beta1_service_(std::make_unique<V1beta1Service>(driver)) {
  reg_->path = registration_socket();
  reg_->services = {reg_service_.get()};
  dra_->path = dra_socket();
  dra_->services = {v1_service_.get(), v1beta1_service_.get()};
}

Plugin::~Plugin() { stop(); }

std::string Plugin::registration_socket() const {
  return fmt::format("{}/{}-reg.sock", opt_.registry_dir, driver_.options().driver_name);
}

std::string Plugin::dra_socket() const {
  return fmt::format("{}/{}/dra.sock", opt_.plugins_dir, driver_.options().driver_name);
}

// The socket appears at its path only once it accepts connections: gRPC binds and listens on a
// hidden name (the kubelet's plugin watcher ignores dot files), which is then renamed into place.
// Bound at the final path, a watcher that dials between bind() and listen() is refused.
Result<void> Plugin::serve(Endpoint& e) {
  shut(e);
  const std::filesystem::path final_path(e.path);
  const std::string staging = (final_path.parent_path() / ("." + final_path.filename().string() + ".new")).string();
  if (staging.size() >= sizeof(sockaddr_un::sun_path)) {
    return fail(ErrorCode::kInvalidArgument, "socket path {} is longer than {} bytes", e.path,
                sizeof(sockaddr_un::sun_path) - 6);
  }
  std::error_code ec;
  std::filesystem::create_directories(final_path.parent_path(), ec);
  if (ec) return fail(ErrorCode::kPermissionDenied, "cannot create the directory of {}: {}", e.path, ec.message());
  for (const std::string& p : {e.path, staging}) {
    if (::unlink(p.c_str()) != 0 && errno != ENOENT) {
      return fail(ErrorCode::kPermissionDenied, "cannot remove the old socket {}: {}", p, std::strerror(errno));
    }
  }
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix://" + staging, grpc::InsecureServerCredentials());
  for (auto* s : e.services) builder.RegisterService(s);
  e.server = builder.BuildAndStart();
  if (!e.server) return fail(ErrorCode::kUnavailable, "cannot serve on {}", e.path);
  if (::rename(staging.c_str(), e.path.c_str()) != 0) {
    const int err = errno;
    e.server->Shutdown(Clock::real().system_now());
    e.server.reset();
    ::unlink(staging.c_str());
    return fail(ErrorCode::kPermissionDenied, "cannot move the socket into place at {}: {}", e.path,
                std::strerror(err));
  }
  e.inode = inode_of(e.path);
  return {};
}

void Plugin::shut(Endpoint& e) {
  if (!e.server) return;
  e.server->Shutdown(Clock::real().system_now() + std::chrono::milliseconds(500));  // gRPC deadlines are real time
  e.server.reset();
  if (e.inode != 0 && inode_of(e.path) == e.inode) ::unlink(e.path.c_str());
  e.inode = 0;
}

Result<void> Plugin::start() {
  // The DRA service first: the kubelet calls it as soon as it has seen the registration socket.
  if (auto ok = serve(*dra_); !ok) return ok;
  if (auto ok = serve(*reg_); !ok) {
    shut(*dra_);
    return ok;
  }
  log::info("DRA driver serving", {log::kv("driver", driver_.options().driver_name),
                                   log::kv("registration", reg_->path), log::kv("endpoint", dra_->path)});
  return {};
}

void Plugin::stop() {
  shut(*reg_);
  shut(*dra_);
}

Result<bool> Plugin::check_sockets() {
  bool recreated = false;
  for (Endpoint* e : {dra_.get(), reg_.get()}) {
    // A new DRA socket is announced by a new registration socket (the kubelet watches for it).
    const bool announce = e == reg_.get() && recreated;
    if (!announce && e->server && e->inode != 0 && inode_of(e->path) == e->inode) continue;
    log::warn("DRA socket gone (kubelet restart?): serving it again", {log::kv("socket", e->path)});
    if (auto ok = serve(*e); !ok) return std::unexpected(ok.error());
    recreated = true;
  }
  if (recreated) {
    std::lock_guard lock(mu_);
    registered_ = false;
  }
  return recreated;
}

bool Plugin::registered() const {
  std::lock_guard lock(mu_);
  return registered_;
}

std::string Plugin::registration_error() const {
  std::lock_guard lock(mu_);
  return reg_error_;
}

int Plugin::registration_notices() const {
  std::lock_guard lock(mu_);
  return notices_;
}

}  // namespace kgpu::dra
