#include "scheduler/scheduler.h"

#include <algorithm>
#include <bit>
#include <map>
#include <set>
#include <string_view>

#include "core/annotations.h"
#include "scheduler/pickers.h"

namespace hami::scheduler {

core::PodAllocation AllocationOf(const NodeState& node, const Placement& p) {
  core::PodAllocation a;
  a.node = node.info.name;
  a.containers.resize(p.containers.size());
  for (size_t ci = 0; ci < p.containers.size(); ++ci) {
    for (const auto& d : p.containers[ci]) {
      const auto& dev = node.info.devices[d.device];
      core::ContainerDevice cd;
      cd.uuid = dev.uuid;
      cd.vendor = dev.vendor;
      cd.usedmem_mib = d.mem_mib;
      cd.usedcores = d.cores;
      cd.index = dev.index;
      if (d.mig_profile >= 0 && d.mig_slices != 0) {
        cd.mig_profile = dev.mig_profiles[d.mig_profile].name;
        cd.mig_placement =
            core::MigPlacement{std::countr_zero(d.mig_slices), std::popcount(d.mig_slices)};
      }
      a.containers[ci].push_back(std::move(cd));
    }
  }
  return a;
}

StatusOr<std::unique_ptr<Scheduler>> Scheduler::Create(const SchedulerOptions& options) {
  HAMI_ASSIGN_OR_RETURN(std::shared_ptr<Profile> profile,
                        MakeProfile(options.policy, options.config));
  HAMI_RETURN_IF_ERROR(ValidateUsageRuleOptions(options.usage));
  std::unique_ptr<Scheduler> s(new Scheduler(std::move(profile), options.seed));
  if (options.usage.enabled()) s->usage_ = std::make_unique<UsageRule>(options.usage);
  // Policies a pod may select by annotation get their own profile (and, for the fragmentation-aware
  // ones, their own learned task-shape model), unless the configured policy is that one.
  const std::string& name = s->profile_->name;
  if (name != core::kPolicyFgd) {
    HAMI_ASSIGN_OR_RETURN(s->fgd_, MakeProfile(core::kPolicyFgd, options.config));
  }
  if (name != core::kPolicyDefault) {
    HAMI_ASSIGN_OR_RETURN(s->default_, MakeProfile(core::kPolicyDefault, options.config));
  }
  if (name.rfind("hami", 0) != 0) {
    HAMI_ASSIGN_OR_RETURN(s->hami_, MakeProfile("hami", options.config));
  }
  for (auto* p : {s->profile_.get(), s->fgd_.get(), s->default_.get(), s->hami_.get()})
    if (p) p->vendor_rules = options.vendor_rules;
  return s;
}

const Profile& Scheduler::ProfileFor(const core::PodRequest& pod) const {
  if (pod.gpu_policy == core::kPolicyFgd && fgd_) return *fgd_;
  if (pod.gpu_policy == core::kPolicyDefault && default_) return *default_;
  if (pod.gpu_policy == core::kPolicyFgd || pod.gpu_policy == core::kPolicyDefault)
    return *profile_;
  if (hami_ && (!pod.gpu_policy.empty() || !pod.node_policy.empty())) return *hami_;
  return *profile_;
}

namespace {
// Per-thread buffers so a decision does not allocate per node.
struct ThreadScratch {
  EvalScratch eval;
  Placement placement;
  FitFailure failure;
  std::vector<int64_t> raw;
  std::vector<std::string> names;  // reused: assign() keeps capacity
  size_t feasible = 0;
  std::vector<BoundedNode> heap;  // ScheduleBounded
  std::vector<uint32_t> mark;     // ScheduleBounded: candidate nodes by index, == epoch when listed
  uint32_t epoch = 0;
  Placement best_placement;
};
thread_local ThreadScratch t_scratch;

// True when no device request of the pod goes to vendor rules (the scorers' bounds assume the
// generic memory and cores of a share).
bool OnGenericChecks(const Profile& profile, const core::PodRequest& pod) {
  if (profile.vendor_rules == nullptr) return true;
  for (const auto& c : pod.containers)
    for (const auto& r : c.devices)
      if (r.nums > 0 && profile.vendor_rules->Covers(r.vendor)) return false;
  return true;
}
}  // namespace

bool Scheduler::AsksPooled(const core::PodRequest& pod) const {
  const VendorRules* rules = profile_->vendor_rules;
  if (rules == nullptr) return false;
  for (const auto& c : pod.containers)
    for (const auto& r : c.devices)
      if (r.nums > 0 && r.vendor != core::kNvidiaVendor && rules->Pooled(r.vendor)) return true;
  return false;
}

namespace {
// FNV-1a: spreads pods over equal nodes the same way on every build and platform.
uint64_t StableHash(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}
}  // namespace

StatusOr<Scheduler::SplitAllocation> Scheduler::SplitPooled(
    const core::PodAllocation& allocation) const {
  SplitAllocation out;
  out.local = allocation;
  const VendorRules* rules = profile_->vendor_rules;
  if (rules == nullptr) return out;
  std::set<std::string> seen;
  for (auto& c : out.local.containers) {
    for (auto it = c.begin(); it != c.end();) {
      if (it->vendor == core::kNvidiaVendor || !rules->Pooled(it->vendor)) {
        ++it;
        continue;
      }
      const std::string node = rules->PoolNodeOf(*it);
      if (node.empty())
        return InvalidArgument("pooled device ", it->uuid, " (", it->vendor,
                               ") names no node that serves it");
      if (out.pooled.node.empty()) out.pooled.node = node;
      if (node != out.pooled.node)
        return InvalidArgument("pooled devices of two serving nodes (", out.pooled.node, ", ", node,
                               "): a pod is served by one");
      if (seen.insert(it->uuid).second) {
        if (out.pooled.containers.empty()) out.pooled.containers.resize(1);
        out.pooled.containers[0].push_back(*it);
      }
      it = c.erase(it);
    }
  }
  return out;
}

bool Scheduler::HasPooledGrants(const core::PodAllocation& allocation) const {
  const VendorRules* rules = profile_->vendor_rules;
  if (rules == nullptr) return false;
  for (const auto& c : allocation.containers)
    for (const auto& d : c)
      if (d.vendor != core::kNvidiaVendor && rules->Pooled(d.vendor)) return true;
  return false;
}

std::vector<UsageRule::Grant> Scheduler::GrantsOf(const std::string& node,
                                                  const PodDelta& delta) const {
  // Read after the pod is in the cache: what was booked before it is the device's usage less the
  // pod's own (a reservation not yet recorded by the rule counts as a pod without a profile, so a
  // race only ever refuses).
  std::vector<UsageRule::Grant> out;
  cache_.WithNode(node, [&](const NodeState& n) {
    for (const DeviceDelta& d : delta.devices) {
      if (d.device < 0 || static_cast<size_t>(d.device) >= n.info.devices.size()) continue;
      const auto i = static_cast<size_t>(d.device);
      out.push_back({node, n.info.devices[i].uuid, d.mem_mib, n.usage[i].usedmem_mib - d.mem_mib});
    }
  });
  return out;
}

std::vector<UsageRule::Grant> Scheduler::GrantsOf(const core::PodAllocation& allocation) const {
  std::vector<UsageRule::Grant> out;
  for (const auto& c : allocation.containers)
    for (const core::ContainerDevice& d : c)
      out.push_back({allocation.node, d.uuid, d.usedmem_mib, 0});
  return out;
}

Status Scheduler::AddPod(const std::string& uid, const core::PodAllocation& allocation,
                         const ClusterCache::PodResources& res,
                         const std::optional<usage::Tenant>& usage_tenant) {
  // The usage rule learns the pod's grants (a tenant only from its profile, when it is given);
  // ground truth, as the cache takes it.
  if (usage_) usage_->Record(uid, usage_tenant, GrantsOf(allocation));
  if (!HasPooledGrants(allocation)) {
    HAMI_RETURN_IF_ERROR(cache_.AddPod(uid, allocation, res));
    (void)cache_.RemovePod(PoolKey(uid));  // a record replaced by one without pooled grants
    return OkStatus();
  }
  HAMI_ASSIGN_OR_RETURN(SplitAllocation split, SplitPooled(allocation));
  HAMI_RETURN_IF_ERROR(cache_.AddPod(uid, split.local, res));
  if (!split.pooled.node.empty()) return cache_.AddPod(PoolKey(uid), split.pooled);
  (void)cache_.RemovePod(PoolKey(uid));  // a record replaced by one without pooled grants
  return OkStatus();
}

StatusOr<Decision> Scheduler::SchedulePooled(const core::PodRequest& pod,
                                             const std::vector<std::string>* candidates,
                                             const ScheduleOptions& options) const {
  const VendorRules& rules = *profile_->vendor_rules;
  // The pod without its pooled requests, and those requests per container.
  core::PodRequest local = pod;
  std::string vendor;
  std::vector<std::optional<core::DeviceRequest>> requests(pod.containers.size());
  for (size_t ci = 0; ci < local.containers.size(); ++ci) {
    auto& devs = local.containers[ci].devices;
    for (auto it = devs.begin(); it != devs.end();) {
      if (it->nums <= 0 || it->vendor == core::kNvidiaVendor || !rules.Pooled(it->vendor)) {
        ++it;
        continue;
      }
      if (!vendor.empty() && vendor != it->vendor)
        return InvalidArgument("pod ", pod.uid, " asks for pooled devices of two vendors (", vendor,
                               ", ", it->vendor, ")");
      if (requests[ci])
        return InvalidArgument("pod ", pod.uid, ": container ", ci, " asks for ", it->vendor,
                               " devices twice");
      vendor = it->vendor;
      requests[ci] = *it;
      it = devs.erase(it);
    }
  }
  // Every node serving the vendor, copied with its usage as it is now (Reserve checks again).
  struct Server {
    std::string name;
    std::vector<core::DeviceInfo> devices;
    std::vector<core::DeviceUsage> usage;
  };
  std::vector<Server> servers;
  cache_.ForEachNode(
      nullptr,
      [&](const NodeState& n) {
        for (const auto& d : n.info.devices)
          if (d.vendor == vendor) {
            servers.push_back({n.info.name, n.info.devices, n.usage});
            return;
          }
      },
      [](const std::string&) {});
  std::vector<VendorRules::PoolNode> views;
  views.reserve(servers.size());
  for (const Server& sv : servers) views.push_back({sv.name, sv.devices, sv.usage});
  const VendorRules::PoolChoice choice = rules.ChoosePool(vendor, requests, views);

  const std::vector<std::string> all = candidates ? std::vector<std::string>() : cache_.NodeNames();
  const std::vector<std::string>& names = candidates ? *candidates : all;
  Decision out;
  if (choice.node.empty()) {
    if (options.explain)
      for (const auto& n : names) out.failures.push_back({n, choice.reason, true});
    return out;
  }
  // The rest of the pod runs on a node that serves no pool of the vendor.
  auto serving = [&](const std::string& n) {
    return std::any_of(servers.begin(), servers.end(),
                       [&](const Server& sv) { return sv.name == n; });
  };
  std::vector<std::string> clients;
  std::vector<NodeFailure> server_failures;
  for (const auto& n : names) {
    if (!serving(n)) {
      clients.push_back(n);
    } else if (options.explain) {
      server_failures.push_back({n,
                                 StrCat("node serves ", vendor,
                                        " devices to other nodes: it hosts no pod asking for them"),
                                 false});
    }
  }
  // A pod whose only devices are pooled takes a candidate the cache does not hold (a node without
  // devices: it strands no GPU there), as pods without devices do; the uid spreads such pods over
  // those nodes, which kube-scheduler has already filtered for CPU and memory.
  if (!local.HasDevices() && candidates != nullptr) {
    std::vector<std::string> untracked;
    for (const auto& n : clients)
      if (!cache_.HasNode(n)) untracked.push_back(n);
    std::sort(untracked.begin(), untracked.end());
    untracked.erase(std::unique(untracked.begin(), untracked.end()), untracked.end());
    if (!untracked.empty()) {
      out.node = untracked[StableHash(pod.uid) % untracked.size()];
      out.node_untracked = true;
      out.feasible_nodes = static_cast<int>(untracked.size());
      out.allocation.node = out.node;
      out.allocation.containers.resize(pod.containers.size());
    }
  }
  if (out.node.empty()) {
    HAMI_ASSIGN_OR_RETURN(out, Schedule(local, &clients, options));
    for (auto& f : server_failures) out.failures.push_back(std::move(f));
    if (out.node.empty()) return out;
  }
  // Merge the pooled grants into the decision, and charge each device once on its server.
  out.allocation.containers.resize(pod.containers.size());
  const Server* server = nullptr;
  for (const Server& sv : servers)
    if (sv.name == choice.node) server = &sv;
  if (server == nullptr)
    return Internal("pooled devices: ", vendor, " chose node ", choice.node, ", which serves none");
  std::map<int, DeviceDelta> by_device;
  for (size_t k = 0; k < choice.containers.size() && k < out.allocation.containers.size(); ++k) {
    for (const core::ContainerDevice& g : choice.containers[k]) {
      const auto at = std::find_if(server->devices.begin(), server->devices.end(),
                                   [&](const core::DeviceInfo& d) { return d.uuid == g.uuid; });
      if (at == server->devices.end())
        return Internal("pooled devices: ", g.uuid, " is not a device of ", choice.node);
      DeviceDelta& d = by_device[static_cast<int>(at - server->devices.begin())];
      d.device = static_cast<int>(at - server->devices.begin());
      d.slots = 1;
      d.mem_mib = std::max(d.mem_mib, g.usedmem_mib);
      d.cores = std::max(d.cores, g.usedcores);
      out.allocation.containers[k].push_back(g);
    }
  }
  out.pool_node = choice.node;
  for (auto& [i, d] : by_device) out.pool_delta.devices.push_back(d);
  return out;
}

StatusOr<Decision> Scheduler::Schedule(const core::PodRequest& pod,
                                       const std::vector<std::string>* candidates,
                                       const ScheduleOptions& options) const {
  if (AsksPooled(pod)) return SchedulePooled(pod, candidates, options);
  // The stream of a decision depends on how many decisions were reserved before it, not on how many
  // times Schedule ran: retries, explains and dry runs draw what the decision they repeat drew, so
  // the extender (which explains a failure with a second call) draws as `hami sim` does.
  Rng local(seed_ ^ (0x9e3779b97f4a7c15ULL * (reserved_.load(std::memory_order_relaxed) + 1)));
  Rng* rng = options.rng ? options.rng : &local;
  const Profile& profile = ProfileFor(pod);
  CycleState cycle(pod, rng, profile.vendor_rules);
  cycle.set_gpu_capacity(cache_.gpu_capacity());
  cycle.set_quota(options.quota);
  std::optional<usage::Tenant> tenant;
  std::optional<UsageRule::Gate> gate;
  if (usage_) {
    tenant = usage_->TenantOf(pod);
    gate.emplace(*usage_, tenant ? &*tenant : nullptr);
    cycle.set_gate(&*gate);
  }
  // A profile that draws per node (uniform host choice, random GPUs) visits the candidates in name
  // order, as over all nodes: the draws then do not depend on the order kube-scheduler lists them
  // in.
  std::vector<std::string> in_name_order;
  if (candidates != nullptr &&
      (profile.selection == HostSelection::kUniformFeasible ||
       dynamic_cast<const RandomPicker*>(profile.picker.get()) != nullptr)) {
    in_name_order = *candidates;
    std::sort(in_name_order.begin(), in_name_order.end());
    in_name_order.erase(std::unique(in_name_order.begin(), in_name_order.end()),
                        in_name_order.end());
    candidates = &in_name_order;
  }
  HAMI_RETURN_IF_ERROR(profile.picker->PreFilter(cycle));
  HAMI_RETURN_IF_ERROR(profile.scorer->PreFilter(cycle));

  if (!options.explain && !options.full_scan && profile.selection == HostSelection::kHighestScore &&
      profile.scorer->bounded() && OnGenericChecks(profile, pod))
    return ScheduleBounded(profile, cycle, candidates);

  ThreadScratch& ts = t_scratch;
  ts.raw.clear();
  ts.feasible = 0;
  Decision out;
  const bool uniform = profile.selection == HostSelection::kUniformFeasible;
  const bool clamp = profile.normalize == Normalize::kClamp;
  // The winner is tracked during the scan: min-max normalisation keeps the order and only raw ==
  // max maps to 100, and clamping is applied to the key, so no second pass over the nodes is
  // needed.
  bool have_best = false;
  int64_t best_key = 0;
  int best_vendor = 0;  // Placement::vendor_score of the best: breaks ties of the policy's key
  std::string best_name;
  cache_.ForEachNode(
      candidates,
      [&](const NodeState& node) {
        FitFailure* why = options.explain ? &ts.failure : nullptr;
        if (!EvaluateNode(profile, cycle, node, ts.eval, &ts.placement, why)) {
          if (options.explain)
            out.failures.push_back({node.info.name, ts.failure.ToString(), !ts.failure.never});
          return;
        }
        const bool keep_name = uniform || options.explain;
        if (keep_name) {
          if (ts.names.size() <= ts.feasible) ts.names.emplace_back();
          ts.names[ts.feasible].assign(node.info.name);
        }
        ++ts.feasible;
        if (uniform) return;
        const int64_t raw = profile.scorer->Score(cycle, node, ts.placement);
        if (options.explain) ts.raw.push_back(raw);
        const int64_t key = clamp ? std::clamp<int64_t>(raw, 0, 100) : raw;
        const int vs = ts.placement.vendor_score;  // 0 unless vendor rules scored (never NVIDIA)
        if (!have_best || key > best_key ||
            (key == best_key && (vs > best_vendor || (vs == best_vendor && candidates &&
                                                      node.info.name < best_name)))) {
          have_best = true;
          best_key = key;
          best_vendor = vs;
          best_name.assign(node.info.name);
        }
      },
      [&](const std::string& name) {
        if (options.explain)
          out.failures.push_back({name, "node not found in the scheduler cache", true});
      });
  out.feasible_nodes = static_cast<int>(ts.feasible);
  if (ts.feasible == 0) return out;

  std::string winner;
  if (uniform) {
    winner = ts.names[rng->Uniform(ts.feasible)];
    out.score = 0;
  } else {
    winner = best_name;
    out.score = clamp ? static_cast<int>(best_key) : 100;
  }
  if (options.explain) {
    if (uniform) ts.raw.assign(ts.feasible, 0);
    NormalizeScores(profile.normalize, ts.raw);
    out.scores.reserve(ts.raw.size());
    for (size_t i = 0; i < ts.raw.size(); ++i)
      out.scores.push_back({ts.names[i], static_cast<int>(ts.raw[i])});
  }
  // Re-evaluate the winner to get its placement (the node may have changed since; Reserve checks).
  bool fits = false;
  cache_.WithNode(winner, [&](const NodeState& node) {
    fits = EvaluateNode(profile, cycle, node, ts.eval, &ts.placement, nullptr);
    if (fits) {
      out.allocation = AllocationOf(node, ts.placement);
      out.delta = ts.placement.delta;
    }
  });
  if (!fits) return Aborted("node ", winner, " changed during the decision; schedule again");
  out.node = std::move(winner);
  return out;
}

StatusOr<Decision> Scheduler::ScheduleBounded(const Profile& profile, const CycleState& cycle,
                                              const std::vector<std::string>* candidates) const {
  ThreadScratch& ts = t_scratch;
  const bool clamp = profile.normalize == Normalize::kClamp;
  auto key_of = [clamp](int64_t raw) { return clamp ? std::clamp<int64_t>(raw, 0, 100) : raw; };
  Decision out;
  cache_.Read([&](const ClusterCache::View& view) {
    // Nodes that may fit, with an upper bound of their key; index = name order, so the node that
    // wins a tie is the lowest index (among all nodes, or among the candidates).
    auto& heap = ts.heap;
    heap.clear();
    auto consider = [&](size_t i) {
      const NodeSummary sum = view.Summary(i);
      if (!MayFit(profile, cycle, sum)) return;
      const int64_t bound = profile.scorer->UpperBound(cycle, sum);
      heap.push_back({bound == kNoBound ? kNoBound : key_of(bound), static_cast<uint32_t>(i)});
    };
    if (candidates == nullptr) {
      for (size_t i = 0; i < view.size(); ++i) consider(i);
    } else {
      // The candidates as a set of indices (duplicates and unknown names drop out), visited in name
      // order, so the scan below is the one over all nodes (kube-scheduler sends NodeNames rotated
      // by its own start node; the order of the list never matters).
      auto& mark = ts.mark;
      if (mark.size() != view.size()) mark.assign(view.size(), 0);
      if (++ts.epoch == 0) {
        std::fill(mark.begin(), mark.end(), 0);
        ts.epoch = 1;
      }
      for (const auto& name : *candidates)
        if (const int i = view.IndexOf(name); i >= 0) mark[static_cast<size_t>(i)] = ts.epoch;
      for (size_t i = 0; i < view.size(); ++i)
        if (mark[i] == ts.epoch) consider(i);
    }
    // Max-heap on (bound, then lower index first).
    auto lower = [](const BoundedNode& a, const BoundedNode& b) {
      return a.bound < b.bound || (a.bound == b.bound && a.index > b.index);
    };
    bool have_best = false;
    int64_t best_key = 0;
    uint32_t best = 0;
    auto examine = [&](uint32_t index) {
      view.WithNode(index, [&](const NodeState& node) {
        if (!EvaluateNode(profile, cycle, node, ts.eval, &ts.placement, nullptr)) return;
        ++out.feasible_nodes;
        const int64_t key = key_of(profile.scorer->Score(cycle, node, ts.placement));
        if (!have_best || key > best_key || (key == best_key && index < best)) {
          have_best = true;
          best_key = key;
          best = index;
          ts.best_placement = ts.placement;
        }
      });
    };
    // Nothing left at this bound can score higher, or tie and come earlier in name order.
    auto pruned = [&](const BoundedNode& n) {
      return have_best && (n.bound < best_key || (n.bound == best_key && n.index > best));
    };
    // The heap holds ascending indices without repeats: the usual case is settled by the nodes of
    // the highest bound alone, in index order; examine them without ordering the rest.
    if (!heap.empty()) {
      int64_t top = heap[0].bound;
      for (const BoundedNode& n : heap) top = std::max(top, n.bound);
      for (const BoundedNode& n : heap) {
        if (n.bound != top) continue;
        if (pruned(n)) break;
        examine(n.index);
      }
      if (have_best && best_key >= top)
        heap.clear();
      else
        std::erase_if(heap, [top](const BoundedNode& n) { return n.bound == top; });
    }
    std::make_heap(heap.begin(), heap.end(), lower);
    while (!heap.empty()) {
      const BoundedNode top = heap.front();
      if (pruned(top)) break;
      std::pop_heap(heap.begin(), heap.end(), lower);
      heap.pop_back();
      examine(top.index);
    }
    if (!have_best) return;
    out.score = clamp ? static_cast<int>(best_key) : 100;
    // The winner's placement was computed under its lock in this view; the node may change before
    // Reserve, which checks.
    view.WithNode(best, [&](const NodeState& node) {
      out.node = node.info.name;
      out.allocation = AllocationOf(node, ts.best_placement);
      out.delta = ts.best_placement.delta;
    });
  });
  return out;
}

Status Scheduler::Reserve(const core::PodRequest& pod, const Decision& decision) {
  if (decision.node.empty())
    return FailedPrecondition("pod ", pod.uid, ": the decision names no node");
  if (!decision.node_untracked) {
    HAMI_RETURN_IF_ERROR(cache_.Reserve(pod.uid, decision.node, decision.delta));
    if (usage_) {
      // Re-checked under the rule's lock: a concurrent reservation on the same card was not in the
      // profiles this decision was made against.
      Status s =
          usage_->Commit(pod.uid, usage_->TenantOf(pod), GrantsOf(decision.node, decision.delta));
      if (!s.ok()) {
        (void)cache_.RemovePod(pod.uid);
        return s;
      }
    }
  }
  if (!decision.pool_node.empty()) {
    // The pooled grants on their server; both records or neither.
    Status s = cache_.Reserve(PoolKey(pod.uid), decision.pool_node, decision.pool_delta);
    if (!s.ok()) {
      if (!decision.node_untracked) (void)cache_.RemovePod(pod.uid);
      if (usage_) usage_->Forget(pod.uid);
      return s;
    }
  }
  reserved_.fetch_add(1, std::memory_order_relaxed);
  if (learns_ && !decision.node_untracked)
    for (const auto& plugin : ProfileFor(pod).reserve) plugin->Reserve(pod, decision.delta);
  return OkStatus();
}

template <typename F>
void Scheduler::ForEachPlugin(F&& f) const {
  if (!learns_) return;
  for (const Profile* p : {profile_.get(), fgd_.get(), default_.get(), hami_.get()})
    if (p)
      for (const auto& plugin : p->reserve) f(*plugin);
}

Status Scheduler::Unreserve(const std::string& uid) {
  // Each profile's plugins know only the pods they learned; the others ignore the uid.
  ForEachPlugin([&](ReservePlugin& p) { p.Unreserve(uid); });
  return RemoveRecords(uid);
}

Status Scheduler::RemovePod(const std::string& uid) {
  ForEachPlugin([&](ReservePlugin& p) { p.Forget(uid); });
  return RemoveRecords(uid);
}

Status Scheduler::RemoveRecords(const std::string& uid) {
  if (usage_) usage_->Forget(uid);
  const Status local = cache_.RemovePod(uid);
  const Status pooled = cache_.RemovePod(PoolKey(uid));
  return local.ok() || pooled.ok() ? OkStatus() : local;
}

std::unique_ptr<Scheduler> Scheduler::DryRun() const {
  std::unique_ptr<Scheduler> s(new Scheduler(profile_, seed_));
  s->fgd_ = fgd_;
  s->default_ = default_;
  s->hami_ = hami_;
  s->learns_ = false;
  if (usage_) s->usage_ = usage_->DryRun();
  return s;
}

StatusOr<Decision> Scheduler::ScheduleAndReserve(const core::PodRequest& pod,
                                                 const std::vector<std::string>* candidates,
                                                 const ScheduleOptions& options) {
  constexpr int kAttempts = 8;
  Status last;
  for (int i = 0; i < kAttempts; ++i) {
    auto d = Schedule(pod, candidates, options);
    if (!d.ok()) {
      if (absl::IsAborted(d.status())) {
        last = d.status();
        continue;
      }
      return d.status();
    }
    if (d->node.empty()) return d;
    Status s = Reserve(pod, *d);
    if (s.ok()) return d;
    if (!absl::IsAborted(s)) return s;
    last = s;
  }
  return last;
}

}  // namespace hami::scheduler
