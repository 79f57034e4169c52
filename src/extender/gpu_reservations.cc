// ClusterState's part of the consolidation controller's GPU reservations (scheduler/
// gpu_reservation.h, docs/consolidation.md "The destination is reserved"): a reservation read from
// a Node's annotation holds its room on its GPU in the scheduler's cache and its namespace's quota,
// as a placed pod of its own key would, until it expires, leaves the annotation, or one pod of the
// workload takes it (its holder: decided onto it here, or found carrying a decision that names it).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>

#include "extender/state.h"

namespace hami::extender {
namespace {

// The cache key of a reservation's room: never a pod uid (those are UUIDs without '/').
std::string CacheKey(const std::string& id) {
  return "consolidate-reservation/" + id;
}

// Whether `alloc` holds GPU `uuid` on `node`.
bool HoldsGpu(const core::PodAllocation& alloc, const std::string& node, const std::string& uuid) {
  if (alloc.node != node) return false;
  for (const auto& c : alloc.containers)
    for (const core::ContainerDevice& d : c)
      if (d.uuid == uuid) return true;
  return false;
}

}  // namespace

std::string ControllerOwnerUid(const Json& pod) {
  std::string uid;
  if (const Json* owners = FieldAt(pod, {"metadata", "ownerReferences"});
      owners != nullptr && owners->is_array())
    for (const Json& o : *owners)
      if (o.is_object() && o.value("controller", false) && o.contains("uid") &&
          o["uid"].is_string())
        uid = o["uid"].get<std::string>();
  return uid;
}

void ClusterState::ReleaseGpuReservationLocked(HeldGpuReservation& h) {
  if (!h.charged) return;
  (void)sched_.RemovePod(CacheKey(h.r.id));
  auto& u = ns_usage_[h.r.namespace_];
  for (const auto& [resource, amount] : h.quota)
    if ((u[resource] -= amount) == 0) u.erase(resource);
  h.quota.clear();
  h.charged = false;
}

void ClusterState::ChargeGpuReservationLocked(HeldGpuReservation& h, bool log) {
  if (h.charged || !h.holder.empty()) return;
  const std::string& node = h.node;
  const scheduler::GpuReservation& r = h.r;
  core::ContainerDevice dev;
  dev.uuid = r.uuid;
  dev.usedmem_mib = r.mem_mib;
  dev.usedcores = r.cores;
  core::PodAllocation room;
  room.node = node;
  room.containers = {{dev}};
  std::string verdict, message;
  bool over = false;
  const bool known = sched_.cache().WithNode(node, [&](const scheduler::NodeState& n) {
    verdict =
        CheckAgainstNode(n, room, {core::ContainerKind::kApp}, /*fresh=*/true, &message, &over);
  });
  if (!known || !verdict.empty() || over) {
    // Not held (the workload's pod is still steered to the GPU, where the fit decides).
    if (log)
      spdlog::info("node {}: reservation {} of GPU {} holds nothing for now: {}", node, r.id,
                   r.uuid, known ? message : "node not registered");
    return;
  }
  if (Status s = sched_.AddPod(CacheKey(r.id), room); !s.ok()) {
    spdlog::warn("node {}: reservation {}: {}", node, r.id, std::string(s.message()));
    return;
  }
  h.charged = true;
  // The evicted pod's quota usage went with it; the room it left counts against its namespace
  // until its replacement takes it (docs/consolidation.md, "Reservations and quota").
  h.quota = ChargeOf({core::ContainerKind::kApp}, room, false);
  auto& u = ns_usage_[r.namespace_];
  for (const auto& [resource, amount] : h.quota) u[resource] += amount;
  if (r.expires_s < next_gpu_reservation_expiry_.load(std::memory_order_relaxed))
    next_gpu_reservation_expiry_.store(r.expires_s, std::memory_order_relaxed);
}

ClusterState::HeldGpuReservation* ClusterState::GpuReservationForLocked(
    const std::string& uid, const std::string& ns, const std::string& owner_uid,
    const std::string& id, const core::PodAllocation& alloc) {
  if (id.empty()) return nullptr;
  auto it = gpu_reservations_.find(id);
  if (it == gpu_reservations_.end()) return nullptr;
  HeldGpuReservation& h = it->second;
  if ((!h.holder.empty() && h.holder != uid) || h.r.namespace_ != ns ||
      h.r.owner_uid != owner_uid || !HoldsGpu(alloc, h.node, h.r.uuid))
    return nullptr;
  return &h;
}

void ClusterState::ClaimGpuReservationLocked(const std::string& uid, const std::string& ns,
                                             const std::string& owner_uid, const std::string& id,
                                             const core::PodAllocation& alloc, bool bound) {
  HeldGpuReservation* h = GpuReservationForLocked(uid, ns, owner_uid, id, alloc);
  if (h == nullptr) return;
  ReleaseGpuReservationLocked(*h);
  h->holder = uid;
  h->landed = h->landed || bound;
}

void ClusterState::LeaveGpuReservationLocked(const PodRecord& rec) {
  if (rec.gpu_reservation.empty()) return;
  for (auto [lo, hi] = gpu_reservation_pods_.equal_range(rec.gpu_reservation); lo != hi; ++lo)
    if (lo->second == rec.uid) {
      gpu_reservation_pods_.erase(lo);
      break;
    }
  auto it = gpu_reservations_.find(rec.gpu_reservation);
  if (it == gpu_reservations_.end() || it->second.holder != rec.uid || it->second.landed) return;
  // Not landed: free again. Its room is charged at its node's next update (the pod's own room may
  // still be in the cache now).
  it->second.holder.clear();
}

void ClusterState::SyncGpuReservations(const std::string& node, const std::string& value,
                                       int64_t now) {
  if (node.empty()) return;
  std::vector<scheduler::GpuReservation> wanted;
  absl::MutexLock l(&mu_);
  if (value.empty() && gpu_reservations_.empty()) return;  // the common case: nothing to do
  if (!value.empty()) {
    auto decoded = scheduler::DecodeGpuReservations(value);
    if (decoded.ok()) {
      refused_gpu_reservations_.erase(node);
      for (scheduler::GpuReservation& r : *decoded)
        // Expired, or claiming more than the scheduler grants any reservation: holds nothing.
        if (r.expires_s > now && r.expires_s <= now + scheduler::kMaxGpuReservationS)
          wanted.push_back(std::move(r));
    } else if (std::string& last = refused_gpu_reservations_[node]; last != value) {
      last = value;
      spdlog::warn("node {}: {} ignored: {}", node, scheduler::kGpuReservationsKey,
                   std::string(decoded.status().message()));
    }
  }
  std::set<std::string> ids;
  for (const scheduler::GpuReservation& r : wanted) ids.insert(r.id);
  for (auto it = gpu_reservations_.begin(); it != gpu_reservations_.end();) {
    if (it->second.node == node && ids.count(it->first) == 0) {
      ReleaseGpuReservationLocked(it->second);
      it = gpu_reservations_.erase(it);
    } else {
      ++it;
    }
  }
  for (const scheduler::GpuReservation& r : wanted) {
    auto [it, inserted] = gpu_reservations_.try_emplace(r.id);
    HeldGpuReservation& h = it->second;
    const bool same = !inserted && h.node == node && h.r == r;
    if (same && (h.charged || !h.holder.empty())) continue;  // as it was
    // Changed (or moved to this node): charged anew below. The same entry not charged yet is
    // tried again on every update of its node, so it holds the room once the GPU has it.
    ReleaseGpuReservationLocked(h);
    h.node = node;
    h.r = r;
    if (!same) {
      h.holder.clear();
      h.landed = false;
      // A pod decided onto it before this replica read the node (another leader's decision).
      for (auto [lo, hi] = gpu_reservation_pods_.equal_range(r.id); lo != hi; ++lo)
        if (auto p = pods_.find(lo->second); p != pods_.end())
          ClaimGpuReservationLocked(p->first, p->second.namespace_, p->second.owner_uid, r.id,
                                    p->second.allocation, !p->second.bound_node.empty());
    }
    ChargeGpuReservationLocked(h, /*log=*/!same);
  }
}

void ClusterState::ExpireGpuReservations(int64_t now) {
  if (next_gpu_reservation_expiry_.load(std::memory_order_relaxed) > now) return;
  absl::MutexLock l(&mu_);
  int64_t next = INT64_MAX;
  for (auto it = gpu_reservations_.begin(); it != gpu_reservations_.end();) {
    if (it->second.r.expires_s <= now) {
      ReleaseGpuReservationLocked(it->second);
      it = gpu_reservations_.erase(it);
      continue;
    }
    if (it->second.charged) next = std::min(next, it->second.r.expires_s);
    ++it;
  }
  next_gpu_reservation_expiry_.store(next, std::memory_order_relaxed);
}

std::optional<ClusterState::TakenGpuReservation> ClusterState::TakeGpuReservation(
    const std::string& ns, const std::string& owner_uid, const std::string& pod_uid) {
  if (ns.empty() || owner_uid.empty() || pod_uid.empty()) return std::nullopt;
  const int64_t now = clock_.UnixSeconds();
  absl::MutexLock l(&mu_);
  HeldGpuReservation* first = nullptr;
  for (auto& [id, h] : gpu_reservations_)
    if ((h.holder.empty() || (h.holder == pod_uid && !h.landed)) && h.r.namespace_ == ns &&
        h.r.owner_uid == owner_uid && h.r.expires_s > now &&
        (first == nullptr || h.r.expires_s < first->r.expires_s))
      first = &h;
  if (first == nullptr) return std::nullopt;
  ReleaseGpuReservationLocked(*first);
  first->holder = pod_uid;
  return TakenGpuReservation{first->node, first->r};
}

void ClusterState::ReturnGpuReservation(const std::string& id, const std::string& pod_uid) {
  absl::MutexLock l(&mu_);
  auto it = gpu_reservations_.find(id);
  if (it == gpu_reservations_.end() || it->second.landed) return;
  if (it->second.holder == pod_uid) it->second.holder.clear();
  ChargeGpuReservationLocked(it->second, /*log=*/false);  // when no other pod holds it
}

std::vector<std::string> ClusterState::GpuReservations() const {
  absl::MutexLock l(&mu_);
  std::vector<std::string> out;
  for (const auto& [id, h] : gpu_reservations_)
    out.push_back(StrCat(h.node, " ", id, " ", h.r.uuid, " ",
                         h.landed            ? "landed"
                         : !h.holder.empty() ? "taken"
                         : h.charged         ? "held"
                                             : "not-charged"));
  return out;
}

}  // namespace hami::extender
