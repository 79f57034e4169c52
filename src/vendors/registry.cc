#include "vendors/registry.h"

#include "vendors/amd/amd.h"
#include "vendors/ascend/ascend.h"
#include "vendors/awsneuron/awsneuron.h"
#include "vendors/biren/biren.h"
#include "vendors/cambricon/cambricon.h"
#include "vendors/enflame/enflame.h"
#include "vendors/hygon/hygon.h"
#include "vendors/iluvatar/iluvatar.h"
#include "vendors/intel/intel.h"
#include "vendors/kunlun/kunlun.h"
#include "vendors/metax/metax.h"
#include "vendors/mthreads/mthreads.h"
#include "vendors/nvidia/nvidia.h"
#include "vendors/remotegpu/remotegpu.h"
#include "vendors/vastai/vastai.h"

namespace hami::vendors {
namespace {

// One row per backend: device-config.yaml section, enabled without a section, factory.
constexpr VendorRow kRows[] = {
    {"nvidia", true, &MakeNvidia},
    {"vnpus", false, &MakeAscend},
    {"hygon", false, &MakeHygon},
    {"cambricon", false, &MakeCambricon},
    {"metax", false, &MakeMetax},
    {"mthreads", false, &MakeMthreads},
    {"iluvatars", false, &MakeIluvatar},
    {"enflame", false, &MakeEnflame},
    {"enflamevgcu", false, &MakeEnflameVgcu},
    {"kunlun", false, &MakeKunlun},
    {"amd", false, &MakeAmd},
    {"awsneuron", false, &MakeAwsNeuron},
    {"vastai", false, &MakeVastai},
    {"biren", false, &MakeBiren},
    {"intel", false, &MakeIntel},
    {"remotegpu", false, &MakeRemoteGpu},
};

}  // namespace

std::span<const VendorRow> VendorRegistry() {
  return kRows;
}

}  // namespace hami::vendors
