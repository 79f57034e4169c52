#include "scheduler/policies/fgd/fgd_common.h"

#include <algorithm>
#include <limits>

namespace hami::scheduler::fgd {

Status PrepareCycle(ShapeModel& model, CycleState& cycle) {
  if (cycle.Read<FgdCycle>(&model) != nullptr) return OkStatus();
  model.Observe(cycle.pod());
  cycle.Write(&model, FgdCycle(model.Snapshot()));
  return OkStatus();
}

const FgdCycle& CycleOf(const ShapeModel& model, const CycleState& cycle) {
  const FgdCycle* c = cycle.Read<FgdCycle>(&model);
  // PreFilter always runs before Pick/Score in a cycle (framework contract).
  return *c;
}

void FgdPicker::Pick(const PickContext& ctx, std::span<const int> candidates, std::vector<int>* out) const {
  const FragmentationView& view = CycleOf(*model_, ctx.cycle).view;
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

  std::vector<char> taken(candidates.size(), 0);
  for (int k = 0; k < ctx.request.nums; ++k) {
    int64_t best = std::numeric_limits<int64_t>::max();
    int best_i = -1;
    int last_free = -1;
    const std::string* last_type = nullptr;
    for (size_t i = 0; i < candidates.size(); ++i) {
      if (taken[i]) continue;
      const int d = candidates[i];
      const auto& dev = node.info.devices[d];
      // Candidates with the same free milli on the same kind of device are interchangeable: the
      // lowest index stands for them.
      if (free[d] == last_free && last_type && *last_type == dev.type) continue;
      changes.push_back({d, free_after(d)});
      const int64_t f = view.FragmentationAfter(node, free, cpu_free, mem_free, changes, cpu_after, mem_after);
      changes.pop_back();
      if (f < best) {
        best = f;
        best_i = static_cast<int>(i);
      }
      last_free = free[d];
      last_type = &dev.type;
    }
    if (best_i < 0) return;
    taken[best_i] = 1;
    const int d = candidates[best_i];
    out->push_back(d);
    changes.push_back({d, free_after(d)});
  }
  // Keep the device order stable for the annotation (ascending index).
  std::sort(out->end() - std::min<int>(ctx.request.nums, static_cast<int>(out->size())), out->end());
}

int64_t FragmentationDelta(const FragmentationView& view, const CycleState& cycle, const NodeState& node,
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
  const int64_t before = view.Fragmentation(node, node.free_milli, cpu, mem);
  const int64_t after = view.FragmentationAfter(node, node.free_milli, cpu, mem, changes,
                                                cpu - placement.delta.cpu_milli, mem - placement.delta.memory_mib);
  (void)cycle;
  return before - after;
}

std::unique_ptr<Profile> MakeFgdProfile(std::string name, const ShapeModelOptions& shapes) {
  auto model = std::make_shared<ShapeModel>(shapes);
  auto p = std::make_unique<Profile>();
  p->name = std::move(name);
  p->picker = std::make_unique<FgdPicker>(model);
  p->scorer = std::make_unique<FgdScorer>(model);
  p->normalize = Normalize::kClamp;  // the sigmoid score is already 0..99
  return p;
}

}  // namespace hami::scheduler::fgd
