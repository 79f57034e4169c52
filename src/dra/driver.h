#pragma once
// NodePrepareResources / NodeUnprepareResources without the transport: fetch each claim, check it,
// book it in the ledger, write its region directory, limits file and CDI spec, and keep the
// two-phase checkpoint (docs/dra.md#what-prepare-does). Thread-safe; every claim succeeds or fails
// on its own and a failed claim leaves nothing behind.
#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "deviceplugin/config.h"
#include "dra/checkpoint.h"
#include "dra/claim.h"
#include "dra/ledger.h"
#include "dra/slice.h"
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
};

struct DriverOptions {
  std::string driver = kDefaultDriverName;
  std::string node_name;   // the pool
  std::string plugin_dir;  // checkpoint.json lives here
  std::string cdi_root = "/var/run/cdi";
  std::string boot_id;              // ReadBootId() in production
  deviceplugin::PluginConfig vgpu;  // libvgpu paths and settings (region root, hook dir, ...)
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
  // Per claim uid. A claim already prepared answers from the checkpoint without fetching it.
  // A call of two or more claims (the kubelet sends one pod's claims together) first reads the pods
  // they are reserved for: the claims a container uses two or more of are refused, and nothing is
  // prepared for them (docs/dra.md#one-container-several-claims).
  std::map<std::string, Result> Prepare(const std::vector<ClaimRef>& claims);
  // Per claim uid; an unknown claim is OK. Works from the checkpoint only.
  std::map<std::string, Status> Unprepare(const std::vector<ClaimRef>& claims);

  // Whether the published devices are shared (consumable capacity on, the default); false: every
  // claim is armed with its whole GPU (SlicePublisher found the gate off).
  void SetShared(bool shared) { shared_.store(shared); }
  bool shared() const { return shared_.load(); }

  // For tests and metrics.
  Usage Used(const std::string& device) const;
  size_t Prepared() const;
  std::string CheckpointPath() const;

 private:
  Driver(DriverOptions options, std::vector<DeviceCapacity> devices, ClaimSource* claims);
  Result PrepareOne(const ClaimRef& ref);
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
  mutable Mutex mu_;
  CapacityLedger ledger_ ABSL_GUARDED_BY(mu_);
  Checkpoint checkpoint_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hami::dra
