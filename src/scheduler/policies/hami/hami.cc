#include "scheduler/policies/hami/hami.h"

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

namespace hami::scheduler::policies {

namespace {

enum class GpuKey { kBinpack, kSpread, kNuma };

// Upstream's GPU policy. A single value (binpack, spread, mutex, topology-aware) orders devices by
// score, then NUMA node; a chain (a comma list, or bare "numa") orders them by its binpack / spread
// / numa keys in the order written, then device index. mutex and topology-aware are filters and
// pickers, never sort keys. In every mode the preferred device is the one upstream's ascending sort
// puts last (it takes devices from the end): a single value on equal keys takes the highest NUMA
// node, then the device registered last; a chain on equal keys takes the highest device index
// (upstream's lessByChain ends on Index), then the device registered last.
struct GpuPolicy {
  bool chain = false;
  bool binpack = false;      // single value: binpack (else spread order)
  std::vector<GpuKey> keys;  // chain: its sort keys, first occurrence of each, in order
  bool mutex = false;
  bool topology = false;
  core::ScoringWeights weights;
};

std::string Trim(const std::string& s) {
  auto b = s.find_first_not_of(" \t");
  auto e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

StatusOr<GpuPolicy> ParseGpuPolicy(const std::string& text) {
  GpuPolicy p;
  std::stringstream ss(text);
  std::string item;
  int items = 0;
  auto add_key = [&](GpuKey k) {
    if (std::find(p.keys.begin(), p.keys.end(), k) == p.keys.end()) p.keys.push_back(k);
  };
  while (std::getline(ss, item, ',')) {
    item = Trim(item);
    ++items;
    if (item == "binpack")
      add_key(GpuKey::kBinpack);
    else if (item == "spread")
      add_key(GpuKey::kSpread);
    else if (item == "mutex")
      p.mutex = true;
    else if (item == "numa")
      add_key(GpuKey::kNuma);
    else if (item == "topology-aware")
      p.topology = true;
    else
      return InvalidArgument(
          "gpu scheduler policy '", text, "': unknown key '", item,
          "' (want binpack, spread, mutex, numa, topology-aware or a comma chain)");
  }
  if (items == 0) return InvalidArgument("gpu scheduler policy is empty");
  p.chain = text.find(',') != std::string::npos || Trim(text) == "numa";
  if (p.chain && p.keys.empty()) p.keys.push_back(GpuKey::kSpread);  // upstream's fallback
  p.binpack = !p.chain && !p.keys.empty() && p.keys[0] == GpuKey::kBinpack;
  return p;
}

// Upstream's per-device score with the pod's own request counted (per mille, weighted).
int64_t DeviceScore(const PickContext& ctx, int d, const core::ScoringWeights& w) {
  const auto& dev = ctx.node.caps[d];
  const auto& u = ctx.usage[d];
  int64_t s = 0;
  if (dev.count > 0) s += int64_t{w.slot} * 1000 * (u.used + 1) / dev.count;
  if (dev.devcore > 0)
    s += int64_t{w.core} * 1000 * (u.usedcores + ctx.request.coresreq) / dev.devcore;
  if (dev.devmem_mib > 0)
    s += int64_t{w.memory} * 1000 * (u.usedmem_mib + ctx.MemFor(d)) / dev.devmem_mib;
  return s;
}

class HamiPicker final : public GpuPicker {
 public:
  explicit HamiPicker(std::string default_policy) : default_(std::move(default_policy)) {
    vetoes_ = true;
  }

  Status PreFilter(CycleState& cycle) const override {
    const auto& pod = cycle.pod();
    HAMI_ASSIGN_OR_RETURN(GpuPolicy p,
                          ParseGpuPolicy(pod.gpu_policy.empty() ? default_ : pod.gpu_policy));
    if (pod.has_weights) {
      const auto& w = pod.weights;
      if (w.slot < 0 || w.core < 0 || w.memory < 0 || (w.slot == 0 && w.core == 0 && w.memory == 0))
        return InvalidArgument(
            "hami.io/device-scoring-weights: values must be >= 0 and at least one > 0");
      p.weights = w;
    }
    cycle.Write(this, std::move(p));
    return OkStatus();
  }

  // mutex: only idle devices, and a device that is part of a card (Vastai's dies) only when no
  // other part of that card is in use (upstream: the card is exclusive).
  Reason Admit(const PickContext& ctx, int d) const override {
    const GpuPolicy* p = ctx.cycle.Read<GpuPolicy>(this);
    if (p == nullptr || !p->mutex) return Reason::kCount;
    if (ctx.usage[d].used > 0) return Reason::kExclusiveDeviceAllocateConflict;
    const auto& devices = ctx.node.info.devices;
    const std::string& card = devices[d].card;
    if (card.empty()) return Reason::kCount;
    for (size_t e = 0; e < devices.size(); ++e)
      if (ctx.usage[e].used > 0 && devices[e].card == card &&
          devices[e].vendor == devices[d].vendor)
        return Reason::kExclusiveDeviceAllocateConflict;
    return Reason::kCount;
  }

  // numa-bind: upstream walks its sorted list from the end and keeps the first NUMA node that
  // holds the request, so the node tried first is the one its order puts last.
  bool HighNumaFirst(const CycleState& cycle) const override {
    const GpuPolicy& p = *cycle.Read<GpuPolicy>(this);
    if (p.chain) return true;  // numa-bind makes numa the chain's first key: highest first
    return p.mutex || !p.binpack;
  }

  void Pick(const PickContext& ctx, std::span<const int> candidates,
            std::vector<int>* out) const override {
    const GpuPolicy& p = *ctx.cycle.Read<GpuPolicy>(this);
    const int nums = ctx.request.nums;
    // Per-thread buffers: Pick runs for every node of every decision.
    thread_local std::vector<int> order;
    thread_local std::vector<int64_t> score;
    order.assign(candidates.begin(), candidates.end());
    score.resize(ctx.node.gpus());
    for (int d : order) score[d] = DeviceScore(ctx, d, p.weights);
    const auto& caps = ctx.node.caps;
    // True when device a is preferred to b (upstream sorts ascending and takes from the end, so
    // "preferred" is "sorts later"). Candidates of one numa-bind group share their NUMA node.
    auto better = [&](int a, int b) {
      if (p.chain) {
        for (GpuKey k : p.keys) {
          switch (k) {
            case GpuKey::kBinpack:
              if (score[a] != score[b]) return score[a] > score[b];
              break;
            case GpuKey::kSpread:
              if (score[a] != score[b]) return score[a] < score[b];
              break;
            case GpuKey::kNuma:
              if (caps[a].numa != caps[b].numa) return caps[a].numa > caps[b].numa;
              break;
          }
        }
        // Nodes register out of index order (an H20 node registers 6, 0, 1, ...): the index, not
        // the position, ends upstream's chain.
        const int ia = ctx.node.info.devices[a].index, ib = ctx.node.info.devices[b].index;
        if (ia != ib) return ia > ib;
        return a > b;
      }
      if (p.mutex) {
        // Single "mutex": busy cards first in upstream's order, so the idlest is preferred.
        if (ctx.usage[a].used != ctx.usage[b].used) return ctx.usage[a].used < ctx.usage[b].used;
      } else if (score[a] != score[b]) {
        return p.binpack ? score[a] > score[b] : score[a] < score[b];
      }
      if (caps[a].numa != caps[b].numa) return caps[a].numa > caps[b].numa;
      return a > b;
    };
    if (p.topology) {
      // Upstream collects every fitting device in its order, then searches them in that order.
      std::sort(order.begin(), order.end(), better);
      PickTopology(ctx, order, nums, out);
      return;
    }
    if (nums == 1 && !order.empty()) {
      out->push_back(*std::min_element(order.begin(), order.end(), better));
      return;
    }
    std::sort(order.begin(), order.end(), better);
    for (int i = 0; i < nums && i < static_cast<int>(order.size()); ++i) out->push_back(order[i]);
  }

 private:
  static int Link(const NodeState& node, int a, int b) {
    const auto& ls = node.info.link_scores;
    auto ia = ls.find(node.info.devices[a].uuid);
    if (ia == ls.end()) return 0;
    auto ib = ia->second.find(node.info.devices[b].uuid);
    return ib == ia->second.end() ? 0 : ib->second;
  }

  // Upstream topology-aware: one GPU -> the one least connected to the other candidates (keeps
  // well-connected groups free); k GPUs -> the combination with the largest sum of pair scores.
  static void PickTopology(const PickContext& ctx, std::span<const int> cand, int nums,
                           std::vector<int>* out) {
    const int n = static_cast<int>(cand.size());
    if (n < nums) return;
    // Pair scores may be negative: the first candidate (in preference order) always counts, and
    // later ones replace it only when strictly better, as upstream's search does.
    if (nums == 1) {
      int best = -1;
      int64_t best_sum = 0;
      for (int i = 0; i < n; ++i) {
        int64_t sum = 0;
        for (int j = 0; j < n; ++j)
          if (j != i) sum += Link(ctx.node, cand[i], cand[j]);
        if (best < 0 || sum < best_sum) best = i, best_sum = sum;
      }
      out->push_back(cand[best]);
      return;
    }
    // Enumerate C(n, k) in lexicographic order (n is the device count of one node, small).
    std::vector<int> idx(nums), best_idx;
    for (int i = 0; i < nums; ++i) idx[i] = i;
    int64_t best_sum = 0;
    while (true) {
      int64_t sum = 0;
      for (int i = 0; i < nums; ++i)
        for (int j = i + 1; j < nums; ++j) sum += Link(ctx.node, cand[idx[i]], cand[idx[j]]);
      if (best_idx.empty() || sum > best_sum) best_sum = sum, best_idx = idx;
      int i = nums - 1;
      while (i >= 0 && idx[i] == n - nums + i) --i;
      if (i < 0) break;
      ++idx[i];
      for (int j = i + 1; j < nums; ++j) idx[j] = idx[j - 1] + 1;
    }
    for (int i : best_idx) out->push_back(cand[i]);
  }

  std::string default_;
};

enum class NodeMode { kBinpack, kSpread };

// Utilisation 0..100 from the node's summed usage: the mean of the slot, core and memory fractions.
int64_t Utilization(int64_t used, int64_t cores, int64_t mem, int64_t total_count,
                    int64_t total_devcore, int64_t total_devmem) {
  int64_t perm = 0;
  if (total_count > 0) perm += 1000 * used / total_count;
  if (total_devcore > 0) perm += 1000 * cores / total_devcore;
  if (total_devmem > 0) perm += 1000 * mem / total_devmem;
  return perm / 30;
}

// Node utilisation after placing the pod, 0..100: the mean of the slot, core and memory fractions
// over all devices of the node (upstream's NodeScore / 30, pod counted).
int64_t NodeUtilization(const NodeState& node, const Placement& pl) {
  int64_t used = node.sum_used, cores = node.sum_usedcores, mem = node.sum_usedmem;
  for (const auto& d : pl.delta.devices) {
    used += d.slots;
    cores += d.cores;
    mem += d.mem_mib;
  }
  return Utilization(used, cores, mem, node.total_count, node.total_devcore, node.total_devmem);
}

// Bounds of the utilisation after placing the pod on a node with summary `n` (Utilization is
// monotone in each sum). Upper: every device request of every container adds its full share (the
// effective usage is at most that); memory of a share resolved on the largest device. Lower: a pod
// with one request adds exactly nums x (slot, cores, memory on the smallest device); otherwise
// nothing.
int64_t MemOf(const core::DeviceRequest& r, int64_t devmem) {
  if (r.memreq_mib > 0) return r.memreq_mib;
  if (r.mem_percentage > 0) return devmem * std::min(r.mem_percentage, 100) / 100;
  return devmem;
}
int64_t UtilizationUpper(const CycleState& cycle, const NodeSummary& n) {
  int64_t used = 0, cores = 0, mem = 0;
  for (const auto& c : cycle.pod().containers)
    for (const auto& r : c.devices) {
      if (r.nums <= 0) continue;
      used += r.nums;
      cores += int64_t{r.nums} * std::max(r.coresreq, 0);
      mem += r.nums * std::max<int64_t>(MemOf(r, n.max_devmem), 0);
    }
  return Utilization(n.sum_used + used, n.sum_usedcores + cores, n.sum_usedmem + mem, n.total_count,
                     n.total_devcore, n.total_devmem);
}
int64_t UtilizationLower(const CycleState& cycle, const NodeSummary& n) {
  if (const core::DeviceRequest* r = cycle.single_request(); r && r->coresreq >= 0) {
    return Utilization(n.sum_used + r->nums, n.sum_usedcores + int64_t{r->nums} * r->coresreq,
                       n.sum_usedmem + r->nums * std::max<int64_t>(MemOf(*r, n.min_devmem), 0),
                       n.total_count, n.total_devcore, n.total_devmem);
  }
  return Utilization(n.sum_used, n.sum_usedcores, n.sum_usedmem, n.total_count, n.total_devcore,
                     n.total_devmem);
}

class HamiNodeScorer final : public NodeScorer {
 public:
  explicit HamiNodeScorer(std::string default_policy) : default_(std::move(default_policy)) {
    bounded_ = true;
  }

  Status PreFilter(CycleState& cycle) const override {
    const std::string& p = cycle.pod().node_policy.empty() ? default_ : cycle.pod().node_policy;
    std::string t = Trim(p);
    if (t == "binpack")
      cycle.Write(this, NodeMode::kBinpack);
    else if (t == "spread")
      cycle.Write(this, NodeMode::kSpread);
    else
      return InvalidArgument("node scheduler policy '", p, "': want binpack or spread");
    return OkStatus();
  }

  int64_t Score(const CycleState& cycle, const NodeState& node,
                const Placement& pl) const override {
    const int64_t util = NodeUtilization(node, pl);
    return *cycle.Read<NodeMode>(this) == NodeMode::kBinpack ? util : 100 - util;
  }

  int64_t UpperBound(const CycleState& cycle, const NodeSummary& node) const override {
    return *cycle.Read<NodeMode>(this) == NodeMode::kBinpack ? UtilizationUpper(cycle, node)
                                                             : 100 - UtilizationLower(cycle, node);
  }

 private:
  std::string default_;
};

StatusOr<std::unique_ptr<Profile>> Make(const char* name, const std::string& node_policy,
                                        const std::string& gpu_policy) {
  // Validate the configured defaults at start-up, not on the first pod.
  HAMI_RETURN_IF_ERROR(ParseGpuPolicy(gpu_policy).status());
  if (node_policy != "binpack" && node_policy != "spread")
    return InvalidArgument("node scheduler policy '", node_policy, "': want binpack or spread");
  auto p = std::make_unique<Profile>();
  p->name = name;
  p->picker = std::make_unique<HamiPicker>(gpu_policy);
  p->scorer = std::make_unique<HamiNodeScorer>(node_policy);
  p->normalize = Normalize::kClamp;
  return p;
}

}  // namespace

StatusOr<std::unique_ptr<Profile>> MakeHami(const PolicyConfig& config) {
  return Make("hami", config.node_policy, config.gpu_policy);
}
StatusOr<std::unique_ptr<Profile>> MakeHamiBinpack(const PolicyConfig&) {
  return Make("hami-binpack", "binpack", "binpack");
}
StatusOr<std::unique_ptr<Profile>> MakeHamiSpread(const PolicyConfig&) {
  return Make("hami-spread", "spread", "spread");
}

}  // namespace hami::scheduler::policies
