// The DRA driver's kubelet plugin: the registration service on
// `<registry_dir>/<driver>-reg.sock` (pluginregistration.Registration: GetInfo answers type
// "DRAPlugin", the driver name, the DRA socket's path and "v1.DRAPlugin", "v1beta1.DRAPlugin";
// NotifyRegistrationStatus is logged, an error naming the kubelet's reason) and the DRAPlugin
// service, v1 and v1beta1, on `<plugins_dir>/<driver>/dra.sock`, answered by a Driver.
//
// A restarting kubelet wipes both directories: check_sockets() notices a socket that is gone or is
// no longer ours and serves it again (the kubelet then finds the registration socket anew).
//
// Thread safety: start()/stop()/check_sockets() from one owner thread; gRPC handlers run on gRPC's
// threads; the status getters from any thread.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "common/error.h"
#include "dra/driver.h"

namespace grpc {
class Server;
}

namespace kgpu::dra {

inline constexpr const char* kDefaultPluginsRegistryDir = "/var/lib/kubelet/plugins_registry";
inline constexpr const char* kDefaultPluginsDir = "/var/lib/kubelet/plugins";

struct PluginOptions {
  std::string registry_dir = kDefaultPluginsRegistryDir;
  std::string plugins_dir = kDefaultPluginsDir;
};

class Plugin {
 public:
  // `driver` (not owned) must outlive the plugin.
  Plugin(Driver& driver, PluginOptions options);
  ~Plugin();
  Plugin(const Plugin&) = delete;
  Plugin& operator=(const Plugin&) = delete;

  // Creates the directories and serves both sockets (a stale file is replaced). Errors name the socket.
  Result<void> start();
  void stop();
  // Serves again each socket whose file vanished or was replaced; true when one was recreated.
  // Errors name the socket that could not be served.
  Result<bool> check_sockets();

  std::string registration_socket() const;  // <registry_dir>/<driver>-reg.sock
  std::string dra_socket() const;           // <plugins_dir>/<driver>/dra.sock

  // What the kubelet last said in NotifyRegistrationStatus.
  bool registered() const;
  std::string registration_error() const;
  int registration_notices() const;

  class RegistrationService;
  class V1Service;
  class V1beta1Service;

 private:
  struct Endpoint;
  Result<void> serve(Endpoint& e);
  void shut(Endpoint& e);

  Driver& driver_;
  PluginOptions opt_;
  std::unique_ptr<Endpoint> reg_, dra_;
  std::unique_ptr<RegistrationService> reg_service_;
  std::unique_ptr<V1Service> v1_service_;
  std::unique_ptr<V1beta1Service> v1beta1_service_;

  mutable std::mutex mu_;
  bool registered_ = false;  // guarded by mu_
  std::string reg_error_;    // guarded by mu_
  int notices_ = 0;          // guarded by mu_
};

}  // namespace kgpu::dra
