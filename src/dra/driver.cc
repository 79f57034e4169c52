#include "dra/driver.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <set>

#include "absl/strings/str_join.h"
#include "common/libc.h"
#include "dra/cdi.h"
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
                " together; each claim's CDI device arms libvgpu with that claim's GPUs and limits "
                "at the same paths, so their limits would overwrite each other: put the requests "
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
  auto edits = BuildClaimEdits(*claim, devices_, options_.driver, options_.vgpu);
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
  pc.files = {spec_path, edits->allocation.limits_host_path};
  pc.dirs = {edits->allocation.region_host_dir};

  MutexLock l(mu_);
  auto it = checkpoint_.claims.find(ref.uid);
  if (it != checkpoint_.claims.end() && it->second.state == PrepareState::kCompleted)
    return {OkStatus(), it->second.devices};  // a concurrent call prepared it meanwhile
  if (Status s = ledger_.Book(ref.uid, claim->ByDevice()); !s.ok())
    return {Annotate(s, StrCat("claim ", ref.namespace_, "/", ref.name)), {}};
  // Phase 1: recorded before any file exists, so a crash leaves a record to roll back.
  checkpoint_.claims[ref.uid] = pc;
  Status s = SaveLocked();
  if (s.ok()) s = MakeRegionDir(edits->allocation.region_host_dir);
  if (s.ok())
    s = WriteFileAtomic(edits->allocation.limits_host_path, edits->allocation.limits_file, 0444);
  if (s.ok()) s = WriteFileAtomic(spec_path, edits->spec_json, 0644);
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

Status Driver::UnprepareOne(const ClaimRef& ref) {
  MutexLock l(mu_);
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
