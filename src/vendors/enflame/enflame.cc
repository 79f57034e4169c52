// Enflame (docs/upstream-contract.md#decision-annotations-per-vendor, #vendors): two vendors.
//  - GCU: whole cards (enflame.com/gcu) from node capacity; decisions
//  hami.io/enflame-gcu-devices-*.
//  - Enflame (DRS): hardware partitions by profile `Ng.Mgb`; memory is rounded up to the smallest
//    profile. Devices are read from enflame.com/gcu-drs-capacity, here as the DeviceInfo JSON array
//    (constructed: upstream names the key and the profile form, not the full value). Only the
//    permanent record hami.io/enflame-vgpu-devices-allocated is written (no to-allocate key).
#include "vendors/enflame/enflame.h"

#include "vendors/config.h"
#include "vendors/generic.h"
#include "yaml-cpp/yaml.h"

namespace hami::vendors {

AnnotationKeys EnflameShareKeys(std::string node_register) {
  return {std::move(node_register),
          "",
          "",
          "hami.io/enflame-vgpu-devices-allocated",
          "",
          "",
          "enflame.com/use-gpuuuid",
          "enflame.com/nouse-gpuuuid"};
}

StatusOr<std::vector<std::unique_ptr<Vendor>>> MakeEnflame(const YAML::Node& section) {
  SectionReader r(section, "enflame");
  Spec gcu;
  gcu.name = "enflame";
  gcu.common_word = "GCU";
  gcu.resources = {"enflame.com/gcu", "", "", "", ""};
  gcu.keys = {"",
              "",
              "hami.io/enflame-gcu-devices-to-allocate",
              "hami.io/enflame-gcu-devices-allocated",
              "",
              "",
              "enflame.com/use-gpuuuid",
              "enflame.com/nouse-gpuuuid"};
  gcu.rules.whole_device_only = true;
  gcu.registration = Registration::kCapacity;
  gcu.capacity_resource = "enflame.com/gcu";
  // Upstream's whole-GCU devices: `<node>-GCU-<i>`, type GCU, one slot, memory and cores both
  // 100 (a share, not MiB: a whole GCU is never split).
  gcu.capacity_device_memory_mib = 100;
  gcu.capacity_id_infix = "-GCU-";
  gcu.model = "GCU";
  Spec drs;
  drs.name = "enflame";
  drs.common_word = "Enflame";
  drs.resources = {"enflame.com/drs-gcu", "enflame.com/gcu-memory", "", "enflame.com/gcu-core", ""};
  drs.keys = EnflameShareKeys("enflame.com/gcu-drs-capacity");
  drs.rules.max_devices_per_container = 1;
  drs.rules.templates = {{"1g.12gb", 12288, 25}, {"2g.24gb", 24576, 50}, {"4g.48gb", 49152, 100}};
  drs.registration = Registration::kJson;
  bool enabled = true;
  HAMI_RETURN_IF_ERROR(r.Bool("enabled", &enabled));
  HAMI_RETURN_IF_ERROR(r.String("resourceCountName", &gcu.resources.count));
  HAMI_RETURN_IF_ERROR(r.String("resourceDRSName", &drs.resources.count));
  HAMI_RETURN_IF_ERROR(r.String("resourceMemoryName", &drs.resources.memory));
  HAMI_RETURN_IF_ERROR(r.String("resourceCoreName", &drs.resources.cores));
  // Upstream chart's names for the same four resources (read after ours: they win when both are
  // set).
  HAMI_RETURN_IF_ERROR(r.String("resourceNameGCU", &gcu.resources.count));
  HAMI_RETURN_IF_ERROR(r.String("resourceNameDRSGCU", &drs.resources.count));
  HAMI_RETURN_IF_ERROR(r.String("resourceNameGCUMemory", &drs.resources.memory));
  HAMI_RETURN_IF_ERROR(r.String("resourceNameGCUCore", &drs.resources.cores));
  HAMI_RETURN_IF_ERROR(r.CheckKeys());
  gcu.capacity_resource = gcu.resources.count;  // upstream reads the (renamed) count resource
  std::vector<std::unique_ptr<Vendor>> out;
  out.push_back(std::make_unique<GenericVendor>(std::move(gcu)));
  out.push_back(std::make_unique<GenericVendor>(std::move(drs)));
  return out;
}

}  // namespace hami::vendors
