#include "scheduler/cluster_cache.h"

#include <algorithm>
#include <cstddef>
#include <map>

#include "common/dcheck.h"
#include "core/pod_request.h"

namespace hami::scheduler {

namespace {

bool SameNode(const core::NodeInfo& a, const core::NodeInfo& b) {
  return a.cpu_milli == b.cpu_milli && a.memory_mib == b.memory_mib && a.devices == b.devices &&
         a.cordoned == b.cordoned && a.link_scores == b.link_scores && a.labels == b.labels;
}

}  // namespace

void ClusterCache::Slot::Publish(const NodeSummary& v) {
  const uint64_t s0 = seq.load(std::memory_order_relaxed);
  seq.store(s0 + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  int64_t vals[kDynamic] = {v.cpu_free,
                            v.mem_free,
                            v.sum_used,
                            v.sum_usedcores,
                            v.sum_usedmem,
                            v.free_milli_total,
                            v.max_free_mem,
                            v.max_free_cores,
                            v.usable,
                            v.max_free_milli,
                            v.fully_free,
                            v.last_slot,
                            0,
                            0};
  static_assert(NodeSummary::kFreeLevels == 8);  // packed 4 x 16 bits into each of the last two
  for (int i = 0; i < NodeSummary::kFreeLevels; ++i)
    vals[12 + i / 4] |= static_cast<int64_t>(static_cast<uint16_t>(v.free_levels[i]))
                        << (16 * (i % 4));
  for (int i = 0; i < kDynamic; ++i) dyn[i].store(vals[i], std::memory_order_relaxed);
  seq.store(s0 + 2, std::memory_order_release);
}

NodeSummary ClusterCache::Slot::Read() const {
  NodeSummary v = fixed;
  int64_t vals[kDynamic];
  while (true) {
    const uint64_t s0 = seq.load(std::memory_order_acquire);
    for (int i = 0; i < kDynamic; ++i) vals[i] = dyn[i].load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if ((s0 & 1) == 0 && seq.load(std::memory_order_relaxed) == s0) break;
  }
  v.cpu_free = vals[0];
  v.mem_free = vals[1];
  v.sum_used = vals[2];
  v.sum_usedcores = vals[3];
  v.sum_usedmem = vals[4];
  v.free_milli_total = vals[5];
  v.max_free_mem = vals[6];
  v.max_free_cores = static_cast<int>(vals[7]);
  v.usable = static_cast<int>(vals[8]);
  v.max_free_milli = static_cast<int>(vals[9]);
  v.fully_free = static_cast<int>(vals[10]);
  v.last_slot = static_cast<int>(vals[11]);
  for (int i = 0; i < NodeSummary::kFreeLevels; ++i)
    v.free_levels[i] = static_cast<int16_t>(
        static_cast<uint16_t>(static_cast<uint64_t>(vals[12 + i / 4]) >> (16 * (i % 4))));
  return v;
}

void ClusterCache::PublishAllLocked(Entry& e) {
  // With nodes_mu_ held exclusively no writer of e.state (they hold nodes_mu_ shared and e.mu) can
  // run, so e.mu is not needed here.
  const NodeState& state = ABSL_TS_UNCHECKED_READ(e.state);
  NodeSummary v = state.Summarize();
  const auto& devs = state.info.devices;
  v.kind = -1;
  v.kind_device = nullptr;
  bool uniform = !devs.empty();
  for (const auto& d : devs)
    uniform = uniform && d.vendor == devs[0].vendor && d.type == devs[0].type &&
              d.devmem_mib == devs[0].devmem_mib && d.devcore == devs[0].devcore;
  if (uniform) {
    auto key = std::make_tuple(devs[0].vendor, devs[0].type, devs[0].devmem_mib, devs[0].devcore);
    auto it = std::find(kinds_.begin(), kinds_.end(), key);
    if (it == kinds_.end()) it = kinds_.insert(kinds_.end(), std::move(key));
    v.kind = static_cast<int>(it - kinds_.begin());
    v.kind_device = &devs[0];
  }
  SlotAt(e.slot).fixed = v;
  SlotAt(e.slot).Publish(v);
}

PodDelta ClusterCache::DeltaFromAllocation(const core::PodAllocation& alloc,
                                           const PodResources& res,
                                           std::vector<std::string>* uuids) {
  std::vector<core::ContainerKind> kinds = res.kinds;
  if (kinds.empty()) kinds.assign(alloc.containers.size(), core::ContainerKind::kApp);
  PodDelta delta;
  delta.cpu_milli = res.cpu_milli;
  delta.memory_mib = res.memory_mib;
  uuids->clear();
  // Grants without a MIG instance, per device, over every container (NodeState::plain_on_mig
  // counts them on MIG-mode devices).
  std::map<std::string, int> plain;
  for (const auto& container : alloc.containers)
    for (const auto& cd : container)
      if (cd.mig_profile.empty()) ++plain[cd.uuid];
  for (const auto& [uuid, u] : core::EffectiveDeviceUsage(kinds, alloc, res.init_finished)) {
    DeviceDelta d{-1, u.used, u.usedmem_mib, u.usedcores, u.mig_slices};
    if (auto it = plain.find(uuid); it != plain.end()) d.plain_grants = it->second;
    delta.devices.push_back(d);
    uuids->push_back(uuid);
  }
  return delta;
}

void ClusterCache::ApplyRecord(NodeState& state, PodRecord& rec) {
  std::vector<DeviceDelta> kept;
  std::vector<std::string> kept_uuids;
  for (size_t i = 0; i < rec.delta.devices.size(); ++i) {
    int idx = state.DeviceIndex(rec.uuids[i]);
    if (idx < 0) continue;  // device gone from the node: its usage no longer counts
    DeviceDelta d = rec.delta.devices[i];
    d.device = idx;
    kept.push_back(d);
    kept_uuids.push_back(rec.uuids[i]);
  }
  rec.delta.devices = std::move(kept);
  rec.uuids = std::move(kept_uuids);
  rec.delta.pod_class = PodClassOf(state, rec.delta);
  state.Apply(rec.delta, +1);
  rec.applied = true;
}

void ClusterCache::ApplyPendingLocked(Entry& e) {
  MutexLock pl(pods_mu_);
  MutexLock nl(e.mu);
  auto it = node_pods_.find(e.state.info.name);
  if (it == node_pods_.end()) return;
  for (const auto& uid : it->second) {
    PodRecord& rec = pods_.at(uid);
    ApplyRecord(e.state, rec);
  }
}

void ClusterCache::UpsertNode(core::NodeInfo info) {
  WriterLock l(nodes_mu_);
  auto it = by_name_.find(info.name);
  if (it != by_name_.end()) {
    Entry& e = *it->second.entry;
    {
      MutexLock nl(e.mu);
      if (SameNode(e.state.info, info)) return;
      CountCapacityLocked(e.state.info, -1);
      CountCapacityLocked(info, +1);
      e.state = NodeState::Make(std::move(info));
    }
    ApplyPendingLocked(e);
    PublishAllLocked(e);
    return;
  }
  CountCapacityLocked(info, +1);
  auto entry = std::make_unique<Entry>(NodeState::Make(std::move(info)));
  Entry* raw = entry.get();
  std::string name;
  {
    MutexLock nl(raw->mu);
    name = raw->state.info.name;
  }
  auto pos = std::lower_bound(order_.begin(), order_.end(), name,
                              [](const std::unique_ptr<Entry>& a, const std::string& n) {
                                // Under nodes_mu_ exclusively (see PublishAllLocked).
                                return ABSL_TS_UNCHECKED_READ(a->state).info.name < n;
                              });
  const size_t at = static_cast<size_t>(pos - order_.begin());
  if (free_slots_.empty()) {
    raw->slot = slot_count_++;
    if (raw->slot / kSlotChunk >= slots_.size())
      slots_.push_back(std::make_unique<Slot[]>(kSlotChunk));
  } else {
    raw->slot = free_slots_.back();
    free_slots_.pop_back();
  }
  order_.insert(pos, std::move(entry));
  order_slot_.insert(order_slot_.begin() + static_cast<std::ptrdiff_t>(at),
                     static_cast<uint32_t>(raw->slot));
  if (raw->slot >= slot_index_.size()) slot_index_.resize(raw->slot + 1);
  ReindexFromLocked(at);
  by_name_[name] = Named{raw, static_cast<uint32_t>(raw->slot)};
  ApplyPendingLocked(*raw);
  PublishAllLocked(*raw);
}

void ClusterCache::ReindexFromLocked(size_t at) {
  for (size_t i = at; i < order_slot_.size(); ++i)
    slot_index_[order_slot_[i]] = static_cast<uint32_t>(i);
}

void ClusterCache::CountCapacityLocked(const core::NodeInfo& info, int sign) {
  if (info.devices.empty()) return;
  for (const auto& d : info.devices) {
    int64_t& n = gpus_by_type_[d.type];
    n += sign;
    if (n <= 0) gpus_by_type_.erase(d.type);
  }
  std::atomic_store(&capacity_, std::shared_ptr<const GpuCapacity>(
                                    std::make_shared<const GpuCapacity>(gpus_by_type_)));
}

void ClusterCache::RemoveNode(const std::string& name) {
  WriterLock l(nodes_mu_);
  auto it = by_name_.find(name);
  if (it == by_name_.end()) return;
  Entry* raw = it->second.entry;
  {
    MutexLock nl(raw->mu);
    CountCapacityLocked(raw->state.info, -1);
  }
  by_name_.erase(it);
  {
    MutexLock pl(pods_mu_);
    auto np = node_pods_.find(name);
    if (np != node_pods_.end())
      for (const auto& uid : np->second) pods_.at(uid).applied = false;
  }
  const size_t at = slot_index_[raw->slot];
  HAMI_DCHECK(at < order_.size() && order_[at].get() == raw, "node ", name, ": index ", at, " of ",
              order_.size(), " does not hold it");
  free_slots_.push_back(static_cast<uint32_t>(raw->slot));
  order_slot_.erase(order_slot_.begin() + static_cast<std::ptrdiff_t>(at));
  order_.erase(order_.begin() + static_cast<std::ptrdiff_t>(at));
  ReindexFromLocked(at);
}

Status ClusterCache::AddPod(const std::string& uid, const core::PodAllocation& alloc,
                            const PodResources& res) {
  if (uid.empty()) return InvalidArgument("pod uid is empty");
  if (alloc.node.empty()) return InvalidArgument("pod ", uid, ": allocation names no node");
  PodRecord rec;
  rec.node = alloc.node;
  rec.delta = DeltaFromAllocation(alloc, res, &rec.uuids);
  ReaderLock l(nodes_mu_);
  MutexLock pl(pods_mu_);
  auto old = pods_.find(uid);
  if (old != pods_.end()) {
    PodRecord& o = old->second;
    if (o.applied) {
      if (auto e = by_name_.find(o.node); e != by_name_.end()) {
        MutexLock nl(e->second.entry->mu);
        e->second.entry->state.Apply(o.delta, -1);
        PublishUsage(*e->second.entry);
      }
    }
    node_pods_[o.node].erase(uid);
    pods_.erase(old);
  }
  if (auto e = by_name_.find(rec.node); e != by_name_.end()) {
    MutexLock nl(e->second.entry->mu);
    ApplyRecord(e->second.entry->state, rec);
    PublishUsage(*e->second.entry);
  }
  node_pods_[rec.node].insert(uid);
  pods_.emplace(uid, std::move(rec));
  return OkStatus();
}

Status ClusterCache::RemovePod(const std::string& uid) {
  ReaderLock l(nodes_mu_);
  MutexLock pl(pods_mu_);
  auto it = pods_.find(uid);
  if (it == pods_.end()) return NotFound("pod ", uid, " is not in the cache");
  PodRecord& rec = it->second;
  if (rec.applied) {
    if (auto e = by_name_.find(rec.node); e != by_name_.end()) {
      MutexLock nl(e->second.entry->mu);
      e->second.entry->state.Apply(rec.delta, -1);
      PublishUsage(*e->second.entry);
    }
  }
  auto np = node_pods_.find(rec.node);
  if (np != node_pods_.end()) {
    np->second.erase(uid);
    if (np->second.empty()) node_pods_.erase(np);
  }
  pods_.erase(it);
  return OkStatus();
}

Status ClusterCache::Reserve(const std::string& uid, const std::string& node,
                             const PodDelta& delta) {
  if (uid.empty()) return InvalidArgument("pod uid is empty");
  ReaderLock l(nodes_mu_);
  auto e = by_name_.find(node);
  if (e == by_name_.end()) return NotFound("node ", node, " is not in the cache");
  MutexLock pl(pods_mu_);
  if (pods_.count(uid)) return absl::AlreadyExistsError(StrCat("pod ", uid, " is already placed"));
  MutexLock nl(e->second.entry->mu);
  NodeState& st = e->second.entry->state;
  if (!st.Fits(delta))
    return Aborted("node ", node, " changed: the pod no longer fits, schedule again");
  PodRecord rec;
  rec.node = node;
  rec.delta = delta;
  for (const auto& d : delta.devices) rec.uuids.push_back(st.info.devices[d.device].uuid);
  if (rec.delta.pod_class == kNoPodClass) rec.delta.pod_class = PodClassOf(st, rec.delta);
  st.Apply(rec.delta, +1);
  if (HAMI_DCHECK_IS_ON()) {
    // What Fits admitted stays within the capacity once applied.
    for (const auto& d : rec.delta.devices) {
      const auto& dev = st.info.devices[d.device];
      const auto& u = st.usage[d.device];
      HAMI_DCHECK((d.slots == 0 || u.used <= dev.count) && u.usedmem_mib <= dev.devmem_mib &&
                      u.usedcores <= dev.devcore,
                  "node ", node, ": device ", d.device, " reserved beyond its capacity (", u.used,
                  "/", dev.count, " slots, ", u.usedmem_mib, "/", dev.devmem_mib, " MiB, ",
                  u.usedcores, "/", dev.devcore, " cores)");
    }
  }
  PublishUsage(*e->second.entry);
  rec.applied = true;
  node_pods_[node].insert(uid);
  pods_.emplace(uid, std::move(rec));
  return OkStatus();
}

std::optional<NodeState> ClusterCache::Snapshot(const std::string& name) const {
  std::optional<NodeState> out;
  WithNode(name, [&](const NodeState& s) { out = s; });
  return out;
}

std::vector<std::string> ClusterCache::NodeNames() const {
  std::vector<std::string> names;
  ForEachNode(
      nullptr, [&](const NodeState& s) { names.push_back(s.info.name); },
      [](const std::string&) {});
  return names;
}

size_t ClusterCache::node_count() const {
  ReaderLock l(nodes_mu_);
  return order_.size();
}

size_t ClusterCache::pod_count() const {
  MutexLock l(pods_mu_);
  return pods_.size();
}

}  // namespace hami::scheduler
