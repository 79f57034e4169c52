#include "scheduler/registry.h"

#include "scheduler/policies/best_fit/best_fit.h"
#include "scheduler/policies/default/default_policy.h"
#include "scheduler/policies/dot_product/dot_product.h"
#include "scheduler/policies/fgd/fgd.h"
#include "scheduler/policies/fgd_balance/fgd_balance.h"
#include "scheduler/policies/gpu_clustering/gpu_clustering.h"
#include "scheduler/policies/gpu_packing/gpu_packing.h"
#include "scheduler/policies/hami/hami.h"
#include "scheduler/policies/random/random.h"

namespace hami::scheduler {

namespace {
// One row per policy.
constexpr PolicyRow kPolicies[] = {
    {"hami", &policies::MakeHami,
     "upstream HAMi defaults: node binpack, GPU spread (pod annotations override)"},
    {"hami-binpack", &policies::MakeHamiBinpack, "upstream HAMi with node binpack and GPU binpack"},
    {"hami-spread", &policies::MakeHamiSpread, "upstream HAMi with node spread and GPU spread"},
    {"random", &policies::MakeRandom, "FGD baseline: random feasible node, random fitting GPU"},
    {"dot-product", &policies::MakeDotProduct,
     "FGD baseline: smallest dot product of free and requested (CPU, GPU)"},
    {"gpu-packing", &policies::MakeGpuPacking,
     "FGD baseline: partly used GPUs, then used nodes, then empty nodes"},
    {"gpu-clustering", &policies::MakeGpuClustering,
     "FGD baseline: keep pods of one GPU class together"},
    {"best-fit", &policies::MakeBestFit, "FGD baseline: least CPU and GPU left after placement"},
    {"default", &policies::MakeDefault,
     "hami-cpp's default: fragmentation-aware (today fgd-balance, with its own learned models; "
     "docs/sim.md)"},
    {"fgd", &policies::MakeFgd,
     "FGD (ATC'23): least fragmentation increase against the learned task shapes"},
    {"fgd-balance", &policies::MakeFgdBalance,
     "FGD plus the GPU capacity a placement strands for lack of CPU (learned CPU per GPU; "
     "docs/sim.md)"},
};
}  // namespace

std::span<const PolicyRow> Policies() {
  return kPolicies;
}

StatusOr<std::unique_ptr<Profile>> MakeProfile(std::string_view name, const PolicyConfig& config) {
  std::string known;
  for (const auto& row : kPolicies) {
    if (name == row.name) return row.factory(config);
    if (!known.empty()) known += ", ";
    known += row.name;
  }
  return InvalidArgument("unknown scheduling policy '", std::string(name), "' (known: ", known,
                         ")");
}

}  // namespace hami::scheduler
