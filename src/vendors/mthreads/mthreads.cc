// Moore Threads (docs/upstream-contract.md#vendors, docs/vendors.md#moore-threads), as upstream's
// scheduler models it:
//  - devices from node capacity: one GPU per started 16 of mthreads.com/sgpu-core, id
//    `<node>-mthreads-<i>`, type Mthreads, 100 slots, 16 cores (core *units*, not percent) and
//    memory = sgpu-memory capacity * 512 MiB * 16 / sgpu-core capacity;
//  - a request needs the count resource and takes memory * 512 MiB / count and cores / count
//    units per GPU (no cores: 0); a multi-GPU or memory-less request is read as the webhook
//    rewrites it (whole GPUs), so a pod that skipped the webhook books the same;
//  - the webhook gives a multi-GPU container whole GPUs (16 cores, 96 memory units each), gives a
//    one-GPU container without memory one whole GPU, and denies a memory value upstream does not
//    slice (2, 4, 8, 16, 32, 64, 96 units);
//  - every container of a pod goes to the same GPU (upstream's customFilterRule; the scheduler
//    applies it across containers: FitRules::pod_on_one_device);
//  - the decision is the permanent record plus what the Moore Threads device plugin reads:
//    mthreads.com/gpu-index (the device indices of the last container with devices),
//    mthreads.com/predicate-node (the node) and mthreads.com/predicate-time (nanoseconds).
#include "vendors/mthreads/mthreads.h"

#include <algorithm>
#include <limits>

#include "vendors/config.h"
#include "vendors/generic.h"

namespace hami::vendors {
namespace {

constexpr int kCoresPerGpu = 16;
constexpr int64_t kMemoryUnitMiB = 512;
constexpr int64_t kMemoryUnitsPerGpu = 96;
constexpr int64_t kMemorySlices[] = {2, 4, 8, 16, 32, 64, 96};

class MthreadsVendor : public GenericVendor {
 public:
  using GenericVendor::GenericVendor;

  StatusOr<std::optional<core::DeviceRequest>> ParseRequest(
      const nlohmann::json& resources, const std::map<std::string, std::string>&) const override {
    const ResourceNames& n = spec_.resources;
    HAMI_ASSIGN_OR_RETURN(auto count, ReadResource(resources, n.count));
    HAMI_ASSIGN_OR_RETURN(auto mem, ReadResource(resources, n.memory));
    HAMI_ASSIGN_OR_RETURN(auto cores, ReadResource(resources, n.cores));
    if (!count || *count == 0) return std::optional<core::DeviceRequest>();
    if (*count > 1024) return InvalidArgument(StrCat(n.count, ": ", *count, " exceeds 1024"));
    if (*count > 1 || !mem) {  // the webhook's whole GPUs, also for a pod that skipped it
      mem = *count * kMemoryUnitsPerGpu;
      cores = *count * kCoresPerGpu;
    }
    core::DeviceRequest r;
    r.vendor = spec_.common_word;
    r.nums = static_cast<int>(*count);
    const int64_t mem_mib = mem.value_or(0) * kMemoryUnitMiB;
    if (mem_mib > std::numeric_limits<int32_t>::max())
      return InvalidArgument(StrCat(n.memory, ": ", *mem, " units exceed the int32 MiB range"));
    r.memreq_mib = mem_mib / *count;
    r.mem_percentage = mem_mib == 0 ? 100 : 0;
    r.coresreq = static_cast<int>(cores.value_or(0) / *count);
    return std::optional<core::DeviceRequest>(r);
  }

  StatusOr<Mutation> Mutate(const nlohmann::json& resources,
                            const std::map<std::string, std::string>&) const override {
    const ResourceNames& n = spec_.resources;
    HAMI_ASSIGN_OR_RETURN(auto count, ReadResource(resources, n.count));
    HAMI_ASSIGN_OR_RETURN(auto mem, ReadResource(resources, n.memory));
    Mutation m;
    if (!count) return m;
    if (*count > 1 || !mem) {
      m.add_limits[n.cores] = *count * kCoresPerGpu;  // replaces any value, as upstream does
      m.add_limits[n.memory] = *count * kMemoryUnitsPerGpu;
    } else if (std::find(std::begin(kMemorySlices), std::end(kMemorySlices), *mem) ==
               std::end(kMemorySlices)) {
      m.denials.push_back(StrCat(n.memory, "=", *mem,
                                 ": Moore Threads sGPU memory must be one of 2, 4, 8, 16, 32, 64, "
                                 "96 (units of 512 MiB)"));
    }
    return m;
  }

 protected:
  Status AddDecisionExtras(const core::PodAllocation& a, int64_t now_unix,
                           std::map<std::string, std::string>* out) const override {
    const std::string index = LastContainerIndices(a);
    if (index.empty()) return OkStatus();
    (*out)["mthreads.com/gpu-index"] = index;
    (*out)["mthreads.com/predicate-node"] = a.node;
    (*out)["mthreads.com/predicate-time"] = StrCat(now_unix * 1000000000LL);
    return OkStatus();
  }
};

}  // namespace

StatusOr<std::vector<std::unique_ptr<Vendor>>> MakeMthreads(const YAML::Node& section) {
  Spec s;
  s.name = "mthreads";
  s.common_word = "Mthreads";
  s.resources = {"mthreads.com/vgpu", "mthreads.com/sgpu-memory", "", "mthreads.com/sgpu-core", ""};
  // Upstream writes only the permanent record for Moore Threads (no to-allocate key).
  s.keys = {"",
            "",
            "",
            "hami.io/mthreads-vgpu-devices-allocated",
            "",
            "",
            "mthreads.ai/use-gpuuuid",
            "mthreads.ai/nouse-gpuuuid"};
  s.rules.pod_on_one_device = true;  // upstream's customFilterRule
  s.memory_unit_mib = kMemoryUnitMiB;
  s.core_units = kCoresPerGpu;
  s.registration = Registration::kCapacity;
  s.capacity_resource = "mthreads.com/sgpu-core";
  s.capacity_per_device = kCoresPerGpu;
  s.capacity_device_memory_mib = kMemoryUnitsPerGpu * kMemoryUnitMiB;
  s.capacity_slots = 100;
  s.capacity_devcore = kCoresPerGpu;
  s.capacity_id_infix = "-mthreads-";
  s.model = "Mthreads";
  SectionReader r(section, "mthreads");
  HAMI_RETURN_IF_ERROR(ReadResourceKeys(r, &s.resources));
  r.Ignore({"memoryPerCard"});  // upstream key, not read
  HAMI_RETURN_IF_ERROR(r.CheckKeys());
  s.capacity_resource = s.resources.cores;
  return One<MthreadsVendor>(std::move(s));
}

}  // namespace hami::vendors
