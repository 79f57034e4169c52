#include "deviceplugin/pending_pod.h"

#include <algorithm>

#include "common/log.h"
#include "deviceplugin/node_devices.h"

namespace hami::deviceplugin {

namespace {

std::string Describe(const PendingPod& p) {
  const PendingContainer& c = p.containers.front();
  std::string gpus;
  for (const auto& d : c.devices) gpus += (gpus.empty() ? "" : ",") + d.uuid;
  return StrCat(p.Key(), " (container ", c.name, ": ", c.devices.size(), " device(s) ", gpus, ")");
}

}  // namespace

bool SameMigGrant(const core::MigAllocation& a, const core::MigAllocation& b) {
  return a.container_index == b.container_index && a.device_index == b.device_index &&
         a.gpu_uuid == b.gpu_uuid && a.profile == b.profile && a.placement == b.placement;
}

StatusOr<Selection> SelectPending(const std::vector<PendingPod>& pods,
                                  const std::vector<std::string>& kubelet_ids,
                                  const std::vector<SteeredChoice>& steered,
                                  KubeletPodView* kubelet_view) {
  std::vector<const PendingPod*> waiting;
  std::vector<const PendingPod*> cands;
  std::string refused;  // refused pods whose next container wants this many devices
  for (const auto& p : pods) {
    if (p.containers.empty()) continue;
    const bool fits = p.containers.front().devices.size() == kubelet_ids.size();
    if (!p.refused.empty()) {
      if (fits) refused += StrCat(refused.empty() ? "" : "; ", p.Key(), ": ", p.refused);
      continue;
    }
    waiting.push_back(&p);
    if (fits) cands.push_back(&p);
  }
  if (cands.empty() && !refused.empty()) {
    return absl::PermissionDeniedError(
        StrCat("refusing to arm a container from a device decision hami-scheduler "
               "did not make for this node (",
               refused, ")"));
  }
  if (waiting.empty()) {
    return NotFound("no pod bound to this node is waiting for devices (kubelet asked for ",
                    kubelet_ids.size(), "); was it scheduled by hami-scheduler?");
  }
  if (cands.empty()) {
    std::string list;
    for (const auto* p : waiting) list += (list.empty() ? "" : "; ") + Describe(*p);
    return NotFound("kubelet asked for ", kubelet_ids.size(),
                    " device(s) but no waiting pod's next container wants that many: ", list);
  }
  const PendingPod* chosen = nullptr;
  if (cands.size() == 1) {
    chosen = cands.front();
  } else {
    if (kubelet_view != nullptr) {
      auto listed = kubelet_view->ListPods();
      if (listed.ok()) {
        std::vector<const PendingPod*> admitting;
        for (const auto* p : cands) {
          for (const auto& k : *listed) {
            if (k.namespace_ == p->namespace_ && k.name == p->name &&
                !k.containers_with_devices.count(p->containers.front().name)) {
              admitting.push_back(p);
              break;
            }
          }
        }
        if (admitting.size() == 1) chosen = admitting.front();
      } else {
        spdlog::warn("kubelet PodResources unavailable: {}",
                     std::string(listed.status().message()));
      }
    }
    std::set<std::string> ids(kubelet_ids.begin(), kubelet_ids.end());
    for (const auto& s : steered) {
      if (chosen != nullptr || s.ids != ids) continue;
      for (const auto* p : cands) {
        if (p->uid == s.pod_uid && p->containers.front().index == s.container_index) chosen = p;
      }
    }
    if (chosen == nullptr) {
      std::string list;
      for (const auto* p : cands) list += (list.empty() ? "" : "; ") + Describe(*p);
      return FailedPrecondition(
          "ambiguous allocation: ", cands.size(), " pods wait for ", kubelet_ids.size(),
          " device(s) on this node and kubelet's IDs do not tell which one this is (", list,
          "); refusing to guess");
    }
  }
  return Selection{*chosen, chosen->containers.front()};
}

std::vector<const PendingPod*> PreferenceCandidates(
    const std::vector<PendingPod>& pods, int size,
    const std::vector<std::string>& available_uuids) {
  std::vector<const PendingPod*> out;
  for (const auto& p : pods) {
    if (p.containers.empty() || !p.refused.empty()) continue;
    const auto& devs = p.containers.front().devices;
    if (static_cast<int>(devs.size()) != size) continue;
    bool all = true;
    for (const auto& d : devs) {
      if (std::find(available_uuids.begin(), available_uuids.end(), d.uuid) ==
          available_uuids.end())
        all = false;
    }
    if (all) out.push_back(&p);
  }
  return out;
}

void MemoryPendingPodSource::AddPod(PendingPod pod) {
  MutexLock l(mu_);
  for (const auto& c : pod.containers) {
    auto& grants = mig_[pod.uid];
    grants.insert(grants.end(), c.mig.begin(), c.mig.end());
  }
  pods_.push_back(std::move(pod));
}

void MemoryPendingPodSource::RemovePod(const std::string& uid) {
  MutexLock l(mu_);
  pods_.erase(
      std::remove_if(pods_.begin(), pods_.end(), [&](const PendingPod& p) { return p.uid == uid; }),
      pods_.end());
  mig_.erase(uid);
}

StatusOr<std::vector<core::MigAllocation>> MemoryPendingPodSource::ActiveMigGrants() {
  MutexLock l(mu_);
  if (!list_error_.ok()) return list_error_;
  std::vector<core::MigAllocation> out;
  for (const auto& [uid, grants] : mig_) out.insert(out.end(), grants.begin(), grants.end());
  return out;
}

StatusOr<std::vector<PendingPod>> MemoryPendingPodSource::ListPending() {
  MutexLock l(mu_);
  if (!list_error_.ok()) return list_error_;
  std::vector<PendingPod> out;
  for (const auto& p : pods_) {
    if (!p.containers.empty() && !failed_.count(p.uid)) out.push_back(p);
  }
  return out;
}

Status MemoryPendingPodSource::MarkAllocated(const PendingPod& pod, int container_index) {
  MutexLock l(mu_);
  if (!mark_error_.ok()) return mark_error_;
  for (auto& p : pods_) {
    if (p.uid != pod.uid) continue;
    auto it = std::find_if(p.containers.begin(), p.containers.end(),
                           [&](const PendingContainer& c) { return c.index == container_index; });
    if (it == p.containers.end())
      return NotFound("pod ", p.Key(), " has no container ", container_index, " waiting");
    p.containers.erase(it);
    return OkStatus();
  }
  return NotFound("pod ", pod.Key(), " is not pending");
}

Status MemoryPendingPodSource::MarkFailed(const PendingPod& pod, std::string_view reason) {
  MutexLock l(mu_);
  failed_[pod.uid] = std::string(reason);
  return OkStatus();
}

Status MemoryPendingPodSource::RecordMig(const PendingPod& pod,
                                         const std::vector<core::MigAllocation>& created) {
  MutexLock l(mu_);
  auto with_identity = [&](core::MigAllocation& m) {
    for (const auto& n : created) {
      if (SameMigGrant(m, n)) m = n;
    }
  };
  for (auto& m : mig_[pod.uid]) with_identity(m);
  for (auto& p : pods_) {
    if (p.uid != pod.uid) continue;
    for (auto& c : p.containers) {
      for (auto& m : c.mig) with_identity(m);
    }
    return OkStatus();
  }
  return NotFound("pod ", pod.Key(), " is not pending");
}

std::map<std::string, std::string> MemoryPendingPodSource::Failed() const {
  MutexLock l(mu_);
  return failed_;
}

void MemoryPendingPodSource::SetListError(Status s) {
  MutexLock l(mu_);
  list_error_ = std::move(s);
}

void MemoryPendingPodSource::SetMarkError(Status s) {
  MutexLock l(mu_);
  mark_error_ = std::move(s);
}

}  // namespace hami::deviceplugin
