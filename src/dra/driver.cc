#include "dra/driver.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <set>

#include "absl/strings/str_join.h"
#include "common/clock.h"
#include "common/libc.h"
#include "dra/cdi.h"
#include "dra/device_status.h"
#include "dra/pod_claims.h"
#include "spdlog/spdlog.h"

namespace hami::dra {

namespace fs = std::filesystem;

namespace {

// The region directory libvgpu writes into from the container: 0770, never world-writable.
Status MakeRegionDir(const std::string& dir) {
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(fs::path(dir).parent_path(), ec);
  if (ec) return Internal("cannot create the region root of ", dir, ": ", ec.message());
  if (::mkdir(dir.c_str(), 0700) != 0 || ::chmod(dir.c_str(), 0770) != 0)
    return Internal("cannot create region directory ", dir, ": ", ErrnoText(errno));
  return OkStatus();
}

}  // namespace

Driver::Driver(DriverOptions options, std::vector<DeviceCapacity> devices, ClaimSource* claims)
    : options_(std::move(options)),
      devices_(devices),
      claims_(claims),
      ledger_(std::move(devices)) {}

std::string Driver::CheckpointPath() const {
  return deviceplugin::JoinPath(options_.plugin_dir, "checkpoint.json");
}

StatusOr<std::unique_ptr<Driver>> Driver::Create(DriverOptions options,
                                                 std::vector<DeviceCapacity> devices,
                                                 ClaimSource* claims) {
  std::error_code ec;
  fs::create_directories(options.plugin_dir, ec);
  if (ec) return Internal("cannot create plugin dir ", options.plugin_dir, ": ", ec.message());
  fs::create_directories(options.cdi_root, ec);
  if (ec) return Internal("cannot create CDI root ", options.cdi_root, ": ", ec.message());
  std::unique_ptr<Driver> d(new Driver(std::move(options), std::move(devices), claims));
  MutexLock l(d->mu_);
  d->checkpoint_.boot_id = d->options_.boot_id;
  auto text = ReadWholeFile(d->CheckpointPath());
  if (!text.ok() && !absl::IsNotFound(text.status())) return text.status();
  if (text.ok()) {
    auto cp = DecodeCheckpoint(*text);
    if (!cp.ok()) return Annotate(cp.status(), d->CheckpointPath());
    if (cp->boot_id != d->options_.boot_id) {
      spdlog::info("dra: checkpoint of boot {} dropped (this boot is {}): {} claim(s) forgotten",
                   cp->boot_id, d->options_.boot_id, cp->claims.size());
      // Files under /var/run and the region root do not survive a reboot either; remove leftovers.
      for (const auto& [uid, pc] : cp->claims) (void)RemoveFiles(pc);
    } else {
      for (auto& [uid, pc] : cp->claims) {
        if (pc.state != PrepareState::kCompleted) {
          (void)RemoveFiles(pc);  // died mid-way: the kubelet will ask again
          continue;
        }
        HAMI_RETURN_IF_ERROR(Annotate(d->ledger_.Book(uid, pc.claim.ByDevice()),
                                      StrCat("checkpointed claim ", uid)));
        d->checkpoint_.claims.emplace(uid, std::move(pc));
      }
    }
  }
  HAMI_RETURN_IF_ERROR(d->SaveLocked());
  return d;
}

Status Driver::SaveLocked() {
  return WriteFileAtomic(CheckpointPath(), EncodeCheckpoint(checkpoint_));
}

Status Driver::RemoveFiles(const PreparedClaim& pc) {
  Status first;
  for (const auto& f : pc.files) {
    if (::unlink(f.c_str()) != 0 && errno != ENOENT && first.ok())
      first = Internal("cannot remove ", f, ": ", ErrnoText(errno));
  }
  for (const auto& d : pc.dirs) {
    std::error_code ec;
    fs::remove_all(d, ec);
    if (ec && first.ok()) first = Internal("cannot remove ", d, ": ", ec.message());
  }
  return first;
}

std::map<std::string, Status> Driver::RefuseClaimsSharingAContainer(
    const std::vector<ClaimRef>& claims) {
  std::map<std::string, Status> refused;
  if (claims.size() < 2) return refused;
  // The claims of this call by object name (this driver's: the kubelet sends a driver its own),
  // and the pods they are reserved for, all in the claims' namespace.
  std::map<std::string, std::string> uid_by_name;
  std::map<PodRef, std::string> pods;  // -> namespace
  for (const auto& ref : claims) {
    auto obj = claims_->GetClaim(ref.namespace_, ref.name);
    if (!obj.ok() || !obj->is_object() ||
        obj->value("metadata", nlohmann::json::object()).value("uid", "") != ref.uid)
      continue;  // PrepareOne says why
    uid_by_name[ref.name] = ref.uid;
    for (auto& p : ReservedPods(*obj)) pods.emplace(std::move(p), ref.namespace_);
  }
  std::set<std::string> names;
  for (const auto& [name, uid] : uid_by_name) names.insert(name);
  for (const auto& [pod_ref, ns] : pods) {
    auto pod = claims_->GetPod(ns, pod_ref.name);
    if (!pod.ok() && absl::IsNotFound(pod.status())) continue;  // gone: no container to arm
    if (!pod.ok()) {
      for (const auto& [name, uid] : uid_by_name)
        refused.emplace(
            uid, Annotate(pod.status(), StrCat("claim ", ns, "/", name, ": cannot read pod ", ns,
                                               "/", pod_ref.name, " to check its containers")));
      continue;
    }
    const std::string uid =
        pod->is_object() ? pod->value("metadata", nlohmann::json::object()).value("uid", "") : "";
    if (!pod_ref.uid.empty() && uid != pod_ref.uid) continue;  // replaced: not the reserved pod
    for (const auto& c : ContainersWithSeveralClaims(*pod, names)) {
      for (const auto& name : c.claims) {
        refused.emplace(
            uid_by_name[name],
            FailedPrecondition(
                "claim ", ns, "/", name, ": pod ", ns, "/", pod_ref.name, " container ",
                c.container, " uses claims ", absl::StrJoin(c.claims, ", "), " of driver ",
                options_.driver,
                " together; each claim's CDI device arms the limiter (libvgpu, the vNPU core) with "
                "that claim's devices and limits at the same paths, so their limits would "
                "overwrite each other: put the requests "
                "in "
                "one claim (its requests on one GPU add up)"));
      }
    }
  }
  return refused;
}

std::map<std::string, Driver::Result> Driver::Prepare(const std::vector<ClaimRef>& claims) {
  std::map<std::string, Result> out;
  std::map<std::string, Status> refused = RefuseClaimsSharingAContainer(claims);
  for (const auto& ref : claims) {
    auto it = refused.find(ref.uid);
    out[ref.uid] = it != refused.end() ? Result{it->second, {}} : PrepareOne(ref);
  }
  return out;
}

std::map<std::string, Status> Driver::Unprepare(const std::vector<ClaimRef>& claims) {
  std::map<std::string, Status> out;
  for (const auto& ref : claims) out[ref.uid] = UnprepareOne(ref);
  return out;
}

Status Driver::RefuseUnhealthy(const ClaimAllocation& claim, const ClaimRef& ref) const {
  const HealthBoard* board = health_.load();
  if (board == nullptr) return OkStatus();
  std::set<std::string> allocated;
  for (const auto& s : claim.shares) allocated.insert(s.device);
  uint64_t version = 0;
  std::vector<std::string> bad;
  for (const auto& e : board->Snapshot(&version)) {
    if (e.healthy || !allocated.count(e.device)) continue;
    std::string uuid;
    for (const auto& d : devices_)
      if (d.name == e.device) uuid = d.uuid;
    bad.push_back(StrCat(e.device, " (", uuid, "): ", e.message));
  }
  if (bad.empty()) return OkStatus();
  return FailedPrecondition(
      "claim ", ref.namespace_, "/", ref.name, " is allocated GPU(s) that are unhealthy on node ",
      options_.node_name, ": ", absl::StrJoin(bad, "; "),
      "; it is left out of the ResourceSlice until it recovers, so a new claim is not "
      "allocated it");
}

Driver::Result Driver::PrepareOne(const ClaimRef& ref) {
  if (Status s = CheckName(ref.uid, "claim uid"); !s.ok()) return {s, {}};
  {
    MutexLock l(mu_);
    auto it = checkpoint_.claims.find(ref.uid);
    if (it != checkpoint_.claims.end() && it->second.state == PrepareState::kCompleted)
      return {OkStatus(), it->second.devices};
  }
  // Fetch and read the claim without the lock: the API server is the slow part.
  auto obj = claims_->GetClaim(ref.namespace_, ref.name);
  if (!obj.ok())
    return {Annotate(obj.status(), StrCat("claim ", ref.namespace_, "/", ref.name)), {}};
  auto claim = ParseClaim(*obj, ref, options_.driver, options_.node_name, devices_, shared());
  if (!claim.ok()) return {claim.status(), {}};
  if (Status s = RefuseUnhealthy(*claim, ref); !s.ok()) return {s, {}};
  auto edits = BuildClaimEdits(*claim, devices_, options_.driver, options_.vgpu, options_.vendor);
  if (!edits.ok()) return {edits.status(), {}};

  PreparedClaim pc;
  pc.claim = *claim;
  for (const auto& s : claim->shares) {
    // One Device per result: the kubelet matches request names to the container's claims.
    std::string request = s.request.substr(0, s.request.find('/'));
    pc.devices.push_back(
        {{request}, options_.node_name, s.device, {edits->cdi_device_id}, s.share_id});
  }
  const std::string spec_path = deviceplugin::JoinPath(options_.cdi_root, edits->spec_file_name);
  pc.files = {spec_path};
  for (const auto& [path, contents] : edits->edits.files) pc.files.push_back(path);
  pc.dirs = edits->edits.dirs;
  Result r = CommitPrepared(ref, pc, spec_path, edits->spec_json, edits->edits);
  if (r.status.ok()) WriteStatus(*claim, edits->cdi_device_id);  // without the lock
  return r;
}

Driver::Result Driver::CommitPrepared(const ClaimRef& ref, const PreparedClaim& pc,
                                      const std::string& spec_path, const std::string& spec_json,
                                      const VendorEdits& edits) {
  MutexLock l(mu_);
  auto it = checkpoint_.claims.find(ref.uid);
  if (it != checkpoint_.claims.end() && it->second.state == PrepareState::kCompleted)
    return {OkStatus(), it->second.devices};  // a concurrent call prepared it meanwhile
  if (Status s = ledger_.Book(ref.uid, pc.claim.ByDevice()); !s.ok())
    return {Annotate(s, StrCat("claim ", ref.namespace_, "/", ref.name)), {}};
  // Phase 1: recorded before any file exists, so a crash leaves a record to roll back.
  checkpoint_.claims[ref.uid] = pc;
  Status s = SaveLocked();
  for (size_t i = 0; s.ok() && i < edits.dirs.size(); ++i) s = MakeRegionDir(edits.dirs[i]);
  for (size_t i = 0; s.ok() && i < edits.files.size(); ++i)
    s = WriteFileAtomic(edits.files[i].first, edits.files[i].second, 0444);
  if (s.ok()) s = WriteFileAtomic(spec_path, spec_json, 0644);
  if (s.ok()) {
    checkpoint_.claims[ref.uid].state = PrepareState::kCompleted;
    s = SaveLocked();  // phase 2
  }
  if (!s.ok()) {
    (void)RemoveFiles(pc);
    ledger_.Release(ref.uid);
    checkpoint_.claims.erase(ref.uid);
    (void)SaveLocked();
    return {Annotate(s, StrCat("claim ", ref.namespace_, "/", ref.name)), {}};
  }
  return {OkStatus(), pc.devices};
}

namespace {
// The CDI device a prepared claim's status names (its first device's), null when it has none.
const std::string* StatusCdiDevice(const PreparedClaim& pc) {
  if (pc.devices.empty() || pc.devices[0].cdi_device_ids.empty()) return nullptr;
  return &pc.devices[0].cdi_device_ids[0];
}
}  // namespace

std::map<std::string, std::string> Driver::UnhealthyDevices() const {
  std::map<std::string, std::string> out;
  const HealthBoard* board = health_.load();
  if (board == nullptr) return out;
  uint64_t version = 0;
  for (const auto& e : board->Snapshot(&version))
    if (!e.healthy) out[e.device] = e.message;
  return out;
}

std::string Driver::HealthKey(const ClaimAllocation& claim,
                              const std::map<std::string, std::string>& unhealthy) {
  std::string key;
  for (const auto& [device, usage] : claim.ByDevice())
    if (auto it = unhealthy.find(device); it != unhealthy.end())
      key += StrCat(device, "=", it->second, "\n");
  return key;
}

void Driver::WriteStatus(const ClaimAllocation& claim, const std::string& cdi_device_id) {
  const std::map<std::string, std::string> unhealthy = UnhealthyDevices();
  const nlohmann::json entries =
      DeviceStatusEntries(claim, devices_, options_.driver, options_.node_name, cdi_device_id,
                          RealClock::Get().UnixSeconds(), options_.vendor, unhealthy);
  Status s = claims_->WriteDeviceStatus(claim.ref, options_.driver, options_.node_name, entries);
  {
    MutexLock l(mu_);
    if (s.ok() && checkpoint_.claims.count(claim.ref.uid) > 0)
      status_health_[claim.ref.uid] = HealthKey(claim, unhealthy);
    const bool retry = !s.ok() && !absl::IsNotFound(s) && !absl::IsFailedPrecondition(s) &&
                       checkpoint_.claims.count(claim.ref.uid) > 0;  // not unprepared meanwhile
    if (retry) {
      status_pending_.insert(claim.ref.uid);
    } else {
      status_pending_.erase(claim.ref.uid);
    }
  }
  if (s.ok()) return;
  ++status_write_failures_;
  spdlog::warn(
      "dra: claim {}/{} is prepared, but its status.devices was not written: {}. From Kubernetes "
      "1.36 the plugin's service account needs update and patch on resourceclaims/status and "
      "associated-node:update and associated-node:patch on resourceclaims/driver for resource "
      "name {} (docs/dra.md#claim-status)",
      claim.ref.namespace_, claim.ref.name, std::string(s.message()), options_.driver);
}

size_t Driver::RetryStatusWrites() {
  std::vector<std::pair<ClaimAllocation, std::string>> todo;  // claim, CDI device id
  {
    MutexLock l(mu_);
    for (const auto& uid : status_pending_) {
      auto it = checkpoint_.claims.find(uid);
      if (it == checkpoint_.claims.end()) continue;
      if (const std::string* cdi = StatusCdiDevice(it->second))
        todo.emplace_back(it->second.claim, *cdi);
    }
  }
  for (const auto& [claim, cdi] : todo) WriteStatus(claim, cdi);
  MutexLock l(mu_);
  return status_pending_.size();
}

size_t Driver::RefreshHealthStatus() {
  const std::map<std::string, std::string> unhealthy = UnhealthyDevices();
  std::vector<std::pair<ClaimAllocation, std::string>> todo;  // claim, CDI device id
  {
    MutexLock l(mu_);
    for (const auto& [uid, pc] : checkpoint_.claims) {
      const std::string* cdi = StatusCdiDevice(pc);
      if (pc.state != PrepareState::kCompleted || cdi == nullptr) continue;
      auto written = status_health_.find(uid);
      const std::string before = written == status_health_.end() ? "" : written->second;
      if (HealthKey(pc.claim, unhealthy) != before) todo.emplace_back(pc.claim, *cdi);
    }
  }
  for (const auto& [claim, cdi] : todo) WriteStatus(claim, cdi);
  return todo.size();
}

Status Driver::UnprepareOne(const ClaimRef& ref) {
  MutexLock l(mu_);
  status_pending_.erase(ref.uid);
  status_health_.erase(ref.uid);
  auto it = checkpoint_.claims.find(ref.uid);
  if (it == checkpoint_.claims.end()) return OkStatus();
  HAMI_RETURN_IF_ERROR(RemoveFiles(it->second));
  checkpoint_.claims.erase(it);
  ledger_.Release(ref.uid);
  return SaveLocked();
}

Usage Driver::Used(const std::string& device) const {
  MutexLock l(mu_);
  return ledger_.Used(device);
}

size_t Driver::Prepared() const {
  MutexLock l(mu_);
  return checkpoint_.claims.size();
}

}  // namespace hami::dra
