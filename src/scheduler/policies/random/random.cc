#include "scheduler/policies/random/random.h"

#include "scheduler/pickers.h"

namespace hami::scheduler::policies {

namespace {
class ZeroScorer final : public NodeScorer {
 public:
  int64_t Score(const CycleState&, const NodeState&, const Placement&) const override { return 0; }
};
}  // namespace

StatusOr<std::unique_ptr<Profile>> MakeRandom(const PolicyConfig&) {
  auto p = std::make_unique<Profile>();
  p->name = "random";
  p->picker = std::make_unique<RandomPicker>();
  p->scorer = std::make_unique<ZeroScorer>();
  p->selection = HostSelection::kUniformFeasible;
  return p;
}

}  // namespace hami::scheduler::policies
