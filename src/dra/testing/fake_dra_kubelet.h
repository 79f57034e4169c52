#pragma once
// The kubelet's side of DRA for tests, over the real sockets and protos: plugin registration as the
// kubelet's plugin watcher does it (GetInfo, validate, NotifyRegistrationStatus) and
// NodePrepareResources / NodeUnprepareResources on the registered endpoint, v1 or v1beta1.
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "dra/claim.h"
#include "dra/proto/dra_health_v1alpha1.pb.h"
#include "dra/proto/dra_v1.pb.h"
#include "dra/proto/pluginregistration.pb.h"

namespace hami::dra::testing {

enum class DraVersion { kV1, kV1beta1 };

class FakeDraKubelet {
 public:
  // Dials <registry_dir>/<driver>-reg.sock, calls GetInfo and checks the answer as the kubelet does
  // (type DRAPlugin, name = driver, an absolute endpoint, a DRAPlugin service it speaks: v1
  // preferred over v1beta1), then reports the outcome with NotifyRegistrationStatus. Errors say
  // what the kubelet would have refused.
  Status Register(const std::string& registry_dir, const std::string& driver);
  const pluginregistration::PluginInfo& info() const { return info_; }
  DraVersion chosen() const { return chosen_; }

  using PrepareResponse = ::k8s::io::kubelet::pkg::apis::dra::v1::NodePrepareResourcesResponse;
  using UnprepareResponse = ::k8s::io::kubelet::pkg::apis::dra::v1::NodeUnprepareResourcesResponse;
  // Calls on the registered endpoint; a gRPC error is returned as a Status.
  StatusOr<PrepareResponse> Prepare(const std::vector<ClaimRef>& claims,
                                    DraVersion version = DraVersion::kV1);
  StatusOr<UnprepareResponse> Unprepare(const std::vector<ClaimRef>& claims,
                                        DraVersion version = DraVersion::kV1);

  // The health stream as the kubelet opens it: only when GetInfo advertised
  // "v1alpha1.DRAResourceHealth" (FailedPrecondition otherwise); reads messages until `done` is
  // true of one (returned) or `timeout` passes (DeadlineExceeded, naming how many came).
  using HealthResponse = ::v1alpha1::NodeWatchResourcesResponse;
  StatusOr<HealthResponse> WatchHealth(const std::function<bool(const HealthResponse&)>& done,
                                       std::chrono::milliseconds timeout);

 private:
  pluginregistration::PluginInfo info_;
  DraVersion chosen_ = DraVersion::kV1;
};

}  // namespace hami::dra::testing
