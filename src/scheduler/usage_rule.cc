#include "scheduler/usage_rule.h"

#include <algorithm>
#include <string_view>

#include "core/mig.h"
#include "usage/recommend.h"

namespace hami::scheduler {

Status ValidateUsageRuleOptions(const UsageRuleOptions& o) {
  if (o.overcommit_pct != 0 && (o.overcommit_pct < 100 || o.overcommit_pct > 1000))
    return InvalidArgument("--usage-overcommit-pct must be 0 (off) or 100..1000, not ",
                           o.overcommit_pct);
  if (o.duty_budget < 1 || o.duty_budget > 10 * usage::kDutyFull)
    return InvalidArgument("--usage-duty-budget-pct must be 1..1000 (%)");
  if (o.contention_bp < 0 || o.contention_bp > 10000)
    return InvalidArgument("--usage-contention-bp must be 0..10000, not ", o.contention_bp);
  if (o.fleet_contention_bp < 0 || o.fleet_contention_bp > 10000 || o.card_contention_bp < 0 ||
      o.card_contention_bp > 10000)
    return InvalidArgument(
        "--usage-fleet-contention-bp and --usage-card-contention-bp must be "
        "0..10000");
  for (const std::string& ns : o.namespaces)
    if (ns.empty()) return InvalidArgument("--usage-namespaces: an empty namespace name");
  return OkStatus();
}

static_assert(std::string_view(kUsageProfileKey) == usage::kUsageProfileAnnotation);

namespace {

// The tenant of a pod of namespace `ns` with this profile text and one NVIDIA card of `limit_mib`,
// or nullopt: a namespace not trusted, a profile that does not parse.
std::optional<usage::Tenant> TenantFrom(const UsageRuleOptions& o, const std::string& ns,
                                        const std::string& profile, int64_t limit_mib) {
  const bool trusted = std::any_of(o.namespaces.begin(), o.namespaces.end(),
                                   [&](const std::string& n) { return n == "*" || n == ns; });
  if (!trusted || limit_mib <= 0) return std::nullopt;
  StatusOr<usage::UsageProfile> p = usage::ParseUsageProfile(profile);
  if (!p.ok()) return std::nullopt;
  usage::Tenant t;
  t.profile = *std::move(p);
  t.spike_mib = t.profile.mem_peak;
  t.limit_mib = limit_mib;
  return t;
}

}  // namespace

std::optional<usage::Tenant> UsageRule::TenantOf(const core::PodRequest& pod) const {
  if (!options_.enabled()) return std::nullopt;
  const auto a = pod.annotations.find(kUsageProfileKey);
  if (a == pod.annotations.end()) return std::nullopt;
  const core::DeviceRequest* only = nullptr;
  for (const core::ContainerRequest& c : pod.containers)
    for (const core::DeviceRequest& r : c.devices) {
      if (only != nullptr) return std::nullopt;  // more than one request: the rule is per card
      only = &r;
    }
  if (only == nullptr || only->vendor != core::kNvidiaVendor || only->nums != 1)
    return std::nullopt;
  return TenantFrom(options_, pod.namespace_, a->second, only->memreq_mib);
}

std::optional<usage::Tenant> UsageRule::TenantOfPlaced(
    const std::string& namespace_, const std::string* profile,
    const core::PodAllocation& allocation) const {
  if (!options_.enabled() || profile == nullptr) return std::nullopt;
  const core::ContainerDevice* only = nullptr;
  for (const auto& c : allocation.containers)
    for (const core::ContainerDevice& d : c) {
      if (only != nullptr) return std::nullopt;
      only = &d;
    }
  if (only == nullptr || only->vendor != core::kNvidiaVendor || !only->mig_profile.empty())
    return std::nullopt;
  return TenantFrom(options_, namespace_, *profile, only->usedmem_mib);
}

void UsageRule::ScaleNode(core::NodeInfo* info) {
  if (!options_.enabled()) return;
  WriterLock l(mu_);
  for (core::DeviceInfo& d : info->devices) {
    if (d.vendor != core::kNvidiaVendor || core::IsMigDevice(d)) continue;
    const std::string key = Key(info->name, d.uuid);
    if (dry_run_)
      if (auto r = real_mib_.find(key);
          r != real_mib_.end() && d.devmem_mib == r->second * options_.overcommit_pct / 100)
        continue;  // the live cache's registration: scaled already
    real_mib_[key] = d.devmem_mib;
    d.devmem_mib = d.devmem_mib * options_.overcommit_pct / 100;
  }
}

std::unique_ptr<UsageRule> UsageRule::DryRun() const {
  auto copy = std::make_unique<UsageRule>(options_);
  ReaderLock l(mu_);
  WriterLock c(copy->mu_);
  copy->dry_run_ = true;
  copy->real_mib_ = real_mib_;
  copy->pods_ = pods_;
  copy->devices_ = devices_;
  copy->ledger_ = ledger_;
  return copy;
}

Reason UsageRule::Gate::Admit(const PickContext& ctx, int device, int64_t mem_mib) const {
  const core::DeviceInfo& d = ctx.node.info.devices[static_cast<size_t>(device)];
  ReaderLock l(rule_.mu_);
  return rule_.CheckLocked(tenant_, ctx.node.info.name, d.uuid,
                           ctx.usage[static_cast<size_t>(device)].usedmem_mib, mem_mib);
}

int64_t UsageRule::Gate::CardMemory(const PickContext& ctx, int device) const {
  const core::DeviceInfo& d = ctx.node.info.devices[static_cast<size_t>(device)];
  ReaderLock l(rule_.mu_);
  const auto real = rule_.real_mib_.find(Key(ctx.node.info.name, d.uuid));
  return real != rule_.real_mib_.end() ? real->second : DeviceGate::CardMemory(ctx, device);
}

Reason UsageRule::CheckLocked(const usage::Tenant* tenant, const std::string& node,
                              const std::string& uuid, int64_t used_mib, int64_t mem_mib) const {
  const std::string key = Key(node, uuid);
  const auto real_it = real_mib_.find(key);
  if (real_it == real_mib_.end()) return Reason::kCount;  // a device the rule does not cover
  const int64_t real = real_it->second;
  // No pod's own limit passes the card: libvgpu would promise memory the card does not have.
  if (mem_mib > real)
    return tenant ? Reason::kCardUsageProfileNotFit : Reason::kCardInsufficientMemory;
  if (tenant == nullptr)
    return used_mib + mem_mib > real ? Reason::kCardInsufficientMemory : Reason::kCount;
  std::vector<const usage::Tenant*> there;
  int64_t profiled = 0;
  if (const auto dev = devices_.find(key); dev != devices_.end())
    for (const std::string& uid : dev->second.uids) {
      const Pod& p = pods_.at(uid);
      if (!p.tenant) continue;
      there.push_back(&*p.tenant);
      for (const Grant& g : p.grants)
        if (g.node == node && g.uuid == uuid) profiled += g.mem_mib;
    }
  // What the cache books there beyond the profiled pods: pods without a profile (or ones we have
  // not been told the profile of). Nothing says when they are busy or how much they use: a pod
  // with a profile never joins them, whatever the duty budget.
  if (used_mib > profiled) return Reason::kCardUsageProfileNotFit;
  if (there.empty()) return Reason::kCount;  // an empty card takes any pod
  usage::PackBudget budget;
  budget.capacity_mib = real;
  budget.duty_budget = options_.duty_budget;
  budget.contention_bp = options_.contention_bp;
  budget.overcommit_pct = options_.overcommit_pct;
  return ledger_.Check(key, there, *tenant, budget,
                       {options_.fleet_contention_bp, options_.card_contention_bp}) ==
                 usage::Fit::kFits
             ? Reason::kCount
             : Reason::kCardUsageProfileNotFit;
}

Status UsageRule::Commit(const std::string& uid, const std::optional<usage::Tenant>& tenant,
                         const std::vector<Grant>& grants) {
  WriterLock l(mu_);
  for (const Grant& g : grants)
    if (Reason r = CheckLocked(tenant ? &*tenant : nullptr, g.node, g.uuid, g.used_mib, g.mem_mib);
        r != Reason::kCount)
      return Aborted("device ", g.uuid, " of node ", g.node, " no longer takes pod ", uid, " (",
                     ReasonName(r), "); schedule again");
  RecordLocked(uid, tenant, grants);
  return OkStatus();
}

void UsageRule::Record(const std::string& uid, const std::optional<usage::Tenant>& tenant,
                       const std::vector<Grant>& grants) {
  WriterLock l(mu_);
  RecordLocked(uid, tenant, grants);
}

void UsageRule::RecordLocked(const std::string& uid, const std::optional<usage::Tenant>& tenant,
                             const std::vector<Grant>& grants) {
  std::optional<usage::Tenant> keep = tenant;
  if (auto it = pods_.find(uid); it != pods_.end()) {
    auto same = [](const Grant& a, const Grant& b) {
      return a.node == b.node && a.uuid == b.uuid && a.mem_mib == b.mem_mib;
    };
    if (!keep && it->second.grants.size() == grants.size() &&
        std::equal(grants.begin(), grants.end(), it->second.grants.begin(), same))
      keep = it->second.tenant;
    ForgetLocked(uid);
  }
  if (grants.empty()) return;
  Pod& p = pods_[uid];
  p.tenant = keep;
  p.grants = grants;
  for (const Grant& g : grants) {
    Device& d = devices_[Key(g.node, g.uuid)];
    d.uids.push_back(uid);
    d.booked_mib += g.mem_mib;
    if (keep) RecountLocked(Key(g.node, g.uuid));
  }
}

void UsageRule::RecountLocked(const std::string& key) {
  std::vector<const usage::Tenant*> there;
  if (const auto dev = devices_.find(key); dev != devices_.end())
    for (const std::string& uid : dev->second.uids)
      if (const Pod& p = pods_.at(uid); p.tenant) there.push_back(&*p.tenant);
  ledger_.Set(key, there, options_.duty_budget);
}

void UsageRule::Forget(const std::string& uid) {
  WriterLock l(mu_);
  ForgetLocked(uid);
}

void UsageRule::ForgetLocked(const std::string& uid) {
  auto it = pods_.find(uid);
  if (it == pods_.end()) return;
  for (const Grant& g : it->second.grants) {
    auto d = devices_.find(Key(g.node, g.uuid));
    if (d == devices_.end()) continue;
    auto& v = d->second.uids;
    if (auto u = std::find(v.begin(), v.end(), uid); u != v.end()) v.erase(u);
    d->second.booked_mib -= g.mem_mib;
    if (v.empty()) devices_.erase(d);
  }
  const std::vector<Grant> grants = std::move(it->second.grants);
  const bool profiled = it->second.tenant.has_value();
  pods_.erase(it);
  if (profiled)
    for (const Grant& g : grants) RecountLocked(Key(g.node, g.uuid));
}

UsageRule::Stats UsageRule::stats() const {
  ReaderLock l(mu_);
  Stats s;
  for (const auto& [uid, p] : pods_) s.profiled_pods += p.tenant.has_value();
  for (const auto& [key, d] : devices_)
    if (auto r = real_mib_.find(key); r != real_mib_.end() && d.booked_mib > r->second)
      ++s.overcommitted_gpus;
  return s;
}

}  // namespace hami::scheduler
