#include "scheduler/policies/fgd/shape_model.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>

#include "core/pod_request.h"

namespace hami::scheduler::fgd {

size_t TaskShapeHash::operator()(const TaskShape& s) const {
  size_t h = std::hash<std::string>()(s.models);
  auto mix = [&h](int64_t v) {
    h ^= std::hash<int64_t>()(v) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  };
  mix(s.cpu_milli);
  mix(s.memory_mib);
  mix(s.gpus);
  mix(s.memreq_mib);
  mix(s.mem_percentage);
  mix(s.coresreq);
  return h;
}

namespace {
std::vector<std::string> SplitModels(const std::string& models) {
  std::vector<std::string> out;
  size_t start = 0;
  while (!models.empty() && start <= models.size()) {
    size_t bar = models.find('|', start);
    if (bar == std::string::npos) bar = models.size();
    out.push_back(models.substr(start, bar - start));
    start = bar + 1;
  }
  return out;
}
}  // namespace

TaskShape ShapeOf(const core::PodRequest& pod) {
  TaskShape s;
  for (const auto& c : pod.containers) {
    for (const auto& d : c.devices) {
      if (d.nums <= 0) continue;
      if (c.kind != core::ContainerKind::kInit) s.gpus += d.nums;
      s.memreq_mib = std::max(s.memreq_mib, d.memreq_mib);
      s.mem_percentage = std::max(s.mem_percentage, d.mem_percentage);
      s.coresreq = std::max(s.coresreq, d.coresreq);
    }
  }
  const core::CpuMemory eff = core::EffectivePodRequest(pod);
  s.cpu_milli = eff.cpu_milli;
  s.memory_mib = eff.memory_mib;
  if (s.gpus == 0 && (s.memreq_mib > 0 || s.mem_percentage > 0 || s.coresreq > 0)) s.gpus = 1;
  if (s.memreq_mib > 0) s.mem_percentage = 0;
  for (const auto& t : pod.selectors.use_types) {
    if (!s.models.empty()) s.models += '|';
    s.models += t;
  }
  return s;
}

ShapeModel::ShapeModel(ShapeModelOptions options) : options_(options) {
  if (options_.half_life > 0) growth_ = std::exp2(1.0 / options_.half_life);
  snapshot_ = std::make_shared<TypicalSet>();
}

void ShapeModel::Observe(const core::PodRequest& pod) {
  ObserveShape(ShapeOf(pod));
}

void ShapeModel::ObserveShape(const TaskShape& shape) {
  MutexLock lock(mu_);
  AddLocked(shape);
  Rebuild();
}

void ShapeModel::Observe(const std::string& uid, const core::PodRequest& pod) {
  TaskShape shape = ShapeOf(pod);
  MutexLock lock(mu_);
  if (auto it = records_.find(uid); it != records_.end()) {
    SubtractLocked(it->second.shape, it->second.weight, it->second.log_scale);
    records_.erase(it);
  }
  const double w = AddLocked(shape);
  records_[uid] = Record{std::move(shape), w, log_scale_};
  Rebuild();
}

void ShapeModel::Unobserve(const std::string& uid) {
  MutexLock lock(mu_);
  auto it = records_.find(uid);
  if (it == records_.end()) return;
  SubtractLocked(it->second.shape, it->second.weight, it->second.log_scale);
  records_.erase(it);
  Rebuild();
}

void ShapeModel::Forget(const std::string& uid) {
  MutexLock lock(mu_);
  records_.erase(uid);
}

size_t ShapeModel::recorded() const {
  MutexLock lock(mu_);
  return records_.size();
}

double ShapeModel::AddLocked(const TaskShape& shape) {
  auto [it, inserted] = weights_.try_emplace(shape);
  if (inserted) {
    it->second.id = next_id_++;
    tracked_dirty_ = true;
  }
  const double added = options_.demand_weighted ? increment_ * std::max(1, shape.gpus) : increment_;
  it->second.weight += added;
  ++it->second.count;
  ++observed_;
  increment_ *= growth_;
  if (increment_ > 1e100) {  // rescale before the doubles run out of range
    for (auto& [k, t] : weights_) t.weight /= increment_;
    log_scale_ += std::log2(increment_);
    increment_ = 1.0;
  }
  if (weights_.size() > options_.max_tracked) {
    auto lightest = std::min_element(
        weights_.begin(), weights_.end(),
        [](const auto& a, const auto& b) { return a.second.weight < b.second.weight; });
    weights_.erase(lightest);
    tracked_dirty_ = true;
  }
  return added;
}

void ShapeModel::SubtractLocked(const TaskShape& shape, double weight, double log_scale) {
  auto it = weights_.find(shape);
  if (it == weights_.end()) return;  // forgotten as the lightest meanwhile
  --observed_;
  if (--it->second.count <= 0) {
    weights_.erase(it);
    tracked_dirty_ = true;
    return;
  }
  it->second.weight = std::max(0.0, it->second.weight - weight * std::exp2(log_scale - log_scale_));
}

void ShapeModel::Rebuild() {
  struct Entry {
    const TaskShape* shape;
    double weight;
    uint64_t id;
  };
  std::vector<Entry> order;
  order.reserve(weights_.size());
  double total = 0;
  for (const auto& [k, t] : weights_) {
    order.push_back({&k, t.weight, t.id});
    total += t.weight;
  }
  // Heaviest first; equal weights by first-seen order so snapshots are reproducible.
  std::sort(order.begin(), order.end(), [](const Entry& a, const Entry& b) {
    return a.weight != b.weight ? a.weight > b.weight : a.id < b.id;
  });
  size_t keep = 0;
  double covered = 0;
  const double goal = total * options_.coverage_pct / 100.0;
  while (keep < order.size() && keep < options_.max_typical) {
    covered += order[keep].weight;
    ++keep;
    if (covered >= goal) break;
  }
  order.resize(keep);
  // Publish in first-seen order; the tracked list is rebuilt only when a shape was added or
  // forgotten.
  std::sort(order.begin(), order.end(), [](const Entry& a, const Entry& b) { return a.id < b.id; });
  if (!tracked_ || tracked_dirty_) {
    tracked_dirty_ = false;
    std::vector<Entry> all;
    all.reserve(weights_.size());
    for (const auto& [k, t] : weights_) all.push_back({&k, t.weight, t.id});
    std::sort(all.begin(), all.end(), [](const Entry& a, const Entry& b) { return a.id < b.id; });
    auto tracked = std::make_shared<TrackedShapes>();
    tracked_ids_.clear();
    for (const auto& e : all) {
      tracked->shapes.push_back(*e.shape);
      tracked->models.push_back(SplitModels(e.shape->models));
      tracked_ids_.push_back(e.id);
    }
    tracked_ = std::move(tracked);
    // Process-wide unique, so caches keyed on it never confuse two models.
    static std::atomic<uint64_t> next_membership{0};
    membership_ = next_membership.fetch_add(1) + 1;
  }

  auto set = std::make_shared<TypicalSet>();
  set->version = ++version_;
  set->membership = membership_;
  set->tracked = tracked_;
  set->observed = observed_;
  set->shapes.reserve(order.size());
  int64_t sum = 0;
  for (const auto& e : order) {
    TypicalShape t;
    t.shape = *e.shape;
    t.tracked = static_cast<int>(std::lower_bound(tracked_ids_.begin(), tracked_ids_.end(), e.id) -
                                 tracked_ids_.begin());
    t.models = tracked_->models[t.tracked];
    t.weight_ppm = covered > 0 ? static_cast<int64_t>(std::floor(e.weight / covered * 1e6)) : 0;
    sum += t.weight_ppm;
    set->shapes.push_back(std::move(t));
  }
  // Hand the rounding remainder out one ppm at a time so the weights sum to exactly 1'000'000.
  for (size_t i = 0; covered > 0 && sum < 1'000'000 && !set->shapes.empty();
       i = (i + 1) % set->shapes.size(), ++sum)
    set->shapes[i].weight_ppm++;
  snapshot_ = std::move(set);
}

std::shared_ptr<const TypicalSet> ShapeModel::Snapshot() const {
  MutexLock lock(mu_);
  return snapshot_;
}

}  // namespace hami::scheduler::fgd
