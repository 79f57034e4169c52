#include "scheduler/dra_placement.h"

#include <algorithm>

#include "scheduler/registry.h"

namespace hami::scheduler::dra {
namespace {

using Json = nlohmann::json;

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int kSharedSlots = 1000;  // no share count in DRA: as the simulator's split count
constexpr char kClaimsContainer[] = "dra-claims";

// Stock DRA's device choice on one node: the first `nums` candidates (positions in slice order)
// that fit; productName must equal one of the pod's use_types.
class FirstFitPicker final : public GpuPicker {
 public:
  FirstFitPicker() { vetoes_ = true; }
  Reason Admit(const PickContext& ctx, int device) const override {
    const auto& types = ctx.cycle.pod().selectors.use_types;
    if (types.empty() ||
        std::find(types.begin(), types.end(), ctx.node.info.devices[device].type) != types.end())
      return Reason::kCount;
    return Reason::kCardTypeMismatch;
  }
  void Pick(const PickContext& ctx, std::span<const int> candidates,
            std::vector<int>* out) const override {
    const size_t n = std::min(candidates.size(), static_cast<size_t>(ctx.request.nums));
    out->insert(out->end(), candidates.begin(), candidates.begin() + static_cast<ptrdiff_t>(n));
  }
};

std::string PoolKey(const std::string& driver, const std::string& pool) {
  return driver + "/" + pool;
}

// The container of `pod` that holds the claims' device requests (DraPodRequest).
int ClaimsContainer(const core::PodRequest& pod) {
  for (int i = static_cast<int>(pod.containers.size()) - 1; i >= 0; --i)
    if (!pod.containers[i].devices.empty()) return i;
  return -1;
}

// What one result takes of its device: one slot and its consumed capacity (memory in MiB rounded
// up), or the whole device when it is exclusive (no shareID).
DeviceDelta ChargeOf(const core::DeviceInfo& device, const Result& r) {
  DeviceDelta dd;
  dd.slots = 1;
  if (!r.share_id) {
    dd.mem_mib = device.devmem_mib;
    dd.cores = device.devcore;
    return dd;
  }
  if (auto m = r.consumed.find("memory"); m != r.consumed.end())
    dd.mem_mib = (m->second + kMiB - 1) / kMiB;
  if (auto c = r.consumed.find("cores"); c != r.consumed.end())
    dd.cores = static_cast<int>(std::min<int64_t>(c->second, 100'000));
  return dd;
}

}  // namespace

StatusOr<std::unique_ptr<Profile>> MakeDraProfile() {
  HAMI_ASSIGN_OR_RETURN(std::unique_ptr<Profile> profile, MakeProfile(core::kPolicyDefault));
  profile->picker = std::make_unique<FirstFitPicker>();
  return profile;
}

// ---------------- DraView ----------------

StatusOr<DraView> DraView::Build(const std::string& driver, const std::vector<Json>& slices,
                                 const std::vector<Json>& classes,
                                 const std::vector<Json>& claims) {
  HAMI_ASSIGN_OR_RETURN(std::vector<Pool> pools, PoolsFromSlices(slices));
  std::map<std::string, std::string> node_of;  // driver/pool -> node
  auto capacity = std::make_shared<GpuCapacity>();
  for (const Pool& p : pools) {
    if (p.driver != driver || p.all_nodes) continue;
    node_of[PoolKey(p.driver, p.name)] = p.node_name;
    if (p.incomplete) continue;
    for (const Device& d : p.devices) {  // as ClusterCache counts NodeInfo devices, by type
      auto it = d.attributes.find("productName");
      ++(*capacity)[it != d.attributes.end() && std::holds_alternative<std::string>(it->second)
                        ? std::get<std::string>(it->second)
                        : std::string()];
    }
  }
  std::map<std::string, DeviceClass> by_name;
  // A class the model cannot read (another driver's CEL beyond the subset) is left out: a claim
  // that names it is then refused as asking an unknown class, and every other claim is unaffected.
  for (const Json& c : classes) {
    if (!c.is_object() || !c.contains("metadata") || !c["metadata"].is_object()) continue;
    if (auto parsed = ClassFromJson(c); parsed.ok())
      by_name[c["metadata"].value("name", "")] = *std::move(parsed);
  }
  DraView view(driver, Allocator(std::move(pools), std::move(by_name)));
  view.capacity_ = std::move(capacity);
  // One pass over the claims: the allocated state and, per node, each claim's results there.
  for (const Json& c : claims) {
    auto read = ResultsOfClaim(c);
    if (!read.ok()) continue;  // an allocation the API server would not have stored: not charged
    std::vector<Result> rs = *std::move(read);
    view.state_.Add(rs);
    std::map<std::string, std::vector<Result>> by_node;
    for (Result& r : rs) {
      if (r.driver != driver) continue;
      auto it = node_of.find(PoolKey(r.driver, r.pool));
      if (it != node_of.end()) by_node[it->second].push_back(std::move(r));
    }
    for (auto& [node, mine] : by_node) view.claims_on_[node].push_back(std::move(mine));
  }
  return view;
}

int DraView::PositionOf(const std::string& node, const Result& result) const {
  int pos = 0;
  for (const Pool* p : allocator_.NodePools(node)) {
    if (p->driver != driver_) continue;
    for (const Device& d : p->devices) {
      if (p->name == result.pool && d.name == result.device && p->driver == result.driver)
        return pos;
      ++pos;
    }
  }
  return -1;
}

NodeState DraView::NodeStateOf(const std::string& node, const NodeResources& res) const {
  core::NodeInfo info;
  info.name = node;
  info.cpu_milli = res.cpu_milli;
  info.memory_mib = res.memory_mib;
  int index = 0;
  for (const Pool* p : allocator_.NodePools(node)) {
    if (p->driver != driver_) continue;
    for (const Device& d : p->devices) {
      core::DeviceInfo dev;
      dev.index = index++;
      if (auto it = d.attributes.find("uuid");
          it != d.attributes.end() && std::holds_alternative<std::string>(it->second))
        dev.uuid = std::get<std::string>(it->second);
      else
        dev.uuid = p->name + "/" + d.name;
      if (auto it = d.attributes.find("productName");
          it != d.attributes.end() && std::holds_alternative<std::string>(it->second))
        dev.type = std::get<std::string>(it->second);
      dev.count = d.allow_multiple_allocations ? kSharedSlots : 1;
      if (auto it = d.capacity.find("memory"); it != d.capacity.end())
        dev.devmem_mib = it->second.value / kMiB;
      if (auto it = d.capacity.find("cores"); it != d.capacity.end())
        dev.devcore = static_cast<int>(std::min<int64_t>(it->second.value, 100'000));
      info.devices.push_back(std::move(dev));
    }
  }
  NodeState state = NodeState::Make(std::move(info));
  if (auto it = claims_on_.find(node); it != claims_on_.end()) {
    for (const std::vector<Result>& claim : it->second) {
      PodDelta delta;
      for (const Result& r : claim) {
        const int pos = PositionOf(node, r);
        if (pos < 0) continue;  // a device no longer published: nothing to charge
        auto dd = std::find_if(delta.devices.begin(), delta.devices.end(),
                               [pos](const DeviceDelta& x) { return x.device == pos; });
        if (dd == delta.devices.end()) dd = delta.devices.insert(delta.devices.end(), {pos});
        const DeviceDelta charge = ChargeOf(state.info.devices[pos], r);
        dd->slots += charge.slots;
        dd->mem_mib += charge.mem_mib;
        dd->cores += charge.cores;
      }
      if (delta.devices.empty()) continue;
      std::sort(delta.devices.begin(), delta.devices.end(),
                [](const DeviceDelta& a, const DeviceDelta& b) { return a.device < b.device; });
      delta.pod_class = PodClassOf(state, delta);
      state.Apply(delta, +1);
    }
  }
  state.cpu_used = res.cpu_used;
  state.mem_used = res.memory_used;
  return state;
}

// ---------------- the pod ----------------

core::PodRequest DraPodRequest(core::PodRequest pod,
                               const std::vector<std::vector<DeviceRequest>>& claims) {
  for (auto& c : pod.containers) c.devices.clear();
  std::vector<core::DeviceRequest> devices;
  for (const auto& claim : claims)
    for (const DeviceRequest& req : claim) {
      // A prioritized list scores as its first choice (the one the allocator takes while it fits).
      const DeviceRequest& r = req.first_available.empty() ? req : req.first_available.front();
      core::DeviceRequest d;
      d.nums = static_cast<int>(r.count);
      if (auto m = r.capacity.find("memory"); m != r.capacity.end())
        d.memreq_mib = (m->second + kMiB - 1) / kMiB;
      else
        d.mem_percentage = 100;
      auto c = r.capacity.find("cores");
      d.coresreq =
          c != r.capacity.end() ? static_cast<int>(std::min<int64_t>(c->second, 100)) : 100;
      devices.push_back(d);
    }
  if (devices.empty()) return pod;
  // Into the last app container (the simulator's one container), else a container of their own.
  core::ContainerRequest* into = nullptr;
  for (auto it = pod.containers.rbegin(); it != pod.containers.rend(); ++it)
    if (it->kind == core::ContainerKind::kApp) {
      into = &*it;
      break;
    }
  if (into == nullptr) {
    pod.containers.push_back({});
    into = &pod.containers.back();
    into->name = kClaimsContainer;
  }
  into->devices = std::move(devices);
  return pod;
}

bool PlacementFromResults(const DraView& view, const CycleState& cycle, const NodeState& node,
                          const std::vector<Result>& results, Placement* placement) {
  if (node.info.cpu_milli > 0 && cycle.cpu_milli() > node.cpu_free()) return false;
  if (node.info.memory_mib > 0 && cycle.memory_mib() > node.mem_free()) return false;
  const core::PodRequest& pod = cycle.pod();
  placement->Clear();
  placement->containers.resize(pod.containers.size());
  placement->delta.cpu_milli = cycle.cpu_milli();
  placement->delta.memory_mib = cycle.memory_mib();
  const int ci = ClaimsContainer(pod);
  std::vector<DeviceDelta> per_device(node.gpus());
  for (const Result& r : results) {
    const int pos = view.PositionOf(node.info.name, r);
    if (pos < 0 || ci < 0) return false;
    DeviceDelta dd = ChargeOf(node.info.devices[pos], r);
    dd.device = pos;
    placement->containers[ci].push_back(dd);
    DeviceDelta& sum = per_device[pos];
    sum.device = pos;
    sum.slots += dd.slots;
    sum.mem_mib += dd.mem_mib;
    sum.cores += dd.cores;
  }
  for (const DeviceDelta& eff : per_device) {
    if (eff.slots == 0) continue;
    placement->delta.devices.push_back(eff);
    placement->gpu_milli += RequestMilli(node.caps[eff.device], eff.mem_mib, eff.cores);
    placement->gpus += 1;
  }
  placement->delta.pod_class = PodClassOf(node, placement->delta);
  return true;
}

// ---------------- DraPlacer ----------------

StatusOr<std::unique_ptr<DraPlacer>> DraPlacer::Create() {
  HAMI_ASSIGN_OR_RETURN(std::unique_ptr<Profile> profile, MakeDraProfile());
  return std::unique_ptr<DraPlacer>(new DraPlacer(std::move(profile)));
}

StatusOr<std::vector<DraNodeVerdict>> DraPlacer::Evaluate(
    const DraView& view, const core::PodRequest& pod,
    const std::vector<std::vector<DeviceRequest>>& claims,
    const std::vector<std::pair<std::string, NodeResources>>& nodes, Rng& rng) const {
  CycleState cycle(pod, &rng);
  cycle.set_gpu_capacity(view.gpu_capacity());
  HAMI_RETURN_IF_ERROR(profile_->scorer->PreFilter(cycle));
  std::vector<DraNodeVerdict> out;
  out.reserve(nodes.size());
  Placement placement;
  // The claims one after the other, each seeing the ones before it (kube-scheduler's order): one
  // copy of the allocated state per call, the pod's results added on a node and removed after.
  AllocatedState state = view.allocated();
  for (const auto& [name, resources] : nodes) {
    DraNodeVerdict v;
    v.node = name;
    Status failed;
    for (const auto& claim : claims) {
      auto got = view.allocator().Allocate(claim, name, state, rng);
      if (!got.ok()) {
        failed = got.status();
        break;
      }
      state.Add(*got);
      v.results.insert(v.results.end(), got->begin(), got->end());
    }
    state.Remove(v.results);
    if (!failed.ok()) {
      if (absl::IsUnimplemented(failed) || absl::IsInvalidArgument(failed)) return failed;
      v.why = std::string(failed.message());
      out.push_back(std::move(v));
      continue;
    }
    const NodeState node = view.NodeStateOf(name, resources);
    if (!PlacementFromResults(view, cycle, node, v.results, &placement)) {
      v.why = "the node's CPU or memory does not fit the pod";
      v.results.clear();
      out.push_back(std::move(v));
      continue;
    }
    v.fits = true;
    v.key = profile_->scorer->Score(cycle, node, placement);
    v.delta = placement.delta;
    out.push_back(std::move(v));
  }
  return out;
}

void DraPlacer::Learn(const core::PodRequest& pod, const PodDelta& delta) {
  {
    MutexLock l(mu_);
    if (!learned_.insert(pod.uid).second) return;
    if (learned_order_.size() < kMaxLearned) {
      learned_order_.push_back(pod.uid);
    } else {
      learned_.erase(learned_order_[learned_next_]);
      learned_order_[learned_next_] = pod.uid;
      learned_next_ = (learned_next_ + 1) % kMaxLearned;
    }
  }
  for (const auto& plugin : profile_->reserve) plugin->Reserve(pod, delta);
}

std::map<std::string, int> RankScores(const std::vector<DraNodeVerdict>& verdicts) {
  std::vector<int64_t> keys;
  for (const auto& v : verdicts)
    if (v.fits) keys.push_back(v.key);
  std::sort(keys.begin(), keys.end(), std::greater<>());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  std::map<std::string, int> out;
  for (const auto& v : verdicts) {
    if (!v.fits) continue;
    const auto rank =
        std::lower_bound(keys.begin(), keys.end(), v.key, std::greater<>()) - keys.begin();
    out[v.node] = static_cast<int>(std::max<ptrdiff_t>(0, 10 - rank));
  }
  return out;
}

}  // namespace hami::scheduler::dra
