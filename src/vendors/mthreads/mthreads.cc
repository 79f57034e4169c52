// Moore Threads (docs/upstream-contract.md#vendors, docs/vendors.md#moore-threads), as upstream's
// scheduler models it:
//  - devices from node capacity: one GPU per started 16 of mthreads.com/sgpu-core, id
//    `<node>-mthreads-<i>`, type Mthreads, 100 slots, 16 cores (core *units*, not percent) and
//    memory = sgpu-memory capacity * 512 MiB * 16 / sgpu-core capacity; `i` is the physical card
//    id from the node label mthreads.com/sgpu.cores ("0-2-3": the cards bound to sGPU), else
//    0..N-1 (upstream v2.11: the vendor stack reads the index as the card id);
//  - a request needs the count resource and takes memory * 512 MiB / count and cores / count
//    units per GPU (no cores: 0); a multi-GPU or memory-less request is read as the webhook
//    rewrites it (whole GPUs), so a pod that skipped the webhook books the same;
//  - the webhook gives a multi-GPU container whole GPUs (16 cores and the first memoryPerCard
//    size, 96 memory units by default, each), gives a one-GPU container without memory one whole
//    GPU, denies a memory value upstream does not slice (powers of two from 2 and the whole card,
//    for any memoryPerCard size: 2..64 and 96 by default), and denies a container that mixes the
//    vendor plugin's whole cards (mthreads.com/gpu) with sGPU slices;
//  - every container of a pod goes to the same GPU (upstream's customFilterRule; the scheduler
//    applies it across containers: FitRules::pod_on_one_device);
//  - the decision is the permanent record plus what the Moore Threads device plugin reads:
//    mthreads.com/gpu-index (the device indices of the last container with devices),
//    mthreads.com/predicate-node (the node) and mthreads.com/predicate-time (nanoseconds).
#include "vendors/mthreads/mthreads.h"

#include <algorithm>
#include <limits>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "vendors/config.h"
#include "vendors/generic.h"
#include "yaml-cpp/yaml.h"

namespace hami::vendors {
namespace {

constexpr int kCoresPerGpu = 16;
constexpr int64_t kMemoryUnitMiB = 512;
constexpr int64_t kDefaultMemoryUnitsPerGpu = 96;  // MTT S4000 (48 GiB); S5000: 160
// The whole-card resource of Moore Threads' own device plugin, outside HAMi's accounting.
constexpr char kWholeGpuResource[] = "mthreads.com/gpu";
// Node label of the vendor stack: the physical card ids bound to sGPU, '-' (or ',') between.
constexpr char kCardIdsLabel[] = "mthreads.com/sgpu.cores";

// The card ids of kCardIdsLabel, in label order. Upstream v2.11 trusts the label strictly: its ids
// must account for the whole sgpu-core capacity (16 units a card), or the node offers nothing.
StatusOr<std::vector<int>> CardIds(const std::string& label, int64_t core_capacity) {
  std::vector<int> ids;
  std::set<int> seen;
  for (absl::string_view part : absl::StrSplit(label, absl::ByAnyChar("-,"))) {
    int id = -1;
    if (!absl::SimpleAtoi(part, &id) || id < 0 || !seen.insert(id).second)
      return InvalidArgument(StrCat("label ", kCardIdsLabel, "=\"", label,
                                    "\": expected distinct card ids such as 0-2-3"));
    ids.push_back(id);
  }
  if (static_cast<int64_t>(ids.size()) * kCoresPerGpu != core_capacity)
    return InvalidArgument(StrCat("label ", kCardIdsLabel, "=\"", label, "\" names ", ids.size(),
                                  " cards, but the sgpu-core capacity is ", core_capacity, " (",
                                  kCoresPerGpu, " a card)"));
  return ids;
}

// Upstream's buildLegalMemorySliceUnion: per card size, the powers of two from 2 below it and the
// whole card; the union over the configured sizes (a mixed cluster admits any model's slice).
std::vector<int64_t> LegalSlices(const std::vector<int64_t>& cards) {
  std::vector<int64_t> out;
  for (int64_t card : cards) {
    for (int64_t s = 2; s < card; s *= 2) out.push_back(s);
    out.push_back(card);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

class MthreadsVendor : public GenericVendor {
 public:
  // `memory_per_card`: memoryPerCard in 512 MiB units, first = the card a whole-GPU request is
  // written as.
  MthreadsVendor(Spec spec, std::vector<int64_t> memory_per_card)
      : GenericVendor(std::move(spec)),
        units_per_gpu_(memory_per_card.front()),
        slices_(LegalSlices(memory_per_card)) {}

  StatusOr<std::optional<core::DeviceRequest>> ParseRequest(
      const nlohmann::json& resources, const std::map<std::string, std::string>&) const override {
    const ResourceNames& n = spec_.resources;
    HAMI_ASSIGN_OR_RETURN(auto count, ReadResource(resources, n.count));
    HAMI_ASSIGN_OR_RETURN(auto mem, ReadResource(resources, n.memory));
    HAMI_ASSIGN_OR_RETURN(auto cores, ReadResource(resources, n.cores));
    if (!count || *count == 0) return std::optional<core::DeviceRequest>();
    if (*count > 1024) return InvalidArgument(StrCat(n.count, ": ", *count, " exceeds 1024"));
    if (*count > 1 || !mem) {  // the webhook's whole GPUs, also for a pod that skipped it
      mem = *count * units_per_gpu_;
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
    // Upstream v2.11: the vendor plugin's whole cards are delivered outside HAMi, so one container
    // holding both would be booked short (limits and requests both count).
    HAMI_ASSIGN_OR_RETURN(auto whole, ReadResource(resources, kWholeGpuResource));
    HAMI_ASSIGN_OR_RETURN(auto cores, ReadResource(resources, n.cores));
    if (whole && (count || mem || cores)) {
      m.denials.push_back(StrCat("cannot mix ", kWholeGpuResource,
                                 " (whole card, delivered outside HAMi) with ", n.count, "/",
                                 n.memory, "/", n.cores, " (sGPU slices) in the same container"));
      return m;
    }
    if (!count) return m;
    if (*count > 1 || !mem) {
      m.add_limits[n.cores] = *count * kCoresPerGpu;  // replaces any value, as upstream does
      m.add_limits[n.memory] = *count * units_per_gpu_;
    } else if (std::find(slices_.begin(), slices_.end(), *mem) == slices_.end()) {
      std::string legal;
      for (int64_t s : slices_) legal += StrCat(legal.empty() ? "" : ", ", s);
      m.denials.push_back(StrCat(n.memory, "=", *mem, ": Moore Threads sGPU memory must be one of ",
                                 legal, " (units of 512 MiB; devices.mthreads.memoryPerCard)"));
    }
    return m;
  }

  StatusOr<std::vector<core::DeviceInfo>> DecodeNode(const NodeView& node) const override {
    HAMI_ASSIGN_OR_RETURN(auto devs, GenericVendor::DecodeNode(node));
    auto label = node.labels.find(kCardIdsLabel);
    if (label == node.labels.end() || label->second.empty() || devs.empty()) return devs;
    // devs is not empty, so the capacity is there; ids.size() * 16 equals it, so one id a device.
    HAMI_ASSIGN_OR_RETURN(const std::vector<int> ids,
                          CardIds(label->second, node.capacity.at(spec_.resources.cores)));
    for (size_t i = 0; i < devs.size(); ++i) {
      devs[i].index = ids[i];
      devs[i].uuid = StrCat(node.name, "-mthreads-", ids[i]);
    }
    return devs;
  }
  // The label is written back when the devices are not cards 0..N-1 (fakes and the simulator).
  Status EncodeNode(const std::vector<core::DeviceInfo>& devices, NodeView* node) const override {
    std::string ids;
    bool contiguous = true;
    for (size_t i = 0; i < devices.size(); ++i) {
      contiguous = contiguous && devices[i].index == static_cast<int>(i);
      ids += StrCat(i == 0 ? "" : "-", devices[i].index);
    }
    if (!contiguous) node->labels[kCardIdsLabel] = ids;
    return GenericVendor::EncodeNode(devices, node);
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

 private:
  int64_t units_per_gpu_;
  std::vector<int64_t> slices_;
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
  s.capacity_slots = 100;
  s.capacity_devcore = kCoresPerGpu;
  s.capacity_id_infix = "-mthreads-";
  s.model = "Mthreads";
  SectionReader r(section, "mthreads");
  HAMI_RETURN_IF_ERROR(ReadResourceKeys(r, &s.resources));
  // memoryPerCard (upstream v2.11): card sizes in 512 MiB units, a list or one number.
  std::vector<int64_t> cards;
  const YAML::Node per_card = r.Child("memoryPerCard");
  if (per_card.IsDefined() && !per_card.IsNull() &&
      !(per_card.IsScalar() && per_card.Scalar().empty())) {
    auto bad = [] {
      return InvalidArgument(
          "mthreads.memoryPerCard: expected integers in 2..65536 (units of 512 "
          "MiB), e.g. [96, 160]");
    };
    const bool list = per_card.IsSequence();
    if (!list && !per_card.IsScalar()) return bad();
    for (size_t i = 0; i < (list ? per_card.size() : 1); ++i) {
      const YAML::Node v = list ? per_card[i] : per_card;
      int64_t units = 0;
      try {
        units = v.as<int64_t>();
      } catch (const YAML::Exception&) {
        return bad();
      }
      if (units < 2 || units > 65536) return bad();
      cards.push_back(units);
    }
  }
  if (cards.empty()) cards.push_back(kDefaultMemoryUnitsPerGpu);
  HAMI_RETURN_IF_ERROR(r.CheckKeys());
  s.capacity_resource = s.resources.cores;
  s.capacity_device_memory_mib = cards.front() * kMemoryUnitMiB;
  return One<MthreadsVendor>(std::move(s), std::move(cards));
}

}  // namespace hami::vendors
