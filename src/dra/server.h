#pragma once
// The kubelet-facing gRPC side of `hami dra-plugin` (docs/dra.md#the-kubelet-grpc-services):
// Registration on <registry_dir>/<driver>-reg.sock (GetInfo lists v1.DRAPlugin and
// v1beta1.DRAPlugin) and DRAPlugin v1 and v1beta1 on <plugin_dir>/dra.sock, both over Driver.
// Per-claim failures go in the claim's `error`; the call itself fails only on a malformed request.
// With a HealthBoard, the DRAResourceHealth stream too (v1alpha1 and v1, both advertised).
#include <atomic>
#include <memory>
#include <string>

#include "common/status.h"
#include "dra/driver.h"
#include "dra/health.h"

namespace grpc {
class Server;
}  // namespace grpc

namespace hami::dra {

struct ServerOptions {
  std::string driver = kDefaultDriverName;
  std::string registry_dir = "/var/lib/kubelet/plugins_registry";
  std::string plugin_dir;  // "" = /var/lib/kubelet/plugins/<driver>
};

// "/var/lib/kubelet/plugins/<driver>" when `plugin_dir` is empty.
std::string PluginDirOrDefault(const std::string& plugin_dir, const std::string& driver);

class DraServer {
 public:
  // `health` may be null: no health stream is served or advertised.
  DraServer(ServerOptions options, Driver* driver, HealthBoard* health = nullptr);
  ~DraServer();
  DraServer(const DraServer&) = delete;
  DraServer& operator=(const DraServer&) = delete;

  // Removes stale sockets, then serves dra.sock and the registration socket (in that order, so the
  // kubelet never sees a registration whose endpoint is not served yet).
  Status Start();
  void Stop();

  std::string RegistrationSocket() const;
  std::string DraSocket() const;
  // Whether the kubelet's last NotifyRegistrationStatus said registered, and its error if not.
  bool Registered() const;
  std::string RegistrationError() const;

 private:
  class Registration;
  class V1Service;
  class V1beta1Service;
  class HealthV1alpha1Service;
  class HealthV1Service;

  ServerOptions options_;
  Driver* driver_;
  HealthBoard* health_;
  std::shared_ptr<std::atomic<bool>> stopping_;  // ends the health streams of this Start
  std::unique_ptr<Registration> registration_;
  std::unique_ptr<V1Service> v1_;
  std::unique_ptr<V1beta1Service> v1beta1_;
  std::unique_ptr<HealthV1alpha1Service> health_v1alpha1_;
  std::unique_ptr<HealthV1Service> health_v1_;
  std::unique_ptr<grpc::Server> dra_server_;
  std::unique_ptr<grpc::Server> reg_server_;
};

}  // namespace hami::dra
