#include "scheduler/policies/fgd/fgd_common.h"

#include <algorithm>
#include <limits>

namespace hami::scheduler::fgd {

Status PrepareCycle(const ShapeModel& model, CycleState& cycle) {
  if (cycle.Read<FgdCycle>(&model) != nullptr) return OkStatus();
  cycle.Write(&model, FgdCycle(model.Snapshot()));
  return OkStatus();
}

const FgdCycle& CycleOf(const ShapeModel& model, const CycleState& cycle) {
  const FgdCycle* c = cycle.Read<FgdCycle>(&model);
  // PreFilter always runs before Pick/Score in a cycle (framework contract).
  return *c;
}

void FgdPicker::Pick(const PickContext& ctx, std::span<const int> candidates,
                     std::vector<int>* out) const {
  const FgdCycle& fc = CycleOf(*model_, ctx.cycle);
  const FragmentationView& view = fc.view;
  const NodeState& node = ctx.node;
  const int n = node.gpus();
  // Free milli under the usage this container sees (earlier containers of the pod included).
  thread_local std::vector<int> free;
  thread_local std::vector<FreeChange> changes;
  free.resize(n);
  for (int d = 0; d < n; ++d) free[d] = ctx.FreeMilliOf(d);
  changes.clear();
  const int64_t cpu_free = node.cpu_free(), mem_free = node.mem_free();
  const int64_t cpu_after = cpu_free - ctx.cycle.cpu_milli();
  const int64_t mem_after = mem_free - ctx.cycle.memory_mib();
  auto free_after = [&](int d) {
    core::DeviceUsage u = ctx.usage[d];
    u.used += 1;
    u.usedmem_mib += ctx.MemFor(d);
    u.usedcores += ctx.request.coresreq;
    return FreeMilli(node.info.devices[d], u);
  };

  // Devices already evaluated in this round by what F depends on: a later one equal in all of these
  // has the same F, so it can never be strictly better (ties go to the lower index).
  struct Seen {
    int free, after;
    const DeviceCaps* caps;
    const std::string* type;
  };
  thread_local std::vector<Seen> seen;
  std::vector<char> taken(candidates.size(), 0);
  for (int k = 0; k < ctx.request.nums; ++k) {
    int64_t best = std::numeric_limits<int64_t>::max();
    int best_i = -1, best_after = 0;
    int last_free = -1;
    const std::string* last_type = nullptr;
    seen.clear();
    for (size_t i = 0; i < candidates.size(); ++i) {
      if (taken[i]) continue;
      const int d = candidates[i];
      const auto& dev = node.info.devices[d];
      // Candidates with the same free milli on the same kind of device are interchangeable: the
      // lowest index stands for them.
      if (free[d] == last_free && last_type && *last_type == dev.type) continue;
      last_free = free[d];
      last_type = &dev.type;
      const int after = free_after(d);
      const DeviceCaps& caps = node.caps[d];
      bool again = false;
      for (const Seen& v : seen)
        again = again ||
                (v.free == free[d] && v.after == after && v.caps->devmem_mib == caps.devmem_mib &&
                 v.caps->devcore == caps.devcore && *v.type == dev.type);
      if (again) continue;
      seen.push_back({free[d], after, &caps, &dev.type});
      changes.push_back({d, after});
      const int64_t f =
          view.FragmentationAfter(node, free, cpu_free, mem_free, changes, cpu_after, mem_after);
      changes.pop_back();
      if (f < best) {
        best = f;
        best_i = static_cast<int>(i);
        best_after = after;
      }
    }
    if (best_i < 0) return;
    taken[best_i] = 1;
    const int d = candidates[best_i];
    out->push_back(d);
    changes.push_back({d, best_after});
    if (ctx.request.nums == 1 && ctx.usage.data() == node.usage.data())
      fc.last = {&node, d, best_after, node.free_milli_total, cpu_after, mem_after, best};
  }
  // Keep the device order stable for the annotation (ascending index).
  std::sort(out->end() - std::min<int>(ctx.request.nums, static_cast<int>(out->size())),
            out->end());
}

namespace {
int64_t Delta(const FragmentationView& view, const FgdCycle::LastPick* last, const NodeState& node,
              const Placement& placement);
}  // namespace

int64_t FragmentationDelta(const FragmentationView& view, const CycleState& cycle,
                           const NodeState& node, const Placement& placement) {
  (void)cycle;
  return Delta(view, nullptr, node, placement);
}

int64_t FgdScorer::Score(const CycleState& cycle, const NodeState& node,
                         const Placement& placement) const {
  const FgdCycle& fc = CycleOf(*model_, cycle);
  return SigmoidScore(Delta(fc.view, &fc.last, node, placement));
}

namespace {
int64_t Delta(const FragmentationView& view, const FgdCycle::LastPick* last, const NodeState& node,
              const Placement& placement) {
  thread_local std::vector<FreeChange> changes;
  changes.clear();
  for (const auto& d : placement.delta.devices) {
    core::DeviceUsage u = node.usage[d.device];
    u.used += d.slots;
    u.usedmem_mib += d.mem_mib;
    u.usedcores += d.cores;
    changes.push_back({d.device, FreeMilli(node.info.devices[d.device], u)});
  }
  const int64_t cpu = node.cpu_free(), mem = node.mem_free();
  const int64_t cpu_after = cpu - placement.delta.cpu_milli,
                mem_after = mem - placement.delta.memory_mib;
  const int64_t before = view.Fragmentation(node, node.free_milli, cpu, mem);
  // The picker's evaluation of exactly this change (same node state, GPU, free after, CPU, memory).
  if (last && last->node == &node && last->free_total == node.free_milli_total &&
      changes.size() == 1 && changes[0].device == last->device &&
      changes[0].free_after == last->free_after && cpu_after == last->cpu_after &&
      mem_after == last->mem_after)
    return before - last->fragmentation;
  const int64_t after =
      view.FragmentationAfter(node, node.free_milli, cpu, mem, changes, cpu_after, mem_after);
  return before - after;
}
}  // namespace

void WeightAbove::Build(std::vector<std::pair<int64_t, int64_t>> vw) {
  std::sort(vw.begin(), vw.end());
  values.resize(vw.size());
  suffix.assign(vw.size() + 1, 0);
  for (size_t i = vw.size(); i-- > 0;) {
    values[i] = vw[i].first;
    suffix[i] = suffix[i + 1] + vw[i].second;
  }
}

int64_t WeightAbove::Above(int64_t x) const {
  if (values.empty() || x >= values.back()) return 0;  // the common case: nothing above
  return suffix[std::upper_bound(values.begin(), values.end(), x) - values.begin()];
}

namespace {

void BuildTables(const TypicalSet& set, FgdBoundTables& t) {
  std::vector<std::pair<int64_t, int64_t>> cpu, mem, multi;
  for (const auto& ts : set.shapes) {
    t.total += ts.weight_ppm;
    cpu.push_back({ts.shape.cpu_milli, ts.weight_ppm});
    mem.push_back({ts.shape.memory_mib, ts.weight_ppm});
    if (ts.shape.gpus >= 2) multi.push_back({ts.shape.gpus, ts.weight_ppm});
  }
  t.cpu.Build(std::move(cpu));
  t.mem.Build(std::move(mem));
  t.multi_gpus.Build(std::move(multi));
  t.built = true;
}

// Per-GPU milli of each typical shape on `dev` (as the tally cache computes it), -1 = cannot use
// it.
void BuildKind(const TypicalSet& set, const core::DeviceInfo& dev, FgdBoundTables::Kind& k) {
  std::vector<std::pair<int64_t, int64_t>> need;
  for (const auto& ts : set.shapes) {
    const TaskShape& shape = ts.shape;
    bool accepted = ts.models.empty();
    for (const auto& m : ts.models) accepted = accepted || TypeMatches(dev.type, m);
    if (!accepted || shape.gpus == 0) {
      k.unaccepted += ts.weight_ppm;
      continue;
    }
    int64_t mem = shape.memreq_mib;
    if (mem == 0)
      mem = dev.devmem_mib *
            (shape.mem_percentage > 0 ? std::min(shape.mem_percentage, 100) : 100) / 100;
    need.push_back({std::max(1, RequestMilli(dev, mem, shape.coresreq)), ts.weight_ppm});
  }
  k.need.Build(std::move(need));
  k.built = true;
}

}  // namespace

int64_t FgdUpperBound(const FgdCycle& fc, const CycleState& cycle, const NodeSummary& node) {
  const int64_t delta = FragmentationDeltaUpperBound(fc, cycle, node);
  if (delta == kNoBound) return kNoBound;
  FgdBoundTables& t = fc.bounds;  // nodes alike give the same delta: remember the last one
  if (delta != t.last_delta) t.last_delta = delta, t.last_score = SigmoidScore(delta);
  return t.last_score;
}

int64_t FragmentationDeltaUpperBound(const FgdCycle& fc, const CycleState& cycle,
                                     const NodeSummary& node) {
  // A pod without GPUs frees nothing and can only stop shapes from running: F cannot fall.
  if (!cycle.has_devices()) return 0;
  const core::DeviceRequest* r = cycle.single_request();
  if (r == nullptr || node.kind < 0 || node.kind_device == nullptr || r->nums <= 0) return kNoBound;
  FgdBoundTables& t = fc.bounds;
  const TypicalSet& set = fc.view.set();
  if (!t.built) BuildTables(set, t);
  if (static_cast<size_t>(node.kind) >= t.kinds.size()) t.kinds.resize(node.kind + 1);
  FgdBoundTables::Kind& k = t.kinds[node.kind];
  if (!k.built) {
    const core::DeviceInfo& dev = *node.kind_device;
    BuildKind(set, dev, k);
    // The pod's share of one GPU of this kind.
    int64_t mem = r->memreq_mib;
    if (mem <= 0)
      mem = dev.devmem_mib * (r->mem_percentage > 0 ? std::min(r->mem_percentage, 100) : 100) / 100;
    mem = std::max<int64_t>(mem, 0);
    const int cores = std::max(r->coresreq, 0);
    // Least free milli of a GPU the request fits on (free memory >= mem, free cores >= cores, a
    // slot).
    int64_t f_lb = kMilliPerGpu;
    if (dev.devmem_mib > 0) f_lb = std::min(f_lb, mem * kMilliPerGpu / dev.devmem_mib);
    if (dev.devcore > 0)
      f_lb = std::min<int64_t>(f_lb, int64_t{cores} * kMilliPerGpu / dev.devcore);
    k.drop = RequestMilli(dev, mem, cores);
    k.f_lb = static_cast<int>(f_lb);
    // Above(f) for every free level, in one sweep over the sorted needs.
    k.need_above.resize(kMilliPerGpu + 1);
    size_t i = 0;
    for (int f = 0; f <= kMilliPerGpu; ++f) {
      while (i < k.need.values.size() && k.need.values[i] <= f) ++i;
      k.need_above[f] = k.need.suffix[i];
    }
  }
  // Every GPU the pod can take has at least f_lb free; the node's least such level is tighter.
  const int f_min = node.LeastFreeAtLeast(k.f_lb);
  if (f_min < 0)
    return kNoBound;  // no usable device that fits: the summary disagrees with the node; no bound
  const int64_t shape_w = k.unaccepted + k.need_above[std::clamp(f_min, 0, kMilliPerGpu)];
  // Free milli one GPU loses: at most the share's milli, or all of it when its last slot goes.
  const int64_t drop = node.last_slot > 0 ? std::max<int64_t>(k.drop, node.max_free_milli) : k.drop;
  const int64_t taken = std::min<int64_t>(int64_t{r->nums} * drop, node.free_milli_total);
  int64_t w = shape_w + t.multi_gpus.Above(node.fully_free);
  if (node.track_cpu) w += t.cpu.Above(node.cpu_free);
  if (node.track_mem) w += t.mem.Above(node.mem_free);
  w = std::min(w, t.total);
  return std::max<int64_t>(taken, 0) * w;
}

std::unique_ptr<Profile> MakeFgdProfile(std::string name, const ShapeModelOptions& shapes) {
  auto model = std::make_shared<ShapeModel>(shapes);
  auto p = std::make_unique<Profile>();
  p->name = std::move(name);
  p->picker = std::make_unique<FgdPicker>(model);
  p->scorer = std::make_unique<FgdScorer>(model);
  p->reserve.push_back(std::make_shared<ObservingPlugin<ShapeModel>>(model));
  p->normalize = Normalize::kClamp;  // the sigmoid score is already 0..99
  return p;
}

}  // namespace hami::scheduler::fgd
