#include "scheduler/framework.h"

#include <algorithm>
#include <cassert>
#include <cctype>

#include "common/dcheck.h"
#include "core/mig.h"
#include "core/pod_request.h"

namespace hami::scheduler {
namespace {

// GpuPicker::Pick's (and VendorRules::Pick's) contract: what it appends is among `candidates`, each
// device once. For HAMI_DCHECK only (quadratic in the devices of one node).
bool PickedAmong(std::span<const int> candidates, const std::vector<int>& picked) {
  for (auto it = picked.begin(); it != picked.end(); ++it) {
    if (std::find(candidates.begin(), candidates.end(), *it) == candidates.end()) return false;
    if (std::find(picked.begin(), it, *it) != it) return false;
  }
  return true;
}

}  // namespace

CycleState::CycleState(const core::PodRequest& pod, Rng* rng, const VendorRules* rules)
    : pod_(&pod), rng_(rng), vendor_state_(rules ? rules->Prepare(pod) : nullptr) {
  int requests = 0;
  for (size_t ci = 0; ci < pod.containers.size(); ++ci) {
    for (const auto& d : pod.containers[ci].devices) {
      if (d.nums <= 0) continue;
      has_devices_ = true;
      if (++requests == 1) single_request_ = &d, single_container_ = static_cast<int>(ci);
    }
  }
  if (requests != 1) single_request_ = nullptr, single_container_ = -1;
  const auto& sel = pod.selectors;
  has_selectors_ = !sel.use_types.empty() || !sel.nouse_types.empty() || !sel.vgpu_mode.empty() ||
                   !sel.use_uuids.empty() || !sel.nouse_uuids.empty();
  const core::CpuMemory eff = core::EffectivePodRequest(pod);
  cpu_milli_ = eff.cpu_milli;
  memory_mib_ = eff.memory_mib;
}

int64_t DeviceGate::CardMemory(const PickContext& ctx, int device) const {
  return ctx.node.caps[device].devmem_mib;
}

int64_t PickContext::MemFor(int d) const {
  if (request.memreq_mib > 0) return request.memreq_mib;
  const DeviceGate* gate = cycle.gate();
  const int64_t devmem = gate != nullptr ? gate->CardMemory(*this, d) : node.caps[d].devmem_mib;
  if (request.mem_percentage > 0) return devmem * std::min(request.mem_percentage, 100) / 100;
  return devmem;  // neither given: the whole card's memory (upstream default)
}

bool TypeMatches(const std::string& type, const std::string& pattern) {
  if (pattern.empty()) return false;
  if (pattern.size() > type.size()) return false;
  for (size_t i = 0; i + pattern.size() <= type.size(); ++i) {
    size_t j = 0;
    while (j < pattern.size() && std::tolower(static_cast<unsigned char>(type[i + j])) ==
                                     std::tolower(static_cast<unsigned char>(pattern[j])))
      ++j;
    if (j == pattern.size()) return true;
  }
  return false;
}

namespace {

bool Contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// The MIG instance request `ctx.request` would get on device `d` under ctx.usage, the pod's
// preferred profiles first (core/mig.h).
core::MigVerdict MigFor(const PickContext& ctx, int d) {
  const DeviceCaps& cap = ctx.node.caps[d];
  const core::DeviceUsage& u = ctx.usage[d];
  return core::ChooseMigInstance(
      ctx.node.info.devices[d], ctx.MemFor(d), ctx.request.coresreq, u.mig_slices,
      cap.devmem_mib - u.usedmem_mib, cap.devcore - u.usedcores,
      ctx.mig_default_order ? std::span<const std::string>()
                            : ctx.cycle.pod().selectors.mig_profile_preference);
}

// How many instances of ctx.request MIG device `d` takes one after another under ctx.usage (each
// its own placement, charged its profile, a slot each), at most `limit`.
int MigInstancesFit(const PickContext& ctx, int d, int limit) {
  const DeviceCaps& cap = ctx.node.caps[d];
  const core::DeviceInfo& dev = ctx.node.info.devices[d];
  const std::span<const std::string> preference =
      ctx.mig_default_order ? std::span<const std::string>()
                            : ctx.cycle.pod().selectors.mig_profile_preference;
  core::DeviceUsage u = ctx.usage[d];
  int n = 0;
  while (n < limit && u.used < cap.count) {
    const core::MigVerdict v = core::ChooseMigInstance(dev, ctx.MemFor(d), ctx.request.coresreq,
                                                       u.mig_slices, cap.devmem_mib - u.usedmem_mib,
                                                       cap.devcore - u.usedcores, preference);
    if (!v.choice) break;
    const core::MigProfile& p = dev.mig_profiles[v.choice->profile];
    u.used += 1;
    u.usedmem_mib += p.memory_mib;
    u.usedcores += p.core;
    u.mig_slices |= core::MigSliceMask(v.choice->placement);
    ++n;
  }
  return n;
}

// A MIG-mode device instead of the memory, core and exclusivity checks: some profile must cover
// the request and have a free placement (the instance is the container's alone).
Reason CheckMig(const PickContext& ctx, int d, bool* never) {
  const core::MigVerdict v = MigFor(ctx, d);
  if (v.choice) return Reason::kCount;
  *never = v.never;
  return Reason::kCardMigTopologyInfeasible;
}

// Upstream's per-device checks in upstream's order. Returns Reason::kCount when the device fits.
Reason CheckDevice(const GpuPicker& picker, const PickContext& ctx, int d, bool* never) {
  const DeviceCaps& cap = ctx.node.caps[d];
  const core::DeviceUsage& u = ctx.usage[d];
  const core::DeviceSelectors& sel = ctx.cycle.pod().selectors;
  *never = false;
  // A MIG-mode device holding a grant without its MIG instance reads as unhealthy, as upstream
  // marks it (NodeState::plain_on_mig); retryable: it opens when the grant leaves.
  if (!cap.health || ctx.node.plain_on_mig[d] > 0) return Reason::kCardNotHealth;
  if (cap.cordoned) return Reason::kCardCordoned;
  const core::DeviceInfo& dev = ctx.node.info.devices[d];  // strings: read only with selectors
  if (ctx.cycle.has_device_selectors() &&
      (!sel.use_types.empty() || !sel.nouse_types.empty() || !sel.vgpu_mode.empty())) {
    bool ok = sel.use_types.empty();
    for (const auto& t : sel.use_types) ok = ok || TypeMatches(dev.type, t);
    for (const auto& t : sel.nouse_types) ok = ok && !TypeMatches(dev.type, t);
    if (ok && !sel.vgpu_mode.empty()) {
      const std::string mode = dev.mode.empty() ? "hami-core" : dev.mode;
      ok = mode.find(sel.vgpu_mode) != std::string::npos;
    }
    if (!ok) {
      *never = true;
      return Reason::kCardTypeMismatch;
    }
  }
  if (ctx.cycle.has_device_selectors() &&
      ((!sel.use_uuids.empty() && !Contains(sel.use_uuids, dev.uuid)) ||
       Contains(sel.nouse_uuids, dev.uuid))) {
    *never = true;
    return Reason::kCardUuidMismatch;
  }
  if (cap.count <= u.used) {
    *never = cap.count <= 0;
    return Reason::kCardTimeSlicingExhausted;
  }
  if (picker.vetoes()) {
    if (Reason veto = picker.Admit(ctx, d); veto != Reason::kCount) return veto;
  }
  if (cap.mig) return CheckMig(ctx, d, never);
  const int64_t mem = ctx.MemFor(d);
  if (cap.devmem_mib - u.usedmem_mib < mem) {
    *never = cap.devmem_mib < mem;
    return Reason::kCardInsufficientMemory;
  }
  const int cores = ctx.request.coresreq;
  if (cap.devcore - u.usedcores < cores) {
    *never = cap.devcore < cores;
    return Reason::kCardInsufficientCore;
  }
  if (cores > 0 && cores >= cap.devcore && u.used > 0)
    return Reason::kExclusiveDeviceAllocateConflict;
  if (cores == 0 && cap.devcore > 0 && u.usedcores >= cap.devcore)
    return Reason::kCardComputeUnitsExhausted;
  if (const DeviceGate* gate = ctx.cycle.gate()) return gate->Admit(ctx, d, mem);
  return Reason::kCount;
}

// The vendor's refusals that come after the policy's veto in upstream's order (its capacity
// checks): a device that is used under `mutex` counts as ExclusiveDeviceAllocateConflict even when
// it also lacks memory, as upstream tallies it. Identity refusals (health, type, uuid, slots) come
// first.
bool VetoPrecedes(Reason vendor_reason) {
  switch (vendor_reason) {
    case Reason::kCount:
    case Reason::kCardInsufficientMemory:
    case Reason::kCardInsufficientCore:
    case Reason::kExclusiveDeviceAllocateConflict:
    case Reason::kCardComputeUnitsExhausted:
      return true;
    default:
      return false;
  }
}

// A device of a vendor with its own rules: cordon and the policy's veto (mutex) are the
// framework's, as they are for every vendor upstream; the rest is the vendor's, then its rule over
// the pod's earlier grants.
Reason CheckByRules(const GpuPicker& picker, const VendorRules& rules, const PickContext& ctx,
                    int d, bool* never) {
  *never = false;
  if (ctx.node.caps[d].cordoned) return Reason::kCardCordoned;
  if (ctx.node.plain_on_mig[d] > 0) return Reason::kCardNotHealth;  // as in CheckDevice
  // A cycle built without the profile's rules (a caller bypassing Scheduler::Schedule) has no
  // parsed selectors: the device cannot be judged, so it is refused.
  assert(ctx.cycle.vendor_state() != nullptr);
  if (ctx.cycle.vendor_state() == nullptr) {
    *never = true;
    return Reason::kCardTypeMismatch;
  }
  const VendorRules::Verdict v =
      rules.Check(*ctx.cycle.vendor_state(), ctx.request, ctx.node.info.devices[d], ctx.usage[d]);
  *never = v.never;
  if (picker.vetoes() && VetoPrecedes(v.reason)) {
    if (Reason veto = picker.Admit(ctx, d); veto != Reason::kCount) {
      *never = false;
      return veto;
    }
  }
  if (v.reason != Reason::kCount || ctx.earlier.empty()) return v.reason;
  const VendorRules::Verdict pod =
      rules.CheckWithPod(ctx.request, ctx.node.info.devices, d, ctx.earlier);
  *never = pod.never;
  return pod.reason;
}

void MaxInto(DeviceDelta& a, const DeviceDelta& b) {
  a.slots = std::max(a.slots, b.slots);
  a.mem_mib = std::max(a.mem_mib, b.mem_mib);
  a.cores = std::max(a.cores, b.cores);
  a.mig_slices |= b.mig_slices;
}

}  // namespace

namespace {

// What request `r` takes on device `d` once chosen: the vendor's grant (e.g. a template) where it
// has rules, else the generic memory resolution.
DeviceDelta Take(const VendorRules* rules, const PickContext& ctx, int d) {
  if (rules != nullptr && rules->Covers(ctx.request.vendor)) {
    const VendorRules::Take t = rules->Grant(ctx.request, ctx.node.info.devices[d]);
    return DeviceDelta{d, 1, t.mem_mib, t.cores};
  }
  if (ctx.node.caps[d].mig) {
    const core::MigVerdict v = MigFor(ctx, d);
    HAMI_DCHECK(v.choice.has_value(), "node ", ctx.node.info.name, ": MIG device ", d,
                " was picked without a free instance");
    if (v.choice) {
      const core::MigProfile& p = ctx.node.info.devices[d].mig_profiles[v.choice->profile];
      return DeviceDelta{
          d, 1, p.memory_mib, p.core, core::MigSliceMask(v.choice->placement), v.choice->profile};
    }
  }
  return DeviceDelta{d, 1, ctx.MemFor(d), ctx.request.coresreq};
}

// A lower bound of what the pod's requests after ctx.request take of its vendor's devices on this
// node: for each later container that keeps running, nums x the smallest grant a device of the
// vendor here gives (0 on a MIG device). Nothing after an init container's request: it runs before
// the others and counts at its peak, so its grants and theirs may overlap.
void LaterGrantsAtLeast(const PickContext& ctx, const VendorRules* rules, int64_t* mem_mib,
                        int64_t* cores) {
  bool after = false;
  for (const core::ContainerRequest& c : ctx.cycle.pod().containers) {
    for (const core::DeviceRequest& r : c.devices) {
      if (&r == &ctx.request) {
        if (c.kind == core::ContainerKind::kInit) return;
        after = true;
        continue;
      }
      if (!after || c.kind == core::ContainerKind::kInit || r.nums <= 0 ||
          r.vendor != ctx.request.vendor)
        continue;
      const PickContext later{ctx.cycle, ctx.node, ctx.usage, r};
      int64_t least_mem = std::numeric_limits<int64_t>::max();
      int64_t least_cores = std::numeric_limits<int64_t>::max();
      for (int d = 0; d < ctx.node.gpus(); ++d) {
        if (ctx.node.info.devices[d].vendor != r.vendor) continue;
        const DeviceDelta t =
            ctx.node.caps[d].mig ? DeviceDelta{d, 1, 0, 0} : Take(rules, later, d);
        least_mem = std::min(least_mem, t.mem_mib);
        least_cores = std::min<int64_t>(least_cores, t.cores);
      }
      if (least_mem == std::numeric_limits<int64_t>::max()) continue;  // it cannot fit anyway
      *mem_mib += r.nums * least_mem;
      *cores += r.nums * least_cores;
    }
  }
}

// Sets s.quota_*: the room ctx.request's vendor has left under the namespace's quotas, less what
// the pod holds of that vendor's devices under ctx.usage (its grants so far: the earlier containers
// that keep running, and an init container's own) and less what its later containers take at
// least. Both are lower bounds of their share of the decision's charge (the effective usage), so
// no card that could still be part of a choice within the quota is skipped.
void SetQuotaLeft(const PickContext& ctx, const VendorRules* rules, EvalScratch& s) {
  const QuotaRoom::Vendor* room = ctx.cycle.QuotaFor(ctx.request);
  s.quota_limited = room != nullptr;
  if (room == nullptr) return;
  int64_t mem = 0, cores = 0;
  if (ctx.usage.data() != ctx.node.usage.data()) {
    for (int d = 0; d < ctx.node.gpus(); ++d) {
      if (ctx.node.info.devices[d].vendor != ctx.request.vendor) continue;
      mem += ctx.usage[d].usedmem_mib - ctx.node.usage[d].usedmem_mib;
      cores += ctx.usage[d].usedcores - ctx.node.usage[d].usedcores;
    }
  }
  if (ctx.cycle.single_request() == nullptr) LaterGrantsAtLeast(ctx, rules, &mem, &cores);
  s.quota_mem_left = room->mem_mib - mem;
  s.quota_cores_left = room->cores - cores;
}

bool WithinQuota(const EvalScratch& s, int64_t mem_mib, int64_t cores) {
  return mem_mib <= s.quota_mem_left && cores <= s.quota_cores_left;
}

// The first ctx.request.nums devices of s.picked, granted together, stay within the quota room.
bool PickedWithinQuota(const VendorRules* rules, const PickContext& ctx, const EvalScratch& s) {
  int64_t mem = 0, cores = 0;
  for (int k = 0; k < ctx.request.nums; ++k) {
    const DeviceDelta t = Take(rules, ctx, s.picked[k]);
    mem += t.mem_mib;
    cores += t.cores;
  }
  return WithinQuota(s, mem, cores);
}

// Under a quota (s.quota_limited): ctx.request.nums devices of `among` (each fits alone) whose
// grants together stay within the room, left in s.picked. In this order: the picker's choice; the
// picker's order over all of `among`, each device taken unless its grant would take the pod past
// the room (upstream's fit loop with its quota check); the devices with the smallest grants (when
// even they pass the room, no choice does). False, every device of `among` counted as
// ResourceQuotaNotFit, when none fits.
bool PickWithinQuota(const GpuPicker& picker, const VendorRules* rules, const PickContext& ctx,
                     std::span<const int> among, EvalScratch& s, FitFailure* why) {
  const int nums = ctx.request.nums;
  s.picked.clear();
  picker.Pick(ctx, among, &s.picked);
  HAMI_DCHECK(PickedAmong(among, s.picked), "node ", ctx.node.info.name,
              ": the picker picked a device that does not fit, or one twice");
  if (static_cast<int>(s.picked.size()) < nums) return false;
  if (nums == 1 || PickedWithinQuota(rules, ctx, s)) return true;  // one card: checked alone
  core::DeviceRequest every = ctx.request;
  every.nums = static_cast<int>(among.size());
  s.picked.clear();
  picker.Pick(PickContext{ctx.cycle, ctx.node, ctx.usage, every, ctx.earlier}, among, &s.picked);
  HAMI_DCHECK(PickedAmong(among, s.picked), "node ", ctx.node.info.name,
              ": the picker picked a device that does not fit, or one twice");
  int64_t mem = 0, cores = 0;
  int kept = 0;
  for (size_t i = 0; i < s.picked.size() && kept < nums; ++i) {
    const DeviceDelta t = Take(rules, ctx, s.picked[i]);
    if (!WithinQuota(s, mem + t.mem_mib, cores + t.cores)) continue;
    mem += t.mem_mib;
    cores += t.cores;
    s.picked[kept++] = s.picked[i];
  }
  if (kept >= nums) {
    s.picked.resize(kept);
    return true;
  }
  s.picked.assign(among.begin(), among.end());
  std::stable_sort(s.picked.begin(), s.picked.end(), [&](int a, int b) {
    const DeviceDelta ta = Take(rules, ctx, a), tb = Take(rules, ctx, b);
    return ta.mem_mib < tb.mem_mib || (ta.mem_mib == tb.mem_mib && ta.cores < tb.cores);
  });
  s.picked.resize(nums);
  if (PickedWithinQuota(rules, ctx, s)) return true;
  if (why)
    for (size_t k = 0; k < among.size(); ++k) why->Add(Reason::kResourceQuotaNotFit, false);
  return false;
}

// Fewer devices fit request `r` than it asks, and some are in MIG mode: as upstream's Fit, which
// looks at a MIG device again after granting it an instance, the request's remaining instances go
// on the chosen MIG devices, each its own placement. The picker chooses among the fitting devices
// (each once, so distinct GPUs stay preferred), then the MIG ones among them take more instances in
// the picker's order, each as many as it holds; s.picked names a device once per instance. When the
// pod's profile preference leaves too little room, the default profile order is tried (upstream's
// planMigContainer: a preference yields, it never rejects a device).
bool PickMigInstances(const GpuPicker& picker, const PickContext& ctx, EvalScratch& s,
                      FitFailure* why) {
  const core::DeviceRequest& r = ctx.request;
  core::DeviceRequest distinct = r;
  distinct.nums = static_cast<int>(s.candidates.size());
  s.picked.clear();
  if (distinct.nums > 0) {
    picker.Pick(PickContext{ctx.cycle, ctx.node, ctx.usage, distinct, ctx.earlier}, s.candidates,
                &s.picked);
    HAMI_DCHECK(PickedAmong(s.candidates, s.picked), "node ", ctx.node.info.name,
                ": the picker picked a device that does not fit, or one twice");
  }
  const size_t chosen = s.picked.size();
  for (const bool default_order : {false, true}) {
    if (default_order && ctx.cycle.pod().selectors.mig_profile_preference.empty()) break;
    PickContext at{ctx.cycle, ctx.node, ctx.usage, r, ctx.earlier, default_order};
    s.picked.resize(chosen);
    for (size_t i = 0; i < chosen && static_cast<int>(s.picked.size()) < r.nums; ++i) {
      const int d = s.picked[i];
      if (!ctx.node.caps[d].mig) continue;
      const int more = r.nums - static_cast<int>(s.picked.size());
      for (int k = MigInstancesFit(at, d, more + 1) - 1; k > 0; --k) s.picked.push_back(d);
    }
    if (static_cast<int>(s.picked.size()) >= r.nums) {
      s.mig_repeats = true;
      s.mig_default_order = default_order;
      return true;
    }
  }
  // The MIG devices that fit one instance cannot hold the rest.
  if (why)
    for (int d : s.candidates)
      if (ctx.node.caps[d].mig) why->Add(Reason::kCardMigTopologyInfeasible, false);
  return false;
}

// Collects the devices that fit request `r` under ctx.usage and lets the picker choose; the chosen
// devices are left in s.picked (a MIG device once per instance when it takes several:
// PickMigInstances). False (with reasons in `why`) when the node cannot take the request.
bool PickForRequest(const GpuPicker& picker, const VendorRules* rules, const PickContext& ctx,
                    EvalScratch& s, FitFailure* why) {
  const core::DeviceRequest& r = ctx.request;
  const NodeState& node = ctx.node;
  if (rules != nullptr && !rules->Covers(r.vendor)) rules = nullptr;  // generic vendor (NVIDIA)
  s.scored_by = rules;
  int n = node.gpus();
  int of_vendor = 0, mig_of_vendor = 0;
  s.candidates.clear();
  s.mig_repeats = s.mig_default_order = false;
  SetQuotaLeft(ctx, rules, s);
  const bool all_of_vendor = !node.uniform_vendor.empty() && node.uniform_vendor == r.vendor;
  if (!all_of_vendor && !node.uniform_vendor.empty()) n = 0;  // no device of this vendor
  for (int d = 0; d < n; ++d) {
    if (!all_of_vendor && node.info.devices[d].vendor != r.vendor) continue;
    ++of_vendor;
    mig_of_vendor += node.caps[d].mig;
    bool never = false;
    Reason why_not = rules == nullptr ? CheckDevice(picker, ctx, d, &never)
                                      : CheckByRules(picker, *rules, ctx, d, &never);
    if (why_not == Reason::kCount && s.quota_limited) {
      const DeviceDelta t = Take(rules, ctx, d);
      if (!WithinQuota(s, t.mem_mib, t.cores)) why_not = Reason::kResourceQuotaNotFit;
    }
    if (why_not == Reason::kCount) {
      s.candidates.push_back(d);
    } else if (why) {
      why->Add(why_not, never);
    }
  }
  // A MIG device may take several instances of the request, so fewer devices than asked is no
  // reason to give up on a node with one.
  if (r.nums > of_vendor && (rules != nullptr || mig_of_vendor == 0)) {
    if (why) {
      why->Clear();
      why->devices = node.gpus();
      why->Add(Reason::kNodeInsufficientDevice, true);
    }
    return false;
  }
  if (static_cast<int>(s.candidates.size()) < r.nums) {
    const bool mig_candidate = std::any_of(s.candidates.begin(), s.candidates.end(),
                                           [&](int d) { return node.caps[d].mig; });
    if (rules == nullptr && mig_candidate && !ctx.cycle.pod().selectors.numa_bind)
      return PickMigInstances(picker, ctx, s, why);
    if (why) why->failed = true;
    return false;
  }
  s.picked.clear();
  // A vendor with group rules chooses the set itself; refusing means no group holds the request.
  if (rules != nullptr && ctx.cycle.vendor_state() != nullptr &&
      rules->Pick(*ctx.cycle.vendor_state(), r, node.info.devices, ctx.usage, s.candidates,
                  &s.picked)) {
    HAMI_DCHECK(PickedAmong(s.candidates, s.picked), "node ", node.info.name,
                ": the vendor picked a device that does not fit, or one twice");
    if (static_cast<int>(s.picked.size()) >= r.nums) {
      if (!s.quota_limited || PickedWithinQuota(rules, ctx, s)) return true;
      if (why) why->Add(Reason::kResourceQuotaNotFit, false);
      return false;
    }
    if (why) why->Add(Reason::kNumaNotFit, false);
    return false;
  }
  if (!ctx.cycle.pod().selectors.numa_bind) {
    if (s.quota_limited) {
      if (PickWithinQuota(picker, rules, ctx, s.candidates, s, why)) return true;
      if (why) why->failed = true;
      return false;
    }
    picker.Pick(ctx, s.candidates, &s.picked);
    HAMI_DCHECK(PickedAmong(s.candidates, s.picked), "node ", node.info.name,
                ": the picker picked a device that does not fit, or one twice");
    if (static_cast<int>(s.picked.size()) >= r.nums) return true;
    if (why) why->failed = true;
    return false;
  }
  // All GPUs of the container from one NUMA node: try each NUMA node, lowest first unless the
  // picker asks for the highest first.
  std::vector<int> numas;
  for (int d : s.candidates) numas.push_back(node.caps[d].numa);
  std::sort(numas.begin(), numas.end());
  numas.erase(std::unique(numas.begin(), numas.end()), numas.end());
  if (picker.HighNumaFirst(ctx.cycle)) std::reverse(numas.begin(), numas.end());
  std::vector<int> group;
  for (int numa : numas) {
    group.clear();
    for (int d : s.candidates)
      if (node.caps[d].numa == numa) group.push_back(d);
    if (static_cast<int>(group.size()) < r.nums) continue;
    if (s.quota_limited) {
      if (PickWithinQuota(picker, rules, ctx, group, s, why)) return true;
      continue;
    }
    s.picked.clear();
    picker.Pick(ctx, group, &s.picked);
    HAMI_DCHECK(PickedAmong(group, s.picked), "node ", node.info.name,
                ": the picker picked a device outside the NUMA group, or one twice");
    if (static_cast<int>(s.picked.size()) >= r.nums) return true;
  }
  if (why) why->Add(Reason::kNumaNotFit, false);
  return false;
}

// The grants of one request, as made, against the quota room its pick saw (exact where the pick
// could only estimate: several instances on one MIG device, a vendor's group). False (the node does
// not fit, with the reason in `why`) when they exceed it.
bool GrantsWithinQuota(const EvalScratch& s, int64_t mem_mib, int64_t cores, FitFailure* why) {
  if (WithinQuota(s, mem_mib, cores)) return true;
  if (why) why->Add(Reason::kResourceQuotaNotFit, false);
  return false;
}

void AddToPlacement(const NodeState& node, const DeviceDelta& eff, Placement* placement) {
  placement->delta.devices.push_back(eff);
  placement->gpu_milli += RequestMilli(node.caps[eff.device], eff.mem_mib, eff.cores);
  placement->gpus += eff.slots > 0;
}

}  // namespace

bool EvaluateNode(const Profile& profile, const CycleState& cycle, const NodeState& node,
                  EvalScratch& s, Placement* placement, FitFailure* why) {
  const core::PodRequest& pod = cycle.pod();
  if (why) {
    why->Clear();
    why->devices = node.gpus();
  }
  if (node.info.cpu_milli > 0 && cycle.cpu_milli() > node.cpu_free()) {
    if (why) why->Add(Reason::kInsufficientCpu, cycle.cpu_milli() > node.info.cpu_milli);
    return false;
  }
  if (node.info.memory_mib > 0 && cycle.memory_mib() > node.mem_free()) {
    if (why) why->Add(Reason::kInsufficientMemory, cycle.memory_mib() > node.info.memory_mib);
    return false;
  }
  placement->Clear();
  placement->containers.resize(pod.containers.size());
  placement->delta.cpu_milli = cycle.cpu_milli();
  placement->delta.memory_mib = cycle.memory_mib();
  if (!cycle.has_devices()) return true;
  const GpuPicker& picker = *profile.picker;

  if (const core::DeviceRequest* r = cycle.single_request()) {
    // Fast path: one request, so its devices are the pod's effective usage.
    PickContext ctx{cycle, node, node.usage, *r};
    if (!PickForRequest(picker, profile.vendor_rules, ctx, s, why)) return false;
    // Several instances on one MIG device: the path below charges them one after another.
    if (!s.mig_repeats) {
      if (s.scored_by != nullptr)
        placement->vendor_score += s.scored_by->Score(
            *r, node.info.devices, std::span<const int>(s.picked).first(r->nums));
      auto& out = placement->containers[cycle.single_request_container()];
      int64_t mem = 0, cores = 0;
      for (int k = 0; k < r->nums; ++k) {
        DeviceDelta dd = Take(profile.vendor_rules, ctx, s.picked[k]);
        mem += dd.mem_mib;
        cores += dd.cores;
        out.push_back(dd);
        AddToPlacement(node, dd, placement);
      }
      if (s.quota_limited && !GrantsWithinQuota(s, mem, cores, why)) return false;
      placement->delta.pod_class = PodClassOf(node, placement->delta);
      return true;
    }
  }

  const int n = node.gpus();
  s.base.assign(node.usage.begin(), node.usage.end());
  s.init_peak.assign(n, DeviceDelta{});
  s.pod_devices.clear();
  for (size_t ci = 0; ci < pod.containers.size(); ++ci) {
    const core::ContainerRequest& c = pod.containers[ci];
    if (c.devices.empty()) continue;
    const bool init = c.kind == core::ContainerKind::kInit;
    // Init containers run one at a time on the node's usage; the others add up (later containers
    // see earlier ones).
    if (init) s.work = s.base;
    std::vector<core::DeviceUsage>& usage = init ? s.work : s.base;
    const size_t earlier = s.pod_devices.size();  // the earlier containers' devices only
    for (const core::DeviceRequest& r : c.devices) {
      if (r.nums <= 0) continue;
      PickContext ctx{cycle, node, usage, r, std::span<const int>(s.pod_devices).first(earlier)};
      if (!PickForRequest(picker, profile.vendor_rules, ctx, s, why)) return false;
      ctx.mig_default_order = s.mig_default_order;
      if (s.scored_by != nullptr)
        placement->vendor_score +=
            s.scored_by->Score(r, node.info.devices, std::span<const int>(s.picked).first(r.nums));
      int64_t mem = 0, cores = 0;
      for (int k = 0; k < r.nums; ++k) {
        const int d = s.picked[k];
        DeviceDelta dd = Take(profile.vendor_rules, ctx, d);
        mem += dd.mem_mib;
        cores += dd.cores;
        usage[d].used += 1;
        usage[d].usedmem_mib += dd.mem_mib;
        usage[d].usedcores += dd.cores;
        usage[d].mig_slices |= dd.mig_slices;
        placement->containers[ci].push_back(dd);
      }
      if (s.quota_limited && !GrantsWithinQuota(s, mem, cores, why)) return false;
      // After the grant (ctx.earlier views this vector): later containers see these devices.
      s.pod_devices.insert(s.pod_devices.end(), s.picked.begin(), s.picked.begin() + r.nums);
    }
    if (init) {
      // The pod's per-device usage while this init container runs: it and every container before it
      // that keeps running (the sidecars declared earlier), as core::EffectiveDeviceUsage counts
      // the placed pod; the pod keeps the peak over init containers.
      for (int d = 0; d < n; ++d) {
        MaxInto(s.init_peak[d], DeviceDelta{d, s.work[d].used - node.usage[d].used,
                                            s.work[d].usedmem_mib - node.usage[d].usedmem_mib,
                                            s.work[d].usedcores - node.usage[d].usedcores,
                                            s.work[d].mig_slices & ~node.usage[d].mig_slices});
      }
    }
  }
  for (int d = 0; d < n; ++d) {
    DeviceDelta eff{d, s.base[d].used - node.usage[d].used,
                    s.base[d].usedmem_mib - node.usage[d].usedmem_mib,
                    s.base[d].usedcores - node.usage[d].usedcores,
                    s.base[d].mig_slices & ~node.usage[d].mig_slices};
    MaxInto(eff, s.init_peak[d]);
    if (eff.slots == 0 && eff.mem_mib == 0 && eff.cores == 0) continue;
    eff.device = d;
    AddToPlacement(node, eff, placement);
  }
  placement->delta.pod_class = PodClassOf(node, placement->delta);
  return true;
}

bool MayFit(const Profile& profile, const CycleState& cycle, const NodeSummary& node) {
  if (node.track_cpu && cycle.cpu_milli() > node.cpu_free) return false;
  if (node.track_mem && cycle.memory_mib() > node.mem_free) return false;
  if (!cycle.has_devices()) return true;
  for (const auto& c : cycle.pod().containers) {
    for (const auto& r : c.devices) {
      if (r.nums <= 0) continue;
      if (profile.vendor_rules != nullptr && profile.vendor_rules->Covers(r.vendor))
        continue;  // its own checks
      // Every device a request takes is usable and has the memory and cores on its own (a MIG
      // device may take several of its instances).
      if ((r.nums > node.usable && node.mig_gpus == 0) || r.coresreq > node.max_free_cores)
        return false;
      // A request sized by the card is sized here by the smallest device as the cycle counts it.
      // Under the usage rule that is the overcommit cap, larger than the card's real size
      // (DeviceGate::CardMemory): the memory is larger too, but so is the free memory it is
      // compared with by at least as much, so no node that fits is turned away.
      const int64_t mem = r.memreq_mib > 0 ? r.memreq_mib
                          : r.mem_percentage > 0
                              ? node.min_devmem * std::min(r.mem_percentage, 100) / 100
                              : node.min_devmem;
      if (mem > node.max_free_mem) return false;
    }
  }
  return true;
}

void NormalizeScores(Normalize how, std::span<int64_t> scores) {
  if (scores.empty()) return;
  if (how == Normalize::kClamp) {
    for (auto& s : scores) s = std::clamp<int64_t>(s, 0, 100);
    return;
  }
  auto [lo, hi] = std::minmax_element(scores.begin(), scores.end());
  const int64_t min = *lo, max = *hi;
  for (auto& s : scores) s = max == min ? 100 : (s - min) * 100 / (max - min);
}

}  // namespace hami::scheduler
