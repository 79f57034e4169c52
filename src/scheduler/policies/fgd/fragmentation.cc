#include "scheduler/policies/fgd/fragmentation.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <unordered_map>

#include "scheduler/framework.h"

namespace hami::scheduler::fgd {

// Per-thread, across decisions: tallies per node for one typical-set membership.
struct TallyCache {
  struct DeviceKind {
    std::string type;
    int64_t devmem = 0;
    int devcore = 0;
    std::vector<int> need;  // per typical shape: per-GPU milli on this device, -1 = not accepted
  };
  struct NodeEntry {
    std::string name;
    std::vector<int> free;
    int64_t cpu = 0, mem = 0, total = 0;
    bool track_cpu = false, track_mem = false;
    std::vector<int> kinds;         // per device, index into TallyCache::kinds
    std::vector<int> fits;          // per shape
    std::vector<int64_t> stranded;  // per shape
  };
  uint64_t membership = 0;
  std::vector<DeviceKind> kinds;
  std::unordered_map<const NodeState*, NodeEntry> nodes;

  void Bind(const TypicalSet& set) {
    if (membership == set.membership) return;
    membership = set.membership;
    kinds.clear();
    nodes.clear();
  }
  int KindOf(const TrackedShapes& shapes, const core::DeviceInfo& dev);
  const NodeEntry& Measure(const TrackedShapes& shapes, const NodeState& node,
                           std::span<const int> free, int64_t cpu_free, int64_t mem_free);
};

namespace {
thread_local TallyCache t_cache;
constexpr size_t kMaxCachedNodes = 1 << 17;
}  // namespace

int TallyCache::KindOf(const TrackedShapes& set, const core::DeviceInfo& dev) {
  for (size_t i = 0; i < kinds.size(); ++i) {
    const auto& k = kinds[i];
    if (k.devmem == dev.devmem_mib && k.devcore == dev.devcore && k.type == dev.type)
      return static_cast<int>(i);
  }
  DeviceKind k;
  k.type = dev.type;
  k.devmem = dev.devmem_mib;
  k.devcore = dev.devcore;
  k.need.reserve(set.shapes.size());
  for (size_t i = 0; i < set.shapes.size(); ++i) {
    const TaskShape& shape = set.shapes[i];
    bool accepted = set.models[i].empty();
    for (const auto& m : set.models[i]) accepted = accepted || TypeMatches(dev.type, m);
    if (!accepted || shape.gpus == 0) {
      k.need.push_back(-1);
      continue;
    }
    int64_t mem = shape.memreq_mib;
    if (mem == 0)
      mem = dev.devmem_mib *
            (shape.mem_percentage > 0 ? std::min(shape.mem_percentage, 100) : 100) / 100;
    // A GPU with 0 free never holds anything, so a need of at least 1 keeps "fits" meaningful.
    k.need.push_back(std::max(1, RequestMilli(dev, mem, shape.coresreq)));
  }
  kinds.push_back(std::move(k));
  return static_cast<int>(kinds.size() - 1);
}

const TallyCache::NodeEntry& TallyCache::Measure(const TrackedShapes& set, const NodeState& node,
                                                 std::span<const int> free, int64_t cpu_free,
                                                 int64_t mem_free) {
  if (nodes.size() > kMaxCachedNodes) nodes.clear();
  NodeEntry& e = nodes[&node];
  if (e.cpu == cpu_free && e.mem == mem_free && e.free.size() == free.size() &&
      std::equal(free.begin(), free.end(), e.free.begin()) && e.name == node.info.name &&
      e.kinds.size() == free.size())
    return e;
  e.name = node.info.name;
  e.cpu = cpu_free;
  e.mem = mem_free;
  e.free.assign(free.begin(), free.end());
  e.track_cpu = node.info.cpu_milli > 0;
  e.track_mem = node.info.memory_mib > 0;
  e.kinds.resize(free.size());
  for (size_t g = 0; g < free.size(); ++g) e.kinds[g] = KindOf(set, node.info.devices[g]);
  const size_t shapes = set.shapes.size();
  e.fits.assign(shapes, 0);
  e.stranded.assign(shapes, 0);
  e.total = 0;
  for (size_t g = 0; g < free.size(); ++g) {
    const int f = free[g];
    e.total += f;
    const int* need = kinds[e.kinds[g]].need.data();
    for (size_t m = 0; m < shapes; ++m) {
      const bool holds = need[m] >= 0 && f >= need[m];
      e.fits[m] += holds;
      e.stranded[m] += holds ? 0 : f;
    }
  }
  return e;
}

FragmentationView::FragmentationView(std::shared_ptr<const TypicalSet> set) : set_(std::move(set)) {
  tracked_ = set_->tracked;
  std::shared_ptr<TrackedShapes> own;
  if (!tracked_) own = std::make_shared<TrackedShapes>();
  for (const auto& t : set_->shapes) {
    weight_.push_back(t.weight_ppm);
    cpu_.push_back(t.shape.cpu_milli);
    mem_.push_back(t.shape.memory_mib);
    gpus_.push_back(t.shape.gpus);
    if (own) {
      index_.push_back(static_cast<int>(own->shapes.size()));
      own->shapes.push_back(t.shape);
      own->models.push_back(t.models);
    } else {
      index_.push_back(t.tracked);
    }
  }
  if (own) tracked_ = std::move(own);
}

int64_t FragmentationView::FragmentationAfter(const NodeState& node, std::span<const int> free,
                                              int64_t cpu_free, int64_t mem_free,
                                              std::span<const FreeChange> changes,
                                              int64_t cpu_after, int64_t mem_after) const {
  TallyCache& cache = t_cache;
  cache.Bind(*set_);
  const TallyCache::NodeEntry& e = cache.Measure(*tracked_, node, free, cpu_free, mem_free);
  int64_t total = e.total;
  for (const auto& c : changes) total += c.free_after - e.free[c.device];
  if (total == 0) return 0;
  const bool cpu_short_any = e.track_cpu;
  const bool mem_short_any = e.track_mem;
  const size_t shapes = weight_.size();
  int64_t frag = 0;
  for (size_t m = 0; m < shapes; ++m) {
    const int t = index_[m];
    int fits = e.fits[t];
    int64_t stranded = e.stranded[t];
    for (const auto& c : changes) {
      const int need = cache.kinds[e.kinds[c.device]].need[t];
      const int before = e.free[c.device];
      const bool held = need >= 0 && before >= need;
      const bool holds = need >= 0 && c.free_after >= need;
      fits += holds - held;
      stranded += (holds ? 0 : c.free_after) - (held ? 0 : before);
    }
    const bool runs = gpus_[m] > 0 && fits >= gpus_[m] && !(cpu_short_any && cpu_after < cpu_[m]) &&
                      !(mem_short_any && mem_after < mem_[m]);
    frag += weight_[m] * (runs ? stranded : total);
  }
  return frag;
}

namespace {
// t[s] = smallest delta (ppm * milli) with 100 * sigmoid(delta / 1e9) >= s, s = 1..99.
struct Thresholds {
  std::array<int64_t, 100> t{};
  Thresholds() {
    for (int s = 1; s < 100; ++s)
      t[s] = static_cast<int64_t>(std::ceil(std::log(s / (100.0 - s)) * 1e9));
  }
};
const Thresholds kThresholds;
}  // namespace

int SigmoidScore(int64_t delta) {
  int lo = 0, hi = 99;  // largest s with t[s] <= delta (0 when none)
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (kThresholds.t[mid] <= delta)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

}  // namespace hami::scheduler::fgd
