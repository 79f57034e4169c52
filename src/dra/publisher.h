#pragma once
// The Kubernetes side of `hami dra-plugin`: claims read from the API server for Prepare, and the
// node's ResourceSlice kept published (docs/dra.md#resourceslice-what-the-plugin-publishes):
// created when absent (the kubelet deletes its node's slices when it starts), updated with the
// pool generation bumped when the devices change, left alone otherwise. When the API server drops
// allowMultipleAllocations (DRAConsumableCapacity off), the slice is re-published with exclusive
// devices and the publisher says so: the driver must then arm whole cards (Driver::SetShared).
// With a HealthBoard, a GPU it marks unhealthy (an NVML Xid) is left out of the slice until it is
// healthy again, so the scheduler stops allocating it (docs/dra.md#health).
#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "dra/driver.h"
#include "dra/health.h"
#include "dra/slice.h"
#include "gpu/discovery.h"
#include "k8s/client.h"

namespace hami::dra {

class K8sClaimSource final : public ClaimSource {
 public:
  explicit K8sClaimSource(k8s::Client* client) : client_(client) {}
  StatusOr<nlohmann::json> GetClaim(const std::string& ns, const std::string& name) override;
  StatusOr<nlohmann::json> GetPod(const std::string& ns, const std::string& name) override;
  // Read-modify-write of resourceclaims/status (a merge patch with the read resourceVersion; a
  // conflict reads again, 3 tries) with MergeDeviceStatus. Nothing is written when the entries are
  // already there, or when the claim is gone or has another uid (FailedPrecondition).
  Status WriteDeviceStatus(const ClaimRef& ref, const std::string& driver, const std::string& pool,
                           const nlohmann::json& entries) override;

 private:
  k8s::Client* client_;
};

// Whether every device of `wanted` that allows multiple allocations still does in `stored` (what
// the API server kept). False: the server dropped the field (its DRAConsumableCapacity gate is
// off).
bool KeptMultipleAllocations(const nlohmann::json& wanted, const nlohmann::json& stored);

class SlicePublisher {
 public:
  // `options.node_uid` and `options.generation` are filled in by Reconcile. `health` (may be null:
  // every GPU published) is read at each Reconcile and must outlive the publisher.
  SlicePublisher(k8s::Client* client, SliceOptions options, std::vector<gpu::GpuInfo> gpus,
                 std::map<std::string, GpuExtras> extras = {}, const HealthBoard* health = nullptr);

  enum class Action { kNone, kCreated, kUpdated };
  struct Outcome {
    Action action = Action::kNone;
    int64_t generation = 0;
    bool shared = true;  // false: published exclusive devices (consumable capacity is off)
  };
  // One pass: reads the Node (its uid) and the slice, and creates or updates the slice as needed
  // (the GPUs the HealthBoard holds unhealthy left out). Errors are the API server's, annotated;
  // the next pass tries again.
  StatusOr<Outcome> Reconcile();
  bool shared() const { return options_.shared; }

 private:
  StatusOr<nlohmann::json> Write(const std::vector<gpu::GpuInfo>& gpus,
                                 const nlohmann::json* existing, int64_t generation);
  // gpus_ less the GPUs the HealthBoard holds unhealthy.
  std::vector<gpu::GpuInfo> HealthyGpus() const;

  k8s::Client* client_;
  SliceOptions options_;
  const std::vector<gpu::GpuInfo> gpus_;
  const std::map<std::string, GpuExtras> extras_;
  const HealthBoard* const health_;
};

}  // namespace hami::dra
