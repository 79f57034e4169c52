#pragma once
// NodePrepareResources / NodeUnprepareResources without the transport: fetch each claim, check it,
// book it in the ledger, write its region directory, limits file and CDI spec, and keep the
// two-phase checkpoint (docs/dra.md#what-prepare-does). Thread-safe; every claim succeeds or fails
// on its own and a failed claim leaves nothing behind.
#include <atomic>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "deviceplugin/config.h"
#include "dra/checkpoint.h"
#include "dra/claim.h"
#include "dra/health.h"
#include "dra/ledger.h"
#include "dra/slice.h"
#include "dra/vendor.h"
#include "nlohmann/json.hpp"

namespace hami::dra {

// Where claims come from (the API server; a map in tests).
class ClaimSource {
 public:
  virtual ~ClaimSource() = default;
  // The ResourceClaim object; NotFound when it does not exist.
  virtual StatusOr<nlohmann::json> GetClaim(const std::string& ns, const std::string& name) = 0;
  // The Pod object; NotFound when it does not exist.
  virtual StatusOr<nlohmann::json> GetPod(const std::string& ns, const std::string& name) = 0;
  // Replaces the claim's status.devices entries of `driver` in `pool` by `entries`
  // (device_status.h), keeping other drivers' entries; only while the claim still has `ref.uid`.
  // The default writes nothing.
  virtual Status WriteDeviceStatus(const ClaimRef& ref, const std::string& driver,
                                   const std::string& pool, const nlohmann::json& entries) {
    return OkStatus();
  }
};

struct DriverOptions {
  std::string driver = kDefaultDriverName;
  std::string node_name;   // the pool
  std::string plugin_dir;  // checkpoint.json lives here
  std::string cdi_root = "/var/run/cdi";
  std::string boot_id;              // ReadBootId() in production
  deviceplugin::PluginConfig vgpu;  // libvgpu paths and settings (region root, hook dir, ...)
  // Whose limiter Prepare arms (dra/vendor.h; not owned, outlives the driver). Null: NVIDIA's.
  const DraVendor* vendor = nullptr;
};

class Driver {
 public:
  // Loads <plugin_dir>/checkpoint.json: completed claims of this boot are booked again; claims left
  // at PrepareStarted are rolled back (their files removed); a checkpoint of another boot is
  // dropped (a reboot undid every preparation). `devices` in NVML index order.
  static StatusOr<std::unique_ptr<Driver>> Create(DriverOptions options,
                                                  std::vector<DeviceCapacity> devices,
                                                  ClaimSource* claims);

  struct Result {
    Status status;
    std::vector<PreparedDevice> devices;
  };
  // Per claim uid. A claim already prepared answers from the checkpoint without fetching it. A
  // claim prepared by this call gets its status.devices entries written
  // (ClaimSource::WriteDeviceStatus; docs/dra.md#claim-status); a failed write is logged and
  // counted, the claim stays prepared. A call of two or more claims (the kubelet sends one pod's
  // claims together) first reads the pods they are reserved for: the claims a container uses two or
  // more of are refused, and nothing is prepared for them
  // (docs/dra.md#one-container-several-claims).
  std::map<std::string, Result> Prepare(const std::vector<ClaimRef>& claims);
  // Per claim uid; an unknown claim is OK. Works from the checkpoint only.
  std::map<std::string, Status> Unprepare(const std::vector<ClaimRef>& claims);

  // The GPUs' health (may be null: every GPU counts as healthy; set before serving). A claim not
  // yet prepared whose allocation names a GPU the board holds unhealthy is refused
  // (FAILED_PRECONDITION naming the GPU and the board's reason; nothing written), so a pod that the
  // scheduler placed before the GPU left the slice does not start on it. A claim prepared before is
  // still answered from the checkpoint (docs/dra.md#health).
  void SetHealthBoard(const HealthBoard* health) { health_.store(health); }

  // Whether the published devices are shared (consumable capacity on, the default); false: every
  // claim is armed with its whole GPU (SlicePublisher found the gate off).
  void SetShared(bool shared) { shared_.store(shared); }
  bool shared() const { return shared_.load(); }

  // For tests and metrics.
  Usage Used(const std::string& device) const;
  size_t Prepared() const;
  // Status writes that failed (RBAC, API server down, the claim gone), since start.
  int64_t StatusWriteFailures() const { return status_write_failures_.load(); }
  // Writes again the status of the prepared claims whose last write failed (the plugin calls it at
  // each resync), except those that are gone or re-created (NotFound, FailedPrecondition: nothing
  // left to write to). Returns how many are still pending. Claims of an earlier run are not
  // remembered.
  size_t RetryStatusWrites();
  // Writes again the status of the prepared claims on a GPU whose health changed since their last
  // write (the health board's; docs/dra.md#claim-status): Ready turns False (reason Unhealthy)
  // while the board holds one of a claim's GPUs unhealthy, and True again once it recovers. The
  // plugin calls it when the board changes and at each resync; returns how many claims it wrote.
  size_t RefreshHealthStatus();
  std::string CheckpointPath() const;

 private:
  Driver(DriverOptions options, std::vector<DeviceCapacity> devices, ClaimSource* claims);
  Result PrepareOne(const ClaimRef& ref);
  // The refusal of a claim that names a GPU the health board holds unhealthy; OK otherwise.
  Status RefuseUnhealthy(const ClaimAllocation& claim, const ClaimRef& ref) const;
  // PrepareOne's booking, files and checkpoint, under the lock: the vendor's directories and
  // files, then the CDI spec.
  Result CommitPrepared(const ClaimRef& ref, const PreparedClaim& pc, const std::string& spec_path,
                        const std::string& spec_json, const VendorEdits& edits);
  // Writes the claim's status.devices; remembers a failed write for RetryStatusWrites, and the
  // health written (HealthKey) for RefreshHealthStatus.
  void WriteStatus(const ClaimAllocation& claim, const std::string& cdi_device_id);
  // The board's unhealthy devices (name -> why); empty without a board.
  std::map<std::string, std::string> UnhealthyDevices() const;
  // What of `unhealthy` concerns `claim`'s devices, as one string ("" = all healthy).
  static std::string HealthKey(const ClaimAllocation& claim,
                               const std::map<std::string, std::string>& unhealthy);
  // Per claim uid, the refusal of the claims of `claims` that one container uses together.
  std::map<std::string, Status> RefuseClaimsSharingAContainer(const std::vector<ClaimRef>& claims);
  Status UnprepareOne(const ClaimRef& ref);
  Status SaveLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes what a (partly) prepared claim wrote; the first error is returned, the rest tried.
  static Status RemoveFiles(const PreparedClaim& pc);

  const DriverOptions options_;
  const std::vector<DeviceCapacity> devices_;
  ClaimSource* const claims_;
  std::atomic<bool> shared_{true};
  std::atomic<const HealthBoard*> health_{nullptr};
  std::atomic<int64_t> status_write_failures_{0};
  mutable Mutex mu_;
  CapacityLedger ledger_ ABSL_GUARDED_BY(mu_);
  Checkpoint checkpoint_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> status_pending_ ABSL_GUARDED_BY(mu_);  // claim uids
  // Per claim uid, the HealthKey of its last status write; absent = written healthy at prepare
  // (or prepared by an earlier run, whose writes were all healthy ones).
  std::map<std::string, std::string> status_health_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hami::dra
