#include "scheduler/policies/fgd_balance/fgd_balance.h"

#include <algorithm>

namespace hami::scheduler::fgd_balance {

namespace {
// Sums are halved past this, keeping the ratio; with the CPU clamp below, cpu * milli < 2^61.
constexpr int64_t kMaxSum = int64_t{1} << 30;
constexpr int64_t kMaxCpu = int64_t{1} << 31;  // milli-cores of one node (2 million cores)
constexpr int64_t kPpm = 1'000'000;

// The GPU milli a shape asks, per GPU on a reference device (ShapeOf keeps the request as written):
// a request by memory is exact only relative to a device, so use the core share, which every shape
// carries in percent, and a whole device when neither is given; times its GPU count.
int64_t ShapeMilli(const fgd::TaskShape& s) {
  int64_t per_gpu = s.coresreq > 0 ? std::min<int64_t>(100, s.coresreq) * 10 : 1000;
  if (s.mem_percentage > 0)
    per_gpu = std::max(per_gpu, std::min<int64_t>(100, s.mem_percentage) * 10);
  return per_gpu * s.gpus;
}
}  // namespace

void CpuDemand::Observe(const core::PodRequest& pod) {
  MutexLock lock(mu_);
  AddLocked(pod);
}

void CpuDemand::Observe(const std::string& uid, const core::PodRequest& pod) {
  MutexLock lock(mu_);
  TakeBackLocked(uid);
  const Ratio added = AddLocked(pod);
  if (added.cpu != 0 || added.milli != 0)
    records_[uid] = CpuDemandRecord{added.cpu, added.milli, halvings_};
}

CpuDemand::Ratio CpuDemand::AddLocked(const core::PodRequest& pod) {
  const fgd::TaskShape s = fgd::ShapeOf(pod);
  if (s.gpus <= 0) return {};
  const Ratio added{s.cpu_milli, ShapeMilli(s)};
  sums_.cpu += added.cpu;
  sums_.milli += added.milli;
  while (sums_.cpu > kMaxSum || sums_.milli > kMaxSum) {
    sums_.cpu /= 2;
    sums_.milli /= 2;
    ++halvings_;
  }
  return added;
}

void CpuDemand::SubtractLocked(const CpuDemandRecord& a) {
  // What is left of the addition after the halvings since (exact while there were none).
  const int64_t shift = std::min<int64_t>(halvings_ - a.halvings, 62);
  sums_.cpu = std::max<int64_t>(0, sums_.cpu - (a.cpu >> shift));
  sums_.milli = std::max<int64_t>(0, sums_.milli - (a.milli >> shift));
}

CpuDemand::Ratio CpuDemand::Get() const {
  MutexLock lock(mu_);
  return sums_;
}

void ModelDemand::Observe(const std::string& uid, const core::PodRequest& pod) {
  const fgd::TaskShape s = fgd::ShapeOf(pod);
  MutexLock lock(mu_);
  TakeBackLocked(uid);
  if (s.gpus <= 0) return;
  ModelDemandRecord a{s.models, std::min<int64_t>(ShapeMilli(s), kMaxSum)};
  if (!a.models.empty()) {
    auto it = by_models_.find(a.models);
    if (it == by_models_.end() && by_models_.size() >= kMaxSets)
      a.models.clear();  // counts in total only
    else
      by_models_[a.models] += a.milli;
  }
  total_ += a.milli;
  while (total_ >
         kMaxSum) {  // halve, keeping the shares (records then take back at most what is left)
    total_ /= 2;
    for (auto& [m, v] : by_models_) v /= 2;
  }
  records_[uid] = std::move(a);
}

void ModelDemand::SubtractLocked(const ModelDemandRecord& a) {
  total_ = std::max<int64_t>(0, total_ - a.milli);
  if (a.models.empty()) return;
  auto it = by_models_.find(a.models);
  if (it == by_models_.end()) return;
  it->second -= a.milli;
  if (it->second <= 0) by_models_.erase(it);
}

ModelDemand::Sums ModelDemand::Get() const {
  Sums out;
  MutexLock lock(mu_);
  out.total = total_;
  for (const auto& [models, milli] : by_models_) {
    std::vector<std::string> split;
    size_t start = 0;
    while (start <= models.size()) {
      const size_t bar = std::min(models.find('|', start), models.size());
      if (bar > start) split.push_back(models.substr(start, bar - start));
      start = bar + 1;
    }
    out.constrained.push_back({std::move(split), milli});
  }
  return out;
}

std::vector<std::pair<std::string, int64_t>> ModelPressure(const ModelDemand::Sums& demand,
                                                           const GpuCapacity& capacity) {
  std::vector<std::pair<std::string, int64_t>> out;
  int64_t gpus = 0;
  for (const auto& [type, n] : capacity) gpus += n;
  if (demand.total <= 0 || gpus <= 0 || demand.constrained.empty()) return out;
  auto accepts = [](const std::vector<std::string>& models, const std::string& type) {
    for (const auto& m : models)
      if (TypeMatches(type, m)) return true;
    return false;
  };
  // GPUs of each set's models.
  std::vector<int64_t> set_gpus(demand.constrained.size(), 0);
  for (size_t i = 0; i < demand.constrained.size(); ++i)
    for (const auto& [type, n] : capacity)
      if (accepts(demand.constrained[i].first, type)) set_gpus[i] += n;
  for (const auto& [type, n] : capacity) {
    int64_t p = 0;
    for (size_t i = 0; i < demand.constrained.size(); ++i) {
      if (set_gpus[i] <= 0 || !accepts(demand.constrained[i].first, type)) continue;
      const int64_t share =
          demand.constrained[i].second * kPpm / demand.total;  // ppm of the demand
      p += share * gpus / set_gpus[i];
      if (p >= kPpm) break;
    }
    if (p > 0) out.push_back({type, std::min(p, kPpm)});
  }
  return out;
}

int64_t StrandedMilli(int64_t gpu_free_milli, int64_t cpu_free, const CpuDemand::Ratio& ratio) {
  if (ratio.cpu <= 0 || ratio.milli <= 0) return 0;
  const int64_t servable = std::clamp<int64_t>(cpu_free, 0, kMaxCpu) * ratio.milli / ratio.cpu;
  return std::max<int64_t>(0, gpu_free_milli - servable);
}

namespace {
// Per-cycle: the ratio this decision uses (one snapshot, so every node is measured alike).
struct BalanceCycle {
  CpuDemand::Ratio ratio;
  std::vector<std::pair<std::string, int64_t>>
      pressure;  // ppm per device type; empty: none anywhere
};

// What a placement costs in model pressure (ppm * milli).
int64_t PressureCost(const BalanceCycle& bc, const NodeState& node, const Placement& placement) {
  if (bc.pressure.empty()) return 0;
  int64_t cost = 0;
  for (const DeviceDelta& d : placement.delta.devices) {
    const core::DeviceInfo& dev = node.info.devices[d.device];
    for (const auto& [type, p] : bc.pressure)
      if (type == dev.type) {
        cost += p * RequestMilli(dev, d.mem_mib, d.cores);
        break;
      }
  }
  return cost;
}
}  // namespace

Status BalanceScorer::PreFilter(CycleState& cycle) const {
  HAMI_RETURN_IF_ERROR(fgd::PrepareCycle(*shapes_, cycle));
  if (cycle.Read<BalanceCycle>(this) == nullptr) {
    BalanceCycle bc{demand_->Get(), {}};
    if (models_ && cycle.has_devices() && cycle.gpu_capacity() != nullptr)
      bc.pressure = ModelPressure(models_->Get(), *cycle.gpu_capacity());
    cycle.Write(this, std::move(bc));
  }
  return OkStatus();
}

int64_t BalanceScorer::Combine(int64_t fgd_delta, int64_t stranded_increase,
                               int64_t pressure_cost) {
  // Stranded milli weigh like FGD's fragmentation with weight one (1e6 ppm).
  const int64_t level = fgd::SigmoidScore(fgd_delta - stranded_increase * kPpm - pressure_cost);
  // Inside a level, the smaller increase wins; |increase| <= free milli of one node, far below
  // 2^31.
  const int64_t tie =
      std::clamp<int64_t>((int64_t{1} << 31) - stranded_increase, 0, (int64_t{1} << 32) - 1);
  return (level << 32) + tie;
}

int64_t BalanceScorer::Score(const CycleState& cycle, const NodeState& node,
                             const Placement& placement) const {
  const int64_t delta =
      fgd::FragmentationDelta(fgd::CycleOf(*shapes_, cycle).view, cycle, node, placement);
  int64_t increase = 0;
  const BalanceCycle& bc = *cycle.Read<BalanceCycle>(this);
  if (node.info.cpu_milli > 0) {  // nodes that do not report CPU strand nothing
    const CpuDemand::Ratio& r = bc.ratio;
    const int64_t cpu = node.cpu_free(), gpu = node.free_milli_total;
    increase = StrandedMilli(gpu - placement.gpu_milli, cpu - placement.delta.cpu_milli, r) -
               StrandedMilli(gpu, cpu, r);
  }
  return Combine(delta, increase, PressureCost(bc, node, placement));
}

int64_t BalanceScorer::UpperBound(const CycleState& cycle, const NodeSummary& node) const {
  const int64_t delta =
      fgd::FragmentationDeltaUpperBound(fgd::CycleOf(*shapes_, cycle), cycle, node);
  if (delta == kNoBound) return kNoBound;
  // stranded(after) >= 0, so the increase is at least -stranded(before) (0 for nodes without CPU).
  const BalanceCycle& bc = *cycle.Read<BalanceCycle>(this);
  const int64_t before = StrandedMilli(node.free_milli_total, node.cpu_free, bc.ratio);
  // The pressure cost is at least the model's pressure times what the request takes on its GPUs
  // (a node of one kind; FragmentationDeltaUpperBound has a bound only for one request). Without
  // it, flexible pods would scan every node of a pressured model.
  int64_t cost = 0;
  const core::DeviceRequest* r = cycle.single_request();
  if (!bc.pressure.empty() && r != nullptr && r->nums > 0 && node.kind_device != nullptr) {
    const core::DeviceInfo& dev = *node.kind_device;
    for (const auto& [type, p] : bc.pressure)
      if (type == dev.type) {
        // Memory as a share of the device resolves against the node's capacities, which may differ
        // from the registration: only MiB asked for count here.
        cost = p * r->nums *
               RequestMilli(dev, std::max<int64_t>(r->memreq_mib, 0), std::max(r->coresreq, 0));
        break;
      }
  }
  return Combine(delta, -before, cost);
}

std::unique_ptr<Profile> MakeFgdBalanceProfile(std::string name) {
  auto shapes = std::make_shared<fgd::ShapeModel>();
  auto p = std::make_unique<Profile>();
  p->name = std::move(name);
  p->picker = std::make_unique<fgd::FgdPicker>(shapes);
  auto demand = std::make_shared<CpuDemand>();
  auto models = std::make_shared<ModelDemand>();
  p->scorer = std::make_unique<BalanceScorer>(shapes, demand, models);
  p->reserve.push_back(std::make_shared<ObservingPlugin<fgd::ShapeModel>>(shapes));
  p->reserve.push_back(std::make_shared<ObservingPlugin<CpuDemand>>(std::move(demand)));
  p->reserve.push_back(std::make_shared<ObservingPlugin<ModelDemand>>(std::move(models)));
  // Raw scores are ordered keys (level, tie-break); the highest raw wins. Min-max only shapes the
  // explained 0..100 scores.
  p->normalize = Normalize::kMinMax;
  return p;
}

}  // namespace hami::scheduler::fgd_balance

namespace hami::scheduler::policies {

StatusOr<std::unique_ptr<Profile>> MakeFgdBalance(const PolicyConfig&) {
  return fgd_balance::MakeFgdBalanceProfile("fgd-balance");
}

}  // namespace hami::scheduler::policies
