#pragma once
// The device plugin's side of the NUMA refit (docs/upstream-contract.md, "NUMA refit"): when
// kubelet's Topology Manager offers a container only GPUs that are not the ones the scheduler
// granted, and the pod asks for it (hami.io/numa-alignment), the plugin asks the scheduler's /refit
// to move the grant onto the offered GPUs (DevicePlugin::PreferredAllocation).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "core/model.h"
#include "core/refit_wire.h"

namespace hami::deviceplugin {

class RefitClient {
 public:
  virtual ~RefitClient() = default;
  // The container's new devices, or why not: the scheduler's in-band refusal, a reply that is not
  // a refit response, the status of a rejected call, a transport error.
  virtual StatusOr<std::vector<core::ContainerDevice>> Refit(const core::RefitRequest& request) = 0;
};

struct SchedulerRefitOptions {
  // The scheduler's base URL, e.g. https://hami-scheduler.kube-system.svc:443 (helm:
  // devicePlugin.numaRefit.schedulerEndpoint). https only: the call carries a bearer token.
  std::string endpoint;
  std::string ca_pem;  // PEM bundle the scheduler's certificate must chain to (numaRefit.caFile)
  // The plugin pod's bound service-account token, re-read at most once a minute as client-go does
  // (kubelet rotates it long before it expires).
  std::string token_file = "/var/run/secrets/kubernetes.io/serviceaccount/token";
  // One round trip, connect included: kubelet gives GetPreferredAllocation no deadline of its own
  // and admits pods one at a time, so this bounds how long a slow scheduler holds the node.
  int64_t timeout_ms = 2000;
};

// The HTTPS client of the scheduler's /refit: one POST, no retries, no redirects, certificate
// verified (never skipped: the request carries the plugin's token). InvalidArgument for an
// endpoint that is not https://, a CA bundle that does not load.
StatusOr<std::unique_ptr<RefitClient>> NewSchedulerRefitClient(
    const SchedulerRefitOptions& options);

}  // namespace hami::deviceplugin
