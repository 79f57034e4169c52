// Moore Threads (docs/upstream-contract.md#vendors): memory in 512 MiB units
// (mthreads.com/sgpu-memory), compute in 16 units
// per GPU (mthreads.com/sgpu-core); devices from node capacity: sgpu-core / 16 = GPUs, sgpu-memory
// capacity spread evenly. Slots per GPU = 16 (one per core unit; constructed).
#include "vendors/mthreads/mthreads.h"

#include "vendors/config.h"
#include "vendors/generic.h"

namespace hami::vendors {

StatusOr<std::vector<std::unique_ptr<Vendor>>> MakeMthreads(const YAML::Node& section) {
  Spec s;
  s.name = "mthreads";
  s.common_word = "Mthreads";
  s.resources = {"mthreads.com/vgpu", "mthreads.com/sgpu-memory", "", "mthreads.com/sgpu-core", ""};
  s.keys = {"",
            "",
            "hami.io/mthreads-vgpu-devices-to-allocate",
            "hami.io/mthreads-vgpu-devices-allocated",
            "",
            "",
            "mthreads.ai/use-gpuuuid",
            "mthreads.ai/nouse-gpuuuid"};
  s.memory_unit_mib = 512;
  s.core_units = 16;
  s.registration = Registration::kCapacity;
  s.capacity_resource = "mthreads.com/sgpu-core";
  s.capacity_per_device = 16;
  s.capacity_device_memory_mib = 49152;
  s.capacity_slots = 16;
  s.model = "MTT S4000";
  return MakeGeneric(std::move(s), section, "mthreads",
                     {"memoryPerCard"});  // upstream key, not read
}

}  // namespace hami::vendors
