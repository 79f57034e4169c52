// Enflame vGCU (docs/vendors.md#enflame-vgcu): upstream's share-based model of Enflame GCUs, as
// its scheduler handled them before the DRS backend replaced it (same devices, rules and plugin
// annotations; see docs/migration.md for where hami-cpp differs):
//  - devices from node capacity: one per enflame.com/gcu-count, id `<node>-enflame-<i>`, 100
//    slots, memory 100 and cores 100, both a percentage of the card, not MiB;
//  - a card is split into `factor` shares (the node's enflame.com/shared-gcu / gcu-count, which
//    the Enflame device plugin publishes); a one-card request asks a percentage
//    (enflame.com/vgcu-percentage, default 100, at least 1) that is rounded up to whole shares
//    (15 -> 25 with 4 shares) and books that much of the card's memory; a multi-card request
//    takes whole cards (100 each). The webhook writes the rounded percentage and the number of
//    shares (enflame.com/shared-gcu, the resource the device plugin hands out) into the limits;
//  - the decision is the permanent record plus what the Enflame device plugin reads:
//    enflame.com/gcu-assigned "false", enflame.com/gcu-assigned-time (nanoseconds) and
//    enflame.com/gcu-assigned-id (the device indices of the first container with devices).
#include <algorithm>

#include "vendors/config.h"
#include "vendors/enflame/enflame.h"
#include "vendors/generic.h"

namespace hami::vendors {
namespace {

constexpr char kSharedResource[] = "enflame.com/shared-gcu";
constexpr char kCardCountResource[] = "enflame.com/gcu-count";
constexpr int64_t kWhole = 100;  // percent of a card
constexpr int64_t kDefaultFactor = 4;

class EnflameVgcuVendor : public GenericVendor {
 public:
  EnflameVgcuVendor(Spec spec, int64_t factor) : GenericVendor(std::move(spec)), factor_(factor) {}

  StatusOr<std::optional<core::DeviceRequest>> ParseRequest(
      const nlohmann::json& resources, const std::map<std::string, std::string>&) const override {
    HAMI_ASSIGN_OR_RETURN(Shape s, Read(resources));
    if (!s.count) return std::optional<core::DeviceRequest>();
    core::DeviceRequest r;
    r.vendor = spec_.common_word;
    r.nums = static_cast<int>(s.count);
    r.memreq_mib = s.percentage;  // percent of the card: devices have 100
    r.mem_percentage = 0;
    r.coresreq = 0;  // upstream books no cores for vGCU
    return std::optional<core::DeviceRequest>(r);
  }

  StatusOr<Mutation> Mutate(const nlohmann::json& resources,
                            const std::map<std::string, std::string>&) const override {
    HAMI_ASSIGN_OR_RETURN(Shape s, Read(resources));
    Mutation m;
    if (!s.count) return m;
    if (s.shares == 0) {
      m.denials.push_back(StrCat(spec_.resources.memory, "=", s.percentage,
                                 ": an Enflame vGCU percentage must be 1..100"));
      return m;
    }
    m.add_limits[spec_.resources.memory] = s.percentage;  // replaces the value, as upstream does
    m.add_limits[kSharedResource] = s.shares;
    return m;
  }

 protected:
  Status AddDecisionExtras(const core::PodAllocation& a, int64_t now_unix,
                           std::map<std::string, std::string>* out) const override {
    for (const auto& c : a.containers) {
      if (c.empty()) continue;
      std::string ids;
      for (const auto& d : c) ids += StrCat(ids.empty() ? "" : ",", d.index);
      (*out)["enflame.com/gcu-assigned"] = "false";
      (*out)["enflame.com/gcu-assigned-time"] = StrCat(now_unix * 1000000000LL);
      (*out)["enflame.com/gcu-assigned-id"] = ids;
      return OkStatus();
    }
    return OkStatus();
  }

 private:
  // A container's request as the webhook leaves it: cards, percent of each card, shares asked of
  // the device plugin (0: the percentage is outside 1..100 and is never rounded).
  struct Shape {
    int64_t count = 0;
    int64_t percentage = 0;
    int64_t shares = 0;
  };
  StatusOr<Shape> Read(const nlohmann::json& resources) const {
    const ResourceNames& n = spec_.resources;
    HAMI_ASSIGN_OR_RETURN(auto count, ReadResource(resources, n.count));
    HAMI_ASSIGN_OR_RETURN(auto pct, ReadResource(resources, n.memory));
    Shape s;
    if (!count || *count <= 0) return s;
    if (*count > 1024) return InvalidArgument(StrCat(n.count, ": ", *count, " exceeds 1024"));
    s.count = *count;
    if (s.count > 1) {  // whole cards
      s.percentage = kWhole;
      s.shares = factor_ * s.count;
      return s;
    }
    s.percentage = std::max<int64_t>(pct.value_or(kWhole), 1);
    if (s.percentage > kWhole) return s;  // never fits: the webhook denies it
    // Upstream's rounding: the share i+1 with 100/factor*i < p <= 100/factor*(i+1), and the
    // percentage of i+1 shares rounded down (integers here; upstream computes it in floats).
    s.shares = (s.percentage * factor_ + kWhole - 1) / kWhole;
    s.percentage = kWhole * s.shares / factor_;
    return s;
  }

  int64_t factor_;
};

}  // namespace

StatusOr<std::vector<std::unique_ptr<Vendor>>> MakeEnflameVgcu(const YAML::Node& section) {
  Spec s;
  s.name = "enflamevgcu";
  // Upstream's Type is "Enflame", which is the DRS backend's here; see docs/migration.md.
  s.common_word = "EnflameVGCU";
  s.resources = {"enflame.com/vgcu", "enflame.com/vgcu-percentage", "", "", ""};
  s.keys = EnflameShareKeys("");  // the DRS backend's record key: one key for both, as upstream
  s.registration = Registration::kCapacity;
  s.capacity_resource = kCardCountResource;
  s.capacity_device_memory_mib = kWhole;  // a percentage, not MiB
  s.capacity_slots = 100;
  s.capacity_devcore = 100;
  s.capacity_id_infix = "-enflame-";
  s.model = "Enflame";
  int64_t factor = kDefaultFactor;
  SectionReader r(section, "enflamevgcu");
  bool enabled = true;
  HAMI_RETURN_IF_ERROR(r.Bool("enabled", &enabled));
  HAMI_RETURN_IF_ERROR(r.String("resourceNameVGCU", &s.resources.count));
  HAMI_RETURN_IF_ERROR(r.String("resourceNameVGCUPercentage", &s.resources.memory));
  HAMI_RETURN_IF_ERROR(r.Int("factor", &factor));
  HAMI_RETURN_IF_ERROR(r.CheckKeys());
  if (factor < 1 || factor > kWhole)
    return InvalidArgument(StrCat("enflamevgcu.factor: ", factor, " must be in 1..100"));
  if (s.resources.count == s.resources.memory)
    return InvalidArgument(
        "enflamevgcu: resourceNameVGCU and resourceNameVGCUPercentage are equal");
  return One<EnflameVgcuVendor>(std::move(s), factor);
}

}  // namespace hami::vendors
