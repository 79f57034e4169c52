// Operating mode mps through the one scheduler path (Schedule + Reserve, as the extender's /filter
// and `hami sim` call it): a node registered in mode mps offers its GPUs like hami-core ones
// (count, memory, cores are accounted the same way; MPS enforces them on the node), and
// nvidia.com/vgpu-mode picks GPUs by mode. Rows named Upstream* replay upstream HAMi's
// TestCheckType_AllocateMode (pkg/device/nvidia/device_test.go) through Schedule.
#include <gtest/gtest.h>

#include "core/annotations.h"
#include "scheduler/scheduler.h"
#include "scheduler/testing/builders.h"
#include "scheduler/testing/harness.h"

namespace hami::scheduler {
namespace {
using namespace testing;

// A node whose GPUs registered in `mode` (as the device plugin of operatingmode `mode` writes
// them).
core::NodeInfo ModeNode(const std::string& name, const std::string& mode, int gpus = 2,
                        int split = 10) {
  core::NodeInfo n = NodeBuilder(name).Gpus(gpus, 16000, "NVIDIA-Tesla T4", split);
  for (auto& d : n.devices) d.mode = mode;
  return n;
}

core::PodRequest ModePod(const std::string& uid, const std::string& mode, int64_t mem = 4000,
                         int cores = 30) {
  core::PodRequest p = PodBuilder(uid).Gpu(1, mem, cores);
  p.selectors.vgpu_mode = mode;
  return p;
}

TEST(MpsScheduling, VgpuModePicksGpusByMode) {
  const std::vector<core::NodeInfo> nodes = {ModeNode("core", core::kModeHamiCore),
                                             ModeNode("mps", core::kModeMps)};
  struct Row {
    const char* name;
    const char* mode;  // the pod's nvidia.com/vgpu-mode ("" = none)
    const char* want;  // node, "" = none fits
  };
  const Row rows[] = {
      {"UpstreamTestCheckType_AllocateMode/mps on an mps device", "mps", "mps"},
      {"UpstreamTestCheckType_AllocateMode/hami-core on a hami-core device", "hami-core", "core"},
      {"mig fits neither", "mig", ""},
  };
  for (const char* policy : {"hami", "default", "fgd"}) {
    for (const Row& r : rows) {
      SCOPED_TRACE(std::string(policy) + " " + r.name);
      const Decision d = Explain(policy, nodes, {}, ModePod("p", r.mode));
      EXPECT_EQ(d.node, r.want);
      if (std::string(r.want).empty()) {
        ASSERT_EQ(d.failures.size(), 2u);
        for (const auto& f : d.failures) {
          EXPECT_NE(f.reason.find("CardTypeMismatch"), std::string::npos) << f.reason;
          EXPECT_FALSE(f.retryable) << "a GPU's mode changes only by re-registering";
        }
      }
    }
    // Upstream: a pod without the annotation may go to either mode.
    SCOPED_TRACE(policy);
    const Decision any = Explain(policy, nodes, {}, ModePod("p", ""));
    EXPECT_FALSE(any.node.empty());
    EXPECT_EQ(any.feasible_nodes, 2);
  }
}

// Only the mps node fits an mps pod: hami-core GPUs with room elsewhere change nothing.
TEST(MpsScheduling, AnMpsPodStaysPendingWhenTheMpsGpusAreFull) {
  for (const char* policy : {"hami", "default"}) {
    SCOPED_TRACE(policy);
    auto s = MakeCluster(
        policy, {ModeNode("core", core::kModeHamiCore), ModeNode("mps", core::kModeMps, 1)},
        {ModePod("a", "mps", 12000, 50)});
    ScheduleOptions o;
    o.explain = true;
    auto d = s->Schedule(ModePod("b", "mps", 8000, 30), nullptr, o);
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_EQ(d->node, "");
    bool memory = false;
    for (const auto& f : d->failures)
      memory |= f.node == "mps" && f.reason.find("CardInsufficientMemory") != std::string::npos;
    EXPECT_TRUE(memory) << "the mps GPU is refused for memory, not mode";
  }
}

// The accounting of an mps GPU is hami-core's (upstream's Fit has no mps branch): memory, cores,
// the split count and whole-card exclusivity, charged at Reserve and released at Unreserve.
TEST(MpsScheduling, AnMpsGpuIsAccountedLikeAHamiCoreGpu) {
  struct Step {
    const char* uid;
    int64_t mem;
    int cores;
    bool fits;
  };
  const Step steps[] = {
      {"a", 6000, 40, true},         {"b", 6000, 40, true},
      {"c-memory", 6000, 10, false},                            // 12000 + 6000 > 16000
      {"d-cores", 1000, 30, false},                             // 80 + 30 > 100
      {"e-whole", 1000, 100, false},                            // exclusive on a used GPU
      {"f", 4000, 20, true},         {"g-count", 0, 0, false},  // split count 3 reached
  };
  for (const char* policy : {"hami", "default"}) {
    SCOPED_TRACE(policy);
    auto s = MakeCluster(policy, {ModeNode("mps", core::kModeMps, 1, /*split=*/3)});
    for (const Step& st : steps) {
      SCOPED_TRACE(st.uid);
      core::PodRequest p = st.mem == 0 ? PodBuilder(st.uid).Gpu(1, 100, 0)
                                       : ModePod(st.uid, "mps", st.mem, st.cores);
      p.selectors.vgpu_mode = core::kModeMps;
      auto d = s->ScheduleAndReserve(p, nullptr);
      ASSERT_TRUE(d.ok()) << d.status();
      EXPECT_EQ(!d->node.empty(), st.fits);
      if (st.fits) {
        ASSERT_EQ(d->allocation.containers.size(), 1u);
        EXPECT_EQ(d->allocation.containers[0][0].usedmem_mib, st.mem);
        EXPECT_EQ(d->allocation.containers[0][0].usedcores, st.cores);
      }
    }
    // Released at Unreserve: b's share fits again.
    ASSERT_TRUE(s->Unreserve("b").ok());
    auto again = s->Schedule(ModePod("h", "mps", 6000, 40), nullptr);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->node, "mps");
  }
}

}  // namespace
}  // namespace hami::scheduler
