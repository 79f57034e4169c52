#pragma once
// A fake kubelet for tests and benchmarks. It speaks the real device plugin API v1beta1 over unix
// sockets: it serves Registration on <dir>/kubelet.sock and, for each plugin that registers, dials
// the plugin's endpoint as kubelet does (GetDevicePluginOptions, then a ListAndWatch stream it
// collects). Tests drive Allocate / GetPreferredAllocation through it and can "restart" it: stop,
// delete every socket in the directory, and serve a new kubelet.sock.
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "deviceplugin/proto/api.grpc.pb.h"

namespace grpc {
class Server;
class ClientContext;
}  // namespace grpc

namespace hami::deviceplugin::testing {

class FakeKubelet {
 public:
  explicit FakeKubelet(std::string dir);
  ~FakeKubelet();

  Status Start();
  void Stop();
  // kubelet restart: stop, remove every socket in the directory (the plugin's too), serve again.
  Status Restart();

  // Waits (up to `timeout`) until `n` registrations in total have been accepted.
  bool WaitForRegistrations(int n, std::chrono::milliseconds timeout);
  std::vector<v1beta1::RegisterRequest> Registrations() const;

  // Waits (up to `timeout`) until the latest ListAndWatch update satisfies `pred`.
  using DevicesPredicate = std::function<bool(const std::vector<v1beta1::Device>&)>;
  bool WaitForDevices(const DevicesPredicate& pred, std::chrono::milliseconds timeout);
  std::vector<v1beta1::Device> Devices() const;  // latest update of the current stream
  int Updates() const;                           // updates received on the current stream
  v1beta1::DevicePluginOptions Options() const;  // from GetDevicePluginOptions

  // DevicePlugin client calls on the registered plugin (one inner vector per container).
  StatusOr<v1beta1::AllocateResponse> Allocate(
      const std::vector<std::vector<std::string>>& containers);
  StatusOr<v1beta1::PreferredAllocationResponse> GetPreferredAllocation(
      const std::vector<std::string>& available, const std::vector<std::string>& must_include,
      int size);

  std::string KubeletSocketPath() const;

  // Serves PodResourcesLister (List) on `socket_path`, listing the pods admitted below. Survives
  // Restart.
  Status ServePodResources(const std::string& socket_path);
  // kubelet's admission of one container: the pod joins kubelet's pod list first (as kubelet adds a
  // pod before admitting it), then Allocate, then the container holds the IDs.
  StatusOr<v1beta1::AllocateResponse> AdmitAndAllocate(const std::string& ns,
                                                       const std::string& pod,
                                                       const std::string& container,
                                                       const std::vector<std::string>& ids);
  // The same for a container asking `n` devices, with the IDs chosen as kubelet chooses them: the
  // plugin's preference (GetPreferredAllocation) among the healthy devices that no container
  // admitted so far holds. Returns the chosen IDs with the response.
  struct Admitted {
    std::vector<std::string> ids;
    v1beta1::AllocateResponse response;
  };
  StatusOr<Admitted> AdmitPreferred(const std::string& ns, const std::string& pod,
                                    const std::string& container, int n);

 private:
  class RegistrationService;
  class PodResourcesService;
  struct KnownPod {
    std::string ns, name;
    std::vector<std::pair<std::string, std::vector<std::string>>> containers;  // name -> device IDs
  };
  Status Serve();
  void OnRegister(const v1beta1::RegisterRequest& req);  // connects to the plugin (own thread)
  void DisconnectPlugin();
  StatusOr<std::unique_ptr<v1beta1::DevicePlugin::Stub>> PluginStub() const;

  std::string dir_;
  std::unique_ptr<RegistrationService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<PodResourcesService> pr_service_;
  std::unique_ptr<grpc::Server> pr_server_;

  mutable Mutex mu_;
  CondVar cv_;  // a registration or a device update arrived
  std::vector<KnownPod> known_pods_ ABSL_GUARDED_BY(mu_);
  std::vector<v1beta1::RegisterRequest> registrations_ ABSL_GUARDED_BY(mu_);
  std::string endpoint_ ABSL_GUARDED_BY(mu_);  // of the latest registration
  std::vector<v1beta1::Device> devices_ ABSL_GUARDED_BY(mu_);
  int updates_ ABSL_GUARDED_BY(mu_) = 0;
  v1beta1::DevicePluginOptions options_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<grpc::ClientContext> stream_ctx_ ABSL_GUARDED_BY(mu_);
  std::thread stream_thread_ ABSL_GUARDED_BY(mu_);
  uint64_t stream_generation_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace hami::deviceplugin::testing
