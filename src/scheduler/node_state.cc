#include "scheduler/node_state.h"

#include <algorithm>

#include "common/dcheck.h"
#include "core/mig.h"

namespace hami::scheduler {

namespace {
int64_t CeilDiv(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}
}  // namespace

int RequestMilli(const core::DeviceInfo& dev, int64_t mem_mib, int cores) {
  return RequestMilli(
      DeviceCaps{dev.devmem_mib, dev.count, dev.devcore, dev.numa, dev.health, false}, mem_mib,
      cores);
}

int RequestMilli(const DeviceCaps& dev, int64_t mem_mib, int cores) {
  int64_t m = 0;
  if (dev.devmem_mib > 0) m = CeilDiv(std::max<int64_t>(mem_mib, 0) * kMilliPerGpu, dev.devmem_mib);
  if (dev.devcore > 0)
    m = std::max(m, CeilDiv(std::max(cores, 0) * int64_t{kMilliPerGpu}, dev.devcore));
  return static_cast<int>(std::min<int64_t>(m, kMilliPerGpu));
}

int FreeMilli(const core::DeviceInfo& dev, const core::DeviceUsage& u) {
  if (dev.count > 0 && u.used >= dev.count) return 0;
  int64_t f = kMilliPerGpu;
  if (dev.devmem_mib > 0)
    f = std::min(f, (dev.devmem_mib - u.usedmem_mib) * kMilliPerGpu / dev.devmem_mib);
  if (dev.devcore > 0)
    f = std::min(f, (dev.devcore - int64_t{u.usedcores}) * kMilliPerGpu / dev.devcore);
  return static_cast<int>(std::clamp<int64_t>(f, 0, kMilliPerGpu));
}

NodeState NodeState::Make(core::NodeInfo info) {
  NodeState s;
  s.info = std::move(info);
  const size_t n = s.info.devices.size();
  s.usage.assign(n, core::DeviceUsage{});
  s.cordoned.assign(n, 0);
  s.free_milli.assign(n, 0);
  s.plain_on_mig.assign(n, 0);
  if (n > 0) s.uniform_vendor = s.info.devices[0].vendor;
  for (const auto& d : s.info.devices)
    if (d.vendor != s.uniform_vendor) s.uniform_vendor.clear();
  for (size_t i = 0; i < n; ++i) {
    const auto& uuid = s.info.devices[i].uuid;
    s.total_count += s.info.devices[i].count;
    s.total_devcore += s.info.devices[i].devcore;
    s.total_devmem += s.info.devices[i].devmem_mib;
    const bool cordoned =
        std::find(s.info.cordoned.begin(), s.info.cordoned.end(), uuid) != s.info.cordoned.end();
    s.cordoned[i] = cordoned ? 1 : 0;
    const auto& dev = s.info.devices[i];
    s.caps.push_back(DeviceCaps{dev.devmem_mib, dev.count, dev.devcore, dev.numa, dev.health,
                                cordoned, core::IsMigDevice(dev)});
    s.Refresh(static_cast<int>(i));
  }
  return s;
}

int NodeState::DeviceIndex(const std::string& uuid) const {
  for (size_t i = 0; i < info.devices.size(); ++i)
    if (info.devices[i].uuid == uuid) return static_cast<int>(i);
  return -1;
}

void NodeState::Refresh(int d) {
  HAMI_DCHECK(d >= 0 && d < gpus(), "node ", info.name, ": device ", d, " of ", gpus());
  const int old = free_milli[d];
  const int now = FreeMilli(info.devices[d], usage[d]);
  free_milli[d] = now;
  free_milli_total += now - old;
  fully_free += (now == kMilliPerGpu) - (old == kMilliPerGpu);
}

void NodeState::Apply(const PodDelta& delta, int sign) {
  cpu_used += sign * delta.cpu_milli;
  mem_used += sign * delta.memory_mib;
  pods += sign;
  HAMI_DCHECK(sign == 1 || sign == -1, "sign ", sign);
  for (const auto& d : delta.devices) {
    HAMI_DCHECK(d.device >= 0 && d.device < gpus(), "node ", info.name, ": device ", d.device,
                " of ", gpus());
    auto& u = usage[d.device];
    u.used += sign * d.slots;
    u.usedmem_mib += sign * d.mem_mib;
    u.usedcores += sign * d.cores;
    // Reservations never overlap (Fits); pods recorded from annotations are checked by their
    // reader (extender/state.cc), so a removal clears only its own slices.
    u.mig_slices = sign > 0 ? u.mig_slices | d.mig_slices : u.mig_slices & ~d.mig_slices;
    // The slice mask is a union that a removal clears bit by bit; a grant without slices leaves
    // nothing in it, so such grants are counted instead (plain_on_mig).
    if (caps[d.device].mig) plain_on_mig[d.device] += sign * d.plain_grants;
    // A removal takes back what an addition put there: usage never goes below zero.
    HAMI_DCHECK(
        u.used >= 0 && u.usedmem_mib >= 0 && u.usedcores >= 0 && plain_on_mig[d.device] >= 0,
        "node ", info.name, ": device ", d.device, " usage below zero (", u.used, " slots, ",
        u.usedmem_mib, " MiB, ", u.usedcores, " cores, ", plain_on_mig[d.device],
        " grants without a MIG instance): a removal without its addition");
    sum_used += int64_t{sign} * d.slots;
    sum_usedmem += sign * d.mem_mib;
    sum_usedcores += int64_t{sign} * d.cores;
    Refresh(d.device);
  }
  if (delta.pod_class >= 0 && delta.pod_class < kPodClasses) {
    int& c = class_count[delta.pod_class];
    if (sign > 0 && c == 0) ++classes_present;
    c += sign;
    if (sign < 0 && c == 0) --classes_present;
    HAMI_DCHECK(c >= 0, "node ", info.name, ": pod class ", delta.pod_class, " count ", c);
  }
  HAMI_DCHECK(pods >= 0, "node ", info.name, ": ", pods, " pods");
}

NodeSummary NodeState::Summarize() const {
  NodeSummary s;
  s.cpu_free = cpu_free();
  s.mem_free = mem_free();
  s.sum_used = sum_used;
  s.sum_usedcores = sum_usedcores;
  s.sum_usedmem = sum_usedmem;
  s.free_milli_total = free_milli_total;
  s.fully_free = fully_free;
  s.gpus = gpus();
  s.track_cpu = info.cpu_milli > 0;
  s.track_mem = info.memory_mib > 0;
  s.total_count = total_count;
  s.total_devcore = total_devcore;
  s.total_devmem = total_devmem;
  for (size_t d = 0; d < caps.size(); ++d) {
    const DeviceCaps& c = caps[d];
    const core::DeviceUsage& u = usage[d];
    s.min_devmem = d == 0 ? c.devmem_mib : std::min(s.min_devmem, c.devmem_mib);
    s.max_devmem = std::max(s.max_devmem, c.devmem_mib);
    s.min_devcore = d == 0 ? c.devcore : std::min(s.min_devcore, c.devcore);
    s.max_devcore = std::max(s.max_devcore, c.devcore);
    s.max_free_milli = std::max(s.max_free_milli, free_milli[d]);
    s.mig_gpus += c.mig;
    if (!Usable(static_cast<int>(d)) || c.count <= u.used) continue;
    ++s.usable;
    s.last_slot += c.count - u.used == 1;
    if (s.usable <= NodeSummary::kFreeLevels)
      s.free_levels[s.usable - 1] = static_cast<int16_t>(free_milli[d]);
    s.max_free_mem = std::max(s.max_free_mem, c.devmem_mib - u.usedmem_mib);
    s.max_free_cores = std::max(s.max_free_cores, c.devcore - u.usedcores);
  }
  if (s.usable <= NodeSummary::kFreeLevels)
    std::sort(s.free_levels.begin(), s.free_levels.begin() + s.usable);
  return s;
}

bool NodeState::Fits(const PodDelta& delta) const {
  if (info.cpu_milli > 0 && delta.cpu_milli > cpu_free()) return false;
  if (info.memory_mib > 0 && delta.memory_mib > mem_free()) return false;
  for (const auto& d : delta.devices) {
    if (d.device < 0 || d.device >= gpus()) return false;
    const auto& dev = info.devices[d.device];
    const auto& u = usage[d.device];
    if (d.slots > 0 && u.used + d.slots > dev.count) return false;
    if (u.usedmem_mib + d.mem_mib > dev.devmem_mib) return false;
    if (u.usedcores + d.cores > dev.devcore) return false;
    if ((u.mig_slices & d.mig_slices) != 0) return false;         // a MIG placement taken meanwhile
    if (d.slots > 0 && plain_on_mig[d.device] > 0) return false;  // blocked meanwhile
    if (d.cores >= dev.devcore && d.cores > 0 && u.used > 0) return false;  // exclusive card
  }
  return true;
}

int PodClassOf(const NodeState& node, const PodDelta& delta) {
  int gpus = 0;
  int milli = 0;
  for (const auto& d : delta.devices) {
    if (d.slots <= 0) continue;
    gpus += d.slots;
    milli = RequestMilli(node.info.devices[d.device], d.mem_mib, d.cores);
  }
  if (gpus == 0) return kNoPodClass;
  if (gpus == 1 && milli < kMilliPerGpu) return 0;
  return std::min(gpus, kPodClasses - 1);
}

}  // namespace hami::scheduler
