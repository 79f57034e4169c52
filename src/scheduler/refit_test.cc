// The NUMA refit's fit, table by table after upstream pkg/scheduler/numa_refit_test.go
// (TestRestrictNodeUsage*, TestFitInRestrictedDevices*): upstream's device fixtures (GPU-a 3 tasks
// 30000 MiB 30 %, GPU-b 2 tasks 20000 MiB 20 %, GPU-c 1 task 10000 MiB 10 %, 40000 MiB and 10
// slots each) become pods placed in the cache, one task of 10000 MiB and 10 % each.
#include "scheduler/refit.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "scheduler/testing/harness.h"

namespace hami::scheduler {
namespace {

using testing::MakeCluster;
using testing::PodBuilder;

struct Dev {
  std::string uuid;
  int numa = 0;
  int tasks = 0;           // tasks placed on it, `task_mib` and `task_cores` each
  int64_t devmem = 40000;  // capacity
  int64_t task_mib = 10000;
  int task_cores = 10;
  std::string vendor = core::kNvidiaVendor;
  std::string mode = "";
};

const char kNode[] = "node-1";

std::unique_ptr<Scheduler> Cluster(const std::vector<Dev>& devs) {
  core::NodeInfo n;
  n.name = kNode;
  n.cpu_milli = 64000;
  n.memory_mib = 262144;
  for (const Dev& d : devs) {
    core::DeviceInfo i;
    i.uuid = d.uuid;
    i.index = static_cast<int>(n.devices.size());
    i.count = 10;
    i.devmem_mib = d.devmem;
    i.type = "NVIDIA-A100";
    i.vendor = d.vendor;
    i.numa = d.numa;
    i.mode = d.mode;
    n.devices.push_back(i);
  }
  auto s = MakeCluster("hami", {n});
  int k = 0;
  for (const Dev& d : devs) {
    for (int t = 0; t < d.tasks; ++t) {
      core::PodAllocation a;
      a.node = kNode;
      a.containers.push_back({core::ContainerDevice{d.uuid, d.vendor, d.task_mib, d.task_cores}});
      EXPECT_TRUE(s->AddPod("placed-" + std::to_string(k++), a).ok());
    }
  }
  return s;
}

std::vector<Dev> ThreeGpus() {
  return {{"GPU-a", 0, 3}, {"GPU-b", 0, 2}, {"GPU-c", 1, 1}};
}

// The refit of container 0 of a pod asking `nums` GPUs of (mem, cores), granted on GPU-z today.
RefitTarget Target(int nums, int64_t mem, int cores, std::vector<std::string> allowed) {
  RefitTarget t;
  for (int i = 0; i < nums; ++i)
    t.current.push_back({"GPU-z" + std::to_string(i), core::kNvidiaVendor, mem, cores});
  t.allowed = std::move(allowed);
  return t;
}

PodBuilder RefitPod(int nums = 1, int64_t mem = 4096, int cores = 10) {
  PodBuilder p("refit-pod");
  p.Gpu(nums, mem, cores);
  return p;
}

std::vector<std::string> Uuids(const std::vector<core::ContainerDevice>& devs) {
  std::vector<std::string> out;
  for (const auto& d : devs) out.push_back(d.uuid);
  return out;
}

// Unrestricted: the fit /filter runs, on the one node.
std::vector<std::string> PlainFit(const Scheduler& s, const core::PodRequest& pod) {
  const std::vector<std::string> nodes{kNode};
  auto d = s.Schedule(pod, &nodes);
  EXPECT_TRUE(d.ok()) << d.status();
  if (!d.ok() || d->node.empty()) return {};
  return Uuids(d->allocation.containers.at(0));
}

core::NodeInfo NodeOf(const Scheduler& s) {
  core::NodeInfo info;
  s.cache().WithNode(kNode, [&](const NodeState& n) { info = n.info; });
  return info;
}

TEST(RefitTest, TestRestrictNodeUsagePreservesPolicyAndOriginal) {
  auto s = Cluster(ThreeGpus());
  const core::PodRequest pod = RefitPod().GpuPolicy("binpack").NumaBind();
  const core::PodRequest before = pod;
  auto r =
      RestrictedRequest(pod, Target(1, 4096, 10, {"GPU-b", "GPU-c", "GPU-unknown"}), NodeOf(*s));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->selectors.use_uuids, (std::vector<std::string>{"GPU-b", "GPU-c"}));
  EXPECT_EQ(r->gpu_policy, "binpack");
  EXPECT_TRUE(r->selectors.numa_bind);
  ASSERT_EQ(r->containers.size(), 1u);
  EXPECT_EQ(r->containers[0].cpu_milli, 0);
  ASSERT_EQ(r->containers[0].devices.size(), 1u);
  EXPECT_EQ(r->containers[0].devices[0].nums, 1);
  EXPECT_EQ(r->containers[0].devices[0].memreq_mib, 4096);
  EXPECT_EQ(r->containers[0].devices[0].coresreq, 10);
  // The pod as parsed is not touched.
  EXPECT_EQ(pod.selectors, before.selectors);
}

TEST(RefitTest, TestRestrictNodeUsageEmptyAllowedSet) {
  auto s = Cluster({{"GPU-a"}});
  auto r = RestrictedRequest(RefitPod(), Target(1, 4096, 10, {}), NodeOf(*s));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(kAllowedSetUnmatched), std::string::npos) << r.status();
}

TEST(RefitTest, TestRestrictNodeUsageKeepsOtherDeviceTypes) {
  // Only the NVIDIA request is refitted; another vendor's grant never moves, so its request is not
  // part of the restricted fit at all.
  Dev other{"OTHER-a"};
  other.vendor = "SomeOtherVendor";
  auto s = Cluster({{"GPU-a"}, {"GPU-b"}, other});
  core::PodRequest pod = RefitPod();
  core::DeviceRequest theirs;
  theirs.vendor = "SomeOtherVendor";
  theirs.nums = 1;
  pod.containers[0].devices.push_back(theirs);
  auto r = RestrictedRequest(pod, Target(1, 4096, 10, {"GPU-b", "OTHER-a"}), NodeOf(*s));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->containers[0].devices.size(), 1u);
  EXPECT_EQ(r->containers[0].devices[0].vendor, core::kNvidiaVendor);
  EXPECT_EQ(r->selectors.use_uuids, (std::vector<std::string>{"GPU-b"}));
}

TEST(RefitTest, TestFitInRestrictedDevicesMatchesFitOnSmallerNode) {
  for (const char* policy : {"binpack", "spread", "binpack,numa", "spread,numa"}) {
    SCOPED_TRACE(policy);
    auto full = Cluster(ThreeGpus());
    auto got = FitInRestrictedDevices(*full, RefitPod().GpuPolicy(policy),
                                      Target(1, 4096, 10, {"GPU-b", "GPU-c"}), kNode);
    ASSERT_TRUE(got.ok()) << got.status();
    auto smaller = Cluster({{"GPU-b", 0, 2}, {"GPU-c", 1, 1}});
    EXPECT_EQ(Uuids(*got), PlainFit(*smaller, RefitPod().GpuPolicy(policy)));
  }
}

TEST(RefitTest, TestFitInRestrictedDevicesHonorsPolicyOrdering) {
  auto s = Cluster(ThreeGpus());
  // Unrestricted binpack prefers the most used device that fits.
  EXPECT_EQ(PlainFit(*s, RefitPod().GpuPolicy("binpack")), std::vector<std::string>{"GPU-a"});
  auto got = FitInRestrictedDevices(*s, RefitPod().GpuPolicy("binpack"),
                                    Target(1, 4096, 10, {"GPU-b", "GPU-c"}), kNode);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(Uuids(*got), std::vector<std::string>{"GPU-b"});
}

TEST(RefitTest, TestFitInRestrictedDevicesMultiGPUWithoutNumaBind) {
  auto s = Cluster(ThreeGpus());
  auto got = FitInRestrictedDevices(*s, RefitPod(2).GpuPolicy("binpack"),
                                    Target(2, 4096, 10, {"GPU-b", "GPU-c"}), kNode);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 2u);
  for (const auto& d : *got) EXPECT_TRUE(d.uuid == "GPU-b" || d.uuid == "GPU-c") << d.uuid;
  EXPECT_NE((*got)[0].uuid, (*got)[1].uuid);
}

TEST(RefitTest, TestFitInRestrictedDevicesNoOpWhenPickAllowed) {
  auto s = Cluster(ThreeGpus());
  auto got = FitInRestrictedDevices(*s, RefitPod().GpuPolicy("binpack"),
                                    Target(1, 4096, 10, {"GPU-a", "GPU-b", "GPU-c"}), kNode);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(Uuids(*got), PlainFit(*s, RefitPod().GpuPolicy("binpack")));
}

TEST(RefitTest, TestFitInRestrictedDevicesEnforcesCapacity) {
  // GPU-a would fit but is not allowed; the allowed GPU-b lacks memory (8192 MiB, 8000 used).
  Dev b{"GPU-b", 0, 1, 8192, 8000, 20};
  auto s = Cluster({{"GPU-a"}, b});
  auto got = FitInRestrictedDevices(*s, RefitPod().GpuPolicy("binpack"),
                                    Target(1, 4096, 10, {"GPU-b"}), kNode);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("no allowed device fits"), std::string::npos);
  EXPECT_NE(got.status().message().find("CardInsufficientMemory"), std::string::npos)
      << got.status();
}

TEST(RefitTest, TestFitInRestrictedDevicesEmptyAllowedSet) {
  auto s = Cluster({{"GPU-a"}});
  auto got = FitInRestrictedDevices(*s, RefitPod(), Target(1, 4096, 10, {}), kNode);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find(kAllowedSetUnmatched), std::string::npos);
}

TEST(RefitTest, TestFitInRestrictedDevicesUnmatchedAllowedSet) {
  // Replica IDs instead of physical UUIDs fail loudly, not as capacity exhaustion.
  auto s = Cluster({{"GPU-a"}});
  auto got =
      FitInRestrictedDevices(*s, RefitPod(), Target(1, 4096, 10, {"GPU-a-0", "GPU-a-1"}), kNode);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find(kAllowedSetUnmatched), std::string::npos);
}

TEST(RefitTest, TestFitInRestrictedDevicesIgnoresOtherTypeRequests) {
  auto s = Cluster({{"GPU-a"}});
  core::PodRequest pod = RefitPod();
  pod.containers[0].devices[0].vendor = "OtherVendor";
  auto got = FitInRestrictedDevices(*s, pod, Target(1, 4096, 10, {"GPU-a"}), kNode);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("request to refit"), std::string::npos) << got.status();
}

TEST(RefitTest, TestFitInRestrictedDevicesUsesPodPolicyAnnotation) {
  for (auto [policy, want] : {std::pair{"binpack", "GPU-b"}, std::pair{"spread", "GPU-c"}}) {
    SCOPED_TRACE(policy);
    auto s = Cluster(ThreeGpus());
    auto got = FitInRestrictedDevices(*s, RefitPod().GpuPolicy(policy),
                                      Target(1, 4096, 10, {"GPU-b", "GPU-c"}), kNode);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(Uuids(*got), std::vector<std::string>{want});
  }
}

TEST(RefitTest, TestFitInRestrictedDevicesMutexPolicy) {
  auto build = [] { return Cluster({{"GPU-a", 0, 1}, {"GPU-b", 0, 0}, {"GPU-c", 1, 2}}); };
  // Mutex only allocates idle GPUs: the busy allowed device is passed over.
  auto s = build();
  auto got = FitInRestrictedDevices(*s, RefitPod().GpuPolicy("mutex"),
                                    Target(1, 4096, 10, {"GPU-a", "GPU-b"}), kNode);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(Uuids(*got), std::vector<std::string>{"GPU-b"});
  // Every allowed device busy: refused.
  auto busy = FitInRestrictedDevices(*build(), RefitPod().GpuPolicy("mutex"),
                                     Target(1, 4096, 10, {"GPU-a", "GPU-c"}), kNode);
  ASSERT_FALSE(busy.ok());
  EXPECT_NE(busy.status().message().find("ExclusiveDeviceAllocateConflict"), std::string::npos)
      << busy.status();
}

TEST(RefitTest, TestFitInRestrictedDevicesKeepsNumaBind) {
  auto build = [] { return Cluster({{"GPU-a0", 0}, {"GPU-b0", 0}, {"GPU-c1", 1}, {"GPU-d1", 1}}); };
  auto got = FitInRestrictedDevices(*build(), RefitPod(2).GpuPolicy("binpack").NumaBind(),
                                    Target(2, 4096, 10, {"GPU-a0", "GPU-b0"}), kNode);
  ASSERT_TRUE(got.ok()) << got.status();
  for (const auto& d : *got) EXPECT_TRUE(d.uuid == "GPU-a0" || d.uuid == "GPU-b0") << d.uuid;
  // One allowed device per NUMA node cannot hold a 2-GPU numa-bind request.
  EXPECT_FALSE(FitInRestrictedDevices(*build(), RefitPod(2).GpuPolicy("binpack").NumaBind(),
                                      Target(2, 4096, 10, {"GPU-a0", "GPU-c1"}), kNode)
                   .ok());
}

// Upstream numa_refit_handler_test.go's refusals that belong to the fit.
TEST(RefitTest, RefusesWhatCannotMove) {
  Dev mig{"GPU-m", 0};
  mig.mode = "mig";
  auto s = Cluster({{"GPU-a"}, {"GPU-b"}, mig});
  const core::NodeInfo node = NodeOf(*s);
  const struct {
    const char* name;
    RefitTarget target;
    const char* want;
  } cases[] = {
      {"heterogeneous reservation",
       {0,
        {{"GPU-a", core::kNvidiaVendor, 40000, 30}, {"GPU-b", core::kNvidiaVendor, 20000, 30}},
        core::kNvidiaVendor,
        {"GPU-b"}},
       "heterogeneous"},
      {"allowed device in MIG mode", Target(1, 4096, 10, {"GPU-m"}), "MIG"},
      {"no grant", {0, {}, core::kNvidiaVendor, {"GPU-b"}}, "no NVIDIA grant"},
      {"container index out of range",
       {3, Target(1, 4096, 10, {"GPU-b"}).current, core::kNvidiaVendor, {"GPU-b"}},
       "outside the pod's containers"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto r = RestrictedRequest(RefitPod(2), c.target, node);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find(c.want), std::string::npos) << r.status();
  }
  // A pod pinned with use-gpuuuid is never refitted onto other GPUs.
  auto pinned =
      RestrictedRequest(RefitPod().UseUuid("GPU-a"), Target(1, 4096, 10, {"GPU-b"}), node);
  ASSERT_FALSE(pinned.ok());
  EXPECT_NE(pinned.status().message().find("use-gpuuuid"), std::string::npos) << pinned.status();
}

}  // namespace
}  // namespace hami::scheduler
